"""Velocity (wheel) mode: the servo turns continuously at a goal speed.

=================  ======================================  ==============================
series             how the mode is set (EEPROM, torque off)  the goal register (per tick)
=================  ======================================  ==============================
X, MX 2.0, XL-320  Operating Mode (11) = 1                 Goal Velocity (104), signed,
                                                           0.229 rpm (X)
AX, MX 1.0         CW and CCW Angle Limit both 0           Moving Speed (32): 0-1023 CCW,
                   (e-Manual: "wheel mode")                1024-2047 CW (bit 10 = direction)
=================  ======================================  ==============================

Leaving wheel mode on AX / MX 1.0 means angle limits that are not both 0
again: a servo left in wheel mode by a velocity run would otherwise ignore
every Goal Position of the next position-mode run.  The factory limits
(the control table's defaults, 0 and the full range) are written back then.

The daemon writes velocity goals in rad/s through the same sync write path as
goal positions (:class:`~servoloop.controller.bus_stages.WriteStage`); the
safety stage clamps them to ``max_velocity`` and limits their acceleration
(:class:`~servoloop.controller.slew.VelocitySlew`).
"""

from __future__ import annotations

import logging

__all__ = ["velocity_register", "set_wheel_mode", "leave_wheel_mode"]

log = logging.getLogger("servoloop.daemon")


def velocity_register(table) -> str:
    """The goal register of velocity mode in ``table``: ``goal_velocity`` or ``moving_speed``."""
    return "goal_velocity" if "goal_velocity" in table.registers else "moving_speed"


def set_wheel_mode(bus, sid: int, joint: str) -> None:
    """AX / MX 1.0: both angle limits 0 (wheel mode), Moving Speed 0 first (no jump at torque on)."""
    cw, ccw = bus.read_raw(sid, "cw_angle_limit"), bus.read_raw(sid, "ccw_angle_limit")
    bus.write(sid, "moving_speed", 0.0)
    if cw or ccw:
        log.warning("servo %d (%s): wheel mode (angle limits %d, %d -> 0, 0; torque off first)",
                    sid, joint, cw, ccw)
        bus.write(sid, "torque_enable", 0)
        bus.write_raw(sid, "cw_angle_limit", 0)
        bus.write_raw(sid, "ccw_angle_limit", 0)


def leave_wheel_mode(bus, sid: int, joint: str, table) -> None:
    """AX / MX 1.0 in a position mode: angle limits both 0 (wheel mode) back to the factory range."""
    cw, ccw = bus.read_raw(sid, "cw_angle_limit"), bus.read_raw(sid, "ccw_angle_limit")
    if cw or ccw:
        return
    lo, hi = table["cw_angle_limit"].default or 0, (table["ccw_angle_limit"].default or table["ccw_angle_limit"].max_raw)
    log.warning("servo %d (%s): was in wheel mode; angle limits back to %d, %d (torque off first)",
                sid, joint, lo, hi)
    bus.write(sid, "torque_enable", 0)
    bus.write_raw(sid, "cw_angle_limit", lo)
    bus.write_raw(sid, "ccw_angle_limit", hi)
