"""Digest §9 checks on the compiled workspace's own matrices (A2, A3, A5, A7, D18).

The other checks (A1, A4, A6, B8-B14, C15, C16) are in test_inverse_dynamics.py,
the closed loop (§9.19, §9.20) in tests/oracle/test_inverse_dynamics_closed_loop.py.
"""

import numpy as np
import pytest

from servoloop.core_cy import inverse_dynamics as ID
from servoloop.core_cy.dynamics._dynamics import Data, Model
from servoloop.core_cy.sim.model import (
    ContactPoints,
    RigidSettings,
    contact_points_from_urdf,
    simulator_servo_model,
)
from servoloop.core_cy.sim.simulator import SimConfig, Simulator
from servoloop.experiments.gaits import stand_goals
from servoloop.robots import urdf_path

QUAD = str(urdf_path("quadruped"))
ARMATURE = simulator_servo_model().armature_kg_m2


@pytest.fixture(scope="module")
def quad():
    model = Model.from_urdf(QUAD, floating_base=True)
    return model, Data(model), contact_points_from_urdf(QUAD)


@pytest.fixture(scope="module")
def moving():
    sim = Simulator.from_urdf(QUAD, SimConfig(mode="rigid", rigid=RigidSettings(
        max_iter=2000, tol=1e-14)))
    stand = stand_goals(QUAD)
    sim.reset(stand)
    sim.step(stand, n_steps=300)
    goal = stand + 0.01 * np.random.default_rng(3).standard_normal(stand.size)
    sim.step(goal, n_steps=5)
    q, v = sim.q.copy(), sim.v.copy()
    sim.step(goal)
    return q, v, (sim.v - v) / 1e-3


def test_noslip_mlcp_rows_hold_and_q_is_psd(quad, moving):
    # §9.2: the solution satisfies every MLCP row (dynamics, P v+ = qd_des,
    # S v+ = T v+ = 0, complementarity) to 1e-9; §9.3: Q symmetric PSD
    model, data, pts = quad
    q, v, qdd_des = moving
    ws = ID.ContactInverseDynamics(model, pts, np.inf, "lcp_noslip", armature=ARMATURE)
    res = ws.solve(q, v, qdd_des)
    Q, r = ws._core.lcp_data()
    np.testing.assert_array_equal(Q, Q.T)
    assert np.linalg.eigvalsh(Q).min() >= -1e-12 * np.abs(Q).max()
    p = ID.build_problem(model, data, q, v, res.qdd, pts, armature=ARMATURE)
    scale = model.total_mass * 9.81
    gen = p.M @ res.qdd + p.h - p.Jw.T @ res.contact_forces.ravel()
    np.testing.assert_allclose(gen[:6], 0.0, atol=1e-9 * scale)
    np.testing.assert_allclose(gen[6:], res.tau, atol=1e-9 * scale)
    np.testing.assert_allclose(res.qdd[6:], qdd_des[6:], atol=1e-9)
    np.testing.assert_allclose(p.S @ res.qdd + p.bias_s, 0.0, atol=1e-9)
    np.testing.assert_allclose(p.T @ res.qdd + p.bias_t, 0.0, atol=1e-9)
    f_n = res.contact_forces @ p.frame[:, 2]
    w_n = p.N @ res.qdd + p.bias_n
    assert f_n.min() >= 0 and w_n.min() >= -1e-9
    assert np.abs(f_n * w_n).max() < 1e-9 * scale


def test_coulomb_lcp_matrix_of_the_workspace_is_copositive(quad, moving):
    # §9.5 on the matrix the compiled solve actually built
    model, data, pts = quad
    q, v, qdd_des = moving
    ws = ID.ContactInverseDynamics(model, pts, 0.5, "lcp_coulomb", armature=ARMATURE)
    ws.solve(q, v, qdd_des)
    Q, _ = ws._core.lcp_data()
    assert Q.shape == (24, 24)
    Z = np.random.default_rng(1).uniform(0, 1, (10_000, 24))
    assert np.einsum("ij,jk,ik->i", Z, Q, Z).min() >= -1e-12 * np.abs(Q).max()


