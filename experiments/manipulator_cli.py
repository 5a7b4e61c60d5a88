"""Command-line side of :mod:`experiments.manipulator`: options, and the table as text."""

from __future__ import annotations

import math
import sys

__all__ = ["add_arguments", "main", "print_table"]


def add_arguments(parser) -> None:
    from servoloop.experiments.manipulator import CONTROLLERS
    from servoloop.experiments.seed003_cli import _positive

    parser.add_argument("--seconds", type=_positive, default=3.0,
                        help="simulated seconds per case (default 3, as the paper)")
    parser.add_argument("--mu", choices=("1", "inf"), action="append",
                        help="only this box friction (repeatable; default both)")
    parser.add_argument("--controller", choices=CONTROLLERS, action="append",
                        help="only this controller (repeatable; default all five)")
    parser.add_argument("--compiled", action="store_true",
                        help="run the compiled inverse dynamics instead of the paper's formulation")


def main(args) -> dict:
    try:
        from servoloop.experiments import manipulator
    except ImportError as exc:       # mujoco is a test/bench dependency
        raise SystemExit(f"experiment manipulator: {exc}; install the test extra "
                         "(pip install 'servoloop[test]')") from None
    from servoloop.experiments.seed003_cli import _stdout_to_stderr

    try:
        manipulator.panda_urdf()
    except FileNotFoundError as exc:
        raise SystemExit(f"experiment manipulator: {exc}") from None
    if not args.compiled:
        import qpsolvers

        if manipulator.QP_SOLVER not in qpsolvers.available_solvers:
            raise SystemExit(f"experiment manipulator: the paper's formulation solves its QPs with "
                             f"{manipulator.QP_SOLVER}, which is not installed: pip install "
                             "'servoloop[test]' (or run --compiled)")
    mus = tuple(math.inf if m == "inf" else float(m) for m in (args.mu or ())) or manipulator.MUS
    quiet = getattr(args, "json", False)

    def progress(name: str) -> None:
        if not quiet:
            print(f"  running {name} ...", file=sys.stderr, flush=True)

    with _stdout_to_stderr():
        return manipulator.run(args.seconds, mus, tuple(args.controller or manipulator.CONTROLLERS),
                               progress, compiled=args.compiled)


def print_table(rep: dict) -> None:
    print(f"experiment: manipulator ({rep['seconds']:g} s per case, {rep['formulation']} formulation)")
    hdr = f"{'case':<24}{'metric':<16}{'ours':>14}  unit"
    print(hdr)
    print("-" * len(hdr))
    for r in rep["rows"]:
        ours = "-" if r["ours"] is None else f"{r['ours']:.4g}"
        print(f"{r['case']:<24}{r['metric']:<16}{ours:>14}  {r['unit']}")
