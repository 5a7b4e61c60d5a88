"""``servoloop bench estimator``: CPU time of the base estimator per tick vs the tick period.

The estimate stage's floating-base half (:class:`controller.base_estimator.BaseEstimator`:
attitude filter, FK with body velocities, feet and contacts, Kalman filter; one compiled
call, :mod:`controller._base_estimator`) on each built-in legged robot, standing in its config pose with a level IMU reading
gravity (the work per tick does not depend on the values).  Ratio = share of the
loop's period at the robot's ``loop.rate_hz`` (the quadruped runs at 1 kHz).
Clock: CPU time of this thread (``time.thread_time``), best of ``--repeats`` blocks.
"""

from __future__ import annotations

import time

import numpy as np

from servoloop.bench.common import Row, report

__all__ = ["add_arguments", "run", "ROBOTS"]

ROBOTS = ("quadruped", "humanoid")


def add_arguments(parser) -> None:
    parser.add_argument("--number", type=int, default=2000, help="ticks per timed block")
    parser.add_argument("--repeats", type=int, default=7, help="timed blocks, best kept")


def _estimator(name: str):
    from servoloop.controller.base_estimator import BaseEstimator
    from servoloop.controller.config import builtin_config
    from servoloop.controller.controllers import BaseState

    cfg = builtin_config(name)
    from servoloop.controller.simulation_config import standing_pose

    pose = standing_pose(cfg)
    q = np.array([float(pose.get(j, 0.0)) for j in cfg.joint_names])
    be = BaseEstimator(cfg, BaseState(), q, np.zeros(cfg.n), 1.0 / cfg.loop.rate_hz)
    be.bind(np.zeros(3), np.array([0.0, 0.0, 9.81]), np.zeros(3))
    be.run()                                  # the first tick starts the filter
    return be, cfg.loop.rate_hz


def run(args) -> dict:
    rows = []
    for name in ROBOTS:
        be, rate = _estimator(name)
        best = float("inf")
        for _ in range(args.repeats):
            t0 = time.thread_time()
            for _ in range(args.number):
                be.run()
            best = min(best, (time.thread_time() - t0) / args.number)
        rows.append(Row(f"{name} base_estimator", "us_per_tick", "us", best * 1e6,
                        f"tick period at {rate:g} Hz", 1e6 / rate))
    return report("estimator", rows)
