"""Command-line side of :mod:`experiments.seed003`: options, and the tables as text."""

from __future__ import annotations

import contextlib
import math
import os
import sys

__all__ = ["add_arguments", "main", "print_table"]


def _positive(text: str) -> float:
    import argparse

    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seconds: expected a number of seconds, got {text!r}") from None
    if not (v > 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(f"--seconds must be > 0, got {text}")
    return v


def _step_ms(text: str) -> float:
    import argparse

    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--step-ms: expected a step in milliseconds, got {text!r}") from None
    if not (0.0 < v <= 10.0):
        raise argparse.ArgumentTypeError(f"--step-ms must be in (0, 10] ms, got {text}")
    return v


def add_arguments(parser) -> None:
    from servoloop.experiments.seed003 import CONTROLLERS, EXTRA_CONTROLLERS, GROUNDS

    parser.add_argument("--seconds", type=_positive, default=3.0,
                        help="simulated seconds of trot per case (default 3; the paper ran 30)")
    parser.add_argument("--ground", choices=GROUNDS, action="append",
                        help="only this ground (repeatable; default both)")
    parser.add_argument("--mu", choices=("0.1", "inf"), action="append",
                        help="only this friction (repeatable; default both)")
    parser.add_argument("--controller", choices=CONTROLLERS + EXTRA_CONTROLLERS, action="append",
                        help="only this controller (repeatable; default all seven)")
    parser.add_argument("--actuators", choices=("ideal", "xm430"), default="ideal",
                        help="the robot's joints: ideal torque sources (default, as the paper's "
                             "simulator) or XM430 servos (4.1 N m stall torque)")
    parser.add_argument("--step-ms", type=_step_ms, default=None,
                        help="the simulator's step and control tick in ms (default 1, the paper's; "
                             "id_lag1/2 lag 1/2 of these)")


def main(args) -> dict:
    from servoloop.experiments import seed003

    mus = tuple(math.inf if m == "inf" else float(m) for m in (args.mu or ())) or seed003.MUS
    quiet = getattr(args, "json", False)

    def progress(name: str) -> None:
        if not quiet:
            print(f"  running {name} ...", file=sys.stderr, flush=True)

    with _stdout_to_stderr():
        return seed003.run(args.seconds, tuple(args.ground or seed003.GROUNDS), mus,
                           tuple(args.controller or seed003.CONTROLLERS), progress,
                           getattr(args, "actuators", "ideal"),
                           _step_s(getattr(args, "step_ms", None), seed003.STEP_S))


def _step_s(step_ms, default: float) -> float:
    return default if step_ms is None else step_ms * 1e-3


@contextlib.contextmanager
def _stdout_to_stderr():
    """Send file descriptor 1 to stderr meanwhile: the QP backend (HiGHS) prints its banner
    from C, which would corrupt ``--json``."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def print_table(rep: dict) -> None:
    print(f"experiment: seed003 ({rep['seconds']:g} s of trot per case, "
          f"{rep.get('actuators', 'ideal')} actuators, step {1e3 * rep.get('step_s', 1e-3):g} ms)")
    hdr = f"{'case':<30}{'metric':<16}{'ours':>12}{'paper':>12}{'ratio':>8}"
    print(hdr)
    print("-" * len(hdr))
    for r in rep["rows"]:
        ours = "-" if r["ours"] is None else f"{r['ours']:.4g}"
        anchor = "-" if r["anchor"] is None else f"{r['anchor']:.4g}"
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}"
        print(f"{r['case']:<30}{r['metric']:<16}{ours:>12}{anchor:>12}{ratio:>8}")
