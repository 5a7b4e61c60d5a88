"""The standard parameter vector theta: inertial block, then friction block.

Layout (the core_cy regressor contract, Pinocchio's order)::

    theta = [body_0 (10), body_1 (10), ..., joint_0 friction (4), joint_1 friction (4), ...]
    body block    [m, mc_x, mc_y, mc_z, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]   about the body origin
    friction      [Fc, Fv, Ia, beta]   for tau_f = Fc sign(v) + Fv v + Ia a + beta

The paper (Zhang et al. 2024, eq. 1) orders a body as
[XX, XY, XZ, YY, YZ, ZZ, m p_x, m p_y, m p_z, m]; :data:`PAPER_FROM_PIN`
converts, so numbers can be compared with the paper's tables.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "INERTIAL_NAMES",
    "FRICTION_NAMES",
    "PAPER_FROM_PIN",
    "PIN_FROM_PAPER",
    "ParameterLayout",
    "body_parameters",
    "body_from_parameters",
]

INERTIAL_NAMES = ("m", "mc_x", "mc_y", "mc_z", "Ixx", "Ixy", "Iyy", "Ixz", "Iyz", "Izz")
FRICTION_NAMES = ("Fc", "Fv", "Ia", "beta")
# paper[k] = pin[PAPER_FROM_PIN[k]]
PAPER_FROM_PIN = np.array([4, 5, 7, 6, 8, 9, 1, 2, 3, 0])
PIN_FROM_PAPER = np.argsort(PAPER_FROM_PIN)


@dataclass(frozen=True)
class ParameterLayout:
    """Where each parameter sits in theta.

    Attributes
    ----------
    body_names : tuple of str
        Moving bodies, in the regressor's order (10 columns each).
    joint_names : tuple of str
        Joints with friction columns (4 each), in velocity order.
    friction_dofs : tuple of int
        Velocity index of each joint in ``joint_names``.
    nv : int
        Rows of the regressor per sample.
    """

    body_names: tuple
    joint_names: tuple
    friction_dofs: tuple
    nv: int

    @property
    def n_bodies(self) -> int:
        return len(self.body_names)

    @property
    def n_inertial(self) -> int:
        return 10 * self.n_bodies

    @property
    def n_params(self) -> int:
        return self.n_inertial + 4 * len(self.joint_names)

    def body_slice(self, body: int) -> slice:
        """Columns of body ``body``'s 10 inertial parameters."""
        return slice(10 * body, 10 * body + 10)

    def friction_index(self, joint: int, name: str) -> int:
        """Column of friction parameter ``name`` (Fc, Fv, Ia, beta) of joint ``joint``."""
        return self.n_inertial + 4 * joint + FRICTION_NAMES.index(name)

    def nonnegative_indices(self) -> np.ndarray:
        """Columns of Fc, Fv and Ia (constrained >= 0; beta is free)."""
        return np.array([self.friction_index(j, n) for j in range(len(self.joint_names))
                         for n in ("Fc", "Fv", "Ia")], dtype=int)

    def names(self) -> list[str]:
        """``body.m``, ``body.Ixx`` ..., then ``joint.Fc`` ... (n_params,)."""
        out = [f"{b}.{n}" for b in self.body_names for n in INERTIAL_NAMES]
        return out + [f"{j}.{n}" for j in self.joint_names for n in FRICTION_NAMES]

    def split(self, theta: np.ndarray):
        """theta -> (inertial (n_bodies, 10), friction (n_joints, 4)) views."""
        theta = np.asarray(theta, dtype=float)
        if theta.shape != (self.n_params,):
            raise ValueError(f"theta has shape {theta.shape}, layout needs ({self.n_params},)")
        return (theta[: self.n_inertial].reshape(self.n_bodies, 10),
                theta[self.n_inertial:].reshape(len(self.joint_names), 4))

    def join(self, inertial: np.ndarray, friction: np.ndarray | None = None) -> np.ndarray:
        """(n_bodies, 10) [+ (n_joints, 4), zeros if None] -> theta (n_params,)."""
        inertial = np.asarray(inertial, dtype=float).reshape(-1)
        if inertial.size != self.n_inertial:
            raise ValueError(f"inertial block has {inertial.size} entries, layout needs {self.n_inertial}")
        if friction is None:
            friction = np.zeros(4 * len(self.joint_names))
        friction = np.asarray(friction, dtype=float).reshape(-1)
        if friction.size != 4 * len(self.joint_names):
            raise ValueError(f"friction block has {friction.size} entries, "
                             f"layout needs {4 * len(self.joint_names)}")
        return np.concatenate([inertial, friction])


def _skew(c):
    return np.array([[0.0, -c[2], c[1]], [c[2], 0.0, -c[0]], [-c[1], c[0], 0.0]])


def body_parameters(mass: float, com, inertia_com) -> np.ndarray:
    """Mass [kg], COM (3,) [m] and inertia about the COM (3, 3) [kg m^2], body axes
    -> the 10 parameters about the body origin, Pinocchio's order."""
    com = np.asarray(com, dtype=float)
    I_o = np.asarray(inertia_com, dtype=float) - mass * _skew(com) @ _skew(com)
    h = mass * com
    return np.array([mass, h[0], h[1], h[2], I_o[0, 0], I_o[0, 1], I_o[1, 1],
                     I_o[0, 2], I_o[1, 2], I_o[2, 2]])


def body_from_parameters(p10):
    """Inverse of :func:`body_parameters`: (mass, com (3,), inertia about COM (3, 3)).

    The COM is NaN when the mass is not positive.
    """
    p = np.asarray(p10, dtype=float)
    m = p[0]
    I_o = np.array([[p[4], p[5], p[7]], [p[5], p[6], p[8]], [p[7], p[8], p[9]]])
    if m <= 0:
        return m, np.full(3, np.nan), np.full((3, 3), np.nan)
    c = p[1:4] / m
    return m, c, I_o + m * _skew(c) @ _skew(c)
