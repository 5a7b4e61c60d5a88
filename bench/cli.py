"""``servoloop bench NAME [--json]``: one module per benchmark in this folder.

A benchmark module ``bench/NAME.py`` defines ``add_arguments(parser)``
(optional) and ``run(args) -> dict`` returning the form of
:func:`bench.common.report`.
"""

from __future__ import annotations

import functools
import importlib

__all__ = ["register", "BENCHMARKS"]

BENCHMARKS = {
    "dynamics": "rigid-body kernels vs Pinocchio (core_cy)",
    "bus": "host CPU per sync cycle vs dynamixel_sdk, cycle rate vs wire limit",
    "loop": "control-loop jitter and missed ticks vs a plain Python loop",
    "sim": "contact simulation steps vs MuJoCo mj_step, and agreement",
    "inverse_dynamics": "contact inverse dynamics vs Pinocchio + qpsolvers(daqp)",
    "startup": "wall time of `servoloop --help` / `servoloop status` vs `import numpy`",
    "live": "tick work with the Foxglove live view (and a subscribed client) vs without",
    "estimator": "base estimator (IMU + leg kinematics) CPU per tick vs the tick period",
    "balance": "whole-body balance step (wbc, trot) CPU per tick vs the tick period",
}


def register(sub) -> None:
    p = sub.add_parser("bench", help="measure ours against the anchor, same process")
    bsub = p.add_subparsers(dest="bench_name", metavar="NAME", required=True)
    from servoloop.cli import lazy_arguments

    for name, helptext in BENCHMARKS.items():
        bp = bsub.add_parser(name, help=helptext)
        bp.add_argument("--json", action="store_true", help="print one JSON object")
        bp.set_defaults(func=_run, bench_name=name)
        # a benchmark module imports what it measures: only when that benchmark is asked for
        lazy_arguments(bp, functools.partial(_module_arguments, name))
    ap = bsub.add_parser("all", help="run every benchmark")
    ap.add_argument("--json", action="store_true")
    ap.set_defaults(func=_run_all)


def _module(name: str, strict: bool = True):
    try:
        return importlib.import_module(f"servoloop.bench.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"servoloop.bench.{name}" or strict:
            raise
        return None


def _module_arguments(name: str, parser) -> None:
    mod = _module(name, strict=False)
    if mod is not None and hasattr(mod, "add_arguments"):
        mod.add_arguments(parser)


def _run(args) -> int:
    from servoloop.bench.common import print_report

    mod = _module(args.bench_name)
    print_report(mod.run(args), args.json)
    return 0


def _run_all(args) -> int:
    import argparse

    from servoloop.bench.common import print_report

    for name in BENCHMARKS:
        mod = _module(name)
        parser = argparse.ArgumentParser(prog=f"servoloop bench {name}")
        if hasattr(mod, "add_arguments"):
            mod.add_arguments(parser)
        ns = parser.parse_args([], namespace=argparse.Namespace(json=args.json, bench_name=name))
        print_report(mod.run(ns), args.json)
    return 0
