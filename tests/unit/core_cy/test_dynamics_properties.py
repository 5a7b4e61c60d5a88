"""Properties of the compiled dynamics that hold whatever the oracle says.

M symmetric positive definite; rnea(q, v, aba(q, v, tau)) = tau; the
regressor times the model's parameters is RNEA; friction columns are
exactly [sign(v), v, a, 1]; external forces act as J^T f; Jacobians are
derivatives of the placements; energy of a free system is conserved (RK4).
"""

import numpy as np
import pytest

from servoloop import core_cy
from tests.unit.core_cy.dynamics_cases import ALL, assert_close, load, random_state

FAST = ("bench", "arm", "quadruped", "humanoid", "ur5", "solo12")


def _rng(seed):
    return np.random.default_rng(seed)


@pytest.mark.parametrize("name", ALL)
def test_mass_matrix_symmetric_positive_definite(name):
    model = load(name)
    data = core_cy.Data(model)
    rng = _rng(21)
    for _ in range(3):
        q, _, _ = random_state(model, rng)
        M = core_cy.crba(model, data, q)
        assert np.array_equal(M, M.T), "M must be exactly symmetric"
        assert np.linalg.eigvalsh(M).min() > 0.0
        np.linalg.cholesky(M)


@pytest.mark.parametrize("name", ALL)
def test_rnea_inverts_aba(name):
    model = load(name)
    data = core_cy.Data(model)
    rng = _rng(22)
    for _ in range(3):
        q, v, tau = random_state(model, rng)
        fext = rng.normal(size=(model.nbodies, 6))
        ddq = core_cy.aba(model, data, q, v, tau).copy()
        assert_close(core_cy.rnea(model, data, q, v, ddq), tau, what="rnea(aba)")
        ddq = core_cy.aba(model, data, q, v, tau, fext=fext).copy()
        assert_close(core_cy.rnea(model, data, q, v, ddq, fext=fext), tau, what="with fext")
        # and M ddq + nle = tau
        M = core_cy.crba(model, data, q).copy()
        nle = core_cy.nonlinear_effects(model, data, q, v).copy()
        ddq = core_cy.aba(model, data, q, v, tau)
        assert_close(M @ ddq + nle, tau, what="M ddq + nle")


@pytest.mark.parametrize("name", ALL)
def test_split_rnea_terms_add_up(name):
    # seed 002 check 4: M a + c + g = ID(q, v, a), c + g = ID(q, v, 0)
    model = load(name)
    data = core_cy.Data(model)
    q, v, a = random_state(model, _rng(23))
    g = core_cy.gravity(model, data, q).copy()
    nle = core_cy.nonlinear_effects(model, data, q, v).copy()
    M = core_cy.crba(model, data, q).copy()
    assert_close(M @ a + nle, core_cy.rnea(model, data, q, v, a), what="M a + nle")
    assert_close(nle, core_cy.rnea(model, data, q, v, np.zeros(model.nv)), what="nle")
    assert_close(g, core_cy.rnea(model, data, q, 0 * v, 0 * a), what="gravity")


@pytest.mark.parametrize("name", ALL)
def test_regressor_times_parameters_is_rnea(name):
    model = load(name)
    data = core_cy.Data(model)
    theta = model.inertial_parameters()
    nb = model.nbodies
    rng = _rng(24)
    for _ in range(3):
        q, v, a = random_state(model, rng)
        Y = core_cy.regressor(model, data, q, v, a)
        assert Y.shape == (model.nv, 10 * nb + 4 * model.n_actuated)
        assert_close(Y[:, :10 * nb] @ theta, core_cy.rnea(model, data, q, v, a), what="Y theta")


@pytest.mark.parametrize("name", ("arm", "quadruped", "ur5", "solo12"))
def test_friction_columns_exact(name):
    model = load(name)
    data = core_cy.Data(model)
    q, v, a = random_state(model, _rng(25))
    first = model.nv - model.n_actuated
    v[first] = 0.0  # sign(0) = 0
    v[first + 1] = -2.5
    Y = core_cy.regressor(model, data, q, v, a)
    F = Y[:, 10 * model.nbodies:]
    expected = np.zeros_like(F)
    for k in range(model.n_actuated):
        r = first + k
        expected[r, 4 * k:4 * k + 4] = [np.sign(v[r]), v[r], a[r], 1.0]
    assert np.array_equal(F, expected)
    assert F[first, 0] == 0.0 and F[first + 1, 4] == -1.0
    # friction parameters add Fc sign(v) + Fv v + Ia a + beta to the joint torques
    phi = _rng(26).uniform(0.1, 1.0, 4 * model.n_actuated)
    extra = F @ phi
    P = phi.reshape(-1, 4)
    vv, aa = v[first:], a[first:]
    assert_close(extra[first:], P[:, 0] * np.sign(vv) + P[:, 1] * vv + P[:, 2] * aa + P[:, 3])


@pytest.mark.parametrize("name", FAST)
def test_external_forces_act_through_local_jacobians(name):
    # rnea(fext) = rnea - sum_i J_i(local)^T fext_i
    model = load(name)
    data = core_cy.Data(model)
    rng = _rng(27)
    q, v, a = random_state(model, rng)
    fext = rng.normal(size=(model.nbodies, 6))
    expected = core_cy.rnea(model, data, q, v, a).copy()
    for i in range(model.nbodies):
        expected -= core_cy.frame_jacobian(model, data, q, i, "local").T @ fext[i]
    assert_close(core_cy.rnea(model, data, q, v, a, fext=fext), expected, what="J^T f")


