"""Per-model default servo parameters, built from datasheet figures.

Gains: seed 000's AX-18A identification (Tan et al.: kp = 9.272 N m/rad,
kd = 0.3069 N m s/rad, kc = 0.03 N m) at the AX-18A's 1.8 N m stall
torque.  No other model has a published identification here, so its gains,
friction and torque-off damping are the AX-18A's scaled by the stall-torque
ratio (the step response then has the same natural frequency and damping
ratio on every model for a load scaled the same way).  The motor line
(stall torque, no-load speed, their voltage) is each model's own datasheet.

The figures come in as an argument (any object with ``stall_torque_nm``,
``no_load_speed_rad_s`` and ``voltage_v``, e.g. a control table's
``datasheet``): core_cy holds the math and never reads the wire's tables.
``virtual_bus.actuator.servo_model_for(name)`` is the lookup by model name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from servoloop.core_cy.actuator.model import ServoModel

__all__ = ["default_servo_model", "stall_ratio", "SEED000_AX18A", "MotorFigures", "XM430_W350_FIGURES"]

# Seed 000's AX-18A values (and our torque-off damping: a powered-off AX-18A
# coasts to rest within ~0.1 s on a small link) at the datasheet stall 1.8 N m.
SEED000_AX18A = {"kp_nm_per_rad": 9.272, "kd_nm_s_per_rad": 0.3069, "coulomb_nm": 0.03,
                 "torque_off_damping_nm_s_per_rad": 0.03}
_AX18A_STALL_NM = 1.8


@dataclass(frozen=True)
class MotorFigures:
    """The datasheet figures the servo model needs: stall torque and no-load speed at one voltage."""

    stall_torque_nm: float
    no_load_speed_rpm: float
    voltage_v: float

    @property
    def no_load_speed_rad_s(self) -> float:
        return self.no_load_speed_rpm * 2.0 * math.pi / 60.0


#: XM430-W350 at 12 V (e-Manual), the contact simulator's default servo; a test
#: checks these against the XM430-W350 control table's datasheet block.
XM430_W350_FIGURES = MotorFigures(stall_torque_nm=4.1, no_load_speed_rpm=46.0, voltage_v=12.0)


def stall_ratio(datasheet) -> float:
    """Datasheet stall torque over the AX-18A's, dimensionless."""
    return datasheet.stall_torque_nm / _AX18A_STALL_NM


def default_servo_model(datasheet, model: str = "") -> ServoModel:
    """Default :class:`ServoModel` of a servo with these datasheet figures.

    Supply voltage = the figures' voltage.  ``model`` names it (reports,
    errors).
    """
    r = stall_ratio(datasheet)
    gains = {k: v * r for k, v in SEED000_AX18A.items()}
    return ServoModel.from_datasheet(datasheet, model=model, **gains)
