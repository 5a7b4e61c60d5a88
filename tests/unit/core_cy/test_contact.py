"""Compliant contact laws, plane detection and the PGS LCP (seed 002 §10 checks 10-11,
seed 003 §9 check 11)."""

import numpy as np
import pytest

from servoloop.core_cy.contact import laws as C
from servoloop.core_cy.contact import lcp
from servoloop.core_cy.contact import reference as ref

LAW = C.ContactLaw(stiffness=3e5, exponent=1.5, damping_max=800.0, ramp_width=1e-3,
                   mu_static=0.8, mu_dynamic=0.6, v_static=0.01, v_dynamic=0.02)


def test_normal_force_continuous_at_touchdown():
    # f_n(depth=0, any rate) = 0, and tiny depths give tiny forces even at high speed
    assert np.all(C.normal_force(LAW, np.zeros(5), np.linspace(-2, 2, 5)) == 0.0)
    d = np.array([1e-9, 1e-8, 1e-7])
    f = C.normal_force(LAW, d, 1.0)
    assert np.all(f < 1e-3)
    assert np.all(np.diff(f) > 0)


def test_damping_ramp_values():
    w, cmax = LAW.ramp_width, LAW.damping_max
    c = C.damping_ramp(LAW, np.array([0.0, w / 2, w, 2 * w, -w]))
    np.testing.assert_allclose(c, [0.0, cmax / 2, cmax, cmax, 0.0], atol=1e-12)


def test_normal_force_hertz_and_no_pull():
    d = np.array([1e-4, 5e-4, 2e-3])
    np.testing.assert_allclose(C.normal_force(LAW, d, 0.0), LAW.stiffness * d**1.5, rtol=1e-12)
    # leaving fast: damping would pull, the clamp keeps f_n >= 0
    assert np.all(C.normal_force(LAW, d, -10.0) >= 0.0)
    unclamped = C.ContactLaw(**{**LAW.__dict__, "clamp_normal": False})
    assert C.normal_force(unclamped, np.array([2e-3]), -10.0)[0] < 0.0


def test_normal_force_matches_reference():
    rng = np.random.default_rng(0)
    d = rng.uniform(-2e-3, 3e-3, 200)
    r = rng.uniform(-1, 1, 200)
    np.testing.assert_allclose(C.normal_force(LAW, d, r), ref.normal_force(LAW, d, r),
                               rtol=1e-12, atol=1e-12)


def test_friction_coefficient_odd_values_and_c1():
    v = np.linspace(-0.05, 0.05, 2001)
    mu = C.friction_coefficient(LAW, v)
    np.testing.assert_allclose(mu, -C.friction_coefficient(LAW, -v), atol=1e-15)
    np.testing.assert_allclose(mu, ref.friction_coefficient(LAW, v), atol=1e-14)
    pts = np.array([0.0, LAW.v_static, -LAW.v_static, LAW.v_dynamic, -LAW.v_dynamic])
    np.testing.assert_allclose(C.friction_coefficient(LAW, pts),
                               [0, 0.8, -0.8, 0.6, -0.6], atol=1e-14)
    # C1: one-sided slopes agree at the joins +-v_s, +-v_d (both are 0 there);
    # the peak slope is 1.5 mu_s / v_s = 120, so 1e-3 is a tight bound
    h = 1e-9
    for x in (LAW.v_static, -LAW.v_static, LAW.v_dynamic, -LAW.v_dynamic):
        left = (C.friction_coefficient(LAW, x)[0] - C.friction_coefficient(LAW, x - h)[0]) / h
        right = (C.friction_coefficient(LAW, x + h)[0] - C.friction_coefficient(LAW, x)[0]) / h
        assert abs(left - right) < 1e-3, (x, left, right)


@pytest.mark.parametrize("cone", ["per_axis", "elliptic"])
def test_friction_opposes_slip(cone):
    law = C.ContactLaw(**{**LAW.__dict__, "cone": cone})
    rng = np.random.default_rng(1)
    slip = rng.normal(0, 0.03, (500, 2))
    fn = rng.uniform(0, 50, 500)
    f = C.friction_force(law, slip, fn)
    assert np.all(np.einsum("ij,ij->i", f, slip) <= 0.0)
    np.testing.assert_allclose(f, ref.friction_force(law, slip, fn), atol=1e-12)
    lim = law.mu_static * fn
    if cone == "elliptic":
        assert np.all(np.linalg.norm(f, axis=1) <= lim + 1e-12)
    else:
        assert np.all(np.abs(f) <= lim[:, None] + 1e-12)


