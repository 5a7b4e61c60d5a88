"""The compiled balance tick (:mod:`controller.wholebody._balance`) against its NumPy oracle.

``wbc`` and ``trot`` drive the simulator over seconds (the rig of test_wbc.py,
true base state); every tick the oracle (``_balance_reference.py``, the
NumPy ``BalanceCore`` before issue 11) is given the same state and targets
as the compiled core, on its own model data, and the two must agree to
rounding: torques, accelerations and contact forces within 1e-9 relative.
"""

from __future__ import annotations

import numpy as np
import pytest

from servoloop.controller.config import builtin_config
from servoloop.controller.wholebody.balance import BalanceCore, Targets
from servoloop.controller.wholebody.force_split import liftoff_weights
from servoloop.controller.wholebody.robot import WholeBodyRobot
from servoloop.core_cy.sim.simulator import SimConfig
from tests.unit.controller._balance_reference import ReferenceBalanceCore
from tests.unit.controller._trot_reference import ReferenceTrotPlanner
from tests.unit.controller.test_wbc import Rig

REL = 1e-9


def _close(a, b) -> float:
    """max |a - b| relative to max |b| (at least 1)."""
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b)), initial=0.0)
                 / max(1.0, float(np.max(np.abs(b), initial=0.0))))


class Twin:
    """Runs the oracle next to a controller's compiled core, tick by tick."""

    def __init__(self, ctrl):
        core, r = ctrl.core, ctrl.robot
        robot = WholeBodyRobot(r.model, r.contacts, r.joint_names, [f.link for f in r.feet],
                               r.armature[r.idx])
        self.ref = ReferenceBalanceCore(robot, core.dt, core.variant, core.mu, core.gains, core.plane)
        self.ref.coulomb_split = core.coulomb_split     # the controller's load_split
        self.ref.sole[:] = core.sole                     # its feet's soles (set_soles)
        self.core = core
        self.step = core.step
        self.ticks = self.swing_ticks = self.lifting_weights = 0
        self.worst = {"tau": 0.0, "qdd": 0.0, "forces": 0.0}
        core.step = self

    def __call__(self, q, v, tg):
        self.ref.variant, self.ref.mu = self.core.variant, self.core.mu
        self.ref.liftoff_weights[:] = self.core.liftoff_weights
        qr, vr = np.array(q), np.array(v)
        tgr = Targets(*(np.array(getattr(tg, k)) for k in Targets.__dataclass_fields__))
        tau_ref = self.ref.step(qr, vr, tgr).copy()
        tau = self.step(q, v, tg)
        self.ticks += 1
        self.lifting_weights += int((self.core.liftoff_weights > 1.0).any())
        self.swing_ticks += int(not np.all(tg.stance))
        for key, a, b in (("tau", tau, tau_ref), ("qdd", self.core.qdd, self.ref.qdd),
                          ("forces", self.core.forces, self.ref.forces)):
            self.worst[key] = max(self.worst[key], _close(a, b))
        assert _close(tau, tau_ref) <= REL, (self.ticks, tau, tau_ref)
        assert self.core.failures == self.ref.failures, (self.ticks, self.core.last_error, self.ref.last_error)
        return tau


@pytest.mark.parametrize("controller, params", [("wbc", {}), ("wbc", {"load_split": True}),
                                                ("trot", {"speed_mps": 0.2})])
def test_compiled_tick_matches_the_numpy_oracle_on_the_quadruped(controller, params):
    rig = Rig("quadruped", controller, params)
    rig.run(0.01)                                  # the run begins: the core exists
    twin = Twin(rig.ctrl)
    rig.run(2.0)
    assert twin.ticks == 2000
    if controller == "trot":
        assert twin.swing_ticks > 800               # the swing rows were exercised
        assert rig.plant.q[0] > 0.1                 # and it trotted forward
        assert rig.ctrl.core.splits > 100           # the Coulomb answer's split was compared
    else:
        assert abs(rig.plant.q[2] - rig.z0) < 0.005
        assert (rig.ctrl.core.splits > 1000) is bool(params.get("load_split"))
    assert max(twin.worst.values()) <= REL, twin.worst


def test_compiled_tick_matches_the_numpy_oracle_on_the_humanoid():
    pose = builtin_config("humanoid").startup.via[-1]
    rig = Rig("humanoid", "wbc", {"posture": pose}, sim=SimConfig(mode="rigid", dt=1e-3),
              drive="offset", servo="AX-18A")
    rig.run(0.05)
    twin = Twin(rig.ctrl)
    rig.run(0.5)
    rig.plant.push((0.3, 0.0, 0.0))
    rig.run(1.5)
    assert twin.ticks == 400                       # 2 s at 200 Hz
    assert max(twin.worst.values()) <= REL, twin.worst


@pytest.mark.parametrize("variant", ["qp", "lcp_noslip"])
def test_other_id_variants_match_the_oracle(variant):
    rig = Rig("quadruped", "trot", {"speed_mps": 0.1, "variant": variant})
    rig.run(0.01)
    twin = Twin(rig.ctrl)
    rig.run(1.0)
    assert twin.swing_ticks > 300
    if variant == "lcp_noslip":     # the split ran and was compared
        assert rig.ctrl.core.splits > 500
        assert twin.lifting_weights > 50       # ticks with a foot unloading before lift-off
    assert max(twin.worst.values()) <= REL, twin.worst


