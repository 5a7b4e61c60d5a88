"""The no-slip split (``controller/wholebody/force_split.py``) and its use by ``wbc`` / ``trot``.

One-call properties of :func:`split_forces` on the quadruped's real contact Jacobians
(the base wrench kept, pushing only, the weights move the load), the lift-off weights
against the gait's own schedule, and the ``mu = inf`` / ``lcp_coulomb`` param check.
"""

from __future__ import annotations

import numpy as np
import pytest

from servoloop.controller.controllers import make_controller
from servoloop.controller.errors import ControllerParamError
from servoloop.controller.wholebody.force_split import (
    LIFTOFF_HORIZON_S,
    LIFTOFF_WEIGHT_MAX,
    cone_step,
    liftoff_weights,
    split_forces,
)
from servoloop.controller.wholebody.gait import TrotGait
from tests.unit.controller.test_wbc import Rig


@pytest.fixture(scope="module")
def stand():
    """The quadruped standing under ``wbc`` (lcp_noslip): its state, four-foot rows, the ID's
    forces (before the split: the no-slip answer as Alg. 2 gives it)."""
    rig = Rig("quadruped", "wbc", {"variant": "lcp_noslip", "mu": "inf"})
    rig.ctrl.core.noslip_split = False
    rig.run(0.3)
    core = rig.ctrl.core
    q = np.array(rig.plant.q)
    r = core.robot
    r.kinematics(q)
    J = np.vstack([r.point_jacobian(q, f.body, p, f.radius) for f in r.feet for p in f.points])
    return J, np.array(core.forces), np.ones(len(J) // 3)


def test_alg2_leaves_a_foot_unloaded_and_the_split_shares_it_keeping_the_wrench(stand):
    J, forces, w = stand
    assert forces.shape == (4, 3) and forces[:, 2].min() < 0.02 * forces[:, 2].sum()
    new, delta = split_forces(J, forces, w)
    np.testing.assert_allclose(new - forces, delta)
    wrench = J[:, :6].T @ forces.reshape(-1)
    np.testing.assert_allclose(J[:, :6].T @ new.reshape(-1), wrench, atol=1e-9 * np.abs(wrench).max())
    share = new[:, 2] / new[:, 2].sum()
    assert share.min() > 0.15                       # every foot loaded
    # least norm: no member of the family (the ID's own, half way to it) is smaller
    for f in (forces, 0.5 * (forces + new)):
        assert (new ** 2).sum() <= (f ** 2).sum() + 1e-9


def test_a_heavy_weight_unloads_that_foot_and_pulling_is_never_asked(stand):
    J, forces, _ = stand
    w = np.ones(4)
    w[0] = LIFTOFF_WEIGHT_MAX
    new, _ = split_forces(J, forces, w)
    assert new[0, 2] < 0.01 * new[:, 2].sum()        # its load went to the others
    assert new[:, 2].min() >= 0.0
    # an upward base wrench (a pull on the ground) has no pushing split: the ID's own answer
    down = -forces
    kept, delta = split_forces(J, down, np.ones(4))
    assert not delta.any() and np.array_equal(kept, down)


def test_liftoff_weights_follow_the_gait_schedule():
    g = TrotGait()
    g.touchdown = np.array([0.25, 0.75, 0.75, 0.25])        # lf, rf, lh, rh: lift at 0 / 0.15 s
    dt = 1e-3
    for t in np.arange(-0.05, 0.6, dt):
        stance = g.stance(t) if t >= 0 else np.ones(4, bool)
        w = liftoff_weights(g, t, stance, dt)
        nxt = g.stance(t + dt + 1e-9)
        for i in range(4):
            # the tick time left to this foot's lift-off, from the gait itself
            left = next(s * dt for s in range(1, 400) if not g.stance(t + s * dt + 1e-9)[i]
                        and t + s * dt > -1e-9)
            if not stance[i] or left > LIFTOFF_HORIZON_S + 1e-9:
                assert w[i] == 1.0, (t, i)
            else:
                assert w[i] == pytest.approx(min((LIFTOFF_HORIZON_S / left) ** 2, LIFTOFF_WEIGHT_MAX))
        assert np.all(w[stance & ~nxt] >= 900.0)              # the last tick: nearly no load


@pytest.mark.parametrize("name", ["wbc", "trot"])
def test_mu_inf_with_the_coulomb_lcp_is_a_clear_param_error(name):
    rig = Rig("quadruped", name)
    with pytest.raises(ControllerParamError, match="mu = inf with variant lcp_coulomb"):
        make_controller(name, rig.ctx, {"mu": "inf"})
    with pytest.raises(ControllerParamError, match=f"{name}: mu = inf"):
        rig.ctrl.check_params({"mu": "inf"})                 # set over the socket
    ok = make_controller(name, rig.ctx, {"mu": "inf", "variant": "lcp_noslip"})
    with pytest.raises(ControllerParamError, match="lcp_coulomb"):
        ok.check_params({"variant": "lcp_coulomb"})          # the other way round
    ok.check_params({"variant": "qp"})




def test_a_friction_bound_keeps_the_shared_forces_in_the_cone_and_held_ones_as_given(stand):
    J, forces, w = stand
    start, _ = split_forces(J, forces, w)                  # every foot loaded, inside a cone mu
    wrench = J[:, :6].T @ start.reshape(-1)
    mu = 1.5 * (np.hypot(start[:, 0], start[:, 1]) / start[:, 2]).max()
    heavy = w.copy()
    heavy[0] = LIFTOFF_WEIGHT_MAX                          # foot 0 about to lift: unload it
    unbounded, _ = split_forces(J, start, heavy)
    # unbounded, the unloaded foot keeps its share of the tangential force: out of the cone
    assert np.hypot(unbounded[0, 0], unbounded[0, 1]) > mu * unbounded[0, 2]
    new, delta = split_forces(J, start, heavy, mu=mu)
    np.testing.assert_allclose(new - start, delta)
    np.testing.assert_allclose(J[:, :6].T @ new.reshape(-1), wrench, atol=1e-6 * np.abs(wrench).max())
    assert np.all(np.hypot(new[:, 0], new[:, 1]) <= mu * new[:, 2] * (1 + 1e-9) + 1e-12)
    assert new[0, 2] < 0.5 * start[0, 2]                   # its load still went to the others
    # a held contact (a sliding foot's) keeps its force; the others take the rest
    keep = np.array([False, True, False, False])
    held, d = split_forces(J, start, heavy, mu=mu, keep=keep)
    assert np.array_equal(held[keep], start[keep]) and not d[keep].any()
    np.testing.assert_allclose(J[:, :6].T @ held.reshape(-1), wrench, atol=1e-6 * np.abs(wrench).max())
    assert np.all(np.hypot(held[:, 0], held[:, 1]) <= mu * held[:, 2] * (1 + 1e-9) + 1e-12)

def test_cone_step_stops_at_the_edge():
    f = np.array([[0.0, 0.0, 10.0], [1.0, 0.0, 10.0]])
    d = np.array([[20.0, 0.0, 0.0], [0.0, 0.0, 0.0]])      # pushes the first 20 N sideways
    s = cone_step(f, d, 0.5)                                 # edge at 5 N: a quarter of the way
    assert s == pytest.approx(0.25, rel=1e-6) and s <= 0.25
    assert cone_step(f, 0.1 * d, 0.5) == 1.0                 # 2 N: inside all the way
    assert cone_step(np.array([[0.0, 0.0, 0.0]]), np.array([[1.0, 0.0, 0.5]]), 0.5) == 0.0
    # leaving through the apex (the normal force crossing zero) stops there
    s = cone_step(np.array([[0.0, 0.0, 1.0]]), np.array([[0.0, 0.0, -4.0]]), 0.5)
    assert s == pytest.approx(0.25, rel=1e-6)


def test_load_split_is_on_for_trot_off_for_wbc_and_a_config_only_boolean():
    trot = Rig("quadruped", "trot", {}).ctrl
    wbc = Rig("quadruped", "wbc", {}).ctrl
    assert trot.core.coulomb_split and not wbc.core.coulomb_split
    assert Rig("quadruped", "wbc", {"load_split": True}).ctrl.core.coulomb_split
    assert not Rig("quadruped", "trot", {"load_split": False}).ctrl.core.coulomb_split
    with pytest.raises(ControllerParamError, match="load_split: expected true or false"):
        wbc.check_params({"load_split": "yes"}, initial=True)
    with pytest.raises(ControllerParamError, match="load_split can only be set in the config"):
        wbc.check_params({"load_split": True})
