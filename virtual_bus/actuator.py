"""Actuator parameters of one virtual servo and their per-model defaults.

The model is seed 000's (Tan et al., AX-18 on a Bioloid GP):
``tau = -kp (q - q_goal) - kd qd - kc sgn(qd)``, the active part saturated
at the stall torque.  Their identified AX-18A gains are kp = 9.272 N*m/rad,
kd = 0.3069 N*m*s/rad, kc = 0.03 N*m.  Other models have no published
identification here, so their gains, friction and default load inertia are
the AX-18A's scaled by the datasheet stall-torque ratio: the step response
then has the same natural frequency and damping ratio on every model, and a
calibration test can still set exact values per servo.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

__all__ = ["ActuatorParams", "AX18A_REFERENCE", "default_actuator", "with_overrides"]

# AX-18A datasheet stall torque (12 V) that seed 000's gains belong to.
_AX18A_STALL_NM = 1.8


@dataclass(frozen=True)
class ActuatorParams:
    """Actuator model and load of one servo (SI units).

    Attributes
    ----------
    kp : float
        Position stiffness, N*m/rad, at the factory gain register values.
    kd : float
        Velocity damping while torque is on, N*m*s/rad.
    kc : float
        Coulomb friction, N*m (also holds the load still below it).
    stall_torque : float
        Saturation of the active torque, N*m.
    inertia : float
        Load + reflected rotor inertia about the joint axis, kg*m^2.
    gravity_torque : float
        m*g*l of a pendulum load, N*m (0: no gravity).  The gravity torque is
        ``-gravity_torque * sin(q - gravity_down_rad)``.
    gravity_down_rad : float
        Joint angle where the pendulum hangs straight down, rad.
    damping_off : float
        Viscous damping with torque off (gearbox only), N*m*s/rad.
    """

    kp: float
    kd: float
    kc: float
    stall_torque: float
    inertia: float
    gravity_torque: float = 0.0
    gravity_down_rad: float = 0.0
    damping_off: float = 0.0

    def __post_init__(self):
        for name in ("kp", "kd", "kc", "stall_torque", "inertia", "gravity_torque", "damping_off"):
            v = getattr(self, name)
            if not math.isfinite(v) or v < 0:
                raise ValueError(f"actuator parameter {name} must be finite and >= 0, got {v!r}")
        if self.inertia <= 0:
            raise ValueError(f"actuator parameter inertia must be > 0 kg*m^2, got {self.inertia!r}")

    @property
    def natural_frequency(self) -> float:
        """sqrt(kp / inertia), rad/s."""
        return math.sqrt(self.kp / self.inertia)

    @property
    def damping_ratio(self) -> float:
        """kd / (2 sqrt(kp inertia)), dimensionless."""
        return self.kd / (2.0 * math.sqrt(self.kp * self.inertia))


# Seed 000's gains.  The inertia is ours: a small foot-sized link plus the
# reflected rotor (about 4e-3 kg*m^2) gives a damping ratio of 0.80, a lightly
# underdamped step that settles in ~0.1 s.
AX18A_REFERENCE = ActuatorParams(
    kp=9.272, kd=0.3069, kc=0.03, stall_torque=_AX18A_STALL_NM, inertia=4.0e-3,
    damping_off=0.03,
)


def default_actuator(table) -> ActuatorParams:
    """Default actuator for a control table (``ControlTable``): AX-18A scaled by stall torque."""
    stall = getattr(table, "stall_torque_nm", None) or _AX18A_STALL_NM
    if getattr(table, "name", "") == "AX-18A":
        return AX18A_REFERENCE
    r = stall / _AX18A_STALL_NM
    ref = AX18A_REFERENCE
    return ActuatorParams(kp=ref.kp * r, kd=ref.kd * r, kc=ref.kc * r, stall_torque=stall,
                          inertia=ref.inertia * r, damping_off=ref.damping_off * r)


def with_overrides(params: ActuatorParams, overrides: dict | None) -> ActuatorParams:
    """``params`` with fields replaced; unknown keys are a ValueError naming them."""
    if not overrides:
        return params
    known = set(ActuatorParams.__dataclass_fields__)
    bad = sorted(set(overrides) - known)
    if bad:
        raise ValueError(f"unknown actuator parameter(s) {bad}; known: {sorted(known)}")
    return replace(params, **{k: float(v) for k, v in overrides.items()})
