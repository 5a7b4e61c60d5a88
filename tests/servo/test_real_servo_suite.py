"""The real-servo suite: what a bench session checks on one servo before trusting it.

Runs against ``--servo-port`` (a real servo: ``--servo-id``, ``--servo-model``,
``--servo-protocol``, ``--servo-baud``) or, without it, against a
``servoloop virtual-bus`` process on a pty (see conftest.py), in real time both
ways.  Every test works through ``firmware_bridge.Bus`` (or the CLI) as a user
would, and the servo is left as found (``leave_as_found``): torque off, every
writable register as before.

Tolerances: positions after a closed-loop move within 0.03 rad of the goal
(AX compliance margin and Coulomb band ~3 mrad, X ~1 tick, plus a load);
``calibrate actuator`` on the virtual servo returns its emulated kp / kd within
a factor of 2 -- a check of units and scale only: the emulator runs in real time
and a loaded 2-core machine starves it (kp read 4 % low alone, 16 % and 45 % low
under full parallel test runs); the lockstep tests in
tests/hil/test_calibrate_actuator.py hold the 3 % accuracy; on a
real servo only a fit that converged with finite, positive gains is asserted
(nothing on the bench says what its gains should be).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from servoloop.firmware_bridge.errors import BridgeError
from servoloop.virtual_bus.actuator import default_actuator

pytestmark = [pytest.mark.hil, pytest.mark.usefixtures("leave_as_found")]

ROOT = Path(__file__).resolve().parents[2]
MOVE_TOL_RAD = 0.03


@pytest.fixture
def bus(servo_target):
    with servo_target.bus() as b:
        yield b
        b.write_raw(servo_target.id, "torque_enable", 0)


def _poll(predicate, timeout=5.0, interval=0.02):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def _goal_limits(bus, sid):
    """Raw (lo, hi) a goal may take on this servo now (angle / position limits)."""
    regs = bus.table(sid).registers
    for lo, hi in (("cw_angle_limit", "ccw_angle_limit"), ("min_position_limit", "max_position_limit")):
        if lo in regs:
            return bus.read_raw(sid, lo), bus.read_raw(sid, hi)
    g = regs["goal_position"]
    return g.min_raw, g.max_raw


def test_ping_reports_the_model(bus, servo_target):
    t = servo_target
    number, firmware = bus.ping_info(t.id)
    assert number == bus.table(t.id).model_number
    assert bus.ping_info(t.id) == (number, firmware)         # stable across pings
    report = bus.connect()
    assert report is not None


def test_ram_register_round_trip(bus, servo_target):
    sid = servo_target.id
    for value in (1, 0, 1, 0):
        bus.write_raw(sid, "led", value)
        assert bus.read_raw(sid, "led") == value


def test_goal_position_round_trip_within_limits(bus, servo_target):
    """Torque off: Goal Position written and read back, the servo does not move."""
    sid = servo_target.id
    bus.write_raw(sid, "torque_enable", 0)
    lo, hi = _goal_limits(bus, sid)
    here = bus.read_raw(sid, "present_position")
    for offset in (25, -25, 0):
        goal = int(min(max(here + offset, lo), hi))
        bus.write_raw(sid, "goal_position", goal)
        assert bus.read_raw(sid, "goal_position") == goal
    with pytest.raises(BridgeError):
        bus.write_raw(sid, "goal_position", hi + 1)           # a goal beyond the limit is refused
    assert bus.read_raw(sid, "goal_position") == goal


def test_sync_write_moves_and_sync_read_follows(bus, servo_target):
    """Closed loop over ~1 s of real time: sync write a goal 0.1 rad away, sync read until there, back."""
    sid = servo_target.id
    writer = bus.sync_writer("goal_position", [sid])
    reader = bus.sync_reader(["goal_position", "present_position"], [sid])
    reader.read()
    start = float(reader.values["present_position"][0])
    lo, hi = (bus.table(sid).registers["goal_position"].scale * (v - bus.table(sid).registers["goal_position"].zero_raw)
              for v in _goal_limits(bus, sid))
    writer.write(np.array([start]))
    bus.write_raw(sid, "torque_enable", 1)
    for target in (start + 0.1 if start + 0.1 < hi else start - 0.1, start):
        assert lo <= target <= hi
        writer.write(np.array([target]))

        def there(target=target):
            reader.read()
            return abs(float(reader.values["present_position"][0]) - target) < MOVE_TOL_RAD

        assert _poll(there, timeout=5.0), f"servo {sid} did not reach {target:.3f} rad"
        tick = bus.table(sid).registers["goal_position"].scale
        assert float(reader.values["goal_position"][0]) == pytest.approx(target, abs=0.51 * tick)
    bus.write_raw(sid, "torque_enable", 0)


def test_reboot(bus, servo_target):
    """RAM back to defaults (LED off, torque off) and the servo answers again; AX has no REBOOT."""
    sid = servo_target.id
    table = bus.table(sid)
    bus.write_raw(sid, "led", 1)
    if table.name.startswith("AX"):
        with pytest.raises(BridgeError):                  # AX firmware: Instruction Error
            bus.reboot(sid)
        assert bus.read_raw(sid, "led") == 1
        return
    bus.reboot(sid)

    def answers():
        try:
            return bus.ping(sid) == table.model_number
        except BridgeError:
            return False

    assert _poll(answers, timeout=5.0), f"servo {sid} silent after REBOOT"
    assert bus.read_raw(sid, "led") == 0
    assert bus.read_raw(sid, "torque_enable") == 0


def test_calibrate_actuator(servo_target, tmp_path, request):
    """``servoloop calibrate actuator`` on this servo, three cycles per gain."""
    t = servo_target
    from servoloop.firmware_bridge.control_table import get_table

    actuator = default_actuator(get_table(t.model))
    inertia = request.config.getoption("--servo-inertia") or actuator.inertia_kg_m2
    out = tmp_path / "params.yaml"
    cmd = [sys.executable, "-m", "servoloop.cli", "calibrate", "actuator", "--port", t.port,
           "--baud", str(t.baud), "--protocol", str(t.protocol), "--id", str(t.id), "--model", t.model,
           "--inertia", repr(inertia), "--cycles", "3", "--out", str(out), "--json"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=240)
    if proc.returncode == 3 and "no reply" in proc.stderr and not t.real:
        # the emulator starved of CPU dropped a reply and calibrate actuator stops at the first
        # lost reply (its own robustness issue, reported); one more run on an idle moment
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    p, se = res["params"], res["stderr"]
    assert out.exists()
    assert p["kp"] > 0 and p["kd"] > 0 and np.isfinite([se[k] for k in ("kp", "kd")]).all()
    print(f"calibrate actuator {t.model}: kp {p['kp']:.4g} kd {p['kd']:.4g} (emulated "
          f"{actuator.servo.kp_nm_per_rad:.4g}, {actuator.servo.kd_nm_s_per_rad:.4g})")
    if not t.real:
        for k, truth in (("kp", actuator.servo.kp_nm_per_rad), ("kd", actuator.servo.kd_nm_s_per_rad)):
            assert 0.5 * truth < p[k] < 2.0 * truth, f"{k} {p[k]:.4g}, emulated {truth:.4g}"
