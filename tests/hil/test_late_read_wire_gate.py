"""The late read's wire-time gate: a stale tick never transmits into a reply still owed.

Lockstep (in-process virtual bus on a real pty).  A ``delay`` fault holds the last servo's
reply back in simulated time; the virtual bus then has it on the wire until it is due, and
an instruction the host sends meanwhile collides with it: the servos never see that
instruction and the reply reaches the host with a bad CRC (``stats["collisions"]``), as on
a real half-duplex RS-485/TTL bus.  The tick after the delayed request is stale (its
replies not in by its budget).

* 4 Mbps, the arm's 6 servos at 1.5 kHz: the read's wire time (request, replies, 100 us
  turnaround per servo) is 1.06 ms, past the stale tick but before the next deadline: the
  stale tick's write waits until the owed replies are off the wire, then goes out.
* 1 Mbps: the wire time, 2.44 ms, ends after the next deadline: the stale tick writes no
  goals (counted) and the next tick writes as usual.

In both, the servos receive every goal write the host sends, nothing collides and no
read fails.  Before the gate, the stale tick's goal write went out at once, into the
delayed reply: goals lost and CRC errors counted on both sides.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from servoloop.firmware_bridge import protocol as P
from tests.hil.test_daemon_lockstep import LockstepRig, short_config

pytestmark = pytest.mark.hil


def _arm(baud: int, rate_hz: float):
    cfg = short_config("arm", loop=dict(read_ahead=True, late_read=True, rate_hz=rate_hz))
    return replace(cfg, bus=replace(cfg.bus, baud=baud))


def _run(baud: int, rate_hz: float, faults: str, seconds: float = 0.5):
    """Run the arm at ``baud`` under ``faults``; (summary, host goal writes, servo goal writes,
    collisions, rig's read stage)."""
    rig = LockstepRig(_arm(baud, rate_hz), faults=faults)
    loop = rig.daemon.loop
    sent = []
    send = loop.write.send

    def counted():
        ok = send()
        sent.append(ok)
        return ok

    loop.write.send = counted
    try:
        summary = rig.daemon.run(seconds)
    finally:
        rig.close()
    received = sum(1 for _t, pkt in rig.instructions() if pkt.instruction == P.Instruction.SYNC_WRITE)
    return summary, len(sent), received, rig.virtual.stats, loop.read


def test_a_stale_tick_waits_for_the_wire_before_its_goal_write():
    """4 Mbps, 1.5 kHz: the last servo's reply 0.7 ms late on 10 % of the reads (the train
    then ends 0.75-1.02 ms after the request, within the read's 1.06 ms wire time but past
    the 0.67 ms period): the stale tick's write waits for the wire, every goal arrives,
    nothing collides."""
    summary, sent, received, stats, read = _run(4_000_000, 1500.0, "delay:id=6:us=700:p=0.1")
    assert summary["state"] == "done", summary["faults"]
    assert read.gate.wire_ns == pytest.approx(1.06e6, abs=1e3)
    assert summary["stale_reads"] >= 20 and stats["delayed"] >= 20
    gate = summary["wire_gate"]
    assert gate["waits"] == summary["stale_reads"] and gate["skipped"] == 0
    # each wait: from the stale tick (a period after the request) to the end of the read's
    # wire time, 1060 - 667 us (longer on a monitor tick, whose wide read takes longer)
    longest = max(read.gate._wire.values()) * 1e-3 - 1e6 / 1500.0
    assert 393.0 * gate["waits"] <= gate["wait_us"] <= (longest + 1.0) * gate["waits"]
    assert stats["collisions"] == 0
    assert summary["bus_errors"] == {} and summary["comm"]["failed_ticks"] == 0
    # every goal write the loop sent reached the servos (shutdown's stop cycles too)
    assert sent > 600 and received == sent


def test_a_stale_tick_whose_wire_is_busy_past_its_deadline_writes_nothing():
    """1 Mbps, 1 kHz: the read's wire time (2.44 ms) ends after the next deadline: a stale
    tick (the last servo's reply 1.3 ms late) sends no goals and counts it; every goal sent
    arrives, nothing collides."""
    summary, sent, received, stats, read = _run(1_000_000, 1000.0, "delay:id=6:us=1300:p=0.1")
    assert summary["state"] == "done", summary["faults"]
    assert read.gate.wire_ns == pytest.approx(2.44e6, abs=1e3)
    assert summary["stale_reads"] >= 20
    gate = summary["wire_gate"]
    assert gate["skipped"] == summary["stale_reads"] and gate["waits"] == 0
    assert stats["collisions"] == 0
    assert summary["bus_errors"] == {} and summary["comm"]["failed_ticks"] == 0
    assert sent > 400 and received == sent


def test_after_a_write_the_gate_held_back_the_goal_steps_from_what_the_servo_holds():
    """1 Mbps, 1 kHz, the base turned 2 rad so its goal moves at the slew limit: a stale tick
    whose write is held back leaves the servo at the goal before it, and the next write
    steps one slew step from that goal, never two (before, the limiter had already moved on
    and the write after a skip jumped twice the step)."""
    from tests.hil.test_daemon_lockstep import hook_at, write_events

    rig = LockstepRig(_arm(1_000_000, 1000.0), faults="delay:id=6:us=1300:p=0.1")
    hook_at(rig, 0.1, lambda: rig.daemon.set_goal({"base_yaw": 2.0}))
    step = float(rig.daemon.loop.safety.slew.max_step[0])          # rad per tick
    try:
        summary = rig.daemon.run(0.6)
    finally:
        rig.close()
    assert summary["state"] == "done", summary["faults"]
    assert summary["wire_gate"]["skipped"] >= 20
    goals = np.array([v for kind, v in write_events(rig)[1] if kind == "goal"], dtype=float)
    steps = np.abs(np.diff(goals)) * (2 * np.pi / 4096)               # rad per goal write
    moving = steps > 0.5 * step
    assert moving.sum() >= 300                                         # it moved at the limit
    assert steps.max() <= step + 2 * np.pi / 4096                      # one step (+ a count)
