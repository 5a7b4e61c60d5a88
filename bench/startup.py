"""``servoloop bench startup``: how long the command line takes to answer, vs ``import numpy``.

Each case is a fresh interpreter, timed from spawn to exit (median of
``--repeats`` runs): ``servoloop --help`` and ``servoloop status --socket
/nonexistent`` (which fails at once: no daemon) against ``python -c
"import numpy"``, the floor of any command that touches an array.  The
three are run interleaved, round after round, so load from elsewhere on
the machine falls on all of them alike; the goal is ``--help`` within 3x
numpy's import.  ``python -c pass`` is reported too (the interpreter alone).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

from servoloop.bench.common import Row, report

__all__ = ["add_arguments", "run", "CASES"]

ANCHOR = "python -c 'import numpy'"

#: case name -> arguments after the interpreter
CASES = {
    "servoloop --help": ["-m", "servoloop", "--help"],
    "servoloop status": ["-m", "servoloop", "status", "--socket", "/nonexistent/servoloop.sock"],
    "python -c pass": ["-c", "pass"],
    ANCHOR: ["-c", "import numpy"],
}


def add_arguments(parser) -> None:
    parser.add_argument("--repeats", type=int, default=15, help="runs of each command (default 15)")


def _wall_s(argv: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=env, check=False)
    return time.perf_counter() - t0


def measure(repeats: int) -> dict[str, float]:
    """Median wall time of each case, s, over ``repeats`` interleaved rounds (one warm-up round)."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for k in range(repeats + 1):
        for name, argv in CASES.items():
            t = _wall_s(argv, env)
            if k:  # round 0 fills the page cache
                times[name].append(t)
    return {name: statistics.median(ts) for name, ts in times.items()}


def run(args) -> dict:
    repeats = max(1, int(getattr(args, "repeats", 15)))
    med = measure(repeats)
    anchor = med[ANCHOR]
    rows = [Row(name, "median wall time", "ms", med[name] * 1e3, ANCHOR, anchor * 1e3)
            for name in CASES if name != ANCHOR]
    return report("startup", rows)
