"""Telemetry plots (PNG, matplotlib Agg): joint tracking and loop timing."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from servoloop.controller.telemetry_format import Telemetry

__all__ = ["plot_telemetry"]


def plot_telemetry(tel: Telemetry, path, max_joints: int = 12) -> Path:
    """One PNG: per joint measured vs goal position (rad), then the histogram of
    tick lateness (us, log count) and the period over time.

    Returns
    -------
    Path
        The written file.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    joints = list(tel.header.get("joint_names", []))[:max_joints]
    t = tel.column("t_s") if tel.data.shape[0] else np.zeros(0)
    ncols = 3
    nrows_j = max(1, math.ceil(len(joints) / ncols))
    fig = plt.figure(figsize=(4.2 * ncols, 2.2 * nrows_j + 3.2), constrained_layout=True)
    gs = fig.add_gridspec(nrows_j + 1, ncols, height_ratios=[1.0] * nrows_j + [1.3])
    for k, j in enumerate(joints):
        ax = fig.add_subplot(gs[k // ncols, k % ncols])
        ax.plot(t, tel.column(f"q.{j}"), lw=0.8, label="measured", color="tab:blue")
        ax.plot(t, tel.column(f"goal.{j}"), lw=1.0, ls="--", label="goal", color="tab:orange")
        ax.set_title(j, fontsize=9)
        ax.tick_params(labelsize=7)
        if k == 0:
            ax.legend(fontsize=7, loc="best")
            ax.set_ylabel("rad", fontsize=8)
    state = tel.column("state") if tel.data.shape[0] else np.zeros(0)
    run = state == 3
    late = tel.column("late_us")[run] if tel.data.shape[0] else np.zeros(0)
    late = late[np.isfinite(late)]
    ax = fig.add_subplot(gs[nrows_j, 0:2])
    if late.size:
        hi = max(10.0, float(np.percentile(late, 99.9)) * 1.2)
        ax.hist(np.clip(late, 0, hi), bins=100, range=(0, hi), color="tab:blue", log=True)
        p50, p99 = np.percentile(late, [50, 99])
        ax.axvline(p99, color="tab:red", lw=1, label=f"p99 {p99:.0f} us")
        ax.axvline(p50, color="tab:green", lw=1, label=f"p50 {p50:.0f} us")
        ax.legend(fontsize=8)
    ax.set_xlabel("tick lateness = wake-up - deadline (us), run state", fontsize=8)
    ax.set_ylabel("ticks", fontsize=8)
    rate = tel.header.get("rate_hz", float("nan"))
    missed = int(np.nanmax(tel.column("missed"))) if tel.data.shape[0] else 0
    ax.set_title(f"loop timing at {rate} Hz: {int(run.sum())} run ticks, {missed} missed", fontsize=9)
    ax2 = fig.add_subplot(gs[nrows_j, 2])
    if tel.data.shape[0]:
        ax2.plot(t, tel.column("period_us"), lw=0.5, color="tab:gray")
        ax2.plot(t, tel.column("cost_us"), lw=0.5, color="tab:purple", label="tick work")
        ax2.legend(fontsize=7)
    ax2.set_xlabel("t (s)", fontsize=8)
    ax2.set_ylabel("period (us)", fontsize=8)
    robot = tel.header.get("robot", "")
    fig.suptitle(f"servoloop telemetry: {robot}", fontsize=11)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp{os.getpid()}.png")
    fig.savefig(tmp, dpi=90)
    plt.close(fig)
    os.replace(tmp, out)
    return out
