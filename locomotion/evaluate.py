"""``rom evaluate``: J / J_full of a learned model against the LIP on a task grid.

Each task: the full-order step (J_full), the LIP step at theta0 and the
learned step at theta, each ROM step from the full-order solution; the
learned one also by continuation from the LIP solution (theta0 -> theta in
a few steps, the branch the learning followed), the lower feasible cost
kept.  Rows use the benchmark JSON form (anchor "lip").
"""

from __future__ import annotations

import numpy as np

from servoloop.locomotion.features import ROM_SPECS, theta0
from servoloop.locomotion.task import Task

__all__ = ["evaluate_task", "evaluate", "CONTINUATION_STEPS"]

CONTINUATION_STEPS = 4


def _best(sols):
    ok = [s for s in sols if s is not None and s.success]
    return min(ok, key=lambda s: s.cost) if ok else None


def evaluate_task(kind: str, theta: np.ndarray, task: Task) -> dict:
    """One task's costs: ``full``, ``lip``, ``ours`` (None if infeasible), and without tau."""
    from servoloop.locomotion.trajopt import problem

    full = problem("full").solve(task)
    rom = problem(kind)
    if not full.success:
        return {"task": task, "full": None, "lip": None, "ours": None}
    w_full = rom.pack(problem("full").unpack(full.w))
    th0 = theta0(ROM_SPECS[kind])
    lip = rom.solve(task, th0, w0=w_full)
    tries = [rom.solve(task, theta, w0=w_full)]
    if lip.success:
        sol = lip
        for k in range(1, CONTINUATION_STEPS + 1):
            th = th0 + (theta - th0) * k / CONTINUATION_STEPS
            sol = rom.solve(task, th, w0=sol.w)
            if not sol.success:
                break
        tries.append(sol if sol.success else None)
    ours = _best(tries)
    lip = lip if lip.success else None
    return {"task": task, "full": full.cost,
            "lip": lip.cost if lip else None, "ours": ours.cost if ours else None,
            "lip_no_tau": lip.cost_no_tau if lip else None,
            "ours_no_tau": ours.cost_no_tau if ours else None}


def evaluate(kind: str, theta: np.ndarray, tasks: list[Task], runner, progress=None) -> list[dict]:
    """Benchmark rows, one per task, in the order of ``tasks``."""
    out = [None] * len(tasks)
    for n, (i, r) in enumerate(runner.map(evaluate_task, [(kind, theta, t) for t in tasks]), 1):
        out[i] = r
        if progress is not None:
            progress.set(n)
    return [_row(r) for r in out]


def _row(r: dict) -> dict:
    full = r["full"]
    ours = r["ours"] / full if full and r["ours"] is not None else None
    anchor = r["lip"] / full if full and r["lip"] is not None else None
    row = {"case": r["task"].case, "metric": "cost_ratio", "unit": "J/J_full", "ours": ours,
           "anchor_name": "lip", "anchor": anchor,
           "ratio": ours / anchor if ours is not None and anchor else None,
           "feasible": ours is not None,
           "ours_no_tau": r["ours_no_tau"] / full if ours is not None else None,
           "anchor_no_tau": r["lip_no_tau"] / full if anchor is not None else None}
    return row
