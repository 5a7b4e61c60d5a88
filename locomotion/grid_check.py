"""``servoloop rom check``: the acceptance checks A4 and A5 on the full 3 x 3 task grid.

CI runs them on the grid's corners (``tests/unit/locomotion/test_trajopt.py``);
this runs all nine tasks (speeds 0.27/0.405/0.54 m/s, inclines
-0.08/0/0.08 rad) and prints the benchmark JSON form.  Rows, per task:

- A4 ``reintegration_defect`` [rad]: each collocation interval re-integrated
  with the scheme's torque, anchored on the digest's bound 1e-3 rad (ratio < 1
  passes);
- A4 ``constraint_violation`` and ``periodicity_error`` of the full-order
  step, anchored on 1e-6;
- A5 ``lip_cost_ratio_<rom>`` (J at the LIP / J_full, from the full-order
  solution) for each ROM asked, anchored on 1 (the lower bound: ratio >= 1
  passes), and ``rom_residual_<rom>`` (the ROM rows of the NLP) on 1e-6.

An infeasible step reports null.  (The benchmark form lives here and not
in ``bench/``: nothing but the CLI imports this package, casadi and all.)
"""

from __future__ import annotations

import numpy as np

from servoloop.locomotion.checks import REINTEGRATION_TOL, periodicity_error, reintegration_defect
from servoloop.locomotion.errors import RomInputError
from servoloop.locomotion.features import ROM_SPECS, theta0
from servoloop.locomotion.task import Task
from servoloop.locomotion.trajopt import problem

__all__ = ["SPEEDS", "INCLINES", "parse_roms", "grid_check"]

SPEEDS = (0.27, 0.405, 0.54)       #: m/s, the digest's grid
INCLINES = (-0.08, 0.0, 0.08)      #: rad


def parse_roms(text: str) -> list[str]:
    """``"2d,4d"`` -> ["2d", "4d"]; ``"none"`` -> []; a clear error naming ``--roms`` otherwise."""
    kinds = [] if text.strip() == "none" else [k.strip() for k in text.split(",")]
    for k in kinds:
        if k not in ROM_SPECS:
            raise RomInputError(f"--roms: {k!r} is not a ROM (give 2d, 4d, 2d,4d or none)")
    return kinds


def _row(case, metric, unit, ours, anchor_name, anchor) -> dict:
    return {"case": case, "metric": metric, "unit": unit, "ours": ours, "anchor_name": anchor_name,
            "anchor": anchor, "ratio": None if ours is None else ours / anchor}


def _rom_rows(kind: str, task: Task, full) -> list[dict]:
    P, F = problem(kind), problem("full")
    th = theta0(ROM_SPECS[kind])
    sol = P.solve(task, th, w0=P.pack(F.unpack(full.w)))
    ratio = residual = None
    if sol.success:
        ratio = sol.cost / full.cost
        ge, _ = P.constraints(sol.w, P.params(task, th))
        residual = float(np.abs(np.array(ge)).max())
    return [_row(task.case, f"lip_cost_ratio_{kind}", "J/J_full", ratio, "J_full (lower bound)", 1.0),
            _row(task.case, f"rom_residual_{kind}", "max |g|", residual, "tolerance", 1e-6)]


def grid_check(roms: list[str], progress=None) -> dict:
    """The benchmark JSON form of A4 (and A5 for each of ``roms``) on the 9 grid tasks."""
    F = problem("full")
    rows: list[dict] = []
    for n, (speed, incline) in enumerate(((s, i) for s in SPEEDS for i in INCLINES), 1):
        task = Task(speed, incline)
        full = F.solve(task)
        ok = full.success
        rows += [
            _row(task.case, "reintegration_defect", "rad", reintegration_defect(F, full) if ok else None,
                 "digest A4 bound", REINTEGRATION_TOL),
            _row(task.case, "constraint_violation", "max", full.violation if ok else None, "tolerance", 1e-6),
            _row(task.case, "periodicity_error", "rad, rad/s", periodicity_error(F, full) if ok else None,
                 "tolerance", 1e-6),
        ]
        for kind in roms if ok else []:
            rows += _rom_rows(kind, task, full)
        if progress is not None:
            progress.set(n)
    return {"benchmark": "rom_check", "rows": rows}
