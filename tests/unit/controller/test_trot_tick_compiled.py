"""The trot planner's compiled tick (:meth:`_gait.TrotKernel.tick`) against its NumPy oracle.

``TrotPlanner.update`` is one compiled call (issue 11): the speed slew, the base
reference and its lead limit, the swing progress, the lift-off points (forward
kinematics at C level), the splines and the force split's lift-off weights.  The
oracle is the NumPy planner (``_trot_reference.py``) with
:func:`force_split.liftoff_weights`; here both are driven through the same
perturbed states, speed changes and clock steps, tick by tick.  The closed-loop
comparison (2 s of trot in the simulator) is in test_balance_compiled.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from servoloop.controller.config import builtin_config
from servoloop.controller.controllers import ControllerContext, make_controller
from servoloop.controller.wholebody._gait import TrotKernel
from servoloop.controller.wholebody.force_split import liftoff_weights
from servoloop.controller.wholebody.gait import TrotGait
from servoloop.controller.wholebody.trot_planner import TrotPlanner
from tests.unit.controller._trot_reference import ReferenceTrotPlanner

FIELDS = ("base_position", "base_velocity", "stance", "swing_position", "swing_velocity",
          "swing_acceleration")


def _standing():
    ctrl = make_controller("trot", ControllerContext.from_config(builtin_config("quadruped")), {})
    r = ctrl.robot
    q0 = r.model.neutral().copy()
    q0[r.q_joints] = ctrl._default_posture()
    q0[2] = 0.25
    return ctrl, r, q0


def _pair(r, q0, posture, **kw):
    new = TrotPlanner(r, q0, posture, TrotGait(), height=0.24, **kw)
    ref = ReferenceTrotPlanner(r, q0, posture, TrotGait(), height=0.24, **kw)
    return new, ref


def _perturbed(q0, rng, lead: float):
    """q0 with the base moved by up to ``lead`` [m], tilted a little, and the joints bent."""
    q = q0.copy()
    q[:2] += rng.uniform(-lead, lead, 2)
    q[2] += rng.uniform(-0.01, 0.01)
    quat = np.r_[rng.normal(0.0, 0.03, 3), 1.0]
    q[3:7] = quat / np.linalg.norm(quat)
    q[7:] += rng.normal(0.0, 0.05, q.size - 7)
    return q


def test_tick_matches_the_numpy_planner_on_perturbed_states():
    ctrl, r, q0 = _standing()
    new, ref = _pair(r, q0, ctrl.posture)
    rng = np.random.default_rng(11)
    dt = 1e-3
    weights = np.zeros(len(r.feet))
    t, lifts, weighted, leads = 0.0, 0, 0, 0
    for k in range(1500):                    # the stand, then four gait cycles
        if k % 200 == 0:
            new.speed_goal = ref.speed_goal = float(rng.uniform(-0.5, 0.5))
        # a late tick now and then, and a clock that steps back (dt clamped to 0)
        t += dt * (3.0 if k % 97 == 0 else (-0.5 if k % 331 == 0 else 1.0))
        q = _perturbed(q0, rng, 0.06 if k % 50 == 0 else 0.005)
        prev = ref._prev_stance.copy()
        a = ref.update(t, q.copy(), None)
        w_ref = liftoff_weights(ref.gait, t - ref.stand_time, a.stance, dt)
        b = new.update(t, q, None, weights, dt)
        for f in FIELDS:
            x, y = getattr(a, f), getattr(b, f)
            assert np.allclose(x, y, rtol=0.0, atol=1e-12 * max(1.0, np.abs(x).max())), (k, f)
        assert np.allclose(new.liftoff, ref.liftoff, rtol=0.0, atol=1e-12), k
        assert new.speed == pytest.approx(ref.speed, abs=1e-15)
        assert np.array_equal(weights, w_ref), (k, weights, w_ref)
        assert np.array_equal(new._prev_stance, ref._prev_stance)
        lifts += int(np.any(prev & ~a.stance))
        weighted += int((w_ref > 1.0).any())
        leads += int(np.hypot(*(a.base_position[:2] - q[:2])) >= ref.max_lead - 1e-12)
    # the cases were reached: lift-offs (the kinematics path), unloading weights, the lead limit
    assert lifts >= 8 and weighted > 100 and leads > 10


def test_tick_without_weights_leaves_the_split_alone_and_skips_the_stand():
    ctrl, r, q0 = _standing()
    new, ref = _pair(r, q0, ctrl.posture, stand_time=0.3)
    new.targets.stance[:] = False
    b = new.update(0.1, q0, None)            # standing: every foot down, no lift-off yet
    assert b.stance.all() and np.array_equal(new.liftoff, ref.liftoff)
    sentinel = np.full(len(r.feet), 7.0)
    new.update(0.101, q0, None, sentinel, 1e-3)
    assert np.array_equal(sentinel, liftoff_weights(new.gait, 0.101 - 0.3, b.stance, 1e-3))


def test_tick_follows_a_replaced_targets_array():
    ctrl, r, q0 = _standing()
    new, _ = _pair(r, q0, ctrl.posture, stand_time=0.0)
    fresh = np.zeros((len(r.feet), 3))
    new.targets.swing_position = fresh
    new.update(0.01, q0, None)               # 10 ms into the first swing of two feet
    assert (~new.targets.stance).sum() == 2
    assert np.all(fresh[~new.targets.stance, 2] > new.ground_z)


def test_tick_refuses_wrong_buffers_naming_them():
    ctrl, r, q0 = _standing()
    new, _ = _pair(r, q0, ctrl.posture)
    with pytest.raises(ValueError, match=r"TrotKernel.tick: expected q \(19,\)"):
        new.update(0.5, q0[:10], None)
    with pytest.raises(ValueError, match=r"TrotKernel.tick: expected weights \(4,\)"):
        new.update(0.5, q0, None, np.zeros(3), 1e-3)
    new.update(0.5, q0, None, np.zeros(4), 1e-3)        # good buffers bind after a bad one
    k = TrotKernel(new.gait.touchdown, new.offset, new.liftoff, new._prev_stance, new.targets)
    with pytest.raises(ValueError, match="made without a robot"):
        k.tick(0.5, None, q0, 0.0, 0.0, 0.5, 0.03, 0.3, 0.3, 0.75, 0.015, 0.0)
