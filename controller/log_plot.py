"""Telemetry plots (PNG, matplotlib Agg): joint tracking and loop timing."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from servoloop.controller.telemetry_format import Telemetry

__all__ = ["plot_telemetry", "plot_pages", "select_joints"]


def select_joints(tel: Telemetry, joints: list[str] | None) -> list[str]:
    """The joints to plot: ``joints`` (checked) or all of the file's, in its order.

    Raises
    ------
    ValueError
        A joint the file does not have, naming the ones it has.
    """
    known = list(tel.header.get("joint_names", []))
    if not joints:
        return known
    bad = [j for j in joints if j not in known]
    if bad:
        raise ValueError(f"no joint {bad[0]!r} in this telemetry; its joints: {', '.join(known)}")
    return list(joints)


def plot_telemetry(tel: Telemetry, path, **options) -> Path:
    """:func:`plot_pages` (same options); returns the first page."""
    return plot_pages(tel, path, **options)[0]


def plot_pages(tel: Telemetry, path, joints: list[str] | None = None, t_from: float | None = None,
               t_to: float | None = None, per_page: int = 12) -> list[Path]:
    """PNG pages: per joint measured vs goal position (rad), ``per_page`` joints a page; the
    first page also has the histogram of tick lateness (us, log count) and the period over time.

    Parameters
    ----------
    tel : Telemetry
    path : the first page; more pages go beside it as ``NAME-2.png``, ``NAME-3.png``, ...
    joints : joint names to plot (default: all, in the file's order)
    t_from, t_to : time window, s of telemetry time (default: the whole file)
    per_page : joints per page (3 columns)

    Returns
    -------
    list of Path
        The written files, first page first.

    Raises
    ------
    ValueError
        An unknown joint, or a window with no rows.
    """
    names = select_joints(tel, joints)
    rows = np.ones(tel.data.shape[0], dtype=bool)
    if tel.data.shape[0]:
        t_all = tel.column("t_s")
        if t_from is not None:
            rows &= t_all >= t_from
        if t_to is not None:
            rows &= t_all <= t_to
        if not rows.any():
            raise ValueError(f"no telemetry rows between {t_from} s and {t_to} s "
                             f"(the file spans {t_all[0]:.2f} .. {t_all[-1]:.2f} s)")
    out = Path(path)
    pages = [names[k:k + per_page] for k in range(0, max(len(names), 1), per_page)] or [[]]
    written = []
    for n, page in enumerate(pages, start=1):
        target = out if n == 1 else out.with_name(f"{out.stem}-{n}{out.suffix or '.png'}")
        title = f" (joints {(n - 1) * per_page + 1}-{(n - 1) * per_page + len(page)} of {len(names)})" \
            if len(pages) > 1 else ""
        written.append(_page(tel, rows, page, target, timing=n == 1, title=title))
    return written


def _page(tel: Telemetry, rows, joints: list[str], out: Path, timing: bool, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def col(name):
        return tel.column(name)[rows]

    t = col("t_s") if tel.data.shape[0] else np.zeros(0)
    ncols = 3
    nrows_j = max(1, math.ceil(len(joints) / ncols))
    extra = 1 if timing else 0
    fig = plt.figure(figsize=(4.2 * ncols, 2.2 * nrows_j + 3.2 * extra), constrained_layout=True)
    gs = fig.add_gridspec(nrows_j + extra, ncols, height_ratios=[1.0] * nrows_j + [1.3] * extra)
    for k, j in enumerate(joints):
        ax = fig.add_subplot(gs[k // ncols, k % ncols])
        ax.plot(t, col(f"q.{j}"), lw=0.8, label="measured", color="tab:blue")
        ax.plot(t, col(f"goal.{j}"), lw=1.0, ls="--", label="goal", color="tab:orange")
        ax.set_title(j, fontsize=9)
        ax.tick_params(labelsize=7)
        if k == 0:
            ax.legend(fontsize=7, loc="best")
            ax.set_ylabel("rad", fontsize=8)
    robot = tel.header.get("robot", "")
    fig.suptitle(f"servoloop telemetry: {robot}{title}", fontsize=11)
    if timing:
        _timing(fig, gs, nrows_j, tel, rows, t)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp{os.getpid()}.png")
    fig.savefig(tmp, dpi=90)
    plt.close(fig)
    os.replace(tmp, out)
    return out


def _timing(fig, gs, nrows_j: int, tel: Telemetry, rows, t) -> None:
    """Lateness histogram and period / tick work over time, in the last grid row."""

    def col(name):
        return tel.column(name)[rows]

    state = col("state") if tel.data.shape[0] else np.zeros(0)
    run = state == 3
    late = col("late_us")[run] if tel.data.shape[0] else np.zeros(0)
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
    missed = int(np.nanmax(col("missed")) - np.nanmin(col("missed"))) if tel.data.shape[0] else 0
    ax.set_title(f"loop timing at {rate} Hz: {int(run.sum())} run ticks, {missed} missed", fontsize=9)
    ax2 = fig.add_subplot(gs[nrows_j, 2])
    if tel.data.shape[0]:
        ax2.plot(t, col("period_us"), lw=0.5, color="tab:gray")
        ax2.plot(t, col("cost_us"), lw=0.5, color="tab:purple", label="tick work")
        ax2.legend(fontsize=7)
    ax2.set_xlabel("t (s)", fontsize=8)
    ax2.set_ylabel("period (us)", fontsize=8)
