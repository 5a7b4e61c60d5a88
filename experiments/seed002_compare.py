"""Seed 002's experiment: the built-in quadruped trotting in our simulator and in MuJoCo.

Same robot (one URDF), same servo model and gains, same precomputed trot
(goals at a 1 kHz control rate), same start state; then the paper's
figures: trunk position and Euler-angle MAE, left-front contact activation
timing and vertical force MAE.  Also the timestep-convergence check
(our run at dt against dt/2, goals held at the control rate in both).
"""

from __future__ import annotations

import numpy as np

from servoloop.core_cy.sim.simulator import SimConfig, Simulator
from servoloop.experiments.gaits import TrotParams, trot_goals
from servoloop.experiments.mujoco_twin import (
    MujocoTwin,
    Trajectory,
    compare_trajectories,
    euler_zyx,
)

__all__ = ["default_urdf", "run_ours", "run_mujoco", "quadruped_comparison", "dt_convergence",
           "trajectory_from_log", "LF", "COMPARISON_DT", "CONTROL_DT"]

LF = 0  # contact index of the left-front foot (URDF order: lf, rf, lh, rh)
CONTROL_DT = 1e-3
# Our physics step for the comparison: with dt = 1 ms the first-order step
# moves the 10 s end point by ~0.1 m against dt = 0.5 ms; at 0.25 ms halving
# dt changes the figures by < 5 mm (see dt_convergence).
COMPARISON_DT = 2.5e-4


def default_urdf() -> str:
    from servoloop.robots import urdf_path

    return str(urdf_path("quadruped"))


def _quat_to_matrix(x, y, z, w):
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def trajectory_from_log(q_log, f_log, dt: float, every: int = 1) -> Trajectory:
    """Trajectory from Simulator.run logs, keeping every ``every``-th sample."""
    q_log, f_log = q_log[every - 1::every], f_log[every - 1::every]
    eul = np.array([euler_zyx(_quat_to_matrix(*q[3:7])) for q in q_log])
    t = (np.arange(q_log.shape[0]) + 1) * dt * every
    return Trajectory(t, q_log[:, :3].copy(), eul, np.any(f_log != 0.0, axis=2), f_log[:, :, 2].copy())


def run_ours(sim: Simulator, goals_ctrl: np.ndarray, q0) -> Trajectory:
    """Run from rest at q0 with control-rate goals (n, 12), sampled at the control rate."""
    every = int(round(CONTROL_DT / sim.config.dt))
    sim.set_state(q0)
    q_log, f_log = sim.run(np.repeat(goals_ctrl, every, axis=0))
    return trajectory_from_log(q_log, f_log, sim.config.dt, every)


def run_mujoco(urdf, sim: Simulator, goals_ctrl, q0, dt: float = CONTROL_DT, **kw) -> Trajectory:
    """MuJoCo twin of ``sim``'s robot and servos, same goals and start, mj_step at dt."""
    every = int(round(CONTROL_DT / dt))
    tw = MujocoTwin(urdf, sim.points, sim.config.servo, sim.config.ground, dt,
                    mu=sim.config.law.mu_dynamic, **kw)
    tr = tw.run(np.repeat(goals_ctrl, every, axis=0), q0)
    sl = slice(every - 1, None, every)
    return Trajectory(tr.t[sl], tr.position[sl], tr.euler[sl], tr.active[sl], tr.fz[sl])


def _setup(urdf, duration, config, trot):
    urdf = urdf or default_urdf()
    goals = trot_goals(urdf, CONTROL_DT, duration, trot or TrotParams())
    sim = Simulator.from_urdf(urdf, config or SimConfig(dt=COMPARISON_DT))
    sim.reset(goals[0])
    return urdf, goals, sim, sim.q.copy()


def quadruped_comparison(duration: float = 10.0, config: SimConfig | None = None, urdf=None,
                         trot: TrotParams | None = None, mujoco_dt: float = CONTROL_DT):
    """Our simulator vs MuJoCo on the trot; returns (figures dict, ours, mujoco)."""
    urdf, goals, sim, q0 = _setup(urdf, duration, config, trot)
    ours = run_ours(sim, goals, q0)
    ref = run_mujoco(urdf, sim, goals, q0, mujoco_dt)
    return compare_trajectories(ours, ref, LF), ours, ref


def dt_convergence(duration: float = 10.0, config: SimConfig | None = None, urdf=None,
                   trot: TrotParams | None = None):
    """Figures between our runs at config.dt and config.dt / 2 (same control-rate goals)."""
    cfg = config or SimConfig(dt=COMPARISON_DT)
    urdf, goals, sim, q0 = _setup(urdf, duration, cfg, trot)
    a = run_ours(sim, goals, q0)
    from dataclasses import replace

    half = Simulator.from_urdf(urdf, replace(cfg, dt=cfg.dt / 2))
    b = run_ours(half, goals, q0)
    return compare_trajectories(a, b, LF), a, b
