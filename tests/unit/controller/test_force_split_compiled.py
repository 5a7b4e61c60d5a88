"""The compiled load split (``controller/wholebody/_force_split.pyx``) against its NumPy
oracle (``controller/wholebody/force_split.py``).

Random contact sets (1 to 8 contacts with point-contact base columns, lift-off weights up
to 1e4, ``mu`` none / inf / finite, held contacts) and the split calls of real trots
(Coulomb and no-slip answers, recorded in the simulator), to 1e-9 of the largest force;
each path of the oracle (a negative normal held at zero, a contact held on the cone, the
cone step short of the split) is counted so that the comparison covers it.
"""

from __future__ import annotations

import numpy as np
import pytest

from servoloop.controller.wholebody import _force_split as cf
from servoloop.controller.wholebody import force_split as fs
from servoloop.controller.wholebody.balance import SPLIT_OPEN_N, STICK_MARGIN
from tests.unit.controller.test_wbc import Rig

REL = 1e-9
MUS = (None, np.inf, 0.3, 0.8, 2.0)


def _skew(p):
    return np.array([[0.0, -p[2], p[1]], [p[2], 0.0, -p[0]], [-p[1], p[0], 0.0]])


def _case(rng, k, mu, nv=18):
    """(J, forces, weights, keep) of ``k`` random feet under a base: the base columns of a
    point contact, the ID's forces inside the cone ``mu`` (held ones on its edge, some
    unloaded), the weights 1 or up to the lift-off weight."""
    J = rng.normal(size=(3 * k, nv))
    for i in range(k):
        p = np.array([rng.uniform(-0.3, 0.3), rng.uniform(-0.3, 0.3), rng.uniform(-0.3, -0.2)])
        J[3 * i:3 * i + 3, :3] = np.eye(3)
        J[3 * i:3 * i + 3, 3:6] = -_skew(p)
    f = np.column_stack([rng.normal(0, 5, k), rng.normal(0, 5, k), rng.uniform(-5, 60, k)])
    w = np.where(rng.random(k) < 0.3, 10 ** rng.uniform(0, 4, k), 1.0)
    if rng.random() < 0.2:
        w[rng.integers(k)] = fs.LIFTOFF_WEIGHT_MAX
    bounded = mu is not None and np.isfinite(mu)
    keep = (rng.random(k) < 0.3) if (bounded and rng.random() < 0.5) else None
    if bounded:
        f[:, 2] = np.where(rng.random(k) < 0.2, 0.0, np.abs(f[:, 2]))
        lim = mu * f[:, 2] * (rng.random(k) if keep is None else np.where(keep, 1.0, rng.random(k)))
        f[:, :2] *= (lim / np.maximum(np.hypot(f[:, 0], f[:, 1]), 1e-300))[:, None]
    return J, f, w, keep


def _err(a, b) -> float:
    return float(np.abs(a - b).max() / max(1.0, np.abs(b).max()))


@pytest.fixture
def paths(monkeypatch):
    """Counts of the oracle's paths while a test runs: negative normals held at zero (a
    least-norm solve that needed more than one), contacts held on the cone, cone steps
    short of 1."""
    seen = {"negative": 0, "held": 0, "step": 0}
    least, onto, step = fs._least_norm, fs._onto_cone, fs.cone_step

    def least_norm(A, wdiag, free, b, iters):
        first = least(A, wdiag, free, b, 1)
        seen["negative"] += int(np.any(free[2::3] & (first[2::3] < 0.0)))
        return least(A, wdiag, free, b, iters)

    def onto_cone(f, ft, mu):
        seen["held"] += len(f)
        return onto(f, ft, mu)

    def cone_step(forces, delta, mu):
        s = step(forces, delta, mu)
        seen["step"] += int(s < 1.0)
        return s

    monkeypatch.setattr(fs, "_least_norm", least_norm)
    monkeypatch.setattr(fs, "_onto_cone", onto_cone)
    monkeypatch.setattr(fs, "cone_step", cone_step)
    return seen


@pytest.mark.parametrize("mu", MUS)
def test_random_splits_match_the_oracle(mu, paths):
    """k = 1 + trial % 8: Jacobi (one or two contacts) and Cholesky; and dgelsd alone."""
    rng = np.random.default_rng(11 + MUS.index(mu))
    splits = 0
    for trial in range(400):
        k = 1 + trial % 8
        J, f, w, keep = _case(rng, k, mu)
        new, delta = fs.split_forces(J, f, w, mu=mu, keep=keep)
        for fast in (True, False):
            cnew, cdelta = cf.split_forces(J, f, w, mu=mu, keep=keep, fast=fast)
            assert _err(cnew, new) <= REL and _err(cdelta, delta) <= REL, (trial, k, fast, new, cnew)
        if keep is not None:
            assert not cdelta[keep].any()                           # held ones as given
        splits += int(delta.any())
    assert splits > 200                                             # most found a split
    assert paths["negative"] > 50                                   # the active set ran
    if mu is not None and np.isfinite(mu):
        assert paths["held"] > 50 and paths["step"] > 5             # the cone's two paths


