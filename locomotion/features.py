"""The reduced-order model class of seed 004 (eq. 6) for the five-link biped.

y = Theta_e phi_e(q) (embedding), ydd = Theta_d phi_d(y, yd) + B tau (dynamics).

phi_e(q) (70): the COM relative to the stance foot (2), the swing foot
relative to the COM (2), and every product of at most two of {1, cos q_i,
sin q_i} over the five angles (1 + 10 + 55 = 66).  The hip x, z features of
the paper are dropped, as the authors' later code does: absolute x is not
periodic (digest section 6 item 3).
phi_d (2D: 16, 4D: 46): [g y1/y2, every product of at most two of {1, y, yd}].

The initial models (eq. 13): the LIP (2D, no input) and the LIP with a
point-mass swing foot (4D, tau = swing-foot acceleration).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations_with_replacement

import casadi as ca
import numpy as np

from servoloop.locomotion.five_link import G, five_link

__all__ = ["RomSpec", "ROM_SPECS", "phi_e", "phi_d", "theta0", "N_E"]

N_E = 70


@dataclass(frozen=True)
class RomSpec:
    """Sizes of one ROM: ``n_y`` outputs, ``n_tau`` inputs, ``n_d`` dynamics features."""

    name: str
    n_y: int
    n_tau: int

    @property
    def n_d(self) -> int:
        k = 1 + 2 * self.n_y
        return 1 + k * (k + 1) // 2

    @property
    def n_theta_e(self) -> int:
        return self.n_y * N_E

    @property
    def n_theta(self) -> int:
        return self.n_y * (N_E + self.n_d)

    @property
    def B(self) -> np.ndarray:
        """(n_y, n_tau): tau drives the last n_tau outputs (fixed, not learned)."""
        return np.vstack([np.zeros((self.n_y - self.n_tau, self.n_tau)), np.eye(self.n_tau)])

    def split(self, theta):
        """(Theta_e (n_y, 70), Theta_d (n_y, n_d)) of a flat theta (row-major blocks)."""
        te = theta[: self.n_theta_e]
        td = theta[self.n_theta_e:]
        if isinstance(theta, np.ndarray):
            return te.reshape(self.n_y, N_E), td.reshape(self.n_y, self.n_d)
        return (ca.reshape(te, N_E, self.n_y).T, ca.reshape(td, self.n_d, self.n_y).T)


ROM_SPECS = {"2d": RomSpec("2d", 2, 0), "4d": RomSpec("4d", 4, 2)}


def _pairs(items):
    return [a * b for a, b in combinations_with_replacement(items, 2)]


def phi_e(q):
    """Embedding features of the pinned q (5,) (casadi), shape (70,)."""
    m = five_link()
    com = m.com(q)
    trig = [1]
    for i in range(5):
        trig += [ca.cos(q[i]), ca.sin(q[i])]
    return ca.vertcat(com, m.swing_foot(q) - com, *_pairs(trig))


def phi_d(y, yd):
    """Dynamics features of (y, yd) (casadi, n_y each): [g y1/y2, quadratics of {1, y, yd}]."""
    n = y.shape[0]
    base = [1] + [y[i] for i in range(n)] + [yd[i] for i in range(n)]
    return ca.vertcat(G * y[0] / y[1], *_pairs(base))


def theta0(spec: RomSpec) -> np.ndarray:
    """The LIP (2D) or LIP + swing foot (4D) parameters, flat (n_theta,)."""
    te = np.zeros((spec.n_y, N_E))
    for i in range(spec.n_y):
        te[i, i] = 1.0        # rows: COM - stance (x, z), then swing - COM (x, z)
    td = np.zeros((spec.n_y, spec.n_d))
    td[0, 0] = 1.0            # y1dd = g y1 / y2; y2dd = 0; (y3, y4)dd = tau
    return np.concatenate([te.ravel(), td.ravel()])
