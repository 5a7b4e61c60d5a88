"""``servoloop bench balance``: CPU time of the whole-body tick (``wbc``, ``trot``) vs the period.

The quadruped's ``wbc`` (standing) and ``trot`` (0.2 m/s) drive the contact
simulator in process for ``--seconds`` (true base state, torque-driven joints,
as tests/unit/controller/test_wbc.py); the states and targets the balance core
saw are recorded, then replayed: the balance step (:meth:`BalanceCore.step`:
task rows, normal equations, contact inverse dynamics, torques) and, for
``trot``, the planner's tick (:meth:`TrotPlanner.update` with the force split's
lift-off weights, what ``trot`` adds to ``wbc``'s targets each tick).  Ratio = share of
the 1 kHz loop's period.  Clock: CPU time of this thread (``time.thread_time``),
best of ``--repeats`` passes over the recording.
"""

from __future__ import annotations

import time

import numpy as np

from servoloop.bench.common import Row, report

__all__ = ["add_arguments", "run"]

CASES = (("wbc", {}), ("trot", {"speed_mps": 0.2}))


def add_arguments(parser) -> None:
    parser.add_argument("--seconds", type=float, default=1.0, help="simulated seconds recorded")
    parser.add_argument("--repeats", type=int, default=5, help="passes over the recording, best kept")


def _record(controller: str, params: dict, seconds: float):
    """(controller, [(q, v, targets copy)]) of ``seconds`` of the quadruped in the simulator."""
    from servoloop.controller.config import builtin_config
    from servoloop.controller.controllers import (
        Command,
        ControllerContext,
        JointState,
        make_controller,
    )
    from servoloop.controller.wholebody.balance import Targets
    from servoloop.core_cy.sim.simulator import SimConfig
    from servoloop.experiments.closed_loop import TorquePlant, builtin_urdf

    cfg = builtin_config("quadruped")
    ctx = ControllerContext.from_config(cfg)
    ctrl = make_controller(controller, ctx, params)
    idx = ctrl.robot.idx
    q0 = np.zeros(ctrl.robot.na)
    q0[idx] = ctrl._default_posture()
    plant = TorquePlant(builtin_urdf("quadruped"), SimConfig(mode="rigid", dt=ctx.dt), q0)
    state, cmd = JointState.zeros(ctx.n), Command.zeros(ctx.n)
    ctrl.start(state)
    ticks, core = [], None
    for k in range(1, round(seconds / ctx.dt) + 1):
        state.position[:] = plant.q[7:][idx]
        state.velocity[:] = plant.v[6:][idx]
        state.base = plant.base_state()
        if core is None and ctrl.running:
            core = ctrl.core
            step = core.step

            def recording(q, v, tg, step=step):
                ticks.append((np.array(q), np.array(v),
                              Targets(*(np.array(getattr(tg, f)) for f in Targets.__dataclass_fields__))))
                return step(q, v, tg)

            core.step = recording
        ctrl.update(k * ctx.dt, state, cmd)
        tau = np.zeros(ctrl.robot.na)
        tau[idx] = cmd.effort
        plant.step(tau)
    if core is not None:
        del core.step                       # the bound method again
    return ctrl, ticks


def _best(fn, items, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.thread_time()
        for it in items:
            fn(*it)
        best = min(best, (time.thread_time() - t0) / len(items))
    return best


def run(args) -> dict:
    rows = []
    period_us = 1e3
    for name, params in CASES:
        ctrl, ticks = _record(name, params, args.seconds)
        us = _best(ctrl.core.step, ticks, args.repeats) * 1e6
        rows.append(Row(f"quadruped {name} balance step", "us_per_tick", "us", us,
                        "tick period at 1000 Hz", period_us))
        if name == "trot":
            dt = ctrl.ctx.dt
            t0 = ctrl.planner._t_prev or 0.0
            weights = np.ones(len(ctrl.robot.feet))
            steps = [(t0 + (i + 1) * dt, q, v, weights, dt) for i, (q, v, _) in enumerate(ticks)]
            us = _best(ctrl.planner.update, steps, 1) * 1e6
            rows.append(Row("quadruped trot planner tick", "us_per_tick", "us", us,
                            "tick period at 1000 Hz", period_us))
    return report("balance", rows)
