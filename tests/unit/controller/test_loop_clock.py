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
