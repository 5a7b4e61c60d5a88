"""A fall, detected in the loop and reacted to per ``safety.on_fall`` (controller/fall.py).

Lockstep through the virtual bus on the contact simulator: a push that knocks the robot
over (``simulation.pushes``), then the virtual servos' registers as the bus engine holds them
(Torque Enable, the gain scale Position P Gain / compliance slope give the plant) and the
plant's joint torques, sampled every tick: the reaction is checked on the servos, not in the
summary alone.  Pushes the robots recover from are the other tests' (test_daemon_wbc.py,
test_op3like_humanoid.py): there ``summary["fall"]`` is None.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from servoloop.controller.config import ControllerConfig, PushConfig, builtin_config
from servoloop.controller.daemon import Daemon
from servoloop.controller.faults import Fault, FaultKind
from servoloop.controller.runtime import make_lockstep

pytestmark = pytest.mark.hil

T_PUSH = 6.5          # s of bus time: the quadruped is 1.2 s into its run


def run(cfg, run_s, tip_rad=0.0, extra=None, setup=None):
    """Run the daemon; per tick (bus time, torque on per servo, gain scale per servo, max |joint
    torque| of the plant, true tilt) and, with ``extra`` (a callable of the bus engine), what it
    returns.  ``tip_rad``: the simulated robot is turned about its x axis before the daemon
    connects (lying on its side); ``setup``: called with the daemon before it runs."""
    lock = make_lockstep(cfg)
    rows = []
    try:
        eng = lock.virtual.engine
        sim = eng.plant.sim
        if tip_rad:
            sim.q[3:7] = (math.sin(tip_rad / 2), 0.0, 0.0, math.cos(tip_rad / 2))
            sim.q[2] = 0.12
        advance = lock.clock.on_advance

        def on_advance(dt):
            advance(dt)
            q = sim.q
            rows.append((lock.virtual.time_s, eng.torque_on.copy(), eng.kp_scale.copy(),
                         float(np.abs(eng.torque).max()),
                         2 * math.asin(min(1.0, math.hypot(q[3], q[4]))))
                        + (() if extra is None else (extra(eng),)))

        lock.clock.on_advance = on_advance
        daemon = Daemon(cfg, lock.bus, lock.clock, telemetry_path=None, socket_path=None)
        if setup is not None:
            setup(daemon)
        summary = daemon.run(cfg.startup.ramp_s + run_s)
        end = (eng.torque_on.copy(), eng.kp_scale.copy(), len(rows))
        for _ in range(round(0.5 * cfg.loop.rate_hz)):   # the robot, 0.5 s after the run
            on_advance(1.0 / cfg.loop.rate_hz)
    finally:
        lock.close()
    return summary, rows, end


#: N m, the XM430-W350's gearbox friction in the servo model: a servo with torque off gives
#: the joint no more than that
COULOMB_NM = 0.134


def quadruped(on_fall, impulse=(0.0, 6.0, 0.0)):
    """The built-in quadruped under ``wbc``, pushed at the trunk at T_PUSH (``impulse`` N s)."""
    cfg = builtin_config("quadruped")
    return replace(cfg, controller=ControllerConfig(name="wbc", params={}),
                   safety=replace(cfg.safety, on_fall=on_fall),
                   simulation=replace(cfg.simulation, pushes=(PushConfig(T_PUSH, impulse),)))


def _fall_of(summary, reaction):
    fall = summary["fall"]
    assert fall is not None and fall["reaction"] == reaction, summary
    assert fall["tilt_rad"] > 0.4 and fall["tipping_rate_rad_s"] > 2.0
    return fall



@pytest.mark.parametrize("on_fall", ["damp", "torque_off", "warn"])
def test_a_quadruped_knocked_over_gets_the_reaction_asked(on_fall):
    """6 N s from the side (2.4 m/s on 2.45 kg) rolls the quadruped over: the fall is seen within
    0.1 s, then damp: every servo torqued at 1/8 of its P gain for ``fall_damp_s``, then torque
    off and the gains back; torque_off: off at once; warn: torqued to the end (as before)."""
    summary, rows, (torque_end, kp_end, n_run) = run(quadruped(on_fall), 3.0)
    fall = _fall_of(summary, on_fall)
    t = np.array([r[0] for r in rows])
    on = np.array([r[1] for r in rows])
    kp = np.array([r[2] for r in rows])
    tau = np.array([r[3] for r in rows])
    tilt = np.array([r[4] for r in rows])
    pushed = t > T_PUSH
    if on_fall == "warn":
        assert tilt[-1] > 1.5                                        # it lies on its side
        assert summary["state"] == "done" and not summary["faults"], summary["faults"]
        assert [w for w in summary["warnings"] if "the robot fell" in w], summary["warnings"]
        lying = pushed[:n_run] & (t[:n_run] > T_PUSH + 0.5)
        assert on[:n_run][pushed[:n_run]].all() and (kp == 1.0).all()    # never let go
        assert np.median(tau[:n_run][lying]) > 0.5                   # and drives its torque into the floor
        return
    # the first tick after the push with a servo let go or softened: the reaction
    k_fall = int(np.argmax(pushed & ((kp != 1.0).any(axis=1) | ~on.all(axis=1))))
    assert on[k_fall - 1].all() and (kp[k_fall - 1] == 1.0).all()
    assert summary["state"] == "fault"
    assert [f["kind"] for f in summary["fault_details"]] == ["fall"], summary["fault_details"]
    t_fall = t[k_fall]
    assert T_PUSH < t_fall < T_PUSH + 0.1                            # seen early
    assert tilt[k_fall] < 1.0                                        # before it lies on its side
    assert not torque_end.any() and (kp_end == 1.0).all()            # off, gains put back
    # afterwards the joints get friction only; the plant's joint torque also holds a joint
    # stop's, which the torque_off quadruped meets 0.26 s later as it lands (6.4 N m)
    assert tau[n_run:n_run + 200].max() <= COULOMB_NM + 1e-9
    if on_fall == "torque_off":
        assert not on[k_fall:].any() and (kp[k_fall:] == 1.0).all()  # off at once, not softened
        return
    damped = (t >= t_fall) & (t < t_fall + 0.9)                      # fall_damp_s: 1 s
    assert on[damped].all() and np.allclose(kp[damped], 0.125, atol=0.002)   # soft, not limp
    # the joints' torque while damped (largest of the 12, median over the window): 0.24 N m,
    # where the controller left on (warn) drives 1.16 into the floor
    assert np.median(tau[damped & (t > T_PUSH + 0.5)]) < 0.5
    assert not on[t > t_fall + 1.1].any()                            # then off
    assert fall["t_s"] > 0


#: N m/A, the XM430-W350's torque constant (e-Manual: 4.1 N m at 2.3 A, 12 V)
XM430_KT = 1.783
#: N m, one Goal Current unit (2.69 mA) of an XM430-W350: the resolution of a current command
CURRENT_UNIT_NM = 2.69e-3 * XM430_KT


def test_a_quadruped_on_current_servos_knocked_over_is_damped_by_current():
    """The quadruped's twelve XM430-W350 in current mode (Operating Mode 0, ``wbc`` sends them
    its joint torques as currents), rolled over by 6 N s from the side: a current servo has no
    P gain to lower, so ``damp`` sends it the damping current ``-DAMP_KD dq / k_t`` every tick for
    ``fall_damp_s``.  Checked on the servos: their commanded torque is that damping, to one
    Goal Current unit; the joints' torques once it lies are small; then torque off."""
    from servoloop.controller.fall import DAMP_KD

    cfg = quadruped("damp")
    cfg = replace(cfg, servos=tuple(replace(s, mode="current", torque_constant=XM430_KT)
                                    for s in cfg.servos))
    summary, rows, (torque_end, _, n_run) = run(
        cfg, 3.0, extra=lambda eng: (eng.mode.copy(), eng.command.copy(), eng.velocity.copy(),
                                     eng.torque.copy()))
    _fall_of(summary, "damp")
    assert summary["state"] == "fault"
    assert [f["kind"] for f in summary["fault_details"]] == ["fall"], summary["fault_details"]
    t = np.array([r[0] for r in rows])
    on = np.array([r[1] for r in rows])
    kp = np.array([r[2] for r in rows])
    mode = np.array([r[5][0] for r in rows])
    command = np.array([r[5][1] for r in rows])          # N m the plant's servos are asked
    velocity = np.array([r[5][2] for r in rows])         # rad/s
    tau = np.abs(np.array([r[5][3] for r in rows])).max(axis=1)
    assert (mode == 2).all() and (kp == 1.0).all()       # current servos throughout, no gain touched
    # torque off fall_damp_s after the fall is seen, and the fall seen within 0.1 s of the push
    k_off = int(np.argmax((t > T_PUSH) & ~on.any(axis=1)))
    t_damp = t[k_off] - cfg.safety.fall_damp_s
    assert T_PUSH < t_damp < T_PUSH + 0.1
    assert on[t < t[k_off]].all() and not on[k_off:].any() and not torque_end.any()
    damped = np.flatnonzero((t > t_damp + 0.003) & (t < t[k_off]))
    # the servos get the damping current: -DAMP_KD times the velocity the loop read a tick before
    want = -DAMP_KD * velocity[damped - 1]
    assert np.abs(command[damped] - want).max() <= CURRENT_UNIT_NM
    assert np.abs(command[damped]).max() > 0.1           # while the limbs still move
    # ...which was not what wbc asked before the fall (its stance torques)
    before = np.flatnonzero((t > T_PUSH - 0.1) & (t < T_PUSH))
    assert np.abs(command[before] + DAMP_KD * velocity[before - 1]).max() > 0.5
    # the joints' torque while it lies damped (largest of the 12, median): ~0.04 N m, where the
    # controller left on (warn, position servos) drives 1.16 into the floor
    assert np.median(tau[damped][t[damped] > T_PUSH + 0.5]) < 0.2
    assert tau[n_run:n_run + 200].max() <= COULOMB_NM + 1e-9     # off: friction only


