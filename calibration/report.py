"""Calibration reports: YAML (parameters, uncertainties, data, metrics) and PNG.

Everything is written atomically (temporary file in the same folder, then
``os.replace``): an interrupted run leaves the previous file or none, never
half a file.
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
from pathlib import Path

import numpy as np
import yaml

__all__ = ["atomic_path", "atomic_write_bytes", "write_yaml", "plot_fit"]


@contextlib.contextmanager
def atomic_path(path, suffix: str = ".tmp"):
    """Yield a temporary path beside ``path``; on success rename it to ``path``.

    On any error the temporary file is removed and ``path`` is untouched:
    an interrupted run leaves the previous file or none, never half a file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_bytes(path, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file and a rename."""
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(data)
    return Path(path)


def _plain(x):
    """Numpy scalars/arrays and non-finite floats to YAML-safe Python values."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, np.ndarray):
        return [_plain(v) for v in x.tolist()]
    if isinstance(x, (np.floating, float)):
        x = float(x)
        return x if math.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def write_yaml(path, report: dict) -> Path:
    """Write a report dict as YAML, atomically."""
    text = yaml.safe_dump(_plain(report), sort_keys=False, default_flow_style=False)
    return atomic_write_bytes(path, text.encode())


def plot_fit(path, runs: list[dict], title: str = "") -> Path:
    """Measured vs simulated position and the error, one row per run.

    Parameters
    ----------
    path : str or Path
        PNG to write (atomically).
    runs : list of dict
        Each with ``name``, ``t`` (n,), ``goal`` (n,), ``measured`` (n,),
        ``simulated`` (n,) [s, rad], and optional ``role``.
    title : str
        Figure title.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = max(len(runs), 1)
    fig, axes = plt.subplots(n, 2, figsize=(13, 2.4 * n), squeeze=False,
                             gridspec_kw={"width_ratios": [3, 1.2]})
    for (ax, ax_err), run in zip(axes, runs, strict=False):
        err = (run["simulated"] - run["measured"]) * 1e3
        ax.plot(run["t"], run["goal"], color="0.6", lw=0.8, ls=":", label="goal")
        ax.plot(run["t"], run["measured"], color="tab:blue", lw=1.2, label="measured")
        ax.plot(run["t"], run["simulated"], color="tab:red", lw=1.0, label="simulated")
        role = f" [{run['role']}]" if run.get("role") else ""
        ax.set_title(f"{run['name']}{role}: MAE {np.mean(np.abs(err)):.1f} mrad", fontsize=9)
        ax.set_ylabel("rad")
        ax.legend(loc="upper right", fontsize=7)
        ax_err.plot(run["t"], err, color="tab:purple", lw=0.8)
        ax_err.axhline(0.0, color="0.5", lw=0.5)
        ax_err.set_ylabel("sim - measured [mrad]", fontsize=8)
    axes[-1][0].set_xlabel("time [s]")
    axes[-1][1].set_xlabel("time [s]")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    try:
        with atomic_path(path, suffix=".png") as tmp:
            fig.savefig(tmp, dpi=80)
    finally:
        plt.close(fig)
    return Path(path)
