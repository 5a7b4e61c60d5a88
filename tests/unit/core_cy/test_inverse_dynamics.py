"""Inverse dynamics with rigid contact (seed 003): digest §9 checks on the built-in robots.

Numbered comments refer to the digest's acceptance checks (§9).  The
simulator (rigid mode) provides consistent states and accelerations.
"""

import numpy as np
import pytest

from servoloop.core_cy import inverse_dynamics as ID
from servoloop.core_cy.dynamics._dynamics import Data, Model, rnea
from servoloop.core_cy.sim.model import (
    Ground,
    RigidSettings,
    contact_points_from_urdf,
    simulator_servo_model,
)
from servoloop.core_cy.sim.simulator import SimConfig, Simulator
from servoloop.experiments.gaits import stand_goals
from servoloop.robots import urdf_path

QUAD = str(urdf_path("quadruped"))
HUMANOID = str(urdf_path("humanoid"))
ARMATURE = simulator_servo_model().armature_kg_m2
DT = 1e-3


@pytest.fixture(scope="module")
def quad():
    model = Model.from_urdf(QUAD, floating_base=True)
    return model, Data(model), contact_points_from_urdf(QUAD)


@pytest.fixture(scope="module")
def standing(quad):
    """Rigid-mode simulator settled on the yaml standing pose (PD servos)."""
    sim = Simulator.from_urdf(QUAD, SimConfig(mode="rigid", rigid=RigidSettings(
        max_iter=500, tol=1e-14)))
    stand = stand_goals(QUAD)
    sim.reset(stand)
    sim.step(stand, n_steps=2000)
    return sim


@pytest.fixture(scope="module")
def moving(quad):
    """A state in motion with all four feet sticking, and the simulator's next qdd."""
    sim = Simulator.from_urdf(QUAD, SimConfig(mode="rigid", rigid=RigidSettings(
        max_iter=2000, tol=1e-14)))
    stand = stand_goals(QUAD)
    sim.reset(stand)
    sim.step(stand, n_steps=300)
    goal = stand + 0.01 * np.random.default_rng(3).standard_normal(stand.size)
    sim.step(goal, n_steps=5)
    q, v = sim.q.copy(), sim.v.copy()
    sim.step(goal)
    assert sim.contact_active.all()
    return q, v, (sim.v - v) / DT, sim.contact_forces.copy()


def weight(model):
    return model.total_mass * np.linalg.norm(model.gravity)


def check_physics(model, data, q, v, res, contacts, mu, armature=ARMATURE):
    """Forward dynamics of (tau, f) gives res.qdd; pyramid, f_n >= 0 (§9.11)."""
    p = ID.build_problem(model, data, q, v, res.qdd, contacts, mu, armature=armature)
    lhs = p.M @ res.qdd + p.h
    rhs = np.concatenate([np.zeros(6), res.tau]) + p.Jw.T @ res.contact_forces.ravel()
    np.testing.assert_allclose(lhs, rhs, atol=1e-9 * weight(model))
    f_local = res.contact_forces @ p.frame            # (t1, t2, n) per contact
    assert f_local[:, 2].min() >= -1e-9
    if np.isfinite(mu):
        assert np.all(np.abs(f_local[:, 0]) + np.abs(f_local[:, 1])
                      <= mu * f_local[:, 2] + 1e-7 * weight(model))
    w_n = p.N @ res.qdd + p.bias_n
    assert w_n.min() >= -1e-7
    return f_local, w_n


# -- errors -------------------------------------------------------------------
def test_errors_name_the_thing(quad):
    model, data, pts = quad
    q, v, a = model.neutral(), np.zeros(18), np.zeros(18)
    with pytest.raises(ID.ContactFrameError, match="lf_toe.*quadruped.urdf"):
        ID.solve(model, data, q, v, a, ["lf_foot_link", "lf_toe"])
    with pytest.raises(ValueError, match="mu: expected a number or 4"):
        ID.solve(model, data, q, v, a, pts, mu=[0.5, 0.5])
    with pytest.raises(ValueError, match="variant.*lcp_noslip"):
        ID.solve(model, data, q, v, a, pts, variant="lcp")
    with pytest.raises(ValueError, match="qdd_des.*18"):
        ID.solve(model, data, q, v, a[:12], pts)
    with pytest.raises(ValueError, match="mu"):
        ID.solve(model, data, q, v, a, pts, mu=-0.1)
    q_stand = q.copy()
    q_stand[2] = 0.0   # feet well inside the ground so they are candidates
    with pytest.raises(ValueError, match="lcp_coulomb needs finite"):
        ID.solve(model, data, q_stand, v, a, pts, mu=np.inf, variant="lcp_coulomb")