def _with_the_fall(kind):
    """A ``setup`` for :func:`run`: a ``kind`` fault (limit or comm) found in the very tick the
    fall detector fires (the knocked-over quadruped's own fall; the other fault injected at
    the safety stage's check of that tick)."""
    def setup(daemon):
        loop, fired = daemon.loop, []
        check = loop.fall.check

        def fall_check(t_s):
            f = check(t_s)
            if f is not None:
                fired.append(loop.ticks)
            return f

        def same_tick(stage_check, fault):
            def wrapped(*args):
                f = stage_check(*args)
                return fault if fired and loop.ticks == fired[0] else f
            return wrapped

        loop.fall.check = fall_check
        if kind == "limit":
            loop.safety.check_measured = same_tick(loop.safety.check_measured, Fault(
                FaultKind.LIMIT, "lf_knee at -2.71 rad, past its limit", 3, "lf_knee"))
        else:
            loop.safety.record_comm = same_tick(loop.safety.record_comm, Fault(
                FaultKind.COMM, "the bus stopped answering", 3, "lf_knee"))
    return setup


def test_a_fall_with_a_joint_limit_fault_in_the_same_tick_is_damped():
    """A joint thrown past its limit in the tick the fall is seen: the fall decides (damping
    serves a falling robot; torque off would drop it limp), both are recorded, fall first."""
    summary, rows, (torque_end, kp_end, _) = run(quadruped("damp"), 3.0, setup=_with_the_fall("limit"))
    _fall_of(summary, "damp")
    assert [f["kind"] for f in summary["fault_details"]] == ["fall", "limit"], summary["fault_details"]
    t = np.array([r[0] for r in rows])
    on = np.array([r[1] for r in rows])
    kp = np.array([r[2] for r in rows])
    k_fall = int(np.argmax((t > T_PUSH) & (kp != 1.0).any(axis=1)))
    assert T_PUSH < t[k_fall] < T_PUSH + 0.1
    damped = (t >= t[k_fall]) & (t < t[k_fall] + 0.9)
    assert on[damped].all() and np.allclose(kp[damped], 0.125, atol=0.002)   # soft, not limp
    assert not on[t > t[k_fall] + 1.1].any() and not torque_end.any() and (kp_end == 1.0).all()


