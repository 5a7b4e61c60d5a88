"""``servoloop bench sim``: contact simulation speed vs MuJoCo ``mj_step``, and agreement.

Speed: the built-in quadruped (4 sphere-foot point contacts, 12 servos) at
dt = 1 ms, mid-trot state, ours (compliant semi-implicit Euler; rigid LCP)
against ``mj_step`` on the MuJoCo twin generated from the same URDF, timed
interleaved in this process; the batch API against a Python loop of single
steps.  Agreement: seed 002's experiment (10 s trot, same robot, servo
gains and gait in both) with the paper's MAEs as anchors, and the
timestep-halving figures against the MuJoCo difference they must stay below.
Agreement runs use our compliant step at dt = 0.25 ms (see
experiments/seed002_compare.py) and the rigid step at 1 ms; MuJoCo at 1 ms.
"""

from __future__ import annotations

import time

import numpy as np

from servoloop.bench.common import Row, interleaved_times, report

__all__ = ["add_arguments", "run"]

FIGURES = ("trunk_pos_mae_mm_x", "trunk_pos_mae_mm_y", "trunk_pos_mae_mm_z",
           "euler_mae_deg_roll", "euler_mae_deg_pitch", "euler_mae_deg_yaw", "lf_fz_mae_n")
UNITS = {"mm": "mm", "deg": "deg", "_n": "N"}


def add_arguments(parser) -> None:
    parser.add_argument("--duration", type=float, default=10.0,
                        help="trot length for the agreement figures [s] (default 10)")
    parser.add_argument("--steps", type=int, default=200, help="steps per timed block")
    parser.add_argument("--envs", type=int, default=32, help="environments in the batch case")
    parser.add_argument("--no-agreement", action="store_true", help="speed rows only")


def _unit(metric: str) -> str:
    return next((u for k, u in UNITS.items() if k in metric), "-")


def _time_vs_mujoco(urdf, goals, mode: str, integ: str, n: int) -> tuple[float, float]:
    """Seconds per block of n steps from one mid-trot state: ours, mj_step."""
    import mujoco

    from servoloop.core_cy.sim.simulator import SimConfig, Simulator
    from servoloop.experiments.mujoco_twin import MujocoTwin

    sim = Simulator.from_urdf(urdf, SimConfig(mode=mode, integrator=integ, dt=1e-3))
    sim.reset(goals[0])
    sim.run(goals[:800])
    q0, v0, g = sim.q.copy(), sim.v.copy(), goals[800]
    tw = MujocoTwin(urdf, sim.points, sim.config.servo, dt=1e-3)
    tw.set_state(q0, v0)
    tw.data.ctrl[:] = g
    qpos0, qvel0 = tw.data.qpos.copy(), tw.data.qvel.copy()

    def ours():
        sim.set_state(q0, v0)
        sim.step(g, n_steps=n)

    def anchor():
        tw.data.qpos[:] = qpos0
        tw.data.qvel[:] = qvel0
        mujoco.mj_step(tw.model, tw.data, nstep=n)

    return interleaved_times(ours, anchor, number=5, repeats=7)


