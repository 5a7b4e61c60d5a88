"""The shared dense kernels (core_cy/linalg/_dense.pxd) against their NumPy statements.

Randomized: each kernel on many random inputs of the sizes the simulator and
the dynamics use (3, 6, up to a humanoid's nv and a dozen contacts' rows).
"""

import numpy as np
import pytest

from servoloop.core_cy.linalg import _dense as K
from servoloop.core_cy.linalg import reference as ref

RNG_SEED = 20240611
TRIALS = 50


def rng():
    return np.random.default_rng(RNG_SEED)


def spd(g, n, cond=1e3):
    """Random SPD (n, n) with condition number ~cond."""
    Q, _ = np.linalg.qr(g.standard_normal((n, n)))
    return (Q * np.geomspace(1.0, 1.0 / cond, n)) @ Q.T


def rotation(g):
    Q, R = np.linalg.qr(g.standard_normal((3, 3)))
    Q = Q * np.sign(np.diag(R))
    return Q if np.linalg.det(Q) > 0 else -Q


def test_vector_kernels_match_numpy():
    g = rng()
    for _ in range(TRIALS):
        a, b = g.standard_normal(3), g.standard_normal(3)
        np.testing.assert_allclose(K.cross3_np(a, b), ref.cross3(a, b), rtol=0, atol=1e-14)
        x, y = g.standard_normal(9), g.standard_normal(9)
        s = g.standard_normal()
        d, ds, d3, d6 = K.dot_np(x, y, s)
        assert d == pytest.approx(ref.dot(x, y), abs=1e-13)
        assert ds == pytest.approx(s + ref.dot(x, y), abs=1e-13)
        assert d3 == pytest.approx(ref.dot(x[:3], y[:3]), abs=1e-14)
        assert d6 == pytest.approx(ref.dot(x[:6], y[:6]), abs=1e-14)


def test_cross3_is_anticommutative_and_orthogonal():
    g = rng()
    for _ in range(TRIALS):
        a, b = g.standard_normal(3), g.standard_normal(3)
        c = K.cross3_np(a, b)
        np.testing.assert_allclose(c, -K.cross3_np(b, a), atol=1e-15)
        assert abs(c @ a) < 1e-13 and abs(c @ b) < 1e-13


def test_small_matrix_kernels_match_numpy():
    g = rng()
    for _ in range(TRIALS):
        R, B = rotation(g), g.standard_normal((3, 3))
        x = g.standard_normal(3)
        S = B + B.T
        np.testing.assert_allclose(K.mat3_vec_np(R, x), ref.mat3_vec(R, x), atol=1e-14)
        np.testing.assert_allclose(K.mat3t_vec_np(R, x), ref.mat3t_vec(R, x), atol=1e-14)
        np.testing.assert_allclose(K.mat3_mul_np(R, B), ref.mat3_mul(R, B), atol=1e-14)
        out = K.mat3_congruence_sym_np(R, S)
        np.testing.assert_allclose(out, ref.mat3_congruence_sym(R, S), atol=1e-13)
        assert np.array_equal(out, out.T)        # exactly symmetric, by construction
        A6, x6 = g.standard_normal((6, 6)), g.standard_normal(6)
        np.testing.assert_allclose(K.mat6_vec_np(A6, x6), ref.mat6_vec(A6, x6), atol=1e-13)


@pytest.mark.parametrize("m, n", [(1, 1), (3, 18), (12, 18), (36, 30), (5, 2)])
def test_rectangular_kernels_match_numpy(m, n):
    g = rng()
    for _ in range(10):
        A = g.standard_normal((m, n))
        x, b, y = g.standard_normal(n), g.standard_normal(m), g.standard_normal(n)
        xm = g.standard_normal(m) * (g.uniform(size=m) < 0.5)   # sparse, as contact impulses
        np.testing.assert_allclose(K.matvec_add_np(A, x, b), ref.matvec_add(A, x, b), atol=1e-12)
        G = K.gram_rows_np(A)
        np.testing.assert_allclose(G, ref.gram_rows(A), atol=1e-12)
        assert np.array_equal(G, G.T)
        np.testing.assert_allclose(K.matTvec_acc_np(A, xm, y), ref.matTvec_acc(A, xm, y),
                                   atol=1e-12)


@pytest.mark.parametrize("n", [1, 2, 6, 18, 30])
def test_cholesky_factor_and_solves_match_numpy(n):
    g = rng()
    for _ in range(20):
        A = spd(g, n)
        x = g.standard_normal(n)
        rc, F = K.cholesky_factor_np(A)
        assert rc == 0
        L = np.tril(F)
        np.testing.assert_allclose(L, ref.cholesky_factor(A), atol=1e-12)
        np.testing.assert_array_equal(np.triu(F, 1), np.triu(A, 1))   # upper left alone
        np.testing.assert_allclose(K.solve_lower_np(F, x), ref.solve_lower(L, x),
                                   rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(K.solve_lower_t_np(F, x), ref.solve_lower_t(L, x),
                                   rtol=1e-9, atol=1e-9)
        sol = K.cholesky_solve_np(F, x)
        np.testing.assert_allclose(sol, ref.cholesky_solve(L, x), rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(A @ sol, x, atol=1e-9)


def test_cholesky_factor_rel_detects_rank():
    # a PSD Gram matrix of rank 3 in 5 dimensions "factors" through round-off
    # with cholesky_factor; the relative test refuses it, and accepts SPD ones
    g = rng()
    X = g.standard_normal((5, 3))
    G = X @ X.T
    rc, _ = K.cholesky_factor_rel_np(G, 1e-12)
    assert rc == -1
    with pytest.raises(np.linalg.LinAlgError):
        ref.cholesky_factor_rel(G + 1e-15 * np.eye(5), 1e-12)
    A = spd(g, 5)
    rc, F = K.cholesky_factor_rel_np(A, 1e-12)
    assert rc == 0
    np.testing.assert_allclose(np.tril(F), ref.cholesky_factor_rel(A, 1e-12), atol=1e-12)


@pytest.mark.parametrize("n", [1, 3, 6, 12])
def test_ldlt_solve_matches_numpy(n):
    g = rng()
    for _ in range(20):
        A = spd(g, n)
        b = g.standard_normal(n)
        rc, x = K.ldlt_solve_np(A, b)
        assert rc == 0
        np.testing.assert_allclose(x, ref.ldlt_solve(A, b), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("bad", ["indefinite", "nan"])
def test_factorizations_refuse_a_matrix_that_is_not_spd(bad):
    g = rng()
    A = spd(g, 6)
    if bad == "indefinite":
        A[4, 4] = -1.0
    else:
        A[2, 2] = np.nan
    assert K.cholesky_factor_np(A)[0] == -1
    assert K.ldlt_solve_np(A, np.ones(6))[0] == -1
    if bad == "indefinite":       # the reference agrees (NumPy lets NaN through)
        with pytest.raises(np.linalg.LinAlgError):
            ref.cholesky_factor(A)
