"""``loop.late_read``: with read-ahead, a tick waits for its replies only until its budget.

Lockstep (in-process virtual bus on a real pty): :class:`LateReplies` holds the replies to
chosen BULK READs back and lets them out a given simulated time later, as a stalled adapter
or pty would deliver them.  Then

* a reply later than the budget: the tick runs on the last reading (stale), writes its goals
  all the same, sends no new request; the next tick takes the late replies (one period
  older) before it asks anew; every reading the loop used is the reply to the request it
  was collected for (the byte stream never gets out of step); nothing fails, no deadline
  is missed;
* a stall longer than ``safety.comm_hold_s``: the servos hold (no goal written) and the
  bus comes back as before; longer than ``comm_timeout_s``: the comm fault, as before;
* the quadruped under ``wbc`` with 0.5 % of its reads 1-3 ms late stands for 3 s.

On the code before ``late_read`` the collect waited up to the reply timeout for the held
replies: each such tick failed its read (timeouts), which these tests refuse.
"""

from __future__ import annotations

import math
import os
import random
from dataclasses import replace

import numpy as np
import pytest

from servoloop.controller.config import ControllerConfig, builtin_config
from servoloop.firmware_bridge import protocol as P
from tests.hil.test_daemon_lockstep import LockstepRig, short_config

pytestmark = pytest.mark.hil

BULK_READ = int(P.Instruction.BULK_READ)


class LateReplies:
    """Hold the replies of chosen BULK READs of ``rig``'s virtual bus; release them
    ``choose(k, t)`` s of simulated time after the request (k: the request's number from 1,
    t: simulated time; 0 = answer at once, as the bus does).

    Attributes
    ----------
    requests : list of [k, t_s, release_t_s or None, reply positions {id: raw}]
    """

    def __init__(self, rig: LockstepRig, choose) -> None:
        self.rig, self.choose = rig, choose
        self.virtual = v = rig.virtual
        self.requests: list[list] = []
        self.held: list[tuple[float, bytes]] = []
        answer = v._answer

        def held_answer(exchanges):
            keep = []
            # the instructions these answer: the last ones the rig's recorder split off
            sent = [p for _t, p in rig.received[len(rig.received) - len(exchanges):]]
            for (total, replies), ins in zip(exchanges, sent, strict=True):
                if ins.instruction == BULK_READ and replies:
                    k = len(self.requests) + 1
                    d = self.choose(k, v.time_s)
                    pos = {}
                    for rp, _rdt, _extra in replies:
                        st, _used = P.parse_packet(rp, 2, status=True)
                        if len(st.params) >= 10 and st.servo_id < 200:
                            # X series block from present_current (126): position at 132
                            pos[st.servo_id] = int.from_bytes(bytes(st.params[6:10]), "little", signed=True)
                    self.requests.append([k, v.time_s, v.time_s + d if d > 0 else None, pos])
                    if d > 0:
                        self.held.append((v.time_s + d, b"".join(rp for rp, _, _ in replies)))
                        continue
                keep.append((total, replies))
            answer(keep)
            return len(exchanges)      # all taken: the pump must not wait for more

        v._answer = held_answer
        rig.hooks.append(self._release)

    def _release(self, t: float) -> None:
        due = [h for h in self.held if h[0] <= t + 1e-9]
        for h in sorted(due, key=lambda h: h[0]):
            self.held.remove(h)
            os.write(self.virtual._master, h[1])


class ReadLog:
    """Per tick of ``rig``'s loop: was it stale, and the raw positions its read stage holds."""

    def __init__(self, rig: LockstepRig) -> None:
        loop = rig.daemon.loop
        stage = loop.read
        self.ticks: list[tuple[bool, dict]] = []
        run = stage.run
        tables = None

        def logged(wide=False):
            nonlocal tables
            ok = run(wide)
            if tables is None:
                tables = {sid: loop.bus.register(sid, "present_position") for sid in loop.ids}
            v = stage.reader.values["present_position"]
            raw = {sid: (None if math.isnan(v[i]) else
                         int(round(v[i] / tables[sid].scale)) + tables[sid].zero_raw)
                   for i, sid in enumerate(loop.ids)}
            self.ticks.append((getattr(stage, "stale", False), raw, ok))
            return ok

        stage.run = logged


