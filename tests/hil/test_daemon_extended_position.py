"""Extended position (multi-turn) mode end to end: config, daemon, safety, virtual bus (lockstep)."""

import pytest

from servoloop.controller.config import config_from_dict
from servoloop.controller.daemon import Daemon
from servoloop.controller.runtime import make_lockstep

pytestmark = pytest.mark.hil


def test_an_x_servo_goes_two_turns_and_back_within_its_limits():
    cfg = config_from_dict({
        "robot": "winch", "bus": {"protocol": 2, "baud": 1_000_000},
        "servos": [{"id": 1, "model": "XM430-W350", "joint": "drum", "mode": "extended_position",
                    "min": -20.0, "max": 20.0}],
        "loop": {"rate_hz": 500}, "startup": {"ramp_s": 0.02},
        "controller": {"name": "hold", "params": {"pose": {"drum": 12.5}}},   # two turns
        "simulation": {"plant": "independent"},
    })
    lock = make_lockstep(cfg)
    seen = []
    advance = lock.clock.on_advance

    def on_advance(dt):
        advance(dt)
        seen.append((lock.virtual.time_s, float(lock.virtual.engine.position[0])))

    lock.clock.on_advance = on_advance
    try:
        mode = lock.virtual.engine.servos[0]
        summary = Daemon(cfg, lock.bus, lock.clock, telemetry_path=None, socket_path=None).run(4.0)
        operating_mode = mode.mem[mode.info.reg["operating_mode"].address]
    finally:
        lock.close()
    assert summary["state"] == "done", summary["faults"]
    assert operating_mode == 4                                    # Extended Position Control Mode
    end = seen[-1][1]
    assert end == pytest.approx(12.5, abs=0.05)                   # two turns, not wrapped to 12.5 - 4 pi
    # on the way there no faster than the datasheet no-load speed (the slew limit)
    speeds = [(q2 - q1) / (t2 - t1) for (t1, q1), (t2, q2) in zip(seen, seen[1:], strict=False) if t2 > t1]
    assert max(speeds) <= 46 * 2 * 3.14159 / 60 * 1.05


def test_extended_position_on_a_servo_without_it_is_a_config_fault():
    cfg = config_from_dict({
        "bus": {"protocol": 1}, "servos": [{"id": 1, "model": "AX-18A", "joint": "a",
                                           "mode": "extended_position"}],
        "simulation": {"plant": "independent"}, "startup": {"ramp_s": 0.02}})
    lock = make_lockstep(cfg)
    try:
        s = Daemon(cfg, lock.bus, lock.clock, telemetry_path=None, socket_path=None).run(0.1)
    finally:
        lock.close()
    assert s["state"] == "fault"
    assert "extended_position" in s["faults"][0] and "not possible" in s["faults"][0]