def test_a_nan_state_takes_the_least_squares_path_as_the_oracle():
    rig = Rig("quadruped", "wbc")
    rig.run(0.01)
    core = rig.ctrl.core
    q = np.array(rig.plant.q)
    v = np.array(rig.plant.v)
    v[7] = np.nan
    tg = rig.ctrl.targets
    twin = Twin(rig.ctrl)
    twin.ref.step(np.array(q), np.array(v), tg)
    qdd_ref = twin.ref.qdd.copy()
    qdd = core.accelerations(q, v, tg)
    assert np.array_equal(np.isnan(qdd), np.isnan(qdd_ref))


def test_the_kernel_names_mismatched_shapes():
    rig = Rig("quadruped", "wbc")
    rig.run(0.01)
    core, tg = rig.ctrl.core, rig.ctrl.targets
    with pytest.raises(ValueError, match="BalanceKernel.accelerations: expected q"):
        core.accelerations(np.zeros(5), np.zeros(core.robot.model.nv), tg)
    assert isinstance(core, BalanceCore)


def test_compiled_trot_references_match_the_numpy_planner():
    rig = Rig("quadruped", "trot", {"speed_mps": 0.3})
    rig.run(0.01)
    ctrl = rig.ctrl
    new = ctrl.planner
    ref = ReferenceTrotPlanner(ctrl.robot, rig.plant.q.copy(), ctrl.posture, new.gait,
                               height=new.targets.base_position[2], accel=new.accel)
    ref.__dict__.update({k: np.array(v) if isinstance(v, np.ndarray) else v
                         for k, v in new.__dict__.items() if k not in ("targets", "gait", "robot")})
    ref.targets = Targets(*(np.array(getattr(new.targets, k)) for k in Targets.__dataclass_fields__))
    update = new.update
    seen = {"ticks": 0, "lifts": 0, "weighted": 0}

    def twin(t, q, v, weights=None, dt=0.0):
        prev = ref._prev_stance.copy()
        a = ref.update(t, np.array(q), np.array(v))
        b = update(t, q, v, weights, dt)
        if weights is not None:      # the split's lift-off weights, written by the same tick
            w = liftoff_weights(ref.gait, t - ref.stand_time, a.stance, dt)
            assert np.array_equal(weights, w), (t, weights, w)
            seen["weighted"] += int((w > 1.0).any())
        seen["ticks"] += 1
        seen["lifts"] += int(np.any(prev & ~a.stance))
        assert np.array_equal(a.stance, b.stance)
        for k in ("base_position", "base_velocity", "swing_position", "swing_velocity",
                  "swing_acceleration"):
            ak, bk = getattr(a, k), getattr(b, k)
            assert np.max(np.abs(ak - bk)) <= 1e-12 * max(1.0, np.max(np.abs(ak))), k
        assert new.speed == pytest.approx(ref.speed, abs=1e-15)
        return b

    new.update = twin
    rig.run(2.0)
    assert seen["ticks"] == 2000 and seen["lifts"] > 10     # many lift-offs, 0.3 m/s reached
    assert seen["weighted"] > 100                            # feet unloaded before lifting
    assert rig.plant.q[0] > 0.2


def test_bench_balance_replays_the_recorded_ticks():
    import argparse

    from servoloop.bench.balance import run

    rep = run(argparse.Namespace(seconds=0.5, repeats=1))
    cases = [r["case"] for r in rep["rows"]]
    assert cases == ["quadruped wbc balance step", "quadruped trot balance step",
                     "quadruped trot planner tick"]
    assert all(r["ours"] > 0 and r["anchor"] == 1000.0 for r in rep["rows"])


def test_swing_posture_lets_the_swing_task_have_its_acceleration():
    # issue 11: with the posture at w_posture in a swing leg, J qdd of the swing foot was
    # ~0.67 of the swing task's acceleration; counted in the foot's metres the posture
    # yields where they conflict (Gains.swing_posture, on in trot), and the oracle agrees
    rig = Rig("quadruped", "trot", {"speed_mps": 0.1})
    seen = []

    def probe(r):
        tg, core = r.ctrl.targets, r.ctrl.core
        if tg is None or tg.stance.all():
            return
        q, v = np.array(r.plant.q), np.array(r.plant.v)
        robot, g = core.robot, core.gains
        shares = {}
        for on in (False, True):
            g.swing_posture = on
            qdd = core.accelerations(q, v, tg).copy()
            for i in np.flatnonzero(~tg.stance):
                f = robot.feet[i]
                robot.kinematics(q)
                J = robot.point_jacobian(q, f.body, f.center, f.radius)
                a = (tg.swing_acceleration[i] + g.swing_kp * (tg.swing_position[i] - robot.foot_position(f))
                     + g.swing_kd * (tg.swing_velocity[i] - J @ v))
                if np.linalg.norm(a) > 5.0:            # a swing task that asks something
                    shares.setdefault(on, []).append(float((J @ qdd) @ a / (a @ a)))
        g.swing_posture = True
        if shares:
            seen.append((np.mean(shares[False]), np.mean(shares[True])))

    rig.run(1.5, every=lambda r: probe(r) if r.k % 10 == 0 else None)
    assert rig.ctrl.core.gains.swing_posture                     # trot turns it on
    off, on = np.array(seen).T
    assert len(seen) > 20
    # measured: off min 0.66, 10th percentile 0.71, median 0.95; on min 0.98, median 0.997
    assert np.percentile(off, 10) < 0.8          # the posture took a fifth and more of it
    assert on.min() > 0.97 and np.median(on) > np.median(off)