def _arm(**safety):
    cfg = short_config("arm", loop=dict(read_ahead=True, late_read=True))
    return replace(cfg, safety=replace(cfg.safety, monitor_every=7, **safety))


def test_a_late_reply_leaves_one_tick_stale_and_is_used_by_the_next():
    """Every 50th request is answered 1.5 ms (2.5 ms every 150th) late: the tick after it
    runs on the last reading (two ticks for 2.5 ms), the next takes the late reply; every
    reading is its own request's, every tick writes its goals, nothing fails."""
    rig = LockstepRig(_arm())
    late = LateReplies(rig, lambda k, t: (2.5e-3 if k % 150 == 0 else 1.5e-3) if k % 50 == 0 and k > 5 else 0.0)
    log = ReadLog(rig)
    try:
        summary = rig.daemon.run(0.6)
        status = rig.daemon.status()
    finally:
        rig.close()
    assert summary["state"] == "done", summary["faults"]
    assert summary["bus_errors"] == {} and summary["comm"]["failed_ticks"] == 0
    assert summary["missed"] == 0
    held = [r for r in late.requests if r[2] is not None]
    two = [r for r in held if r[2] - r[1] > 2e-3]
    assert len(held) >= 10 and len(two) >= 3
    # one stale tick per 1.5 ms reply, two per 2.5 ms
    assert summary["stale_reads"] == status["stale_reads"] == len(held) + len(two)
    assert rig.daemon.loop.read.late_collected == len(held)
    # the stream stays aligned: the readings the loop took (ticks that were not stale) are
    # the replies to the requests in order, each exactly once
    taken = [raw for stale, raw, _ok in log.ticks if not stale]
    assert len(taken) == len(late.requests) - 1      # the last one drained at the stop
    for raw, req in zip(taken, late.requests, strict=False):
        assert raw == req[3]
    # the servos' position noise (a quarter tick) makes the readings differ: a reading
    # taken for another request's would not match
    assert len({tuple(sorted(r.items())) for r in taken}) > 20
    # a stale tick holds the reading before it (the arrays were not touched)
    for (_s0, raw0, _), (s1, raw1, _) in zip(log.ticks, log.ticks[1:], strict=False):
        if s1:
            assert raw1 == raw0
    # no request went out while one was owed
    for a, b in zip(late.requests, late.requests[1:], strict=False):
        if a[2] is not None:
            assert b[1] >= a[2] - 1e-9
    # every tick wrote its goals, the stale ones too
    ins = [pkt.instruction for _t, pkt in rig.instructions()]
    first = ins.index(P.Instruction.BULK_READ)
    writes = sum(1 for x in ins[first:] if x == P.Instruction.SYNC_WRITE)
    assert writes >= len(log.ticks) - 2


def test_a_stall_past_comm_hold_holds_and_recovers():
    """Replies 15.5 ms late once (the reply timeout on a pty is ~20 ms: late, not lost): the
    stale ticks climb to hold after ``comm_hold_s`` (5 ms), no goal is written while holding,
    the late reply brings the bus back; nothing counted as failed."""
    rig = LockstepRig(_arm(comm_hold_s=0.005, comm_timeout_s=1.0))
    late = LateReplies(rig, lambda k, t: 0.0155 if k == 200 else 0.0)
    try:
        summary = rig.daemon.run(0.6)
        lost_s = rig.daemon.loop.read._lost_ns * 1e-9
    finally:
        rig.close()
    assert summary["state"] == "done", summary["faults"]
    assert summary["bus_errors"] == {} and summary["comm"]["failed_ticks"] == 0
    assert lost_s > 0.0155                   # the stall was late, not lost
    levels = [s["level"] for s in summary["comm"]["steps"]]
    assert "hold" in levels and levels[-1] in ("warn", "ok")
    assert summary["stale_reads"] == 15
    held = next(r for r in late.requests if r[2] is not None)
    writes = [t for t, pkt in rig.instructions() if pkt.instruction == P.Instruction.SYNC_WRITE]
    # ticks 1-4 ms into the stall write their goals; from 5 ms (comm_hold_s) to the release, none
    assert len([t for t in writes if held[1] + 5e-4 < t < held[1] + 4.5e-3]) == 4
    assert not [t for t in writes if held[1] + 4.5e-3 < t < held[2] - 1e-6]
    assert [t for t in writes if held[2] < t < held[2] + 2e-3]       # and after it again


