"""Every missed tick gets its cause, under each cause injected on its own.

* compute: a controller whose update takes 2.5 periods every 50th tick
  (in simulated time: it advances the lockstep clock, as real work would
  move the wall clock);
* wakeup: a clock that wakes the loop 1.3 periods late every 40th sleep;
* bus: the virtual bus process on a pty, replies delayed by a ``delay`` fault.

The counts add up to ``missed`` in the summary, in ``status`` and in the
telemetry file; tick work is reported as p50 <= p99 <= max.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from servoloop.cli import main
from servoloop.controller.clock import MonotonicClock, SimulatedClock
from servoloop.controller.config import builtin_config
from servoloop.controller.controllers.hold import HoldController as Hold
from servoloop.controller.daemon import Daemon
from servoloop.controller.runtime import VirtualBusProcess, make_bus, make_lockstep
from servoloop.controller.telemetry_format import read_telemetry

pytestmark = pytest.mark.hil

PERIOD_NS = 1_000_000


def arm_config(**loop):
    cfg = builtin_config("arm")
    return replace(cfg, startup=replace(cfg.startup, ramp_s=0.05),
                   loop=replace(cfg.loop, rate_hz=1000.0, **loop),
                   safety=replace(cfg.safety, max_consecutive_missed=None, comm_timeout_s=1e3,
                                  comm_hold_s=1e3),
                   simulation=replace(cfg.simulation, plant="independent"))


def consistent(summary: dict) -> dict:
    causes = summary["missed_by_cause"]
    assert set(causes) == {"compute", "bus", "wakeup"}
    assert sum(causes.values()) == summary["missed"]
    w = summary["tick_work_us"]
    assert set(w) == {"p50", "p99", "max"} and w["p50"] <= w["p99"] <= w["max"]
    return causes


class SlowHold(Hold):
    """``hold``, but every ``every``-th update takes ``work_ns`` of (simulated) time."""

    def __init__(self, ctx, params, clock, every, work_ns):
        super().__init__(ctx, params)
        self.clock, self.every, self.work_ns, self.calls, self.slow = clock, every, work_ns, 0, 0

    def update(self, t, state, command):
        super().update(t, state, command)
        self.calls += 1
        if self.calls % self.every == 0:
            self.slow += 1
            self.clock.advance(self.work_ns)


def test_controller_overrunning_its_period_is_compute(tmp_path):
    cfg = arm_config()
    lock = make_lockstep(cfg)
    tel = tmp_path / "t.sltl"
    d = Daemon(cfg, lock.bus, lock.clock, telemetry_path=tel, socket_path=None)
    slow = SlowHold(d.ctx, cfg.controller.params, lock.clock, every=50, work_ns=5 * PERIOD_NS // 2)
    d.controller = d.loop.control.controller = slow
    try:
        s = d.run(duration_s=1.0)
    finally:
        lock.close()
    assert s["state"] == "done" and slow.slow >= 15
    causes = consistent(s)
    # a tick of 2.5 periods from its deadline passes the next two deadlines
    assert causes == {"compute": 2 * slow.slow, "bus": 0, "wakeup": 0}
    data = read_telemetry(tel)
    last = {c: data.column(c)[-1] for c in ("missed", "missed_compute", "missed_bus", "missed_wakeup")}
    assert last["missed_compute"] == last["missed"] == s["missed"] and last["missed_bus"] == 0


class LateClock(SimulatedClock):
    """Simulated time whose every ``every``-th sleep wakes ``late_ns`` after the deadline."""

    def __init__(self, on_advance, every, late_ns):
        super().__init__(on_advance=on_advance)
        self.every, self.late_ns, self.calls, self.late = every, late_ns, 0, 0

    def sleep_until(self, deadline_ns):
        self.calls += 1
        if self.calls % self.every == 0:
            self.late += 1
            deadline_ns += self.late_ns
        return super().sleep_until(deadline_ns)


def test_late_wakeup_is_wakeup():
    cfg = arm_config()
    lock = make_lockstep(cfg)
    clock = LateClock(lock.virtual.advance, every=40, late_ns=13 * PERIOD_NS // 10)
    d = Daemon(cfg, lock.bus, clock, telemetry_path=None, socket_path=None)
    try:
        s = d.run(duration_s=1.0)
        st = d.status()
    finally:
        lock.close()
    assert s["state"] == "done" and clock.late >= 20
    assert consistent(s) == {"compute": 0, "bus": 0, "wakeup": clock.late}
    assert st["missed_by_cause"] == s["missed_by_cause"]


def test_delayed_replies_are_bus():
    """Real time on a pty: servo 1 answers 2.5 ms late one time in five, so those ticks run
    2.5 periods; whatever else this shared machine does, the bus is the main cause."""
    cfg = arm_config()
    vb = VirtualBusProcess(cfg, faults="delay:id=1:us=2500:p=0.2")
    port = vb.start()
    d = Daemon(cfg, make_bus(cfg, port), MonotonicClock(), telemetry_path=None, socket_path=None,
               realtime=False)
    try:
        s = d.run(duration_s=1.0)
    finally:
        vb.stop()
    causes = consistent(s)
    assert s["state"] == "done" and s["bus_errors"] == {}
    assert causes["bus"] >= 50 and causes["bus"] > causes["compute"] + causes["wakeup"]


def test_run_json_summary_has_causes_and_tick_work(capsys):
    rc = main(["run", "--robot", "arm", "--lockstep", "--duration", "0.2", "--json", "--quiet",
               "--telemetry", "none", "--socket", "none"])
    assert rc == 0
    s = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert consistent(s) == {"compute": 0, "bus": 0, "wakeup": 0} and s["missed"] == 0