@pytest.mark.parametrize("name", FAST)
def test_jacobian_is_derivative_of_placement(name):
    model = load(name)
    data = core_cy.Data(model)
    q, v, _ = random_state(model, _rng(28))
    body = model.nbodies - 1
    J = core_cy.frame_jacobian(model, data, q, body, "local_world_aligned").copy()
    h = 1e-6

    def pose(qq):
        core_cy.forward_kinematics(model, data, qq)
        return data.position_body_in_world[body].copy(), data.rotation_body_to_world[body].copy()

    p1, R1 = pose(core_cy.integrate(model, q, v, h))
    p0, R0 = pose(core_cy.integrate(model, q, v, -h))
    dp = (p1 - p0) / (2 * h)
    W = (R1 - R0) / (2 * h) @ pose(q)[1].T
    w = np.array([W[2, 1], W[0, 2], W[1, 0]])
    np.testing.assert_allclose(J[:3] @ v, dp, atol=1e-6 * max(1, np.abs(dp).max()))
    np.testing.assert_allclose(J[3:] @ v, w, atol=1e-6 * max(1, np.abs(w).max()))
    # and the body velocity from forward kinematics agrees with J v
    core_cy.forward_kinematics(model, data, q, v)
    J_local = core_cy.frame_jacobian(model, data, q, body, "local")
    assert_close(data.velocity_body_local[body], J_local @ v, what="v = J v")


def _rk4_energy_drift(model, q, v, dt, steps, tau=None):
    data = core_cy.Data(model)
    tau = np.zeros(model.nv) if tau is None else tau

    def acc(qq, vv):
        return core_cy.aba(model, data, qq, vv, tau).copy()

    def energy(qq, vv):
        M = core_cy.crba(model, data, qq)
        com = core_cy.center_of_mass(model, data, qq)
        return 0.5 * vv @ M @ vv - model.total_mass * (model.gravity @ com)

    e0 = energy(q, v)
    for _ in range(steps):
        k1v, k1a = v, acc(q, v)
        q2 = core_cy.integrate(model, q, k1v, dt / 2)
        k2v = v + dt / 2 * k1a
        k2a = acc(q2, k2v)
        q3 = core_cy.integrate(model, q, k2v, dt / 2)
        k3v = v + dt / 2 * k2a
        k3a = acc(q3, k3v)
        q4 = core_cy.integrate(model, q, k3v, dt)
        k4v = v + dt * k3a
        k4a = acc(q4, k4v)
        q = core_cy.integrate(model, q, (k1v + 2 * k2v + 2 * k3v + k4v) / 6, dt)
        v = v + dt / 6 * (k1a + 2 * k2a + 2 * k3a + k4a)
    return abs(energy(q, v) - e0) / abs(e0)


@pytest.mark.parametrize("name", ("arm", "ur5", "quadruped", "solo12"))
def test_energy_conserved_free_system_rk4(name):
    # no gravity, no torque: kinetic energy is the only energy
    path = load(name).source
    model = core_cy.Model.from_urdf(path, floating_base=load(name).floating_base,
                                    gravity=(0.0, 0.0, 0.0))
    q, v, _ = random_state(model, _rng(29))
    drift_fine = _rk4_energy_drift(model, q, v, 1e-3, 200)
    assert drift_fine < 1e-7
    # and it shrinks with dt (the check can fail if the dynamics are wrong)
    drift_coarse = _rk4_energy_drift(model, q, v, 2e-2, 10)
    assert drift_fine < drift_coarse


def test_energy_conserved_with_gravity_rk4():
    model = load("arm")
    q, v, _ = random_state(model, _rng(30))
    assert _rk4_energy_drift(model, q, v, 1e-3, 200) < 1e-7


def test_wrong_dynamics_breaks_energy_check():
    # the energy check is sensitive: a constant torque makes the "free" system gain energy
    model = core_cy.Model.from_urdf(load("ur5").source, gravity=(0.0, 0.0, 0.0))
    q, v, _ = random_state(model, _rng(31))
    assert _rk4_energy_drift(model, q, v, 1e-3, 200, tau=np.full(model.nv, 0.5)) > 1e-4


@pytest.mark.parametrize("name", ("arm", "solo12"))
def test_batch_forms_equal_single_calls(name):
    model = load(name)
    data = core_cy.Data(model)
    rng = _rng(32)
    states = [random_state(model, rng) for _ in range(5)]
    Q = np.array([s[0] for s in states])
    V = np.array([s[1] for s in states])
    A = np.array([s[2] for s in states])
    T = core_cy.rnea_batch(model, Q, V, A)
    D = core_cy.aba_batch(model, Q, V, A)
    Y = core_cy.regressor_batch(model, Q, V, A)
    for k in range(5):
        assert np.array_equal(T[k], core_cy.rnea(model, data, Q[k], V[k], A[k]))
        assert np.array_equal(D[k], core_cy.aba(model, data, Q[k], V[k], A[k]))
        assert np.array_equal(Y[k], core_cy.regressor(model, data, Q[k], V[k], A[k]))
    out = np.empty_like(T)
    assert core_cy.rnea_batch(model, Q, V, A, out=out, data=data) is out
    assert np.array_equal(out, T)


def test_total_mass_and_com_of_built_in_quadruped_are_plausible():
    # robots/quadruped is sized at ~2.5 kg (issue 2)
    model = load("quadruped")
    assert 1.5 < model.total_mass < 4.0