def _stall(t0: float, t1: float):
    """Every request made in [t0, t1) is answered at t1 (a bus silent over that window)."""
    return lambda k, t: (t1 - t) if t0 <= t < t1 else 0.0


def test_a_stall_past_comm_timeout_is_the_comm_fault():
    """The bus silent for 0.2 s with ``comm_timeout_s`` 0.05 s: the comm fault, as before
    (requests whose replies are not in after the reply timeout fail as lost ones)."""
    rig = LockstepRig(_arm(comm_hold_s=0.01, comm_timeout_s=0.05))
    LateReplies(rig, _stall(0.2, 0.4))
    try:
        summary = rig.daemon.run(0.6)
    finally:
        rig.close()
    assert summary["state"] == "fault"
    assert "safety.comm_timeout_s" in summary["faults"][0]
    levels = [s["level"] for s in summary["comm"]["steps"]]
    assert levels[-2:] == ["hold", "timeout"]
    assert summary["stale_reads"] >= 15


def test_quadruped_wbc_stands_with_late_replies_at_random():
    """3 s of ``wbc`` on the quadruped (servos and IMU in one bulk read), 0.5 % of the reads
    1-3 ms late, at random: stands level, no failed read, no missed deadline."""
    cfg = builtin_config("quadruped")
    cfg = replace(cfg, controller=ControllerConfig(name="wbc", params={}),
                  loop=replace(cfg.loop, read_ahead=True, late_read=True))
    rng = random.Random(11)
    rig = LockstepRig(cfg)
    late = LateReplies(rig, lambda k, t: rng.uniform(1e-3, 3e-3) if k > 50 and rng.random() < 0.005 else 0.0)
    try:
        summary = rig.daemon.run(cfg.startup.ramp_s + 3.0)
    finally:
        rig.close()
    assert summary["state"] == "done", summary["faults"]
    assert summary["bus_errors"] == {} and summary["missed"] == 0
    held = [r for r in late.requests if r[2] is not None]
    assert len(held) >= 10
    assert len(held) <= summary["stale_reads"] <= 3 * len(held)
    est = summary["estimate"]
    assert est["valid"]
    assert est["base_position_in_world"][2] > 0.2                 # standing
    assert math.hypot(*est["base_rpy"][:2]) < 0.05                # level


def test_a_late_reply_after_a_failed_read_holds_the_goals():
    """A request lost (its replies held past the reply timeout: a failed read, NaN), the next
    one 1.5 ms late: the stale tick after the failed one has no reading to run on, so it
    holds the goals as the failed tick did (its controller is not fed the NaN reading: ``wbc``
    fed it faulted a pty run, SVD did not converge);
    the lost request's replies, arriving later, are never taken for another's."""
    cfg = builtin_config("quadruped")
    cfg = replace(cfg, controller=ControllerConfig(name="wbc", params={}),
                  loop=replace(cfg.loop, read_ahead=True, late_read=True))
    rig = LockstepRig(cfg)
    late = LateReplies(rig, lambda k, t: {300: 0.1, 301: 1.5e-3}.get(k, 0.0))
    ctrl = rig.daemon.loop.control.controller
    update, fed_nan = ctrl.update, []

    def checked(t, state, command):
        if not np.isfinite(state.position).all():
            fed_nan.append(t)
        return update(t, state, command)

    ctrl.update = checked
    try:
        summary = rig.daemon.run(cfg.startup.ramp_s + 0.5)
        lost_s = rig.daemon.loop.read._lost_ns * 1e-9
    finally:
        rig.close()
    assert summary["state"] == "done", summary["faults"]
    n = len(cfg.servos) + 1                          # the servos and the IMU board
    assert summary["bus_errors"] == {"timeout": n}   # the lost request, once
    assert summary["comm"]["failed_ticks"] == 1
    stale_lost = math.ceil(lost_s / 1e-3) - 1        # ticks within its reply timeout
    assert stale_lost - 1 <= summary["stale_reads"] - 1 <= stale_lost + 1
    assert len([r for r in late.requests if r[2] is not None]) == 2
    assert fed_nan == []                             # the controller never saw the failed reading
    est = summary["estimate"]
    assert est["valid"] and est["base_position_in_world"][2] > 0.2
