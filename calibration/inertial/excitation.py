"""Excitation trajectories: finite Fourier series per joint (Swevers et al. 1997).

::

    q_j(t) = q0_j + sum_l  a_jl / (w l) sin(w l t) - b_jl / (w l) cos(w l t)

is periodic with period 2 pi / w and has analytic velocity and acceleration,
which makes it the usual choice for identification experiments.  The paper
does not state its parametrisation; this is the one its authors' later code
(RAPTOR) uses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["FourierTrajectory", "random_fourier"]


@dataclass(frozen=True)
class FourierTrajectory:
    """Fourier-series joint trajectory.

    Attributes
    ----------
    a, b : ndarray (n_joints, n_harmonics), sine/cosine velocity amplitudes [rad/s]
    omega : float, base angular frequency [rad/s]
    q0 : ndarray (n_joints,), offset [rad]
    """

    a: np.ndarray
    b: np.ndarray
    omega: float
    q0: np.ndarray

    def __call__(self, t):
        """Position, velocity, acceleration at times ``t`` (N,): three (N, n_joints) arrays."""
        t = np.asarray(t, dtype=float)[:, None, None]
        ell = np.arange(1, self.a.shape[1] + 1)[None, None, :]
        wl = self.omega * ell
        s, c = np.sin(wl * t), np.cos(wl * t)
        q = self.q0 + np.sum((self.a * s - self.b * c) / wl, axis=2)
        v = np.sum(self.a * c + self.b * s, axis=2)
        a = np.sum(wl * (-self.a * s + self.b * c), axis=2)
        return q, v, a


def random_fourier(rng: np.random.Generator, lower, upper, n_harmonics: int = 5,
                   period_s: float = 10.0, fill: float = 0.8, max_velocity=None) -> FourierTrajectory:
    """A random Fourier trajectory scaled to stay inside the joint limits.

    Parameters
    ----------
    rng : numpy Generator (fixed seed for reproducible experiments)
    lower, upper : ndarray (n_joints,), position limits [rad]; infinite ones count as +-pi
    n_harmonics : int
    period_s : float, period of the base harmonic [s]
    fill : float in (0, 1], fraction of each half-range the motion may use
    max_velocity : ndarray (n_joints,) or None, velocity bound [rad/s]
    """
    lower = np.maximum(np.asarray(lower, dtype=float), -np.pi)
    upper = np.minimum(np.asarray(upper, dtype=float), np.pi)
    n = lower.size
    omega = 2.0 * np.pi / period_s
    a = rng.normal(size=(n, n_harmonics))
    b = rng.normal(size=(n, n_harmonics))
    q0 = 0.5 * (lower + upper)
    # The sum of |amplitude / (w l)| bounds the excursion from q0.
    ell = np.arange(1, n_harmonics + 1)
    reach = np.sum((np.abs(a) + np.abs(b)) / (omega * ell), axis=1)
    scale = fill * 0.5 * (upper - lower) / reach
    if max_velocity is not None:
        vmax = np.sum(np.abs(a) + np.abs(b), axis=1)
        scale = np.minimum(scale, np.asarray(max_velocity, dtype=float) / vmax)
    return FourierTrajectory(a * scale[:, None], b * scale[:, None], omega, q0)
