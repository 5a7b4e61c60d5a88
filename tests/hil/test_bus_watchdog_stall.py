"""A stalled host and the servos' Bus Watchdog (``safety.bus_watchdog_s``, 0.1 s).

The watchdog stops a servo whose bus goes quiet for longer than the set time and makes its
goal registers refuse writes until it is cleared.  A stall of the host that is *not* its
death (a collection of a large heap, a swap-in) therefore left the robot stopped while the
loop went on writing goals nobody took: found as the quadruped that never stood up in the
full test suite (``pause_gc``'s collection, 0.9 s in that process, came after the watchdog
was armed).  Now

* the daemon's slow preparation (the collection, the controller's start) comes before
  torque on, and the watchdog is armed right before the first deadline;
* a tick after a gap long enough to have fired it asks the servos, and clears and re-arms
  the ones that fired (``controller/watchdog_guard.py``), with a warning.

Lockstep through the virtual bus: a stall is simulated time passing with no bus traffic,
the virtual servos' watchdogs run on that time, as a real servo's on its own clock.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from servoloop.controller.config import ControllerConfig, builtin_config
from servoloop.controller.realtime import LoopEnvironment
from servoloop.controller.watchdog_guard import BusWatchdogGuard
from tests.hil.test_daemon_lockstep import LockstepRig

pytestmark = pytest.mark.hil

STALL_S = 0.3


def _quadruped_wbc():
    cfg = builtin_config("quadruped")
    # the stall's missed deadlines are counted, not a fault: this is about what comes after
    return replace(cfg, controller=ControllerConfig(name="wbc", params={}),
                   safety=replace(cfg.safety, max_consecutive_missed=None))


def _stall_at(rig: LockstepRig, t_s: float, stall_s: float = STALL_S) -> list[float]:
    """Once the simulated time reaches ``t_s``: ``stall_s`` more pass with no bus traffic
    (the loop's clock and the plant both move on, nothing is sent).  Returns the list the
    stall's time is appended to."""
    done: list[float] = []

    def hook(t):
        if not done and t >= t_s:
            done.append(t)
            rig.lock.clock.advance(int(stall_s * 1e9))

    rig.hooks.append(hook)
    return done


def _run(rig: LockstepRig, run_s: float):
    sim = rig.virtual.engine.plant.sim
    try:
        summary = rig.daemon.run(run_s)
        z = float(sim.q[2])
        tilt = math.degrees(2 * math.asin(min(1.0, math.hypot(sim.q[3], sim.q[4]))))
        trips = rig.virtual.engine.stats["watchdog_trips"]
    finally:
        rig.close()
    return summary, z, tilt, trips


@pytest.mark.parametrize("guard", [True, False])
def test_a_stall_during_the_stand_up_fires_the_watchdog_and_the_loop_clears_it(monkeypatch, guard):
    """0.3 s without bus traffic 1 s into the 3 s stand-up ramp: every servo's watchdog fires
    (the virtual servos count it).  With the guard the next tick finds them fired, clears and
    re-arms them, and the robot stands 1 s into the run; without it (the code before) every
    later goal is refused and the quadruped stays on its belly, the loop none the wiser."""
    if not guard:
        monkeypatch.setattr(BusWatchdogGuard, "check", lambda self, bus, gap_ns, errors: [])
    rig = LockstepRig(_quadruped_wbc())
    stalled = _stall_at(rig, 1.0)
    summary, z, tilt, trips = _run(rig, 1.0)
    assert stalled, "the stall was not injected"
    assert summary["state"] == "done", summary["faults"]
    assert summary["missed"] >= 0.9 * STALL_S * 1000        # the stall's deadlines, skipped
    n = len(rig.daemon.cfg.servos)
    assert trips == n                                       # every servo's watchdog fired once
    if guard:
        assert summary["bus_watchdog_trips"] == n
        assert any("bus watchdog" in w and "cleared" in w for w in summary["warnings"]), summary["warnings"]
        assert z > 0.2 and tilt < 5.0, (z, tilt)            # it stood up after all
    else:
        assert summary["bus_watchdog_trips"] == 0
        assert z < 0.1, (z, tilt)                           # goals refused: never stood up


def test_a_slow_collection_before_the_first_tick_does_not_fire_the_watchdog(monkeypatch):
    """``pause_gc``'s collection as slow as in a large process (0.5 s, here simulated time
    passing while it runs), the guard turned off: the watchdog is armed after it, right
    before the first deadline, so no servo fires and the quadruped stands.  (Armed at torque
    on, as before, every servo fired and it never stood up.)"""
    monkeypatch.setattr(BusWatchdogGuard, "check", lambda self, bus, gap_ns, errors: [])
    rig = LockstepRig(_quadruped_wbc())
    orig = LoopEnvironment.pause_gc
    calls = []

    def slow_pause_gc(env):
        if not env._gc_paused:
            calls.append(rig.lock.clock.now_ns())
            rig.lock.clock.advance(int(0.5e9))
        orig(env)

    monkeypatch.setattr(LoopEnvironment, "pause_gc", slow_pause_gc)
    summary, z, tilt, trips = _run(rig, 0.5)
    assert len(calls) == 1
    assert summary["state"] == "done", summary["faults"]
    assert trips == 0
    assert z > 0.2 and tilt < 5.0, (z, tilt)


def test_the_guard_asks_only_after_a_long_gap_and_only_armed():
    """Unit: no bus traffic below half the watchdog time or when not armed; a servo that
    fired (-1) is cleared (0) then armed again; one that did not is left alone."""
    writes, reads = [], []

    class Bus:
        def read_raw(self, sid, name):
            reads.append((sid, name))
            return -1 if sid == 2 else 5

        def write_raw(self, sid, name, raw):
            writes.append((sid, name, raw))

    events = []
    g = BusWatchdogGuard(lambda kind, msg: events.append((kind, msg)))
    assert g.check(Bus(), 10**9, None) == []                 # not armed
    g.arm([1, 2, 3], 5)                                      # 0.1 s: asks from 50 ms
    assert g.check(Bus(), 49_000_000, None) == [] and reads == []
    assert g.check(Bus(), 60_000_000, None) == [2]
    assert reads == [(1, "bus_watchdog"), (2, "bus_watchdog"), (3, "bus_watchdog")]
    assert writes == [(2, "bus_watchdog", 0), (2, "bus_watchdog", 5)]
    assert g.trips == 1 and events and events[0][0] == "bus_watchdog" and "[2]" in events[0][1]
    g.disarm()
    assert g.check(Bus(), 10**9, None) == [] and len(reads) == 3
