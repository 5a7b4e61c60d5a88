"""Independent servo joints on the one servo law: one rigid load per servo, compiled.

Each joint: ``I qdd = tau_m + tau_g - friction`` with ``tau_m`` the servo
law (core_cy/actuator/_law.pxd: position / velocity / torque demand, motor
line at the supply voltage, torque limit; 0 with torque off), ``tau_g =
-mgl sin(q - q_down)`` and the gearbox friction ``coulomb + (viscous [+
torque-off damping]) |qd|`` applied by clipping the torque that would stop
the joint within a substep (BAM's rule: a joint at rest stays at rest below
it and friction never reverses a motion).  Semi-implicit Euler, fixed
substeps, GIL released; the NumPy reference is
:func:`core_cy.actuator.reference.step_independent_reference`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from servoloop.core_cy.actuator import _actuator
from servoloop.core_cy.actuator.model import ServoModel

__all__ = ["IndependentServos", "COLUMNS"]

# Columns of the parameter matrix (the S_* enum of _actuator.pyx).
COLUMNS = ("kp", "kd", "kv", "stall", "emf", "limit", "coulomb", "viscous", "off_damping",
           "inertia", "mgl", "q_down")
_C = {name: k for k, name in enumerate(COLUMNS)}
assert len(COLUMNS) == _actuator.NS


class IndependentServos:
    """State and parameters of n independent servo joints.

    Parameters
    ----------
    servos : sequence of ServoModel, length n
    inertia_kg_m2 : (n,) array_like
        Total inertia of each joint (load + armature), kg m^2 (> 0).
    gravity_torque_nm, gravity_down_rad : (n,) array_like, optional
        Pendulum loads (default none).

    Attributes
    ----------
    q, qd, tau : (n,) float64
        Position [rad], velocity [rad/s], motor torque of the last substep [N m].
    drive : (n,) int8
        0 position, 1 velocity, 2 torque command (``command`` in rad/s or N m).
    """

    def __init__(self, servos: Sequence[ServoModel], inertia_kg_m2, gravity_torque_nm=None,
                 gravity_down_rad=None):
        servos = list(servos)
        n = len(servos)
        inertia = np.asarray(inertia_kg_m2, dtype=np.float64).reshape(-1)
        if inertia.shape != (n,) or not np.all(inertia > 0):
            raise ValueError(f"IndependentServos: inertia_kg_m2 must be ({n},) and > 0, got {inertia}")
        self.n = n
        self.servos = tuple(servos)
        S = np.zeros((n, len(COLUMNS)))
        for i, s in enumerate(servos):
            S[i, _C["kp"]] = s.kp_nm_per_rad
            S[i, _C["kd"]] = s.kd_nm_s_per_rad
            S[i, _C["kv"]] = s.velocity_loop_gain_nm_s_per_rad
            S[i, _C["stall"]] = s.stall_torque_at_supply_nm
            S[i, _C["emf"]] = s.back_emf_nm_s_per_rad
            S[i, _C["limit"]] = s.stall_torque_at_supply_nm
            S[i, _C["coulomb"]] = s.coulomb_nm
            S[i, _C["viscous"]] = s.viscous_nm_s_per_rad
            S[i, _C["off_damping"]] = s.torque_off_damping_nm_s_per_rad
        S[:, _C["inertia"]] = inertia
        if gravity_torque_nm is not None:
            S[:, _C["mgl"]] = gravity_torque_nm
        if gravity_down_rad is not None:
            S[:, _C["q_down"]] = gravity_down_rad
        self.S = S
        self._kp0 = S[:, _C["kp"]].copy()
        self._stall = S[:, _C["stall"]].copy()
        self.q = np.zeros(n)
        self.qd = np.zeros(n)
        self.tau = np.zeros(n)
        self.drive = np.zeros(n, dtype=np.int8)
        self.command = np.zeros(n)

    def set_actuation(self, kp_scale, torque_limit_nm) -> None:
        """Gain scale (1 = factory) and torque limit [N m] (capped at the stall torque), (n,)."""
        np.multiply(self._kp0, kp_scale, out=self.S[:, _C["kp"]])
        self.S[:, _C["limit"]] = np.minimum(self._stall, torque_limit_nm)

    def step(self, n_sub: int, h: float, goal_rad, torque_on) -> None:
        """Advance every joint ``n_sub`` substeps of ``h`` s with goals (n,) [rad] and torque enables."""
        if not h > 0:
            raise ValueError(f"IndependentServos.step: h must be > 0 s, got {h!r}")
        goal = np.ascontiguousarray(goal_rad, dtype=np.float64)
        on = np.ascontiguousarray(torque_on, dtype=np.uint8)
        if goal.shape != (self.n,) or on.shape != (self.n,):
            raise ValueError(f"IndependentServos.step: goal and torque_on must be ({self.n},)")
        _actuator.step_independent(self.S, goal, on, self.drive, self.command, int(n_sub), float(h),
                                   self.q, self.qd, self.tau)
