"""Loop timing statistics without per-tick allocation: a 1-us histogram of lateness.

``jitter`` here is the wake-up lateness of each tick, ``wake - deadline``:
with absolute deadlines it is the error that matters (it never
accumulates), and it is what the issue's reference figures measure.
"""

from __future__ import annotations

import numpy as np

__all__ = ["JitterStats"]


class JitterStats:
    """Histogram of per-tick lateness in 1 us bins up to ``max_us`` (overflow in the last bin)."""

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