def test_a_fall_in_the_tick_the_loop_is_declared_late_is_damped():
    """The late-tick fault is found at the start of a tick, before the fall check: before, it
    decided and the fallen robot dropped limp.  The run is deterministic (lockstep): a first run
    finds the tick the fall is seen, the second declares that tick the loop's last straw of late
    ticks.  The fall decides (the damping's own ticks are on time), both recorded."""
    ticks = []

    def find(daemon):
        check = daemon.loop.fall.check

        def fall_check(t_s):
            f = check(t_s)
            if f is not None:
                ticks.append(daemon.loop.ticks)
            return f
        daemon.loop.fall.check = fall_check

    first, _, _ = run(quadruped("damp"), 3.0, setup=find)
    assert [f["kind"] for f in first["fault_details"]] == ["fall"] and len(ticks) == 1

    def late_then(daemon):
        loop, late = daemon.loop, daemon.loop.safety.late
        loop.safety.late = lambda skipped: (Fault(FaultKind.LATE, "10 consecutive late ticks")
                                             if loop.ticks == ticks[0] else late(skipped))

    summary, rows, (torque_end, kp_end, _) = run(quadruped("damp"), 3.0, setup=late_then)
    assert summary["fall"]["t_s"] == first["fall"]["t_s"]          # the same fall, the same tick
    assert [f["kind"] for f in summary["fault_details"]] == ["fall", "late"], summary["fault_details"]
    t = np.array([r[0] for r in rows])
    on = np.array([r[1] for r in rows])
    kp = np.array([r[2] for r in rows])
    damped = (t > T_PUSH + 0.1) & (t < T_PUSH + 0.9)
    assert on[damped].all() and np.allclose(kp[damped], 0.125, atol=0.002)
    assert not torque_end.any() and (kp_end == 1.0).all()


