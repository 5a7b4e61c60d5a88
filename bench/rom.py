"""``servoloop bench rom``: the walking-model acceptance checks A4 and A5 on the full 3 x 3 grid.

CI runs them on the grid's corners (``tests/unit/locomotion/test_trajopt.py``);
this runs all nine tasks (speeds 0.27/0.405/0.54 m/s, inclines
-0.08/0/0.08 rad).  Rows, per task:

- A4 ``reintegration_defect`` [rad]: each collocation interval re-integrated
  with the scheme's torque, anchored on the digest's bound 1e-3 rad (ratio < 1
  passes);
- A4 ``constraint_violation`` and ``periodicity_error`` of the full-order
  step, anchored on 1e-6;
- A5 ``lip_cost_ratio`` (J at the LIP / J_full, from the full-order solution)
  for each ROM asked, anchored on 1 (the lower bound: ratio >= 1 passes), and
  its ``rom_residual`` (the ROM rows of the NLP at the midpoints) on 1e-6.

An infeasible step reports NaN.  Needs casadi (``pip install 'servoloop[rom]'``).
"""

from __future__ import annotations

import math

import numpy as np

from servoloop.bench.common import Row, report

__all__ = ["add_arguments", "run", "SPEEDS", "INCLINES"]

SPEEDS = (0.27, 0.405, 0.54)       #: m/s, the digest's grid
INCLINES = (-0.08, 0.0, 0.08)      #: rad


def _roms(text: str) -> list[str]:
    import argparse

    kinds = [] if text.strip() == "none" else [k.strip() for k in text.split(",")]
    for k in kinds:
        if k not in ("2d", "4d"):
            raise argparse.ArgumentTypeError(f"{k!r} is not a ROM (give 2d, 4d, 2d,4d or none)")
    return kinds


def add_arguments(parser) -> None:
    parser.add_argument("--roms", type=_roms, default="2d,4d",
                        help="ROMs checked at the LIP (A5), comma-separated, or 'none' (default 2d,4d)")


def _rom_rows(kind: str, task, full, case: str) -> list[Row]:
    from servoloop.locomotion.features import ROM_SPECS, theta0
    from servoloop.locomotion.trajopt import problem

    P, F = problem(kind), problem("full")
    th = theta0(ROM_SPECS[kind])
    sol = P.solve(task, th, w0=P.pack(F.unpack(full.w)))
    ratio = sol.cost / full.cost if sol.success else math.nan
    residual = math.nan
    if sol.success:
        ge, _ = P.constraints(sol.w, P.params(task, th))
        residual = float(np.abs(np.array(ge)).max())
    return [Row(case, f"lip_cost_ratio_{kind}", "J/J_full", ratio, "J_full (lower bound)", 1.0),
            Row(case, f"rom_residual_{kind}", "max |g|", residual, "tolerance", 1e-6)]


def run(args) -> dict:
    from servoloop.locomotion.checks import (
        REINTEGRATION_TOL,
        periodicity_error,
        reintegration_defect,
    )
    from servoloop.locomotion.task import Task
    from servoloop.locomotion.trajopt import problem

    roms = args.roms if isinstance(args.roms, list) else _roms(args.roms)
    F = problem("full")
    rows: list[Row] = []
    for speed in SPEEDS:
        for incline in INCLINES:
            task = Task(speed, incline)
            case = task.case
            full = F.solve(task)
            ok = full.success
            rows += [
                Row(case, "reintegration_defect", "rad",
                    reintegration_defect(F, full) if ok else math.nan, "digest A4 bound", REINTEGRATION_TOL),
                Row(case, "constraint_violation", "max", full.violation if ok else math.nan, "tolerance", 1e-6),
                Row(case, "periodicity_error", "rad, rad/s",
                    periodicity_error(F, full) if ok else math.nan, "tolerance", 1e-6),
            ]
            for kind in roms if ok else []:
                rows += _rom_rows(kind, task, full, case)
    return report("rom", rows)
