# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Python entry points of the dense kernels in ``_dense.pxd`` (tests only).

The kernels themselves are ``cdef inline`` in the .pxd and compile into the
modules that cimport them; these thin wrappers compile one more copy so that
tests/unit/core_cy/test_linalg.py can hold each against
:mod:`core_cy.linalg.reference`.  Shapes are the caller's business: the
wrappers take C-contiguous float64 arrays of the documented shapes and
allocate their outputs (not for a hot path).
"""

import numpy as np

__all__ = [
    "cross3_np", "dot_np", "mat3_vec_np", "mat3t_vec_np", "mat3_mul_np", "mat3_congruence_sym_np",
    "mat6_vec_np", "matvec_add_np", "gram_rows_np", "matTvec_acc_np", "cholesky_factor_np", "cholesky_factor_rel_np",
    "solve_lower_np", "solve_lower_t_np", "cholesky_solve_np", "ldlt_solve_np",
]


def cross3_np(const double[::1] a, const double[::1] b):
    """a x b, (3,)."""
    out = np.empty(3)
    cdef double[::1] o = out
    cross3(&a[0], &b[0], &o[0])
    return out


def dot_np(const double[::1] a, const double[::1] b, double s=0.0):
    """(dot, dot_acc from s, dot3 of the first 3, dot6 of the first 6) of two (n,) vectors, n >= 6."""
    cdef int n = <int>a.shape[0]
    return (dot(n, &a[0], &b[0]), dot_acc(s, n, &a[0], &b[0]), dot3(&a[0], &b[0]),
            dot6(&a[0], &b[0]))


def mat3_vec_np(const double[:, ::1] R, const double[::1] x):
    """R @ x, (3,)."""
    out = np.empty(3)
    cdef double[::1] o = out
    mat3_vec(&R[0, 0], &x[0], &o[0])
    return out


def mat3t_vec_np(const double[:, ::1] R, const double[::1] x):
    """R.T @ x, (3,)."""
    out = np.empty(3)
    cdef double[::1] o = out
    mat3t_vec(&R[0, 0], &x[0], &o[0])
    return out


def mat3_mul_np(const double[:, ::1] A, const double[:, ::1] B):
    """A @ B, (3, 3)."""
    out = np.empty((3, 3))
    cdef double[:, ::1] o = out
    mat3_mul(&A[0, 0], &B[0, 0], &o[0, 0])
    return out


def mat3_congruence_sym_np(const double[:, ::1] R, const double[:, ::1] S):
    """R @ S @ R.T for a symmetric S, (3, 3)."""
    out = np.empty((3, 3))
    cdef double[:, ::1] o = out
    mat3_congruence_sym(&R[0, 0], &S[0, 0], &o[0, 0])
    return out


def mat6_vec_np(const double[:, ::1] A, const double[::1] x):
    """A @ x, A (6, 6), (6,)."""
    out = np.empty(6)
    cdef double[::1] o = out
    mat6_vec(&A[0, 0], &x[0], &o[0])
    return out


def matvec_add_np(const double[:, ::1] A, const double[::1] x, const double[::1] b):
    """b + A @ x, A (m, n), (m,)."""
    out = np.empty(A.shape[0])
    cdef double[::1] o = out
    matvec_add(<int>A.shape[0], <int>A.shape[1], &A[0, 0], &x[0], &b[0], &o[0])
    return out


def gram_rows_np(const double[:, ::1] A):
    """A @ A.T, A (m, n), (m, m)."""
    out = np.empty((A.shape[0], A.shape[0]))
    cdef double[:, ::1] o = out
    gram_rows(<int>A.shape[0], <int>A.shape[1], &A[0, 0], &o[0, 0])
    return out


def matTvec_acc_np(const double[:, ::1] A, const double[::1] x, const double[::1] y):
    """y + A.T @ x, A (m, n), (n,) (y is copied, not changed)."""
    out = np.array(y, dtype=np.float64)
    cdef double[::1] o = out
    matTvec_acc(<int>A.shape[0], <int>A.shape[1], &A[0, 0], &x[0], &o[0])
    return out


def cholesky_factor_np(const double[:, ::1] A):
    """(status, F): F is A with its lower triangle factored in place (0 or -1)."""
    out = np.array(A, dtype=np.float64)
    cdef double[:, ::1] o = out
    cdef int rc = cholesky_factor(<int>A.shape[0], &o[0, 0])
    return rc, out


def cholesky_factor_rel_np(const double[:, ::1] A, double rel_tol):
    """(status, F) as cholesky_factor_np, -1 also for a pivot^2 <= rel_tol A[j, j]."""
    out = np.array(A, dtype=np.float64)
    cdef double[:, ::1] o = out
    cdef int rc = cholesky_factor_rel(<int>A.shape[0], &o[0, 0], rel_tol)
    return rc, out


def solve_lower_np(const double[:, ::1] L, const double[::1] x):
    """L^-1 x for the lower triangle of L, (n,)."""
    out = np.array(x, dtype=np.float64)
    cdef double[::1] o = out
    solve_lower(<int>L.shape[0], &L[0, 0], &o[0])
    return out


def solve_lower_t_np(const double[:, ::1] L, const double[::1] x):
    """L^-T x for the lower triangle of L, (n,)."""
    out = np.array(x, dtype=np.float64)
    cdef double[::1] o = out
    solve_lower_t(<int>L.shape[0], &L[0, 0], &o[0])
    return out


def cholesky_solve_np(const double[:, ::1] L, const double[::1] x):
    """A^-1 x given L from cholesky_factor_np, (n,)."""
    out = np.array(x, dtype=np.float64)
    cdef double[::1] o = out
    cholesky_solve(<int>L.shape[0], &L[0, 0], &o[0])
    return out


def ldlt_solve_np(const double[:, ::1] A, const double[::1] b):
    """(status, x) with A x = b by LDL^T (0 or -1 when A is not positive definite)."""
    cdef int n = <int>A.shape[0]
    out = np.array(b, dtype=np.float64)
    work = np.empty(n * n + n)
    cdef double[::1] o = out
    cdef double[::1] w = work
    cdef int rc = ldlt_solve(n, &A[0, 0], &o[0], &w[0])
    return rc, out
