"""Plots (matplotlib, the ``plot`` extra): the learning curve (as the paper's Fig. 5) and a gait."""

from __future__ import annotations

import numpy as np

from servoloop.locomotion.errors import RomInputError

__all__ = ["plot_learning_curve", "plot_learning_curves", "plot_gait"]


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise RomInputError("--plot needs matplotlib (pip install 'servoloop[plot]')") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_learning_curve(costs, costs_no_tau, path: str, title: str = "") -> None:
    """Mean J / J_full of each iteration's sampled tasks, with and without the tau cost (PNG)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.2))
    it = np.arange(len(costs))
    ax.plot(it, costs, "o-", label="J / J_full")
    if costs_no_tau is not None and not np.allclose(costs, costs_no_tau):
        ax.plot(it, costs_no_tau, "s--", label="without the tau cost")
    ax.set_xlabel("outer iteration")
    ax.set_ylabel("mean normalised cost")
    ax.set_title(title or "learning curve")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_learning_curves(models: dict, path: str) -> None:
    """One panel per model, as the paper's Fig. 5: mean J / J_full of each iteration's tasks.

    Parameters
    ----------
    models : title -> model dict (from :func:`~servoloop.locomotion.model_file.load_model`),
        each with ``costs`` and optionally ``costs_no_tau``
    path : PNG to write
    """
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 3.2), squeeze=False)
    for ax, (title, model) in zip(axes[0], models.items(), strict=True):
        costs = model.get("costs") or []
        if not costs:
            raise RomInputError(f"model {title!r}: holds no learning curve ('costs' is empty)")
        it = np.arange(len(costs))
        ax.plot(it, costs, "o-", ms=3, label="J / J_full")
        no_tau = model.get("costs_no_tau")
        if no_tau is not None and not np.allclose(costs, no_tau):
            ax.plot(it, no_tau, "s--", ms=3, label="without the tau cost")
        ax.axhline(1.0, color="k", lw=0.6, ls=":")        # the full-order bound
        ax.set_xlabel("outer iteration")
        ax.set_ylabel("mean normalised cost")
        ax.set_ylim(bottom=0)
        ax.set_title(f"{title} ({model.get('model', '?')})")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_gait(result: dict, path: str) -> None:
    """Stick figures of the IK joint angles of a plan, stride after stride (PNG)."""
    from servoloop.locomotion.five_link import five_link

    plt = _pyplot()
    m = five_link()
    fig, ax = plt.subplots(figsize=(8, 2.8))
    foot_x = 0.0
    for j, qs in enumerate(result["q"]):
        for k, q in enumerate(qs):
            hip = np.array(m.hip(q)).ravel() + [foot_x, 0]
            sw = np.array(m.swing_foot(q)).ravel() + [foot_x, 0]
            torso = hip + 0.3 * np.array([np.sin(q[0]), np.cos(q[0])])
            shade = 0.3 + 0.7 * k / max(len(qs) - 1, 1)
            ax.plot([foot_x, hip[0], sw[0]], [0, hip[1], sw[1]], color=(0.1, 0.3, shade), lw=0.8)
            ax.plot([hip[0], torso[0]], [hip[1], torso[1]], color="0.3", lw=0.8)
        foot_x += result["steps"][j]
    ax.axhline(0, color="k", lw=0.5)
    ax.set_aspect("equal")
    ax.set_xlabel("x [m]")
    ax.set_title(f"{result['strides']} strides, {result['distance']:g} m")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
