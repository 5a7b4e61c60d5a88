"""The loop clock: absolute deadlines, late ticks counted and skipped.

Two clocks share one tiny interface (``now_ns()``, ``sleep_until(deadline_ns)``):

* :class:`MonotonicClock` sleeps on CLOCK_MONOTONIC with
  ``clock_nanosleep(TIMER_ABSTIME)`` (compiled, GIL released) and an
  optional busy-wait tail;
* :class:`SimulatedClock` jumps straight to the deadline, for tests and the
  lockstep mode, and can run a callback each time it advances (lockstep
  integrates the virtual bus physics there).

:class:`FixedRate` turns either into a fixed-rate ticker in the spirit of
``loop-rate-limiters`` (absolute ``next_tick``, exposed ``period``), except
that it takes its clock as a parameter and never catches up: a deadline
that has already passed when the loop gets to it is counted as missed and
skipped, so a stall never turns into a burst of back-to-back ticks.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Protocol

__all__ = ["Clock", "MonotonicClock", "SimulatedClock", "FixedRate", "HAVE_COMPILED_CLOCK"]

try:  # the compiled clock; the pure-Python fallback only keeps imports working
    from servoloop.controller._clock import monotonic_ns as _monotonic_ns
    from servoloop.controller._clock import set_timer_slack_ns as _set_timer_slack_ns
    from servoloop.controller._clock import sleep_until_ns as _sleep_until_ns

    HAVE_COMPILED_CLOCK = True
except ImportError:  # pragma: no cover - only without `make setup`
    HAVE_COMPILED_CLOCK = False
    _monotonic_ns = time.monotonic_ns

    def _sleep_until_ns(deadline_ns: int, spin_ns: int = 0) -> int:
        now = time.monotonic_ns()
        if deadline_ns - spin_ns > now:
            time.sleep((deadline_ns - spin_ns - now) * 1e-9)
        now = time.monotonic_ns()
        while now < deadline_ns:
            now = time.monotonic_ns()
        return now

    def _set_timer_slack_ns(slack_ns: int) -> bool:
        return False


class Clock(Protocol):
    """What the loop needs from a clock (times in ns)."""

    def now_ns(self) -> int: ...

    def sleep_until(self, deadline_ns: int) -> int: ...


class MonotonicClock:
    """CLOCK_MONOTONIC with absolute-deadline sleeps.

    Parameters
    ----------
    spin_s : float
        Busy-wait the last ``spin_s`` seconds before each deadline (0: never).
        Costs one core for that long every tick; 50-100 us removes most of
        the kernel's wake-up latency.
    """

    simulated = False

    def __init__(self, spin_s: float = 0.0) -> None:
        if spin_s < 0:
            raise ValueError(f"MonotonicClock spin_s must be >= 0, got {spin_s}")
        self.spin_ns = int(spin_s * 1e9)
        if not HAVE_COMPILED_CLOCK:
            warnings.warn(
                "controller._clock is not compiled (run `make setup`): falling back to "
                "time.sleep, expect ~10x the jitter",
                RuntimeWarning,
                stacklevel=2,
            )
        self.prepare_thread()

    def prepare_thread(self) -> bool:
        """Timer slack 1 ns for the calling thread (Linux default 50 us, pure added wake-up
        lateness for us; per thread, so the loop thread calls this when it starts).

        Returns
        -------
        bool
            True when the kernel took it.
        """
        return bool(_set_timer_slack_ns(1))

    def now_ns(self) -> int:
        """Current CLOCK_MONOTONIC time, ns."""
        return _monotonic_ns()

    def sleep_until(self, deadline_ns: int) -> int:
        """Sleep (GIL released) until ``deadline_ns``; returns the wake-up time, ns."""
        return _sleep_until_ns(deadline_ns, self.spin_ns)


class SimulatedClock:
    """Simulated time: sleeping jumps to the deadline at once.

    Parameters
    ----------
    start_ns : int
        Initial time, ns.
    on_advance : callable(dt_s) or None
        Called with the elapsed simulated seconds each time the clock moves
        forward (lockstep mode integrates the plant here).
    """

    simulated = True

    def __init__(self, start_ns: int = 0, on_advance: Callable[[float], None] | None = None):
        self._now = int(start_ns)
        self.on_advance = on_advance

    def now_ns(self) -> int:
        """Current simulated time, ns."""
        return self._now

    def advance(self, dt_ns: int) -> None:
        """Move time forward by ``dt_ns`` ns (>= 0), running ``on_advance``."""
        if dt_ns < 0:
            raise ValueError(f"SimulatedClock cannot go back in time (dt_ns={dt_ns})")
        if dt_ns == 0:
            return
        self._now += dt_ns
        if self.on_advance is not None:
            self.on_advance(dt_ns * 1e-9)

    def sleep_until(self, deadline_ns: int) -> int:
        """Jump to ``deadline_ns`` (no-op when already past); returns the new time, ns."""
        if deadline_ns > self._now:
            self.advance(deadline_ns - self._now)
        return self._now


class FixedRate:
    """Fixed-rate ticker on absolute deadlines ``t0 + k * period``.

    Parameters
    ----------
    rate_hz : float
        Tick rate, Hz (> 0).
    clock : Clock
        Where time comes from.

    Attributes
    ----------
    period_ns : int
        Tick period, ns.
    deadline_ns : int
        Deadline of the tick that :meth:`wait` last released, ns.
    next_deadline_ns : int
        Deadline of the next tick, ns.
    late_ns : int
        How late the last tick woke up (wake time - its deadline), ns >= 0.
    missed : int
        Deadlines skipped so far because the loop got to them too late.
    entry_ns : int
        When the last :meth:`wait` was called, ns (the end of the previous tick's work).
    overrun_skipped, late_skipped : int
        Of the deadlines the last :meth:`wait` skipped: those already past when it
        was called (the previous tick overran) and those that passed while the
        kernel was late waking the loop.  Their sum is its return value.
    """

    def __init__(self, rate_hz: float, clock: Clock) -> None:
        if not rate_hz > 0:
            raise ValueError(f"FixedRate rate_hz must be > 0, got {rate_hz}")
        self.clock = clock
        self.period_ns = int(round(1e9 / rate_hz))
        self.dt = self.period_ns * 1e-9
        self.deadline_ns = 0
        self.next_deadline_ns = 0
        self.late_ns = 0
        self.missed = 0
        self.ticks = 0
        self.entry_ns = 0
        self.overrun_skipped = 0
        self.late_skipped = 0

    def start(self, at_ns: int | None = None) -> None:
        """Anchor the deadline grid: the first tick is due one period after ``at_ns`` (default now)."""
        t0 = self.clock.now_ns() if at_ns is None else int(at_ns)
        self.next_deadline_ns = t0 + self.period_ns

    def wait(self) -> int:
        """Block until the next tick is due; returns the number of deadlines skipped now.

        A deadline already in the past when we get here (the previous tick
        overran) is skipped, as is every deadline that passes while the
        kernel is late waking us: the tick then serves the latest deadline
        that has passed, and the grid never shifts.
        """
        period = self.period_ns
        deadline = self.next_deadline_ns
        skipped = k = 0
        now = self.clock.now_ns()
        self.entry_ns = now
        if now > deadline:  # overran: skip to the first deadline still ahead
            skipped = (now - deadline + period - 1) // period
            deadline += skipped * period
        woke = self.clock.sleep_until(deadline)
        late = woke - deadline
        if late >= period:  # woke after later deadlines had passed too: skip them
            k = late // period
            deadline += k * period
            late -= k * period
        self.overrun_skipped = skipped
        self.late_skipped = k
        skipped += k
        self.deadline_ns = deadline
        self.next_deadline_ns = deadline + period
        self.late_ns = late
        self.missed += skipped
        self.ticks += 1
        return skipped