def test_contact_force_on_tilted_plane():
    n = np.array([0.0, np.sin(0.3), np.cos(0.3)])
    R = C.plane_frame(n)
    np.testing.assert_allclose(R.T @ R, np.eye(3), atol=1e-14)
    np.testing.assert_allclose(R[:, 2], n)
    assert np.linalg.det(R) > 0
    f = C.contact_force(LAW, 1e-3, np.zeros(3), R)
    np.testing.assert_allclose(f, LAW.stiffness * 1e-3**1.5 * n, rtol=1e-12)
    # sliding along t1: friction along -t1 at mu_d
    f = C.contact_force(LAW, 1e-3, 0.5 * R[:, 0], R)
    fn = LAW.stiffness * 1e-3**1.5
    np.testing.assert_allclose(f, fn * n - LAW.mu_dynamic * fn * R[:, 0], rtol=1e-12)


def test_sphere_point_and_box_detection():
    n = np.array([0.0, 0.0, 1.0])
    p, gap, _ = C.sphere_plane([0.1, 0.2, 0.015], 0.02, normal=n)
    assert gap == pytest.approx(-0.005)
    np.testing.assert_allclose(p, [0.1, 0.2, -0.005])
    assert C.point_plane([0, 0, -0.01]) == pytest.approx(-0.01)
    # slope through (0, 0, 1): a point on it has zero gap
    ns = np.array([np.sin(0.2), 0.0, np.cos(0.2)])
    q = np.array([0.0, 0.0, 1.0]) + 0.3 * np.array([np.cos(0.2), 0.0, -np.sin(0.2)])
    assert abs(C.point_plane(q, [0, 0, 1.0], ns)) < 1e-14
    c = np.array([0.0, 0.0, 0.04])
    pts, gaps = C.box_plane(c, np.eye(3), [0.1, 0.05, 0.05])
    assert sorted(np.round(gaps, 12)) == [-0.01] * 4 + [0.09] * 4
    np.testing.assert_allclose(pts.mean(axis=0), c, atol=1e-15)


def _random_contact_lcp(rng, nc, nv=18):
    J = rng.normal(size=(3 * nc, nv))
    A = rng.normal(size=(nv, nv))
    M = A @ A.T + nv * np.eye(nv)
    W = J @ np.linalg.solve(M, J.T)
    b = rng.normal(size=3 * nc)
    b[2::3] -= 0.5  # approaching contacts
    return W, b


@pytest.mark.parametrize("cone", ["per_axis", "elliptic"])
def test_pgs_residual_and_complementarity(cone):
    rng = np.random.default_rng(2)
    for nc in (1, 2, 4):
        W, b = _random_contact_lcp(rng, nc)
        mu = np.full(nc, 0.7)
        r = lcp.solve_lcp_pgs(W, b, mu, max_iter=2000, tol=1e-12, cone=cone)
        lam, w = r.impulses, r.velocity
        np.testing.assert_allclose(w, W @ lam + b, atol=1e-12)
        assert r.residual < 1e-6 and r.complementarity < 1e-6, r
        assert ref.lcp_natural_residual(W, b, mu, lam, cone) < 1e-6
        assert np.all(lam[2::3] >= 0) and np.all(w[2::3] >= -1e-6)


def test_pgs_frictionless_matches_qp():
    # frictionless: the LCP is min 1/2 l'Wl + b'l, l >= 0 (scipy reference)
    from scipy.optimize import minimize

    rng = np.random.default_rng(3)
    W, b = _random_contact_lcp(rng, 4)
    idx = np.arange(2, 12, 3)
    Wn, bn = W[np.ix_(idx, idx)], b[idx]
    r = lcp.solve_lcp_pgs(W, b, np.zeros(4), max_iter=5000, tol=1e-14)
    res = minimize(lambda x: 0.5 * x @ Wn @ x + bn @ x, np.zeros(4), jac=lambda x: Wn @ x + bn,
                   bounds=[(0, None)] * 4, method="L-BFGS-B", options={"ftol": 1e-15, "gtol": 1e-12})
    np.testing.assert_allclose(r.impulses[idx], res.x, atol=1e-6)
    assert np.all(r.impulses[0::3] == 0) and np.all(r.impulses[1::3] == 0)


