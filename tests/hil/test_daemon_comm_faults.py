"""Issue 10, check 2: the graded comm-fault policy against injected faults on the virtual bus.

Lockstep (simulated time, the in-process virtual bus behind a real pty):

* 1 % dropped and 1 % corrupted replies on the 6-servo arm for 60 s: the
  daemon keeps running (state run until the end, every servo torqued), counts
  the errors per kind and per servo, and warns;
* every reply dropped from t = 5 s: the servos stop per
  ``safety.comm_timeout_action`` within ``comm_timeout_s`` + one tick.
"""

from __future__ import annotations

import os

import pytest

from servoloop.controller.lifecycle import State
from servoloop.controller.telemetry_format import read_telemetry
from tests.hil.test_daemon_lockstep import LockstepRig, hook_at, short_config

pytestmark = pytest.mark.hil

PERIOD = 1e-3
# A lost reply costs its read timeout in real time even under lockstep, so the
# issue's 60 s run takes minutes of wall time: the suite runs 8 s of it,
# SERVOLOOP_LONG_CHECKS=1 the full 60 s (passed: 3 min 36 s wall on 2 cores).
LOSS_RUN_S = 60.0 if os.environ.get("SERVOLOOP_LONG_CHECKS") == "1" else 8.0


@pytest.mark.slow
def test_one_percent_loss_for_60s_keeps_running_counts_and_warns(tmp_path):
    cfg = short_config("arm")
    rig = LockstepRig(cfg, faults="drop:p=0.01,corrupt:p=0.01", telemetry_path=tmp_path / "l.sltl")
    seen = []

    def look():
        d = rig.daemon
        seen.append((d.lifecycle.state, all(rig.servo(s.id).torque_enabled for s in cfg.servos)))

    for t in (LOSS_RUN_S / 6, LOSS_RUN_S / 2, LOSS_RUN_S - 0.1):
        hook_at(rig, t, look)
    try:
        s = rig.daemon.run(LOSS_RUN_S)
    finally:
        rig.close()
    assert s["state"] == "done" and not s["faults"], s["faults"]
    assert seen == [(State.RUN, True)] * 3
    errs = s["bus_errors"]
    # ~1 % of 6 servos x 1000 reads/s of each kind (minus corrupt ones that read as short)
    expect = 0.01 * 6 * 1000 * LOSS_RUN_S
    assert errs.get("timeout", 0) > 0.5 * expect and errs.get("checksum", 0) > 0.25 * expect, errs
    per_servo = s["comm"]["errors_per_servo"]
    assert set(per_servo) == {sv.id for sv in cfg.servos}
    assert s["comm"]["level"] in ("warn", "ok")
    assert any(w.startswith("comm: reached") for w in s["warnings"]), s["warnings"]
    tel = read_telemetry(tmp_path / "l.sltl")
    assert any(e["kind"] == "comm_warn" for e in tel.events)
    assert not any(e["kind"] in ("comm_timeout", "fault") for e in tel.events)


@pytest.mark.parametrize("action", ["torque_off", "hold"])
@pytest.mark.slow
def test_bus_gone_stops_per_policy_within_timeout_plus_one_tick(tmp_path, action):
    cfg = short_config("arm", safety={"comm_timeout_action": action})
    rig = LockstepRig(cfg, faults="drop:p=1.0:at=5.0", telemetry_path=tmp_path / "g.sltl")
    try:
        s = rig.daemon.run(10.0)
    finally:
        rig.close()
    assert s["state"] == "fault" and s["fault_details"][0]["kind"] == "comm", s["faults"]
    tel = read_telemetry(tmp_path / "g.sltl")
    fault_tick = int(tel.column("tick")[-1])
    t_fault = fault_tick * PERIOD
    assert 5.0 + cfg.safety.comm_timeout_s - PERIOD <= t_fault <= 5.0 + cfg.safety.comm_timeout_s + PERIOD
    kinds = [e["kind"] for e in tel.events]
    assert kinds.index("comm_hold") < kinds.index("comm_timeout") < kinds.index("fault")
    torqued = [rig.servo(sv.id).torque_enabled for sv in cfg.servos]
    if action == "torque_off":
        assert not any(torqued)  # the writes arrive; only the replies are lost
    else:
        assert all(torqued)
        assert any("comm_timeout_action: hold" in w for w in s["warnings"])


def test_hardware_error_disable_servo_keeps_the_others_running(tmp_path):
    cfg = short_config("arm", safety={"on_hardware_error": "disable_servo"})
    rig = LockstepRig(cfg, faults="hwerror:id=4:bits=overload:at=0.2", telemetry_path=tmp_path / "x.sltl")
    seen = []
    hook_at(rig, 0.8, lambda: seen.append({sv.id: rig.servo(sv.id).torque_enabled for sv in cfg.servos}))
    try:
        s = rig.daemon.run(1.0)
    finally:
        rig.close()
    assert s["state"] == "done" and not s["faults"], s["faults"]
    assert not seen[0][4]
    assert all(on for sid, on in seen[0].items() if sid != 4)
    assert s["comm"]["disabled"] == [4] and s["comm"]["level"] == "ok"
    tel = read_telemetry(tmp_path / "x.sltl")
    assert any(e["kind"] == "disable_servo" and "servo 4" in e["message"] for e in tel.events)
    j = cfg.servos[3].joint
    # the disabled joint never feeds NaN into control: its goal stays where it was
    goal = tel.column(f"goal.{j}")
    assert not (goal != goal).any()
