"""Velocity (wheel) mode end to end, in lockstep against the virtual bus.

An XM430 (Operating Mode 1, Goal Velocity) and an AX-18A (wheel mode: both
angle limits 0, Moving Speed with the direction bit) turn at the speed the
``hold`` controller's ``velocity`` param asks for -- measured by the
emulated joint's position over time -- in both directions, start from rest,
never faster than the speed limit nor with a step in velocity, and stop at
shutdown (0 rad/s written before torque off).
"""

from __future__ import annotations

import numpy as np
import pytest

from servoloop.controller.slew import DEFAULT_VELOCITY_RAMP_S
from servoloop.firmware_bridge.control_table import get_table
from tests.hil.velocity_rigs import (
    lockstep_daemon,
    sample,
    speed,
    wheel_config,
)

pytestmark = pytest.mark.hil

RATE = 500
FWD, REV = 1.5, -1.0          # rad/s, below both servos' no-load speed (XM430 4.8, AX-18A 10.2)
GOAL_REG = {"XM430-W350": "goal_velocity", "AX-18A": "moving_speed"}


def _servo_raw(lock, name: str) -> int:
    """Raw value of register ``name`` in the (only) emulated servo's memory."""
    engine = lock.virtual.engine
    servo = engine.servos[0]
    reg = servo.info.reg[name]
    return int.from_bytes(bytes(servo.mem[reg.address:reg.address + reg.size]), "little")


@pytest.mark.parametrize("model", ["XM430-W350", "AX-18A"])
def test_wheel_turns_at_commanded_speed_both_ways_and_stops(model):
    proto = 1 if model.startswith("AX") else 2
    servos = [(1, model, "velocity", 0.0)]
    cfg = wheel_config(servos, proto, {"velocity": [FWD]}, RATE)
    daemon, lock, position = lockstep_daemon(cfg, servos)
    log = sample(lock, position, [1], hooks=[(1.5, lambda: daemon.loop.control.set_params({"velocity": [REV]}))])
    try:
        s = daemon.run(3.0)
        assert s["state"] == "done", s
        assert _servo_raw(lock, "torque_enable") == 0
        # 0 rad/s was the last velocity goal written (before torque off)
        assert _servo_raw(lock, GOAL_REG[model]) == 0
        # and with torque off the wheel comes to rest
        t_end = lock.virtual.time_s
        q_end = position(1)
        for _ in range(500):
            lock.virtual.advance(1e-3)
        assert lock.virtual.time_s > t_end
        q_rest = position(1)
        for _ in range(200):
            lock.virtual.advance(1e-3)
        assert abs(position(1) - q_rest) < 0.02, (q_end, q_rest, position(1))
    finally:
        lock.close()
    assert s["bus_errors"] == {}, s["bus_errors"]
    v_fwd = speed(log, 1, 0.6, 1.45)
    assert v_fwd == pytest.approx(FWD, rel=0.05), v_fwd
    v_rev = speed(log, 1, 2.1, 2.95)
    assert v_rev == pytest.approx(REV, rel=0.05), v_rev


def test_velocity_goal_starts_at_rest_is_clamped_and_acceleration_limited():
    servos = [(1, "XM430-W350", "velocity", 0.0)]
    cfg = wheel_config(servos, 2, {"velocity": [100.0]}, RATE)   # far above what the servo can do
    daemon, lock, position = lockstep_daemon(cfg, servos)
    goals = []
    log = sample(lock, position, [1])
    inner = lock.clock.on_advance

    def record(dt):
        inner(dt)
        goals.append(float(daemon.loop.velocity_servo[0]))

    lock.clock.on_advance = record
    try:
        s = daemon.run(1.5)
    finally:
        lock.close()
    assert s["state"] == "done" and s["bus_errors"] == {}, s
    g = np.array(goals)
    vmax = 200 * 0.023980823922402087          # XM430-W350 factory Velocity Limit (raw 200), rad/s
    # without safety.max_acceleration: the datasheet no-load speed reached in DEFAULT_VELOCITY_RAMP_S
    acc = get_table("XM430-W350").datasheet.no_load_speed_rad_s / DEFAULT_VELOCITY_RAMP_S
    assert abs(g[0]) <= acc / RATE + 1e-9      # from rest: no jump at torque on
    assert np.abs(g).max() <= vmax + 1e-9
    assert np.abs(np.diff(g[:-1])).max() <= acc / RATE + 1e-9     # the last one is the stop's 0
    assert g.max() == pytest.approx(vmax)
    assert speed(log, 1, 0.8, 1.45) == pytest.approx(vmax, rel=0.05)


def test_shutdown_hold_leaves_the_wheel_standing_torqued():
    servos = [(1, "XM430-W350", "velocity", 0.0)]
    cfg = wheel_config(servos, 2, {"velocity": [2.0]}, RATE, shutdown={"mode": "hold"})
    daemon, lock, position = lockstep_daemon(cfg, servos)
    try:
        s = daemon.run(1.0)
        assert s["state"] == "done", s
        assert _servo_raw(lock, "torque_enable") == 1
        assert _servo_raw(lock, "goal_velocity") == 0
        for _ in range(300):                    # let it brake
            lock.virtual.advance(1e-3)
        q0 = position(1)
        for _ in range(500):
            lock.virtual.advance(1e-3)
        assert abs(position(1) - q0) < 0.01
    finally:
        lock.close()
