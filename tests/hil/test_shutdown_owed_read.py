"""``run_loop`` + ``shutdown()`` with no ``drain()`` between: torque off still reaches every servo.

A library user who drives the loop (``connect``, ``startup``, ``run_loop``, ``shutdown``, as
``Daemon.run`` does) has a read-ahead request outstanding when ``run_loop`` returns, its
replies possibly still on the wire (here: the last servo's replies 0.7 ms late at 1.5 kHz,
the bus slow for the whole run and the stop ticks; then the servos answer at once again).  ``shutdown`` now waits out
the read's wire time and takes its replies before it writes torque off.  Before, the torque
off went out while the late reply was owed: the reply and then every torque-off status were
lost behind it, the retries too, and ``shutdown`` raised "torque off of servo 1 failed" with
five servos left torqued.
"""

from __future__ import annotations

import pytest

from servoloop.controller.lifecycle import State
from tests.hil.test_daemon_lockstep import LockstepRig, short_config

pytestmark = pytest.mark.hil


def test_shutdown_after_run_loop_without_drain_turns_torque_off():
    cfg = short_config("arm", loop=dict(read_ahead=True, late_read=True, rate_hz=1500.0))
    rig = LockstepRig(cfg, faults="delay:id=6:us=700:at=0.1")
    d = rig.daemon
    owed = []
    tick = d.loop.tick

    def stop_tick():
        tick()
        if d.lifecycle.state == State.SHUTDOWN:
            owed.append((d.bus.pending is not None, d.loop.read.stale))
            if len(owed) == cfg.shutdown.stop_cycles:   # the last stop tick: its read is late,
                rig.virtual.engine.faults.reply_faults = []   # the torque off's statuses not

    d.loop.tick = stop_tick
    try:
        d.connect()
        d.startup()
        d.run_loop(0.3)
        if not d.loop.read.stale:       # stale ticks alternate: end the run on one, so that the
            d.run_loop(1 / 1500.0)      # last stop tick sends a request (its reply delayed)
        assert d.loop.read.stale and d.loop.read.stale_reads > 100
        d.shutdown()                                 # no drain() first
        torque = {s.bus_id0: int(s.mem[s.info.a_torque]) for s in rig.virtual.engine.servos}
        assert len(owed) == 5 and owed[-1] == (True, False)   # the last stop tick's request owed
        assert d.lifecycle.state == State.DONE
        assert torque == {i: 0 for i in range(1, 7)}
        assert rig.virtual.stats["collisions"] == 0
        assert d.bus.pending is None
    finally:
        d.resume_gc()           # startup paused the collector (Daemon.run resumes it the same way)
        d.close_bus()
        rig.close()