@pytest.mark.parametrize("comm_action", ["torque_off", "hold"])
def test_a_fall_with_a_comm_fault_in_the_same_tick_gets_torque_off(comm_action):
    """The bus failing in the tick the fall is seen: damping needs the bus, so the comm fault
    decides: torque off at once, no gain touched; and a fallen robot is not held at its last
    goal even with ``comm_timeout_action: hold``.  Both recorded, comm first."""
    cfg = quadruped("damp")
    cfg = replace(cfg, safety=replace(cfg.safety, comm_timeout_action=comm_action))
    summary, rows, (torque_end, kp_end, _) = run(cfg, 3.0, setup=_with_the_fall("comm"))
    _fall_of(summary, "damp")
    assert [f["kind"] for f in summary["fault_details"]] == ["comm", "fall"], summary["fault_details"]
    t = np.array([r[0] for r in rows])
    on = np.array([r[1] for r in rows])
    kp = np.array([r[2] for r in rows])
    k_off = int(np.argmax((t > T_PUSH) & ~on.all(axis=1)))
    assert T_PUSH < t[k_off] < T_PUSH + 0.1
    assert not on[k_off:].any() and not torque_end.any()        # off at once, and stays off
    assert (kp == 1.0).all() and (kp_end == 1.0).all()          # never softened
    assert not [w for w in summary["warnings"] if "left torqued" in w], summary["warnings"]


def test_a_recovered_push_is_no_fall_with_the_same_detector():
    """2 N s from behind (test_daemon_wbc.py's push: tipped 0.11 rad, back level) with the
    harshest reaction armed: no fall, every servo torqued at its own gain throughout."""
    summary, rows, (_, _, n_run) = run(quadruped("torque_off", (2.0, 0.0, 0.0)), 2.0)
    assert summary["state"] == "done" and summary["fall"] is None, summary["faults"]
    assert all(r[1].all() and (r[2] == 1.0).all() for r in rows[:n_run] if r[0] > T_PUSH)