def test_infeasible_error_carries_residual():
    # w = -1 - z can never be >= 0 with z >= 0: ray termination
    with pytest.raises(ID.InfeasibleError, match="ray termination") as e:
        ID.lemke(np.array([[-1.0]]), np.array([-1.0]))
    assert e.value.residual == pytest.approx(1.0)


# -- linear algebra (§9 A) ------------------------------------------------------
def test_lemke_solves_random_psd_and_copositive_lcps():
    # solvable by construction: r = w* - Q z* with z*, w* >= 0 complementary
    rng = np.random.default_rng(0)
    for n in (1, 3, 8, 20):
        X = rng.standard_normal((n, max(1, n // 2)))
        for Q in (X @ X.T, X @ X.T + np.triu(rng.uniform(0, 1, (n, n)), 1)):
            on = rng.uniform(size=n) < 0.5
            z_star = np.where(on, rng.uniform(0.1, 1, n), 0.0)
            w_star = np.where(on, 0.0, rng.uniform(0.1, 1, n))
            r = w_star - Q @ z_star
            z, w, it = ID.lemke(Q, r)
            assert z.min() >= 0 and w.min() >= -1e-9
            assert np.abs(z * w).max() < 1e-9
            np.testing.assert_allclose(w, Q @ z + r, atol=1e-12)


def test_reduced_form_identities(quad, standing):
    # §9.1: X = [[M, P^T], [P, 0]] nonsingular, its Phi = blockdiag(A^-1, 0)
    model, data, pts = quad
    p = ID.build_problem(model, data, standing.q, standing.v, np.zeros(18), pts)
    M = p.M
    P = np.hstack([np.zeros((12, 6)), np.eye(12)])
    X = np.block([[M, P.T], [P, np.zeros((12, 12))]])
    Phi = np.linalg.inv(X)[:18, :18]
    ref = np.zeros((18, 18))
    ref[:6, :6] = np.linalg.inv(M[:6, :6])
    scale = np.abs(ref).max()
    np.testing.assert_allclose(Phi, ref, atol=1e-10 * scale)
    np.testing.assert_allclose(Phi @ M @ Phi, Phi, atol=1e-10 * scale)
    np.testing.assert_allclose(P @ Phi, 0.0, atol=1e-10 * scale)


def test_find_indices_keeps_a_basis_of_the_tangent_rows(quad, standing):
    # §9.4: on flat ground the tangent forces span (f_x, f_y, tau_z) only: 3 rows
    model, data, pts = quad
    p = ID.build_problem(model, data, standing.q, standing.v, np.zeros(18), pts)
    Ainv = np.linalg.inv(p.M[:6, :6])
    Sb, Tb = p.S[:, :6], p.T[:, :6]
    ks, kt = ID.find_indices(Ainv, Sb, Tb)
    K = np.vstack([Sb[ks], Tb[kt]])
    assert len(ks) + len(kt) == np.linalg.matrix_rank(np.vstack([Sb, Tb]), tol=1e-9) == 3
    for rows, kept in ((Sb, ks), (Tb, kt)):
        for i in set(range(4)) - set(kept):
            G = np.vstack([K, rows[i]]) @ Ainv @ np.vstack([K, rows[i]]).T
            assert np.linalg.eigvalsh(G).min() < 1e-9 * np.abs(G).max()


def test_coulomb_lcp_matrix_is_copositive(quad, standing):
    # §9.5: z^T Q z >= 0 for random z >= 0 (Q rebuilt as in _coulomb)
    model, data, pts = quad
    p = ID.build_problem(model, data, standing.q, standing.v, np.zeros(18), pts, 0.5)
    k = p.k
    Rb = np.vstack([p.N, p.S, -p.S, p.T, -p.T]).T[:6]
    E = np.tile(np.eye(k), (4, 1))
    Q = np.zeros((6 * k, 6 * k))
    Q[:5 * k, :5 * k] = Rb.T @ np.linalg.inv(p.M[:6, :6]) @ Rb
    Q[k:5 * k, 5 * k:] = E
    Q[5 * k:, :k] = np.diag(p.mu)
    Q[5 * k:, k:5 * k] = -E.T
    Z = np.random.default_rng(1).uniform(0, 1, (10_000, 6 * k))
    assert np.einsum("ij,jk,ik->i", Z, Q, Z).min() >= -1e-12 * np.abs(Q).max()


# -- physics (§9 B) ---------------------------------------------------------------
@pytest.mark.parametrize("variant", ID.VARIANTS)
def test_standing_still_carries_the_weight(quad, standing, variant):
    # §9.10: qdd_des = 0 -> sum f_n = m g, no net tangential force, qdd = 0
    model, data, pts = quad
    res = ID.solve(model, data, standing.q, standing.v, np.zeros(18), pts, 0.8, variant,
                   armature=ARMATURE)
    mg = weight(model)
    f = res.contact_forces
    assert f[:, 2].sum() == pytest.approx(mg, rel=1e-6)
    assert np.abs(f[:, :2].sum(axis=0)).max() < 1e-5 * mg
    # the settled state still moves at |v| ~ 3e-8: the step may cancel that much
    np.testing.assert_allclose(res.qdd, 0.0, atol=2 * np.abs(standing.v).max() / DT + 1e-9)
    mu = np.inf if variant == "lcp_noslip" else 0.8
    f_local, w_n = check_physics(model, data, standing.q, standing.v, res, pts, mu)
    # §9.6 / Appendix F: pivoting puts load on at most rank(N_b A^-1 N_b^T) = 3 feet
    if variant != "qp":
        assert res.diagnostics.active.sum() <= 3
        assert np.abs(f_local[:, 2] * w_n).max() < 1e-9
        assert res.diagnostics.iterations >= 1


def test_standing_qp_torque_is_what_the_pd_servos_settle_to(quad, standing):
    """The min-norm torque of Stage II against the simulator's settled PD torque.

    The simulator's force split over four feet is set by the servos'
    compliance, the ID's by Stage II (min ||tau||), so the two only have to
    agree to the size of the internal (nullspace) forces; on this symmetric
    stance both end up within 3e-4 N m (measured) of each other.  1e-3 N m is
    0.1 % of the largest joint torque and still fails for the 3-leg LCP
    solutions (differences of 0.6 N m).  The sim's own torques are a feasible
    point of Stage II's set, so Stage II's norm cannot exceed theirs (§9.16).
    """
    model, data, pts = quad
    res = ID.solve(model, data, standing.q, standing.v, np.zeros(18), pts, 0.8, "qp",
                   armature=ARMATURE)
    tau_sim = standing.joint_torques
    np.testing.assert_allclose(res.tau, tau_sim, atol=1e-3)
    # up to the residual motion: the sim's step realises its own v+ (|v| ~ 3e-8),
    # Stage I's v+ differs by that much, moving the set by ~ M |v| / dt ~ 1e-4 N
    assert np.linalg.norm(res.tau) <= np.linalg.norm(tau_sim) + 1e-4
    assert res.diagnostics.stage2
    lcp = ID.solve(model, data, standing.q, standing.v, np.zeros(18), pts, 0.8, "lcp_noslip",
                   armature=ARMATURE)
    assert np.abs(lcp.tau - tau_sim).max() > 1e-2


def test_stage2_keeps_the_motion_and_lowers_the_torque(quad, moving):
    # §9.16: Stage II leaves v+ (hence the kinetic energy) alone, ||tau_II|| <= ||tau_I||;
    # erratum E5: the nullspace is 5k - 6 = 14-dimensional for four feet, not "two"
    model, data, pts = quad
    q, v, qdd_sim, _ = moving
    res = ID.solve(model, data, q, v, qdd_sim, pts, 0.8, "qp", armature=ARMATURE)
    d = res.diagnostics
    assert d.stage2 and d.nullity == 5 * 4 - 6
    np.testing.assert_allclose(res.qdd, d.qdd_stage1, atol=1e-9 * np.abs(res.qdd).max())
    assert np.linalg.norm(res.tau) <= np.linalg.norm(d.tau_stage1) + 1e-9


@pytest.mark.parametrize("variant", ["lcp_noslip", "lcp_coulomb"])
def test_simulator_step_acceleration_is_reproduced(quad, moving, variant):
    # §9.9 right inverse: qdd_des from the simulator's own (sticking) step
    model, data, pts = quad
    q, v, qdd_sim, _ = moving
    res = ID.solve(model, data, q, v, qdd_sim, pts, 0.8, variant, armature=ARMATURE)
    np.testing.assert_allclose(res.qdd, qdd_sim, atol=1e-8 * max(1.0, np.abs(qdd_sim).max()))
    # no-slip has no friction bound (mu = inf in the check)
    f_local, w_n = check_physics(model, data, q, v, res, pts,
                                 np.inf if variant == "lcp_noslip" else 0.8)
    assert np.abs(f_local[:, 2] * w_n).max() < 1e-8
    assert res.diagnostics.residual < 1e-9 and not res.diagnostics.fallback


def test_qp_imposes_the_joint_acceleration_and_no_positive_work(quad, moving):
    # the QP model (max dissipation) sets its own base motion; joints are imposed
    model, data, pts = quad
    q, v, qdd_sim, _ = moving
    res = ID.solve(model, data, q, v, qdd_sim, pts, 0.8, "qp", armature=ARMATURE)
    np.testing.assert_array_equal(res.qdd[6:], qdd_sim[6:])
    check_physics(model, data, q, v, res, pts, 0.8)
    # contact does no positive work on the kinetic energy (Stage I objective)
    ws = ID.ContactInverseDynamics(model, pts, 0.8, "qp", armature=ARMATURE)
    again = ws.solve(q, v, qdd_sim)   # a fresh workspace, same answer (§9.15)
    np.testing.assert_array_equal(again.tau, res.tau)
    # the no-allocation path fills the caller's arrays with the same numbers
    tau, forces = np.empty(12), np.empty((4, 3))
    ws.solve_into(q, v, qdd_sim, tau, forces)
    np.testing.assert_array_equal(tau, res.tau)
    np.testing.assert_array_equal(forces, res.contact_forces)


def test_separating_contact_gets_no_force_and_classical_id(quad, standing):
    # §9.8 and §9.13: a foot 10 cm above the ground; the robot falls freely
    model, data, pts = quad
    q = standing.q.copy()
    q[2] += 0.1
    a_des = np.zeros(18)
    a_des[6:] = np.linspace(-2, 2, 12)
    for variant in ID.VARIANTS:
        res = ID.solve(model, data, q, standing.v, a_des, pts, 0.8, variant)
        np.testing.assert_allclose(res.contact_forces, 0.0, atol=1e-9)
        tau_rnea = rnea(model, data, q, standing.v, res.qdd)
        np.testing.assert_allclose(res.tau, tau_rnea[6:], atol=1e-9)
        np.testing.assert_allclose(tau_rnea[:6], 0.0, atol=1e-9)   # free fall of the base


def test_approaching_contact_gets_only_the_impulse_it_needs(quad, standing):
    # §9.13: a foot 0.2 mm up falling at 1 m/s may close the gap but not cross it
    model, data, pts = quad
    q = standing.q.copy()
    q[2] += 2e-4 - min(ID.build_problem(model, data, standing.q, standing.v, np.zeros(18),
                                        pts).gap)
    v = np.zeros(18)
    v[2] = -1.0  # base frame is level: local z = world z
    res = ID.solve(model, data, q, v, np.zeros(18), pts, 0.8, "lcp_coulomb")
    p = ID.build_problem(model, data, q, v, res.qdd, pts, 0.8)
    v_n = p.N @ res.v_next
    np.testing.assert_allclose(v_n[res.diagnostics.active], -p.gap[res.diagnostics.active] / DT,
                               atol=1e-9)


def test_low_friction_slip_puts_forces_on_the_pyramid(quad, standing):
    # §9.12: a hard sideways push of all hips at mu = 0.1 makes the feet slip
    model, data, pts = quad
    a_des = np.zeros(18)
    a_des[[6, 9]] = 200.0     # left hips abduct
    a_des[[12, 15]] = -200.0  # right hips adduct -> feet splay outwards
    res = ID.solve(model, data, standing.q, standing.v, a_des, pts, 0.1, "lcp_coulomb")
    f_local, _ = check_physics(model, data, standing.q, standing.v, res, pts, 0.1, 0.0)
    p = ID.build_problem(model, data, standing.q, standing.v, res.qdd, pts, 0.1)
    slip = np.hypot(p.S @ res.v_next, p.T @ res.v_next)
    sliding = (slip > 1e-6) & (f_local[:, 2] > 1e-6)
    assert sliding.any()
    np.testing.assert_allclose(np.abs(f_local[sliding, 0]) + np.abs(f_local[sliding, 1]),
                               0.1 * f_local[sliding, 2], rtol=1e-6)
    # no-slip: the same demand is inconsistent (§9.14): fallback, and every foot sticks
    ns = ID.solve(model, data, standing.q, standing.v, a_des, pts, 0.1, "lcp_noslip")
    assert ns.diagnostics.fallback
    assert np.abs(ns.qdd[6:] - a_des[6:]).max() > 1.0
    p = ID.build_problem(model, data, standing.q, standing.v, ns.qdd, pts)
    np.testing.assert_allclose(p.S @ ns.qdd + p.bias_s, 0.0, atol=1e-6)
    np.testing.assert_allclose(p.T @ ns.qdd + p.bias_t, 0.0, atol=1e-6)


def test_repeat_and_perturbation_smoothness(quad, standing):
    # §9.15: identical calls -> identical tau; a 1e-6 state change -> O(1e-6) change
    model, data, pts = quad
    a = np.zeros(18)
    base = ID.solve(model, data, standing.q, standing.v, a, pts, 0.8, "qp", armature=ARMATURE)
    again = ID.solve(model, data, standing.q, standing.v, a, pts, 0.8, "qp", armature=ARMATURE)
    np.testing.assert_array_equal(base.tau, again.tau)
    rng = np.random.default_rng(5)
    a_pert = a.copy()
    a_pert[6:] += 1e-6 * rng.standard_normal(12)
    pert = ID.solve(model, data, standing.q, standing.v, a_pert, pts, 0.8, "qp",
                    armature=ARMATURE)
    assert np.abs(pert.tau - base.tau).max() < 1e-4   # O(1e-6) x the inertia of the map
    # a 1e-6 rad joint change moves the feet ~1e-7 m: through the gap terms
    # (phi / dt^2 ~ 0.1 m/s^2 on 2.5 kg) that is ~0.01 N m, continuous; a switch
    # to a 3-leg vertex (what an LP-like Stage II would do) costs 0.5 N m
    q = standing.q.copy()
    q[7:] += 1e-6 * rng.standard_normal(12)
    pert = ID.solve(model, data, q, standing.v, a, pts, 0.8, "qp", armature=ARMATURE)
    assert np.abs(pert.tau - base.tau).max() < 0.05
    assert pert.diagnostics.active.all()


def test_link_name_contacts_and_infinite_friction(quad, standing):
    # point contacts at the foot link origins (sphere centres, 15 mm above the ground)
    model, data, pts = quad
    names = ["lf_foot_link", "rf_foot_link", "lh_foot_link", "rh_foot_link"]
    q = standing.q.copy()
    q[2] -= pts.radius[0]        # the link origins on the ground (an open gap takes no force)
    res = ID.solve(model, data, q, standing.v, np.zeros(18), names, np.inf, "qp")
    assert res.contact_forces[:, 2].sum() == pytest.approx(weight(model), rel=1e-6)


def test_fixed_base_is_classical_id():
    # §9.8 on a fixed-base model: contacts out of reach take no force, tau = rnea
    fixed = Model.from_urdf(QUAD, floating_base=False)
    data = Data(fixed)
    q = fixed.neutral()
    v = np.linspace(-0.5, 0.5, 12)
    a = np.linspace(1.0, -1.0, 12)
    pts = contact_points_from_urdf(QUAD, floating_base=False)
    for variant in ID.VARIANTS:
        res = ID.solve(fixed, data, q, v, a, pts, 0.8, variant, ground=Ground((0, 0, -1.0)))
        np.testing.assert_allclose(res.tau, rnea(fixed, data, q, v, a), atol=1e-12)
        np.testing.assert_array_equal(res.contact_forces, 0.0)


def test_humanoid_box_feet_standing():
    model = Model.from_urdf(HUMANOID, floating_base=True)
    data = Data(model)
    pts = contact_points_from_urdf(HUMANOID, links=("l_foot", "r_foot"))   # 8 corners per foot
    sim = Simulator.from_urdf(HUMANOID, SimConfig(mode="rigid"))
    from servoloop.controller.config import builtin_config
    from servoloop.controller.simulation_config import standing_pose

    pose = standing_pose(builtin_config("humanoid"))
    sim.reset(np.array([pose.get(n, 0.0) for n in model.joint_names[1:]]), clearance=0.0)
    z = np.zeros(model.nv)
    gap = ID.build_problem(model, data, sim.q, z, z, pts, margin=1.0).gap
    top = gap > 0.002                               # the 3 mm sole's upper corners
    assert top.sum() == 8
    # Coulomb LCP: complementarity keeps the upper corners (inside the 5 mm margin) idle
    lcp = ID.solve(model, data, sim.q, z, z, pts, 0.8, "lcp_coulomb")
    assert lcp.contact_forces[:, 2].sum() == pytest.approx(weight(model), rel=1e-9)
    np.testing.assert_allclose(lcp.contact_forces[top], 0.0, atol=1e-9)
    # the complementarity-free QP would spread load onto them: keep them out by margin
    qp = ID.solve(model, data, sim.q, z, z, pts, 0.8, "qp", margin=0.002)
    assert qp.contact_forces[:, 2].sum() == pytest.approx(weight(model), rel=1e-9)
    np.testing.assert_allclose(qp.qdd, 0.0, atol=1e-9)
    np.testing.assert_array_equal(qp.contact_forces[top], 0.0)


def test_ppm_solves_random_psd_lcps_and_keeps_a_feasible_warm_start():
    # Alg. 2 against the same solvable-by-construction LCPs as Lemke (§9 A.6: at
    # most rank(Q) positive entries when started cold)
    rng = np.random.default_rng(4)
    for n in (2, 5, 12):
        X = rng.standard_normal((n, 3))
        Q = X @ X.T
        on = np.zeros(n, dtype=bool)
        on[rng.choice(n, 2, replace=False)] = True
        r = np.where(on, 0.0, rng.uniform(0.1, 1, n)) - Q @ np.where(on, rng.uniform(0.1, 1, n), 0)
        z, w, it, act = ID.ppm(Q, r)
        assert z.min() >= 0 and w.min() >= -1e-9 and np.abs(z * w).max() < 1e-9
        assert (z > 1e-9).sum() <= np.linalg.matrix_rank(Q)
        z2, _, it2, act2 = ID.ppm(Q, r, act)      # warm: answer in one iteration
        assert it2 == 1 and act2 == act
        np.testing.assert_allclose(z2, z, rtol=1e-12)   # index order may differ


def test_noslip_warm_start_keeps_the_previous_support(quad, standing):
    # §4.6 / §9.15: on four feet the stance is indeterminate; the COM sits behind
    # the middle, so both triangles with the two hind feet carry it.  Warm-started,
    # Alg. 2 stays on whichever the caller had; cold, it is deterministic.
    model, data, pts = quad
    a = np.zeros(18)
    hind = [2, 3]     # lh, rh in contact_points_from_urdf's order
    for front in (0, 1):
        warm = ID.WarmStart([front] + hind)
        res = ID.solve(model, data, standing.q, standing.v, a, pts, variant="lcp_noslip",
                       warm=warm, armature=ARMATURE)
        assert warm.active == [front] + hind and res.diagnostics.iterations == 1
        assert res.contact_forces[1 - front, 2] == 0.0 and res.contact_forces[front, 2] > 1.0
        assert res.contact_forces[:, 2].sum() == pytest.approx(weight(model), rel=1e-9)
    cold = [ID.solve(model, data, standing.q, standing.v, a, pts, variant="lcp_noslip").tau
            for _ in range(2)]
    np.testing.assert_array_equal(cold[0], cold[1])
