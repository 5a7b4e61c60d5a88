"""``servoloop experiment walk_a9``: torque cost per metre of the humanoid's walk, learned ROM vs LIP.

Seed 004's A9 on a real robot model: the built-in AX-18A humanoid walks
``--steps`` steps at ``--speed`` with ``walk`` (in process, contact
simulator, 200 Hz, servo goals as the daemon sends them), once with the LIP
plan and once per learned model; rows in the benchmark JSON form with the
LIP as the anchor (``ratio`` < 1: the learned model costs less torque per metre).
"""

from __future__ import annotations

import math
import sys

__all__ = ["add_arguments", "main", "print_table"]

METRICS = (("torque_cost_per_m", "N^2 m^2 s / m"), ("max_tilt_deg", "deg"),
           ("base_rms_error_m", "m"), ("distance_m", "m"),
           ("steps_done", "steps before a fall"))


def add_arguments(parser) -> None:
    parser.add_argument("--model", action="append",
                        help="learned model (repeatable; default builtin:five_link_4d): a file from "
                             "'servoloop rom learn' or builtin:five_link_4d / builtin:five_link_2d")
    parser.add_argument("--speed", type=float, default=0.12, help="forward speed [m/s] (default 0.12)")
    parser.add_argument("--steps", type=int, default=10, help="steps per walk (default 10)")


def main(args) -> dict:
    from servoloop.bench.common import Row, report
    from servoloop.controller.errors import ControllerParamError
    from servoloop.experiments.walk_humanoid import run_walk

    if not (0.0 < args.speed <= 0.3 and math.isfinite(args.speed)):
        raise SystemExit(f"--speed {args.speed}: must lie in (0, 0.3] m/s")
    if not 5 <= args.steps <= 200:
        raise SystemExit(f"--steps {args.steps}: must lie in 5..200 (the cost is taken over the "
                         "steady steps: all but two at each end)")
    base = {"speed_mps": args.speed, "steps": args.steps}
    quiet = getattr(args, "json", False)
    runs = {}
    for model in ["lip"] + list(args.model or ["builtin:five_link_4d"]):
        if not quiet:
            print(f"  walking with {model} ...", file=sys.stderr, flush=True)
        try:
            r = run_walk({**base, "model": model})
        except ControllerParamError as exc:
            raise SystemExit(str(exc)) from None
        r.pop("run")
        runs[model] = r
    rows = []
    lip = runs.pop("lip")
    case0 = f"humanoid v={args.speed:g} steps={args.steps}"
    for model, r in [("lip", lip)] + list(runs.items()):
        for metric, unit in METRICS:
            rows.append(Row(f"{case0} {model}", metric, unit, float(r[metric]), "lip", float(lip[metric])))
    return report("walk_a9", rows)


def print_table(rep: dict) -> None:
    from servoloop.bench.common import print_report

    print_report(rep, False)
