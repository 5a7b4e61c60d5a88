"""Checks of a config's ``imu:`` section (the IMU board on the bus), each naming the key.

Unknown keys are refused by the loader itself (``config._build``); here the
values: a board with a control table, an id no servo has, a protocol the bus
speaks, three-vectors that are three finite numbers, non-negative noise, and
a floating base for the estimate to be about.
"""

from __future__ import annotations

import math

__all__ = ["check_imu"]


def _vector3(value, key: str, err) -> None:
    if len(value) != 3 or not all(math.isfinite(v) for v in value):
        raise err(f"{key} must be 3 finite numbers, got {list(value)}", key)


def check_imu(cfg, err) -> None:
    """Raise ``err(message, key)`` for the first bad value of ``cfg.imu`` (None: nothing to check)."""
    imu = cfg.imu
    if imu is None:
        return
    from servoloop.firmware_bridge.errors import UnknownModelError
    from servoloop.firmware_bridge.imu import get_imu_table

    try:
        table = get_imu_table(imu.model)
    except UnknownModelError as exc:
        raise err(f"imu.model: {exc.args[0]}", "imu.model") from None
    if not 0 <= imu.id <= 252:
        raise err(f"imu.id must be 0..252, got {imu.id}", "imu.id")
    for i, s in enumerate(cfg.servos):
        if s.id == imu.id:
            raise err(f"imu.id {imu.id} is also the id of servos[{i}] (joint {s.joint!r})", "imu.id")
    if cfg.bus.protocol not in (table.protocol, "mixed"):
        raise err(f"imu.model: {table.name} speaks Protocol {table.protocol}.0 and bus.protocol is "
                  f"{cfg.bus.protocol}; use bus.protocol: mixed to put it beside Protocol "
                  f"{cfg.bus.protocol}.0 servos", "imu.model")
    for key in ("rotation_rpy", "gyro_bias", "accel_bias"):
        _vector3(getattr(imu, key), f"imu.{key}", err)
    for key in ("gyro_noise", "accel_noise", "rpy_noise"):
        v = getattr(imu, key)
        if not (math.isfinite(v) and v >= 0):
            raise err(f"imu.{key} must be >= 0, got {v}", f"imu.{key}")
    if not cfg.model.floating_base:
        raise err("imu: the base estimator it feeds needs a floating-base model "
                  "(model.floating_base: true)", "imu")
