"""Loop timing statistics without per-tick allocation: 1-us histograms and missed-tick causes.

``jitter`` here is the wake-up lateness of each tick, ``wake - deadline``:
with absolute deadlines it is the error that matters (it never
accumulates), and it is what the issue's reference figures measure.  The
same histogram holds the tick's own work (wake-up to the end of the tick,
sleep excluded).

Every missed tick gets one cause (:class:`MissCauses`):

* ``wakeup``: the kernel woke the loop a whole period or more after its
  deadline (timer slack, scheduling), or the late wake-up was the largest
  part of a tick that overran;
* ``bus``: waiting on the bus (sync read until its replies are in, writes,
  the monitor's read) was the largest part of a tick that overran;
* ``compute``: the tick's own work (every stage but the bus waits, and the
  loop's bookkeeping until the next wait) was the largest part.

A tick overruns when its deadline-to-end time (lateness + bus + compute)
passes the next deadline; the deadlines it skips all go to the largest of
the three, so the counts always add up to the loop's ``missed``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["JitterStats", "MissCauses", "CAUSES"]

#: the causes a missed tick is put down to, in report order
CAUSES = ("compute", "bus", "wakeup")


class JitterStats:
    """Histogram of a per-tick duration (lateness, tick work) in 1 us bins up to ``max_us``
    (overflow in the last bin)."""

    def __init__(self, max_us: int = 100_000) -> None:
        self.nbins = int(max_us) + 1
        self.hist = np.zeros(self.nbins, dtype=np.int64)
        self.count = 0
        self.max_ns = 0

    def reset(self) -> None:
        self.hist[:] = 0
        self.count = 0
        self.max_ns = 0

    def add(self, late_ns: int) -> None:
        """Record one tick's lateness, ns (>= 0)."""
        b = late_ns // 1000
        self.hist[b if b < self.nbins else self.nbins - 1] += 1
        self.count += 1
        if late_ns > self.max_ns:
            self.max_ns = late_ns

    def percentile_us(self, p: float) -> float:
        """Lateness percentile ``p`` in [0, 100], us (bin centre; NaN with no data)."""
        if self.count == 0:
            return float("nan")
        target = p / 100.0 * self.count
        idx = int(np.searchsorted(np.cumsum(self.hist), max(target, 1), side="left"))
        return min(idx + 0.5, self.max_ns / 1000.0)

    def summary(self) -> dict:
        """``{"p50", "p99", "max"}`` in us."""
        return {
            "p50": self.percentile_us(50),
            "p99": self.percentile_us(99),
            "max": self.max_ns / 1000.0 if self.count else float("nan"),
        }


class MissCauses:
    """Missed ticks per cause (see the module docstring); plain int counters, no allocation.

    Attributes
    ----------
    compute, bus, wakeup : int
        Deadlines skipped for each cause so far.
    """

    def __init__(self) -> None:
        self.compute = 0
        self.bus = 0
        self.wakeup = 0

    def reset(self) -> None:
        self.compute = self.bus = self.wakeup = 0

    def late_wakeup(self, k: int) -> None:
        """``k`` deadlines passed while the kernel was late waking the loop."""
        self.wakeup += k

    def overrun(self, k: int, late_ns: int, bus_ns: int, compute_ns: int) -> None:
        """``k`` deadlines passed during a tick that took ``late_ns + bus_ns + compute_ns``
        from its deadline: all go to the largest part (ties: compute, then bus)."""
        if compute_ns >= bus_ns and compute_ns >= late_ns:
            self.compute += k
        elif bus_ns >= late_ns:
            self.bus += k
        else:
            self.wakeup += k

    @property
    def total(self) -> int:
        return self.compute + self.bus + self.wakeup

    def summary(self) -> dict:
        """``{"compute", "bus", "wakeup"}``: missed ticks per cause."""
        return {"compute": int(self.compute), "bus": int(self.bus), "wakeup": int(self.wakeup)}
