"""Signal processing before identification (paper section III, ref. code values).

Velocity is low-pass filtered, differentiated with a 4th-order central
difference to get acceleration, and velocity, acceleration and torque are
filtered zero-phase (forward-backward 4th-order Butterworth) before
decimation.  Position is not filtered (the regressor is smooth in q and
encoder noise is small).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.signal

from servoloop.calibration.errors import FitError

__all__ = [
    "central_difference",
    "lowpass",
    "decimate",
    "FilterSettings",
    "prepare_samples",
]

# Interior stencil on x[i-2..i+2], 4th order (exact on polynomials of degree <= 4).
_CENTRAL = np.array([1.0 / 12.0, -2.0 / 3.0, 0.0, 2.0 / 3.0, -1.0 / 12.0])
# One-sided stencil on x[i..i+4] for the first two points (also 4th order);
# mirrored (negated, reversed) for the last two.
_FORWARD = np.array([-25.0 / 12.0, 4.0, -3.0, 4.0 / 3.0, -1.0 / 4.0])


def central_difference(x: np.ndarray, dt: float, axis: int = 0) -> np.ndarray:
    """Derivative of uniformly sampled ``x`` by 4th-order finite differences.

    Parameters
    ----------
    x : ndarray (N, ...) along ``axis``, N >= 5
    dt : float, sampling period [s]

    Returns
    -------
    ndarray, same shape, dx/dt [unit of x / s]
    """
    x = np.moveaxis(np.asarray(x, dtype=float), axis, 0)
    n = x.shape[0]
    if n < 5:
        raise FitError(f"central_difference needs >= 5 samples, got {n}")
    out = np.empty_like(x)
    out[2:-2] = sum(c * x[k : n - 4 + k] for k, c in enumerate(_CENTRAL) if c != 0.0)
    for i in (0, 1):
        out[i] = sum(c * x[i + k] for k, c in enumerate(_FORWARD))
        j = n - 1 - i
        out[j] = -sum(c * x[j - k] for k, c in enumerate(_FORWARD))
    return np.moveaxis(out / dt, 0, axis)


def lowpass(x: np.ndarray, cutoff_hz: float, fs_hz: float, order: int = 4, axis: int = 0) -> np.ndarray:
    """Zero-phase Butterworth low-pass (forward-backward, second-order sections).

    The forward-backward pass squares the magnitude response: the -3 dB point
    of the result is below ``cutoff_hz`` (-6 dB at it), and the phase is zero.

    Parameters
    ----------
    x : ndarray, filtered along ``axis``
    cutoff_hz, fs_hz : float, cutoff and sampling frequencies [Hz]
    """
    if not 0.0 < cutoff_hz < fs_hz / 2.0:
        raise FitError(f"lowpass cutoff {cutoff_hz} Hz must lie in (0, fs/2 = {fs_hz / 2.0}) Hz")
    sos = scipy.signal.butter(order, cutoff_hz, btype="low", fs=fs_hz, output="sos")
    return scipy.signal.sosfiltfilt(sos, np.asarray(x, dtype=float), axis=axis)


def decimate(x: np.ndarray, factor: int, axis: int = 0) -> np.ndarray:
    """Keep every ``factor``-th sample, starting at the first.

    No filtering here: call :func:`lowpass` first with a cutoff below the new
    Nyquist frequency (``prepare_samples`` checks that).
    """
    if factor < 1:
        raise FitError(f"decimation factor must be >= 1, got {factor}")
    sl = [slice(None)] * np.ndim(x)
    sl[axis] = slice(None, None, factor)
    return np.asarray(x)[tuple(sl)]


@dataclass(frozen=True)
class FilterSettings:
    """Cutoffs [Hz] and decimation of :func:`prepare_samples`.

    Defaults are the reference code's (torque 33, velocity 18, acceleration
    15 Hz, 4th order) and the paper's decimation by 10; ``trim`` samples are
    dropped at each end after filtering, where the filter's edge transient lives.
    """

    velocity_hz: float = 18.0
    acceleration_hz: float = 15.0
    torque_hz: float = 33.0
    order: int = 4
    decimation: int = 10
    trim: int = 20


def prepare_samples(t, q, tau, v=None, settings: FilterSettings | None = None):
    """Raw log -> (q, v, a, tau) ready for the regressor.

    Parameters
    ----------
    t : ndarray (N,), uniformly sampled time [s]
    q : ndarray (N, n), positions [rad]
    tau : ndarray (N, n), joint torques [N m]
    v : ndarray (N, n) or None, velocities [rad/s]; None = differentiate q

    Returns
    -------
    q, v, a, tau : ndarray (M, n) each, M ~ (N - 2 trim) / decimation
    """
    settings = FilterSettings() if settings is None else settings
    t = np.asarray(t, dtype=float)
    dt_all = np.diff(t)
    dt = float(np.median(dt_all))
    if dt <= 0 or np.max(np.abs(dt_all - dt)) > 1e-3 * dt:
        raise FitError(f"prepare_samples: time is not uniformly sampled "
                       f"(steps {dt_all.min():.6g} to {dt_all.max():.6g} s); resample first")
    fs = 1.0 / dt
    s = settings
    if max(s.velocity_hz, s.acceleration_hz, s.torque_hz) >= fs / (2.0 * s.decimation):
        raise FitError(f"cutoffs must stay below the decimated Nyquist frequency "
                       f"{fs / (2 * s.decimation):.3g} Hz (fs {fs:.4g} Hz, decimation {s.decimation})")
    q = np.asarray(q, dtype=float)
    v = central_difference(q, dt) if v is None else np.asarray(v, dtype=float)
    v_f = lowpass(v, s.velocity_hz, fs, s.order)
    a_f = lowpass(central_difference(v_f, dt), s.acceleration_hz, fs, s.order)
    tau_f = lowpass(tau, s.torque_hz, fs, s.order)
    keep = slice(s.trim, q.shape[0] - s.trim)
    return tuple(decimate(x[keep], s.decimation) for x in (q, v_f, a_f, tau_f))
