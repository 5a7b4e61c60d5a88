"""The fixed-rate clock on simulated time: absolute deadlines, late ticks skipped."""

import pytest

from servoloop.controller.clock import FixedRate, MonotonicClock, SimulatedClock


class LateClock(SimulatedClock):
    """A simulated clock whose sleeps overshoot by a scripted amount (ns)."""

    def __init__(self, overshoots):
        super().__init__(0)
        self.overshoots = list(overshoots)

    def sleep_until(self, deadline_ns):
        woke = super().sleep_until(deadline_ns)
        extra = self.overshoots.pop(0) if self.overshoots else 0
        self.advance(extra)
        return woke + extra


def test_deadlines_are_absolute_and_never_drift():
    clock = SimulatedClock(0)
    rate = FixedRate(1000.0, clock)
    rate.start()
    for k in range(1, 1001):
        assert rate.wait() == 0
        assert rate.deadline_ns == k * 1_000_000
    assert clock.now_ns() == 1_000_000_000 and rate.missed == 0


def test_work_overrun_skips_deadlines_instead_of_bursting():
    clock = SimulatedClock(0)
    rate = FixedRate(1000.0, clock)
    rate.start()
    rate.wait()  # tick at 1 ms
    clock.advance(2_500_000)  # the tick's work takes 2.5 ms: deadlines 2 and 3 ms are gone
    skipped = rate.wait()
    assert skipped == 2 and rate.missed == 2
    assert rate.deadline_ns == 4_000_000  # the next grid point, not "now + period"
    assert rate.wait() == 0 and rate.deadline_ns == 5_000_000


def test_late_wakeup_within_a_period_is_jitter_not_a_miss():
    clock = LateClock([0, 300_000])
    rate = FixedRate(1000.0, clock)
    rate.start()
    rate.wait()
    assert rate.wait() == 0
    assert rate.late_ns == 300_000 and rate.missed == 0
    assert rate.wait() == 0 and rate.deadline_ns == 3_000_000


def test_very_late_wakeup_skips_the_passed_deadlines():
    clock = LateClock([2_400_000])
    rate = FixedRate(1000.0, clock)
    rate.start()
    assert rate.wait() == 2
    assert rate.deadline_ns == 3_000_000 and rate.late_ns == 400_000
    assert rate.next_deadline_ns == 4_000_000


def test_simulated_clock_calls_on_advance_with_seconds():
    got = []
    clock = SimulatedClock(0, on_advance=got.append)
    clock.sleep_until(2_000_000)
    clock.sleep_until(1_000_000)  # in the past: no-op
    assert got == [0.002] and clock.now_ns() == 2_000_000
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_bad_rate():
    with pytest.raises(ValueError):
        FixedRate(0, SimulatedClock())


def test_monotonic_clock_sleeps_to_an_absolute_deadline():
    clock = MonotonicClock()
    t0 = clock.now_ns()
    woke = clock.sleep_until(t0 + 2_000_000)
    assert woke >= t0 + 2_000_000
    assert clock.sleep_until(t0) >= t0 + 2_000_000  # a past deadline returns at once


def test_bare_loop_the_floor_keeps_the_skip_rule():
    """The machine's floor (``bench loop --wakeup``): a loop in C that only sleeps.

    At a 2 us period every wake-up (tens of us on any kernel) passes deadlines: they
    must be counted as missed and skipped, each tick's lateness left under one period.
    At 1 ms over 20 ticks it runs about 20 ms of wall time, and a tick is rarely missed.
    """
    import time

    import numpy as np

    from servoloop.controller._clock import bare_loop

    late = np.full(200, -1, dtype=np.int64)
    missed = bare_loop(2_000, late)
    assert missed > 0
    assert (late >= 0).all() and (late < 2_000).all()

    late = np.full(20, -1, dtype=np.int64)
    t0 = time.monotonic_ns()
    missed = bare_loop(1_000_000, late)
    took = time.monotonic_ns() - t0
    assert (late >= 0).all() and (late < 1_000_000).all()
    assert took >= (20 + missed) * 1_000_000        # it slept to every deadline it kept

    with pytest.raises(ValueError, match="period_ns"):
        bare_loop(0, late)
