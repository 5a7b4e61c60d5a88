"""The compiled base estimator against its NumPy oracle, tick for tick.

``_base_estimator_reference.ReferenceEstimator`` is the estimator as it was before its
per-tick work was compiled.  Both are fed the very same input arrays (IMU registers,
joint readings) and every output must agree to 1e-9 (positions, rpy, velocities), the
contact flags and ``valid`` exactly: over seconds of a lockstep trot (the robot lies,
stands up, then trots: feet touch down and lift off), and over random inputs on both
legged robots (every branch: no foot down, NaN readings, tumbling attitudes).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from servoloop.controller.base_estimator import BaseEstimator
from servoloop.controller.config import ControllerConfig, builtin_config
from servoloop.controller.controllers import BaseState
from servoloop.controller.simulation_config import standing_pose
from tests.unit.controller._base_estimator_reference import ReferenceEstimator

TOL = 1e-9


def _same_summary(a: dict, b: dict) -> None:
    assert a["contact"] == b["contact"] and a["valid"] == b["valid"]
    for key in ("base_position_in_world", "base_rpy", "base_velocity_in_world"):
        assert a[key] == pytest.approx(b[key], abs=TOL), key


class _Compare:
    """Runs the reference after each tick of ``be`` on the same inputs and records the worst gaps."""

    def __init__(self, be: BaseEstimator, cfg, dt: float):
        self.be = be
        self.ref = ReferenceEstimator(cfg, BaseState(), be.position, be.velocity, dt)
        self.worst = 0.0
        self.ticks = self.contact_changes = self.invalid = 0
        self.no_foot_down = 0
        self._last = None

    def check(self, ok: bool, elapsed: float = 0.0) -> None:
        be, ref = self.be, self.ref
        if ref.gyro is None and be.gyro is not None:
            ref.bind(be.gyro, be.accel, be.rpy)
        assert ref.run(elapsed) == ok
        a, b = be.base, ref.base
        assert a.valid == b.valid
        assert np.array_equal(a.contact, b.contact), (self.ticks, a.contact, b.contact)
        assert np.array_equal(be.telemetry[12:], ref.telemetry[12:], equal_nan=True)       # valid + contact columns
        pairs = [(a.position, b.position), (a.quaternion, b.quaternion),
                 (a.linear_velocity, b.linear_velocity), (a.angular_velocity, b.angular_velocity),
                 (be.telemetry[:12], ref.telemetry[:12]), (be.p, ref.p), (be.v, ref.v),
                 (be.P, ref.P)]
        for x, y in pairs:
            gap = float(np.max(np.abs(np.subtract(x, y)))) if np.all(np.isfinite(y)) else 0.0
            assert np.array_equal(np.isfinite(x), np.isfinite(y))
            assert gap <= TOL, (self.ticks, x, y)
            self.worst = max(self.worst, gap)
        _same_summary(be.summary(), ref.summary())
        self.ticks += 1
        self.invalid += not ok
        self.no_foot_down += ok and not a.contact.any()
        if self._last is not None and not np.array_equal(self._last, a.contact):
            self.contact_changes += 1
        self._last = a.contact.copy()


def test_a_lockstep_trot_gives_the_same_estimate_tick_for_tick():
    from servoloop.controller.daemon import Daemon
    from servoloop.controller.runtime import make_lockstep

    cfg = builtin_config("quadruped")
    cfg = replace(cfg, controller=ControllerConfig(name="trot", params={}))
    lock = make_lockstep(cfg)
    try:
        daemon = Daemon(cfg, lock.bus, lock.clock, telemetry_path=None, socket_path=None)
        be = daemon.loop.base_estimator
        cmp = _Compare(be, cfg, be.dt)
        run = be.run

        def run_both(elapsed_s=0.0):
            ok = run(elapsed_s)
            cmp.check(ok, elapsed_s)       # the loop's deadlines' difference (< MAX_STEP_S)
            return ok

        be.run = run_both
        summary = daemon.run(cfg.startup.ramp_s + 1.5)        # lie, stand up, 1.5 s of trot
    finally:
        lock.close()
    assert summary["state"] == "done"
    assert cmp.ticks > 4000 and cmp.contact_changes > 10 and cmp.no_foot_down > 0
    _same_summary(summary["estimate"], cmp.ref.summary())


def _standing(robot):
    """The compiled estimator and its oracle on ``robot`` standing still: (cfg, q0, q, dq,
    gyro, acc, rpy, dt, be, cmp); the inputs are the arrays the estimator is bound to."""
    cfg = builtin_config(robot)
    pose = standing_pose(cfg)
    q0 = np.array([float(pose.get(j, 0.0)) for j in cfg.joint_names])
    q, dq = q0.copy(), np.zeros(cfg.n)
    gyro, acc, rpy = np.zeros(3), np.array([0.0, 0.0, 9.81]), np.zeros(3)
    dt = 1.0 / cfg.loop.rate_hz
    be = BaseEstimator(cfg, BaseState(), q, dq, dt)
    be.bind(gyro, acc, rpy)
    return cfg, q0, q, dq, gyro, acc, rpy, dt, be, _Compare(be, cfg, dt)


@pytest.mark.parametrize("robot", ["quadruped", "humanoid"])
def test_random_inputs_give_the_same_estimate(robot):
    cfg, q0, q, dq, gyro, acc, rpy, dt, be, cmp = _standing(robot)
    from servoloop.virtual_bus.robot_plant import make_plant

    plant = make_plant([(sv.id, sv.model) for sv in cfg.servos], robot)     # as it lies at power-up
    names = list(plant.sim.model.actuated_joint_names)
    lying = plant.sim.q[plant.sim.model.nq - plant.sim.n_joints:]
    q_lying = np.array([lying[names.index(j)] for j in cfg.joint_names])
    rng = np.random.default_rng(7)
    airborne = rest_changes = 0
    for k in range(1800):
        # standing still, moving legs, tumbling, legs folded up, standing, and (issue 11) legs
        # folded up again through falls (~0 g), impacts (~3 g) and calm spells (the rest gate)
        phase = k // 300
        dq[:] = rng.normal(0, 0.5 if phase in (1, 2) else 0.01, cfg.n)
        q[:] = q0 + (rng.normal(0, 0.3, cfg.n) if phase in (1, 2) else 0.0) + (1.5 if phase == 3 else 0.0)
        if phase == 5:
            q[:] = q_lying + rng.normal(0, 0.001, cfg.n)
        gyro[:] = rng.normal(0, 2.0 if phase == 2 else 0.02, 3)
        g = (0.0, 3.0, 1.0, 1.0)[(k // 15) % 4] if phase == 5 else 1.0
        acc[:] = (0.0, 0.0, 9.81 * g) + rng.normal(0, 3.0 if phase == 2 else 0.1, 3)
        rpy[:] = rng.uniform(-3, 3, 3) if phase == 2 else rng.normal(0, 0.01, 3)
        if k % 97 == 5:
            (gyro if k % 2 else q)[k % 3] = np.nan            # a failed read: the tick is invalid
        was = be.resting
        cmp.check(be.run())
        assert be.resting == cmp.ref.resting and be.airborne == cmp.ref.airborne
        airborne += be.airborne
        rest_changes += be.resting != was
    assert cmp.invalid > 10 and cmp.contact_changes > 5 and cmp.no_foot_down > 0
    if robot == "quadruped":      # it lies on its trunk with the legs folded
        assert airborne > 50 and rest_changes > 4, (airborne, rest_changes)


def test_ticks_of_any_length_give_the_same_estimate():
    """A skipped or stale tick leaves 2+ periods between estimates (``run(elapsed_s)``): the
    kernel integrates, propagates the attitude, rolls the anchors and filters the stance
    heights over that time as the oracle does; a step is never longer than ``MAX_STEP_S``."""
    from servoloop.controller.base_estimator import MAX_STEP_S

    cfg, q0, q, dq, gyro, acc, rpy, dt, be, cmp = _standing("quadruped")
    rng = np.random.default_rng(3)
    moved = 0.0
    for k in range(600):
        dq[:] = rng.normal(0, 0.3, cfg.n)
        q[:] = q0 + rng.normal(0, 0.05, cfg.n)
        gyro[:] = rng.normal(0, 0.2, 3)
        acc[:] = (0.5, 0.0, 9.81) + rng.normal(0, 0.3, 3)
        rpy[:] = rng.normal(0, 0.01, 3)
        elapsed = dt * int(rng.integers(1, 5)) if k % 3 else 0.0
        cmp.check(be.run(elapsed), elapsed)
        moved = max(moved, abs(be.p[0]))
    assert cmp.ticks == 600 and moved > 0.01
    # the step is capped: a 1 s gap moves the estimate as MAX_STEP_S does
    a = BaseEstimator(cfg, BaseState(), q, dq, dt)
    b = BaseEstimator(cfg, BaseState(), q, dq, dt)
    for e in (a, b):
        e.bind(gyro, acc, rpy)
        e.run()
    a.run(1.0)
    b.run(MAX_STEP_S)
    assert np.array_equal(a.p, b.p) and np.array_equal(a.v, b.v)
    c = BaseEstimator(cfg, BaseState(), q, dq, dt)
    c.bind(gyro, acc, rpy)
    c.run()
    c.run(dt)
    assert not np.array_equal(c.p, b.p)