def test_pgs_warm_start_converges_faster():
    rng = np.random.default_rng(4)
    W, b = _random_contact_lcp(rng, 4)
    mu = np.full(4, 0.8)
    cold = lcp.solve_lcp_pgs(W, b, mu, max_iter=5000, tol=1e-10)
    warm = lcp.solve_lcp_pgs(W, b, mu, warm_start=cold.impulses, max_iter=5000, tol=1e-10)
    assert warm.iterations < cold.iterations
    np.testing.assert_allclose(warm.impulses, cold.impulses, atol=1e-6)


def test_pgs_separating_contact_gets_no_impulse():
    W = np.eye(3)
    b = np.array([0.1, 0.0, 0.2])
    r = lcp.solve_lcp_pgs(W, b, [0.5])
    assert np.all(r.impulses == 0.0)


def test_law_validation_names_field():
    with pytest.raises(ValueError, match="cone"):
        C.ContactLaw(cone="square")
    with pytest.raises(ValueError, match="v_dynamic"):
        C.ContactLaw(v_static=0.02, v_dynamic=0.01)


# -- Lemke and principal pivoting (core_cy.contact.lcp, seed 003 digest §4) ------
def _solvable_lcp(rng, n, rank):
    """PSD Q of the given rank and r = w* - Q z* with z*, w* >= 0 complementary."""
    X = rng.standard_normal((n, rank))
    Q = X @ X.T
    on = rng.uniform(size=n) < 0.5
    z_star = np.where(on, rng.uniform(0.1, 1, n), 0.0)
    w_star = np.where(on, 0.0, rng.uniform(0.1, 1, n))
    return Q, w_star - Q @ z_star


def _assert_lcp_solution(Q, r, z, w, tol=1e-9):
    np.testing.assert_allclose(w, Q @ z + r, atol=1e-12 * max(1.0, np.abs(r).max()))
    assert z.min() >= 0 and w.min() >= -tol and np.abs(z * w).max() < tol


def test_lemke_and_ppm_solve_random_psd_lcps():
    rng = np.random.default_rng(5)
    for n in (1, 4, 9, 16):
        for rank in sorted({1, max(1, n // 2), n}):
            Q, r = _solvable_lcp(rng, n, rank)
            z, w, _ = lcp.lemke(Q, r)
            _assert_lcp_solution(Q, r, z, w)
            out = lcp.ppm(Q, r)             # None would mean it cycled (callers then use Lemke)
            assert out is not None, (n, rank)
            _assert_lcp_solution(Q, r, out[0], out[1])


def test_lemke_regularized_needs_no_regularization_on_a_pd_lcp():
    rng = np.random.default_rng(6)
    Q, r = _solvable_lcp(rng, 6, 6)
    z, w, pivots, eps = lcp.lemke_regularized(Q, r)
    assert eps == 0.0 and pivots >= 1
    _assert_lcp_solution(Q, r, z, w)


def test_lcp_failures_raise_lcp_error_with_the_residual():
    # w = -1 - z can never be >= 0 with z >= 0
    with pytest.raises(lcp.LCPError, match="ray termination") as e:
        lcp.lemke(np.array([[-1.0]]), np.array([-1.0]))
    assert e.value.residual == pytest.approx(1.0)
    with pytest.raises(lcp.LCPError, match="regularisation 1e-4"):
        lcp.lemke_regularized(np.array([[-1.0]]), np.array([-1.0]))


def test_pgs_names_a_bad_cone_and_shape():
    with pytest.raises(ValueError, match="cone 'square'.*per_axis"):
        lcp.solve_lcp_pgs(np.eye(3), np.zeros(3), [0.5], cone="square")
    with pytest.raises(ValueError, match="W: expected shape"):
        lcp.solve_lcp_pgs(np.eye(2), np.zeros(3), [0.5])
