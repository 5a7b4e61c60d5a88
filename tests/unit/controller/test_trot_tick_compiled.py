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


@pytest.mark.parametrize("ground_z", ["default", None])
def test_tick_matches_the_numpy_planner_on_perturbed_states(ground_z):
    # default: every swing lands at the standing feet's mean height; None: each at its foot's
    # lift-off height
    ctrl, r, q0 = _standing()
    new, ref = _pair(r, q0, ctrl.posture)
    if ground_z is None:
        new.ground_z = ref.ground_z = None
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


def _swing_ends(new, q, t0: float, dt: float = 1e-3):
    """Per foot, the swing reference at its lift-off tick and on its last swing tick
    (feet, 3) each, and the lift-off points, over one gait cycle from ``t0`` [s] at the
    fixed state ``q``."""
    nf = len(new.robot.feet)
    first, last = np.full((nf, 3), np.nan), np.full((nf, 3), np.nan)
    prev = new.targets.stance.copy()
    for k in range(int(round(new.gait.period / dt)) + 2):
        tg = new.update(t0 + k * dt, q, None)
        lift = prev & ~tg.stance
        first[lift] = tg.swing_position[lift]
        going = ~tg.stance
        last[going] = tg.swing_position[going]
        prev = tg.stance.copy()
    return first, last, new.liftoff.copy()


def test_ground_z_none_lands_each_swing_at_its_own_lift_off_height():
    # a diagonal pair standing 2.5 mm lower than the other (ground under it softer, say);
    # at the default (the standing feet's mean height) the lower pair would be planned to
    # land 1.25 mm up and the higher one 1.25 mm down
    ctrl, r, q0 = _standing()
    new = TrotPlanner(r, q0, ctrl.posture, TrotGait(), height=0.24, stand_time=0.0)
    new.ground_z = None
    r.kinematics(q0)
    feet = np.array([r.foot_position(f) for f in r.feet])
    # lower a diagonal: the base's roll and pitch stay, the feet of pair 0.25 drop 2.5 mm
    q = q0.copy()
    q[2] -= 0.0025
    lowered = new.gait.touchdown == 0.25
    assert lowered.sum() == 2
    first, last, liftoff = _swing_ends(new, _feet_at(r, q0, q, ~lowered), 0.0)
    assert np.ptp(liftoff[:, 2]) == pytest.approx(0.0025, abs=2e-4), liftoff[:, 2] - feet[:, 2]
    # the spline starts where the foot stands ...
    assert np.allclose(first, liftoff, rtol=0.0, atol=1e-12)
    # ... and comes down to that height: on its last tick (u = 1 - 1 ms / 75 ms) on the
    # slow final descent, LAND_DEPTH (1 mm) * (1 - u) / LAND_FRACTION = 67 um above it
    above = last[:, 2] - liftoff[:, 2]
    assert np.all((above > 0.0) & (above < 1e-4)), above


@pytest.mark.parametrize("ground_z", [None, 0.001])
def test_a_set_ground_height_is_where_every_swing_lands(ground_z):
    # the default (None here: keep the standing feet's mean at the start) and seed 003's
    # surface (SURFACE_TOUCHDOWN sets 0.0); the feet's own heights do not move it
    ctrl, r, q0 = _standing()
    new = TrotPlanner(r, q0, ctrl.posture, TrotGait(), height=0.24, stand_time=0.0)
    r.kinematics(q0)
    mean = float(np.mean([r.foot_position(f)[2] for f in r.feet]))
    assert new.ground_z == pytest.approx(mean, abs=1e-15)
    if ground_z is not None:
        new.ground_z = ground_z
    gz = new.ground_z
    q = q0.copy()
    q[2] -= 0.0025
    first, last, liftoff = _swing_ends(new, _feet_at(r, q0, q, new.gait.touchdown != 0.25), 0.0)
    assert np.ptp(liftoff[:, 2]) > 0.002
    assert np.allclose(first[:, 2], gz, rtol=0.0, atol=1e-12)
    assert np.all((last[:, 2] - gz > 0.0) & (last[:, 2] - gz < 1e-4)), last[:, 2] - gz


def _feet_at(r, q0, q, keep):
    """``q`` (the base moved) with the legs of the feet ``keep`` (feet,) bool bent back to
    where they stood at ``q0`` (position IK, a few Newton steps)."""
    r.kinematics(q0)
    goal = np.array([r.foot_position(f) for f in r.feet])
    q = q.copy()
    for i, f in enumerate(r.feet):
        if not keep[i]:
            continue
        for _ in range(8):
            r.kinematics(q)
            J = r.point_jacobian(q, f.body, f.center, f.radius)
            cols = np.flatnonzero(np.abs(J[:, 6:]).sum(axis=0) > 1e-12)
            q[7 + cols] += np.linalg.lstsq(J[:, 6 + cols], goal[i] - r.foot_position(f),
                                           rcond=None)[0]
    return q