def test_stage2_torque_is_the_min_norm_over_the_same_motion(quad, moving):
    """§9.7 in the nullspace-free form: for W a basis of null(R_b), moving the
    forces by W w leaves the base motion alone and changes tau by -R_q W w
    (G^-1 U W == R_q W); Stage II's tau is the minimum over such moves (checked
    against an independent QP solve), so it does not depend on Stage I's vertex."""
    from qpsolvers import solve_qp
    from scipy import sparse

    model, data, pts = quad
    q, v, qdd_des = moving
    res = ID.solve(model, data, q, v, qdd_des, pts, 0.8, "qp", armature=ARMATURE)
    p = ID.build_problem(model, data, q, v, res.qdd, pts, 0.8, armature=ARMATURE)
    k = p.k
    R = np.vstack([p.N, p.S, -p.S, p.T, -p.T]).T           # (nv, 5k)
    Rb, Rq = R[:6], R[6:]
    f_loc = res.contact_forces @ p.frame                    # (t1, t2, n)
    f = np.concatenate([f_loc[:, 2], np.maximum(f_loc[:, 0], 0), np.maximum(-f_loc[:, 0], 0),
                        np.maximum(f_loc[:, 1], 0), np.maximum(-f_loc[:, 1], 0)])
    _, sv, Vt = np.linalg.svd(Rb)
    W = Vt[np.sum(sv > 1e-10 * sv.max()):].T                # null(R_b), (5k, 5k - 6)
    assert W.shape[1] == 5 * k - 6
    w = np.random.default_rng(2).standard_normal(W.shape[1])
    np.testing.assert_allclose(Rb @ (W @ w), 0.0, atol=1e-12)
    t = res.tau + Rq @ f                                      # tau = t - R_q f
    # min |t - R_q f'|^2 over R_b f' = R_b f, f' >= 0, pyramid
    Gf = np.zeros((k, 5 * k))
    for i in range(k):
        Gf[i, i] = -0.8
        Gf[i, k + i::k] = 1.0
    csc = sparse.csc_matrix
    f2 = solve_qp(csc(Rq.T @ Rq + 1e-12 * np.eye(5 * k)), -Rq.T @ t, csc(Gf), np.zeros(k),
                  csc(Rb), Rb @ f,
                  lb=np.zeros(5 * k), solver="clarabel", tol_gap_abs=1e-10, tol_gap_rel=1e-10,
                  tol_feas=1e-10)
    tau_ref = t - Rq @ f2
    assert np.linalg.norm(res.tau) <= np.linalg.norm(tau_ref) + 1e-6
    np.testing.assert_allclose(res.tau, tau_ref, atol=1e-4)


def test_noslip_pivots_grow_at_most_linearly_with_duplicated_feet(quad):
    # §9.18 as work, not time (timings belong to bench/): Alg. 2 from a cold
    # start on the feet duplicated 1..10 times
    model, data, pts = quad
    sim = Simulator.from_urdf(QUAD, SimConfig(mode="rigid"))
    stand = stand_goals(QUAD)
    sim.reset(stand)
    sim.step(stand, n_steps=1000)
    its = {}
    for copies in (1, 2, 5, 10):
        many = ContactPoints.concat([pts] * copies)
        ws = ID.ContactInverseDynamics(model, many, np.inf, "lcp_noslip", armature=ARMATURE)
        res = ws.solve(sim.q, sim.v, np.zeros(18))
        assert res.contact_forces[:, 2].sum() == pytest.approx(model.total_mass * 9.81,
                                                               rel=1e-6)
        its[copies] = res.diagnostics.iterations
    assert its[10] <= 10 * its[1] + 10, its


