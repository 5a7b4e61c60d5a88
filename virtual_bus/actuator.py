"""What one virtual servo drives: the one servo model plus the load on its horn.

The servo's parameters are :class:`core_cy.actuator.ServoModel` (per-model
defaults from the datasheet figures, :func:`core_cy.actuator.default_servo_model`);
this module only adds the load of the bus's independent-joint plant: a
rigid body of inertia ``inertia_kg_m2`` (the servo's armature is added),
optionally a pendulum.  The default load is seed 000's: with the AX-18A a
small foot-sized link, 4e-3 kg m^2 (damping ratio 0.80, a lightly
underdamped step that settles in ~0.1 s), scaled by the stall-torque ratio
on other models like the gains, so every model has the same step response.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

from servoloop.core_cy.actuator import ALIASES, ServoModel, ServoModelError, default_servo_model
from servoloop.core_cy.actuator.defaults import stall_ratio
from servoloop.firmware_bridge.control_table import get_table

__all__ = ["JointLoad", "Actuator", "AX18A_REFERENCE", "default_actuator", "servo_model_for", "with_overrides",
           "OVERRIDE_KEYS"]

_AX18A_LOAD_KG_M2 = 4.0e-3


@dataclass(frozen=True)
class JointLoad:
    """Load of one servo (SI units).

    Attributes
    ----------
    inertia_kg_m2 : float
        Load inertia about the joint axis, kg m^2 (the servo's armature is added).
    gravity_torque_nm : float
        m g l of a pendulum load, N m (0: no gravity); the gravity torque is
        ``-gravity_torque_nm * sin(q - gravity_down_rad)``.
    gravity_down_rad : float
        Joint angle where the pendulum hangs straight down, rad.
    """

    inertia_kg_m2: float
    gravity_torque_nm: float = 0.0
    gravity_down_rad: float = 0.0

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            if not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"load parameter {f.name} must be a finite number, got {v!r}")
        if self.gravity_torque_nm < 0:
            raise ValueError(f"load parameter gravity_torque_nm must be >= 0, got {self.gravity_torque_nm!r}")
        if self.inertia_kg_m2 < 0:
            raise ValueError(f"load parameter inertia_kg_m2 must be >= 0, got {self.inertia_kg_m2!r}")


@dataclass(frozen=True)
class Actuator:
    """One servo and its load."""

    servo: ServoModel
    load: JointLoad

    def __post_init__(self):
        if not self.inertia_kg_m2 > 0:
            raise ValueError(f"actuator inertia (load {self.load.inertia_kg_m2} + armature "
                             f"{self.servo.armature_kg_m2}) must be > 0 kg m^2")

    @property
    def inertia_kg_m2(self) -> float:
        """Load plus reflected rotor inertia, kg m^2."""
        return self.load.inertia_kg_m2 + self.servo.armature_kg_m2

    @property
    def natural_frequency(self) -> float:
        """sqrt(kp / inertia) of the position loop, rad/s."""
        return self.servo.natural_frequency(self.inertia_kg_m2)

    @property
    def damping_ratio(self) -> float:
        """kd / (2 sqrt(kp inertia)), dimensionless."""
        return self.servo.damping_ratio(self.inertia_kg_m2)


def servo_model_for(model: str) -> ServoModel:
    """Default :class:`ServoModel` of a servo model name, from its control table's datasheet.

    Raises ``UnknownModelError`` naming the known models for an unknown name.
    """
    table = get_table(model)
    if table.datasheet is None:
        raise ValueError(f"{table.name}: its control table ({table.source}) has no datasheet figures")
    return default_servo_model(table.datasheet, table.name)


def default_actuator(table) -> Actuator:
    """Default actuator of a control table (``ControlTable``): the model's servo, seed 000's load."""
    servo = servo_model_for(table.name)
    return Actuator(servo, JointLoad(_AX18A_LOAD_KG_M2 * stall_ratio(table.datasheet)))


AX18A_REFERENCE = Actuator(servo_model_for("AX-18A"), JointLoad(_AX18A_LOAD_KG_M2))

# Override keys: ServoModel fields (or their short aliases), JointLoad fields,
# and the short load names ``inertia`` (load + armature, as identified on a
# bench), ``gravity_torque``, ``gravity_down_rad``.
_LOAD_ALIASES = {"inertia": "inertia", "gravity_torque": "gravity_torque_nm",
                 "gravity_down_rad": "gravity_down_rad"}
OVERRIDE_KEYS = frozenset({f.name for f in fields(ServoModel)} | set(ALIASES)
                          | {f.name for f in fields(JointLoad)} | set(_LOAD_ALIASES))


def with_overrides(actuator: Actuator, overrides: dict | None, where: str = "actuator overrides") -> Actuator:
    """``actuator`` with fields replaced; unknown keys are a ValueError naming them."""
    if not overrides:
        return actuator
    bad = sorted(set(overrides) - OVERRIDE_KEYS)
    if bad:
        raise ValueError(f"{where}: unknown actuator parameter(s) {bad}; known: {sorted(OVERRIDE_KEYS)}")
    load_keys = {f.name for f in fields(JointLoad)} | set(_LOAD_ALIASES)
    servo_over = {k: float(v) for k, v in overrides.items() if k not in load_keys}
    try:
        servo = actuator.servo.with_overrides(servo_over, where)
    except ServoModelError as e:
        raise ValueError(str(e)) from None
    load = {}
    for k, v in overrides.items():
        if k in load_keys:
            name = _LOAD_ALIASES.get(k, k)
            load["inertia_kg_m2" if name == "inertia" else name] = (
                float(v) - servo.armature_kg_m2 if name == "inertia" else float(v))
    return Actuator(servo, replace(actuator.load, **load))
