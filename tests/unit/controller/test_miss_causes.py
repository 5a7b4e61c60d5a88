"""Missed-tick causes: the clock splits what it skipped, MissCauses puts each on one cause."""

import pytest

from servoloop.controller.clock import FixedRate, SimulatedClock
from servoloop.controller.loop_stats import CAUSES, JitterStats, MissCauses

MS = 1_000_000


def test_overrun_goes_to_the_largest_part_of_the_tick():
    c = MissCauses()
    c.overrun(2, late_ns=100_000, bus_ns=300_000, compute_ns=1_900_000)
    c.overrun(1, late_ns=100_000, bus_ns=1_200_000, compute_ns=50_000)
    c.overrun(3, late_ns=900_000, bus_ns=200_000, compute_ns=150_000)
    c.late_wakeup(4)
    assert c.summary() == {"compute": 2, "bus": 1, "wakeup": 7}
    assert c.total == 10 and tuple(c.summary()) == CAUSES
    c.reset()
    assert c.total == 0


def test_fixed_rate_splits_overrun_from_late_wakeup():
    clock = SimulatedClock()
    rate = FixedRate(1000.0, clock)
    rate.start()
    rate.wait()
    assert (rate.overrun_skipped, rate.late_skipped) == (0, 0)
    clock.advance(2 * MS + MS // 2)  # the tick's work ran 2.5 periods
    assert rate.wait() == 2
    assert (rate.overrun_skipped, rate.late_skipped) == (2, 0)
    assert rate.entry_ns == 3 * MS + MS // 2

    class LateClock(SimulatedClock):
        def sleep_until(self, deadline_ns):
            return super().sleep_until(deadline_ns + 3 * MS + 1000)  # the kernel woke us 3 periods late

    late = FixedRate(1000.0, LateClock())
    late.start()
    assert late.wait() == 3
    assert (late.overrun_skipped, late.late_skipped) == (0, 3) and late.late_ns == 1000
    assert late.missed == 3


def test_work_histogram_reports_percentiles_in_us():
    w = JitterStats()
    for ns in (100_000, 120_000, 140_000, 900_000):
        w.add(ns)
    s = w.summary()
    assert s["max"] == pytest.approx(900.0) and 100.0 <= s["p50"] <= 141.0


def test_missed_tick_advice_names_the_main_cause():
    from servoloop.controller.run_advice import missed_ticks_advice

    s = {"missed": 300, "ticks": 700, "rate_hz": 700.0,
         "missed_by_cause": {"compute": 10, "bus": 250, "wakeup": 40}}
    msg = missed_ticks_advice(s, 1000.0)
    assert "Most (250) were missed because waiting for the servos' replies" in msg
    s["missed_by_cause"] = {"compute": 290, "bus": 0, "wakeup": 10}
    assert "tick's own work" in missed_ticks_advice(s, 1000.0)
