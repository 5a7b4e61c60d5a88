"""The benchmark JSON form shared by every ``servoloop bench NAME --json``.

``{"benchmark": NAME, "rows": [{"case", "metric", "unit", "ours",
"anchor_name", "anchor", "ratio"}]}`` with ``ratio = ours / anchor``.  Ours
and the anchor are always measured in the same process, interleaved, so a
busy machine slows both alike and the ratio stays meaningful.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

__all__ = ["Row", "report", "print_report", "time_per_call", "interleaved_times"]


@dataclass
class Row:
    case: str
    metric: str
    unit: str
    ours: float
    anchor_name: str
    anchor: float

    @property
    def ratio(self) -> float:
        return self.ours / self.anchor if self.anchor else float("inf")

    def as_dict(self) -> dict:
        d = asdict(self)
        d["ratio"] = self.ratio
        return d


def report(name: str, rows: list[Row]) -> dict:
    return {"benchmark": name, "rows": [r.as_dict() for r in rows]}


def print_report(rep: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(rep))
        return
    print(f"benchmark: {rep['benchmark']}")
    w = max([28] + [len(r["case"]) + 2 for r in rep["rows"]])    # long case names stay apart
    hdr = f"{'case':<{w}}{'metric':<22}{'ours':>12}{'anchor':>12}  {'anchor name':<22}{'ratio':>7}"
    print(hdr)
    print("-" * len(hdr))
    for r in rep["rows"]:
        print(
            f"{r['case']:<{w}}{r['metric']:<22}{r['ours']:>12.4g}{r['anchor']:>12.4g}  "
            f"{r['anchor_name']:<22}{r['ratio']:>7.3f}   [{r['unit']}]"
        )


def time_per_call(fn: Callable[[], object], number: int, clock=time.perf_counter) -> float:
    """Seconds per call of ``fn`` over ``number`` back-to-back calls."""
    t0 = clock()
    for _ in range(number):
        fn()
    return (clock() - t0) / number


def interleaved_times(
    ours: Callable[[], object],
    anchor: Callable[[], object],
    number: int,
    repeats: int = 7,
    clock=time.perf_counter,
) -> tuple[float, float]:
    """Best-of-``repeats`` seconds per call for ``ours`` and ``anchor``.

    The two are timed in alternating blocks so that load from elsewhere on
    the machine falls on both; the minimum over blocks is the usual
    low-noise estimator of a kernel's cost.
    """
    best_o = best_a = float("inf")
    for _ in range(repeats):
        best_o = min(best_o, time_per_call(ours, number, clock))
        best_a = min(best_a, time_per_call(anchor, number, clock))
    return best_o, best_a