def test_the_humanoid_knocked_over_is_damped_on_its_compliance_slopes():
    """The AX-18A humanoid (Protocol 1.0: no P gain, a compliance slope) shoved 2 N s at the
    pelvis: damped on slope 254 (the plant's gain 32/254), then torque off, slopes back."""
    cfg = builtin_config("humanoid")
    cfg = replace(cfg, simulation=replace(cfg.simulation, pushes=(PushConfig(2.5, (2.0, 0.0, 0.0)),)))
    summary, rows, (torque_end, kp_end, _) = run(cfg, 3.0)
    _fall_of(summary, "damp")
    assert [f["kind"] for f in summary["fault_details"]] == ["fall"], summary["fault_details"]
    kp = np.array([r[2] for r in rows])
    soft = np.isclose(kp, 32 / 254).all(axis=1)
    assert soft.sum() >= 0.9 * cfg.loop.rate_hz * cfg.safety.fall_damp_s   # ~1 s of ticks soft
    assert not torque_end.any() and (kp_end == 1.0).all()


def test_a_robot_lying_on_its_side_at_startup_is_not_torqued_up():
    """The quadruped found on its side (1.4 rad) never gets torque; on its belly (every other
    test) it stands up."""
    summary, rows, (torque_end, _, _) = run(quadruped("damp", (0.0, 0.0, 0.0)), 1.0, tip_rad=1.4)
    assert summary["state"] == "fault"
    (f,) = summary["fault_details"]
    assert f["kind"] == "fall" and "lies tipped over" in f["message"], f
    assert not any(r[1].any() for r in rows) and not torque_end.any()


def test_the_op3_like_humanoid_knocked_over_is_damped():
    """Our OP3-like humanoid (20 XM430-W350 at 1 kHz, its IMU turned about z) shoved 3 N s
    forward at the trunk: the fall is a fault ``fall``, its servos soft (P gain 1/8) for the
    damping second, then off with their gains back."""
    import tempfile
    from pathlib import Path

    from tests.hil.test_op3like_humanoid import _config

    with tempfile.TemporaryDirectory() as d:
        cfg = _config(Path(d), [PushConfig(2.5, (3.0, 0.0, 0.0))])
        summary, rows, (torque_end, kp_end, n_run) = run(cfg, 3.0)
    fall = _fall_of(summary, "damp")
    assert [f["kind"] for f in summary["fault_details"]] == ["fall"], summary["fault_details"]
    assert 0.0 < fall["t_s"]
    kp = np.array([r[2] for r in rows[:n_run]])
    on = np.array([r[1] for r in rows[:n_run]])
    soft = np.isclose(kp, 0.125).all(axis=1)
    assert soft.sum() >= 0.9 * cfg.loop.rate_hz * cfg.safety.fall_damp_s and on[soft].all()
    assert not torque_end.any() and (kp_end == 1.0).all()
    assert max(r[4] for r in rows) > 1.0                              # it went down


def test_the_fall_is_in_the_status_and_a_telemetry_event(tmp_path):
    """``servoloop status``'s reply and the telemetry file say when, how far and what was done."""
    from servoloop.controller.telemetry_format import read_telemetry

    cfg = quadruped("torque_off")
    lock = make_lockstep(cfg)
    try:
        daemon = Daemon(cfg, lock.bus, lock.clock, telemetry_path=tmp_path / "fall.sltl", socket_path=None)
        summary = daemon.run(cfg.startup.ramp_s + 1.5)
        status = daemon.status()
    finally:
        lock.close()
    assert status["fall"] == summary["fall"] and status["fall"]["reaction"] == "torque_off"
    assert status["state"] == "fault" and status["fault_details"][0]["kind"] == "fall"
    events = [e for e in read_telemetry(tmp_path / "fall.sltl").events if e["kind"] == "fall"]
    assert len(events) == 1, events
    assert "the robot fell" in events[0]["message"] and events[0]["fault"]["kind"] == "fall"
    assert events[0]["t_s"] == pytest.approx(summary["fall"]["t_s"], abs=1e-6)