def test_cached_workspace_follows_ground_and_mu_changes(quad, moving):
    # a controller moves the plane (and may change mu) every tick: solve() keeps
    # one workspace and must answer as a fresh one would
    from servoloop.core_cy.inverse_dynamics import api
    from servoloop.core_cy.sim.model import Ground

    model, data, pts = quad
    q, v, qdd_des = moving
    api._CACHE.clear()
    for z, mu in ((0.0, 0.8), (-2e-4, 0.5), (0.0, 0.8), (1e-4, 0.3)):
        g = Ground((0.0, 0.0, z))
        got = ID.solve(model, data, q, v, qdd_des, pts, mu, "lcp_coulomb", ground=g,
                       armature=ARMATURE)
        fresh = ID.ContactInverseDynamics(model, pts, mu, "lcp_coulomb", ground=g,
                                          armature=ARMATURE).solve(q, v, qdd_des)
        np.testing.assert_array_equal(got.tau, fresh.tau)
        np.testing.assert_array_equal(got.contact_forces, fresh.contact_forces)
    assert len(api._CACHE) == 1


@pytest.mark.parametrize("variant", ["lcp_coulomb", "qp"])
def test_move_ground_answers_as_the_ground_setter(quad, moving, variant):
    """``move_ground`` (the balance controller's per-tick stance plane) moves the plane as
    the ``ground`` setter does, on a tilted plane too: the same torques and forces, bit for
    bit, and ``ground`` reads back the moved plane."""
    from servoloop.core_cy.sim.model import Ground

    model, data, pts = quad
    q, v, qdd_des = moving
    for normal in ((0.0, 0.0, 1.0), (0.05, -0.02, 1.0)):
        moved = ID.ContactInverseDynamics(model, pts, 0.8, variant, armature=ARMATURE,
                                          ground=Ground((0.0, 0.0, 0.0), normal))
        for z in (-2e-4, 3e-3, 1e-4):
            g = Ground((0.01, -0.02, z), normal)
            fresh = ID.ContactInverseDynamics(model, pts, 0.8, variant, armature=ARMATURE,
                                              ground=g).solve(q, v, qdd_des)
            moved.move_ground(0.01, -0.02, z)
            got = moved.solve(q, v, qdd_des)
            np.testing.assert_array_equal(got.tau, fresh.tau)
            np.testing.assert_array_equal(got.contact_forces, fresh.contact_forces)
            assert moved.ground == g
        # the setter after a move compares with the moved plane (not the one made at start)
        moved.ground = Ground((0.0, 0.0, 0.0), normal)
        assert moved.ground.point == (0.0, 0.0, 0.0)


def test_stage2_loads_only_contacts_that_stage1_keeps_closed(quad, moving):
    """Stage II moves forces only on Stage I's optimal face: a contact that opens
    during the step (w_n = n^T qdd + bias > 0) carries no force, at mu 0.1 where the
    random joint accelerations make feet slide.  The nullspace alone (the paper's
    Stage II) let the closed-loop trot load feet the simulator left unloaded."""
    model, data, pts = quad
    q, v, _ = moving
    rng = np.random.default_rng(11)
    moved = 0
    for _ in range(20):
        qdd_des = np.zeros(18)
        qdd_des[6:] = 10.0 * rng.standard_normal(12)
        res = ID.solve(model, data, q, v, qdd_des, pts, 0.1, "qp", armature=ARMATURE)
        p = ID.build_problem(model, data, q, v, res.qdd, pts, 0.1, armature=ARMATURE)
        fn = (res.contact_forces @ p.frame)[:, 2]
        w_n = p.N @ res.qdd + p.bias_n
        loaded = fn > 1e-6
        # closed within 1 um over the step (FACE_GAP) where loaded; never penetrating
        assert np.all(w_n[loaded] * p.dt ** 2 < 1.01e-6)
        assert w_n.min() * p.dt ** 2 > -1e-9
        assert res.diagnostics.cone_violation < 1e-6 * model.total_mass * 9.81
        assert res.diagnostics.residual < 1e-6 * model.total_mass * 9.81
        moved += int(np.abs(res.tau - res.diagnostics.tau_stage1).max() > 1e-6)
    assert moved >= 5          # Stage II did change Stage I's answer on these draws