def _speed_rows(args) -> list[Row]:
    from servoloop.core_cy.sim.simulator import SimConfig, Simulator
    from servoloop.experiments.gaits import trot_goals
    from servoloop.experiments.seed002_compare import default_urdf

    urdf = default_urdf()
    goals = trot_goals(urdf, 1e-3, 1.0)
    n = int(args.steps)
    rows = []
    for mode, integ in (("compliant", "euler"), ("rigid", "euler"), ("compliant", "rk4")):
        o, a = _time_vs_mujoco(urdf, goals, mode, integ, n)
        rows.append(Row(f"quadruped {mode}" + (" rk4" if integ == "rk4" else ""),
                        "us_per_step", "us", o / n * 1e6, "mujoco mj_step", a / n * 1e6))
    # batch API vs a Python loop of single steps
    from servoloop.core_cy.sim.simulator import BatchSimulator

    ne = int(args.envs)
    cfg = SimConfig(dt=1e-3)
    batch = BatchSimulator.from_urdf(urdf, ne, cfg)
    sims = [Simulator.from_urdf(urdf, cfg) for _ in range(ne)]
    for e, s in enumerate(sims):
        s.reset(goals[0])
        batch.q[e], batch.v[e], batch.goal[e] = s.q, s.v, goals[0]
    qb, vb = batch.q.copy(), batch.v.copy()
    steps = max(n // 10, 1)

    def run_batch():
        batch.q[:], batch.v[:] = qb, vb
        batch.step(n_steps=steps)

    def run_loop():
        for _ in range(steps):
            for s in sims:
                s.step(goals[0])

    o, a = interleaved_times(run_batch, run_loop, number=3, repeats=5)
    rows.append(Row(f"batch {ne} envs", "us_per_env_step", "us",
                    o / (steps * ne) * 1e6, "python loop of step()", a / (steps * ne) * 1e6))

    return rows


def _agreement_rows(args) -> list[Row]:
    from servoloop.core_cy.sim.simulator import SimConfig
    from servoloop.experiments.mujoco_twin import PAPER_FIGURES
    from servoloop.experiments.seed002_compare import (
        COMPARISON_DT,
        dt_convergence,
        quadruped_comparison,
    )

    rows = []
    T = float(args.duration)
    for mode, dt in (("compliant", COMPARISON_DT), ("rigid", 1e-3)):
        cfg = SimConfig(mode=mode, dt=dt)
        t0 = time.perf_counter()
        fig, ours, _ = quadruped_comparison(T, cfg)
        wall = time.perf_counter() - t0
        case = f"{mode} vs mujoco"
        for k in FIGURES:
            rows.append(Row(case, k, _unit(k), fig[k], "paper (seed 002)", PAPER_FIGURES[k]))
        rows.append(Row(case, "lf_touchdown_dt_ms", "ms", fig["lf_touchdown_dt_ms"],
                        "paper: 'very similar'", float("nan")))
        rows.append(Row(case, "lf_contact_mismatch", "fraction", fig["lf_contact_mismatch"],
                        "paper: 'very similar'", float("nan")))
        conv, _, _ = dt_convergence(T, cfg)
        for k in ("trunk_pos_mae_mm_x", "trunk_pos_mae_mm_y", "trunk_pos_mae_mm_z", "lf_fz_mae_n"):
            rows.append(Row(f"{mode} dt vs dt/2", k, _unit(k), conv[k],
                            "mujoco difference", fig[k]))
        del wall, ours
    rows += _realtime_rows(T)
    return rows


def _realtime_rows(T: float) -> list[Row]:
    """Simulated seconds per wall second of the whole trot (the paper: 10 s in 300 s)."""
    import mujoco

    from servoloop.core_cy.sim.simulator import SimConfig, Simulator
    from servoloop.experiments.gaits import trot_goals
    from servoloop.experiments.mujoco_twin import MujocoTwin
    from servoloop.experiments.seed002_compare import COMPARISON_DT, default_urdf

    urdf = default_urdf()
    goals = trot_goals(urdf, 1e-3, T)
    sim = Simulator.from_urdf(urdf, SimConfig(dt=COMPARISON_DT))
    sim.reset(goals[0])
    q0 = sim.q.copy()
    fine = np.repeat(goals, int(round(1e-3 / COMPARISON_DT)), axis=0)
    t0 = time.perf_counter()
    sim.run(fine)
    ours = time.perf_counter() - t0
    tw = MujocoTwin(urdf, sim.points, sim.config.servo, dt=1e-3)
    tw.set_state(q0, np.zeros(18))
    t0 = time.perf_counter()
    for g in goals:
        tw.data.ctrl[:] = g
        mujoco.mj_step(tw.model, tw.data)
    mj = time.perf_counter() - t0
    case = f"{T:g}s trot"
    return [Row(case, "realtime_factor", "x", T / ours, "paper simulator (seed 002)", 10 / 300),
            Row(case, "realtime_factor", "x", T / ours, "mujoco 1ms, python loop", T / mj)]


def run(args) -> dict:
    rows = _speed_rows(args)
    if not getattr(args, "no_agreement", False):
        rows += _agreement_rows(args)
    return report("sim", rows)