def test_open_contacts_and_few_iterations_match_the_oracle():
    rng = np.random.default_rng(5)
    for trial in range(200):
        k = 2 + trial % 7
        J, f, w, _ = _case(rng, k, None)
        open_ = rng.random(k) < 0.3
        iters = 1 + trial % 3
        new, delta = fs.split_forces(J, f, w, open_=open_, iters=iters)
        cnew, cdelta = cf.split_forces(J, f, w, open_=open_, iters=iters)
        assert _err(cnew, new) <= REL and _err(cdelta, delta) <= REL, trial
        assert not cnew[open_].any() or not cdelta.any()            # open ones unloaded


def test_least_norm_matches_the_oracle_rank_deficient_and_with_negative_normals():
    rng = np.random.default_rng(3)
    negative = 0
    for trial in range(300):
        k = 1 + trial % 6                       # 1 and 2 contacts: A W^-1 A^T rank 3 and 5
        J, f, w, _ = _case(rng, k, None)
        A = J[:, :6].T
        wdiag = np.ones(3 * k)
        wdiag[2::3] = w
        free = np.ones(3 * k, dtype=bool)
        free[rng.integers(3 * k)] = trial % 4 != 0
        b = A @ f.reshape(-1) + (rng.normal(size=6) if trial % 5 == 0 else 0.0)
        x = fs._least_norm(A, wdiag, free, b, 8)
        negative += int(np.any(fs._least_norm(A, wdiag, free, b, 1)[2::3] < 0.0))
        np.testing.assert_allclose(cf.least_norm(A, wdiag, free, b, 8), x,
                                   atol=REL * max(1.0, np.abs(x).max()), rtol=0)
    assert negative > 30


def test_cone_step_matches_the_oracle():
    rng = np.random.default_rng(7)
    short = 0
    for trial in range(2000):
        k = 1 + trial % 4
        mu = [0.3, 0.8, 2.0][trial % 3]
        f = np.column_stack([rng.normal(0, 2, (k, 2)), rng.uniform(0, 10, k)])
        f[rng.random(k) < 0.1] = 0.0                        # unloaded: the apex
        d = rng.normal(0, 5, (k, 3)) * (rng.random((k, 1)) < 0.8)
        s = fs.cone_step(f, d, mu)
        assert cf.cone_step(f, d, mu) == pytest.approx(s, rel=1e-12, abs=1e-15), (trial, f, d, mu)
        short += int(0.0 < s < 1.0)
    assert short > 200
    # the oracle's own edge cases (tests/unit/controller/test_force_split.py)
    f = np.array([[0.0, 0.0, 10.0], [1.0, 0.0, 10.0]])
    d = np.array([[20.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    assert cf.cone_step(f, d, 0.5) == pytest.approx(0.25, rel=1e-6)
    assert cf.cone_step(f, 0.1 * d, 0.5) == 1.0
    assert cf.cone_step(np.zeros((1, 3)), np.array([[1.0, 0.0, 0.5]]), 0.5) == 0.0


def test_an_edge_held_end_does_not_decide_the_step_by_rounding():
    # a contact starting unloaded and held on the cone's edge: inside to rounding, so the
    # split is taken whole (a strict test made it all or nothing by the last bit)
    mu = 0.8
    f = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 10.0]])
    for ft in np.linspace(0.1, 5.0, 200):
        fn = ft / mu
        d = np.array([[ft * 0.6, ft * 0.8, fn], [0.0, 0.0, -fn]])
        d[0, :2] *= mu * fn / np.hypot(*d[0, :2])          # on the edge to rounding
        assert fs.cone_step(f, d, mu) == 1.0 and cf.cone_step(f, d, mu) == 1.0


def _record_splits(controller, params, seconds):
    """[(Js rows, forces, liftoff weights, stance, coulomb, mu, tau_m)] of a run's split
    calls, and the core's split kernel (a recording stand-in wraps it)."""
    rig = Rig("quadruped", controller, params)
    rig.run(0.01)
    core = rig.ctrl.core
    kernel, calls = core._splitter, []

    class Recording:
        def split_stance(self, Js, ms, forces, lw, stance, coulomb, mu, tau_m):
            calls.append((np.array(Js[:ms]), forces.copy(), np.array(lw), np.array(stance),
                          coulomb, mu, tau_m.copy()))
            return kernel.split_stance(Js, ms, forces, lw, stance, coulomb, mu, tau_m)

    core._splitter = Recording()
    rig.run(seconds)
    core._splitter = kernel
    return rig, kernel, calls


