"""Per-model default servo parameters, built from the control tables' datasheet figures.

Gains: seed 000's AX-18A identification (Tan et al.: kp = 9.272 N m/rad,
kd = 0.3069 N m s/rad, kc = 0.03 N m) at the AX-18A's 1.8 N m stall
torque.  No other model has a published identification here, so its gains,
friction and torque-off damping are the AX-18A's scaled by the stall-torque
ratio (the step response then has the same natural frequency and damping
ratio on every model for a load scaled the same way).  The motor line
(stall torque, no-load speed, their voltage) is each model's own datasheet.
"""

from __future__ import annotations

from functools import cache

from servoloop.core_cy.actuator.model import ServoModel

__all__ = ["default_servo_model", "stall_ratio", "SEED000_AX18A"]

# Seed 000's AX-18A values (and our torque-off damping: a powered-off AX-18A
# coasts to rest within ~0.1 s on a small link) at the datasheet stall 1.8 N m.
SEED000_AX18A = {"kp_nm_per_rad": 9.272, "kd_nm_s_per_rad": 0.3069, "coulomb_nm": 0.03,
                 "torque_off_damping_nm_s_per_rad": 0.03}
_AX18A_STALL_NM = 1.8


def _datasheet(model: str):
    # the figures are data files of firmware_bridge (generated from the e-Manual)
    from servoloop.firmware_bridge.control_table import get_table

    table = get_table(model)
    if table.datasheet is None:
        raise ValueError(f"{table.name}: its control table ({table.source}) has no datasheet figures")
    return table.name, table.datasheet


def stall_ratio(model: str) -> float:
    """Datasheet stall torque of ``model`` over the AX-18A's, dimensionless."""
    return _datasheet(model)[1].stall_torque_nm / _AX18A_STALL_NM


@cache
def default_servo_model(model: str) -> ServoModel:
    """Default :class:`ServoModel` of a servo model name ("XM430-W350", "AX-18A", ...).

    Supply voltage = the datasheet figures' voltage.  Raises
    ``UnknownModelError`` naming the known models for an unknown name.
    """
    name, ds = _datasheet(model)
    r = ds.stall_torque_nm / _AX18A_STALL_NM
    gains = {k: v * r for k, v in SEED000_AX18A.items()}
    return ServoModel.from_datasheet(ds, model=name, **gains)