@pytest.mark.parametrize("params", [{"speed_mps": 0.2}, {"speed_mps": 0.1, "variant": "lcp_noslip"}])
def test_the_trots_split_calls_match_the_numpy_glue(params):
    """Every split of 1.5 s of trot (its lift-off weights, Coulomb keep masks) against the
    balance core's NumPy step 4: split_forces, then ``tau_m -= J_j^T delta``."""
    rig, kernel, calls = _record_splits("trot", params, 1.5)
    assert rig.plant.q[0] > 0.05 and len(calls) > 1000           # it trotted, splitting
    counts = np.array([len(f.points) for f in rig.ctrl.core.robot.feet])
    changed = lifting = heavy = 0
    for J, f0, lw, stance, coulomb, mu, tau0 in calls:
        st = stance.astype(bool)
        w = np.repeat(lw[st], counts[st])
        keep = None
        if coulomb:
            ft2 = f0[:, 0] ** 2 + f0[:, 1] ** 2
            keep = (f0[:, 2] > SPLIT_OPEN_N) & (ft2 >= (mu * STICK_MARGIN * f0[:, 2]) ** 2)
        if keep is not None and keep.all():
            new, delta = f0, np.zeros_like(f0)
        else:
            new, delta = fs.split_forces(J, f0, w, mu=mu if coulomb else None, keep=keep)
        tau_ref = tau0 - J[:, 6:].T @ delta.reshape(-1)
        forces, tau_m = f0.copy(), tau0.copy()
        moved = kernel.split_stance(J, len(J), forces, lw, stance, coulomb, mu, tau_m)
        # no change only where the oracle's is rounding (its answer was the least norm)
        assert moved or np.abs(delta).max() <= 1e-12 * max(1.0, np.abs(f0).max())
        assert _err(forces, new) <= REL and _err(tau_m, tau_ref) <= REL
        changed += int(moved)
        lifting += int(moved and w.max() > 1.0)
        heavy += int(moved and w.max() > 100.0)
    assert changed > 800 and lifting > 100 and heavy > 10       # shared, also before lift-offs
    # both fast solves ran: Cholesky (three or more feet) and Jacobi (two: rank 5)
    assert kernel.cholesky > 100 and kernel.jacobi > 100
    assert kernel.cholesky + kernel.jacobi == kernel.solves


def test_non_finite_inputs_leave_the_answer_and_bad_shapes_are_named():
    rng = np.random.default_rng(0)
    J, f, w, _ = _case(rng, 4, None)
    f[1, 2] = np.nan              # NumPy's lstsq does not return on this: the kernel does
    new, delta = cf.split_forces(J, f, w)
    assert np.array_equal(new, f, equal_nan=True) and not delta.any()
    kern = cf.ForceSplitKernel(4, 18, [1, 1, 1, 1])
    with pytest.raises(ValueError, match="ForceSplitKernel.split_stance: expected Js"):
        kern.split_stance(J, 12, np.zeros((3, 3)), np.ones(4), np.ones(4, np.uint8), False,
                          np.inf, np.zeros(12))
    with pytest.raises(ValueError, match="the stance feet have 2 points, the forces 4"):
        kern.split_stance(J, 12, np.zeros((4, 3)), np.ones(4), np.array([1, 1, 0, 0], np.uint8),
                          False, np.inf, np.zeros(12))
    with pytest.raises(ValueError, match="ForceSplitKernel.split: expected J"):
        kern.split(J[:6], f, w, np.inf, None, None, np.zeros((4, 3)), np.zeros((4, 3)))


def test_liftoff_weights_match_the_oracle_over_two_cycles():
    from servoloop.controller.wholebody.gait import TrotGait

    g = TrotGait()
    g.touchdown = np.array([0.25, 0.75, 0.75, 0.25])
    out = np.zeros(4)
    rising = 0
    for t in np.arange(-0.05, 2 * g.period + 0.05, 1e-4):
        stance = g.stance(t) if t >= 0 else np.ones(4, bool)
        ref = fs.liftoff_weights(g, t, stance, 1e-3)
        assert cf.liftoff_weights(g, t, stance, 1e-3, out=out) is out
        assert np.array_equal(out, ref), t
        assert np.array_equal(cf.liftoff_weights(g, t, stance, 1e-3, horizon=0.0), np.ones(4))
        rising += int(ref.max() > 1.0)
    assert rising > 1000
    with pytest.raises(ValueError, match="liftoff_weights: expected stance and out"):
        cf.liftoff_weights(g, 0.1, np.ones(3, bool), 1e-3)
