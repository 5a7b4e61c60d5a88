"""NumPy statements of the dense kernels in ``core_cy/linalg/_dense.pxd`` (tests only).

One function per kernel, same name, same shapes, written with NumPy/SciPy
so the compiled copies have an independent statement to agree with.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import solve_triangular

__all__ = [
    "cross3", "dot", "mat3_vec", "mat3t_vec", "mat3_mul", "mat3_congruence_sym", "mat6_vec",
    "matvec_add", "gram_rows", "matTvec_acc", "cholesky_factor", "solve_lower", "solve_lower_t",
    "cholesky_solve", "ldlt_solve",
]


def cross3(a, b):
    """a x b, (3,)."""
    return np.cross(a, b)


def dot(a, b):
    """a @ b, (n,)."""
    return float(np.dot(a, b))


def mat3_vec(R, x):
    """R @ x, R (3, 3)."""
    return R @ x


def mat3t_vec(R, x):
    """R.T @ x, R (3, 3)."""
    return R.T @ x


def mat3_mul(A, B):
    """A @ B, (3, 3)."""
    return A @ B


def mat3_congruence_sym(R, S):
    """R @ S @ R.T, (3, 3)."""
    return R @ S @ R.T


def mat6_vec(A, x):
    """A @ x, A (6, 6)."""
    return A @ x


def matvec_add(A, x, b):
    """b + A @ x, A (m, n)."""
    return b + A @ x


def gram_rows(A):
    """A @ A.T, A (m, n) -> (m, m)."""
    return A @ A.T


def matTvec_acc(A, x, y):
    """y + A.T @ x, A (m, n)."""
    return y + A.T @ x


def cholesky_factor(A):
    """Lower-triangular L with A = L L^T, (n, n); LinAlgError if A is not SPD."""
    return np.linalg.cholesky(A)


def cholesky_factor_rel(A, rel_tol):
    """cholesky_factor, but LinAlgError when a pivot^2 <= rel_tol A[j, j] (rank test)."""
    L = np.linalg.cholesky(A)
    if np.any(np.diag(L) ** 2 <= rel_tol * np.diag(A)):
        raise np.linalg.LinAlgError("singular to the relative tolerance")
    return L


def solve_lower(L, x):
    """L^-1 x for lower-triangular L."""
    return solve_triangular(L, x, lower=True)


def solve_lower_t(L, x):
    """L^-T x for lower-triangular L."""
    return solve_triangular(L, x, lower=True, trans="T")


def cholesky_solve(L, x):
    """A^-1 x with A = L L^T."""
    return solve_lower_t(L, solve_lower(L, x))


def ldlt_solve(A, b):
    """A^-1 b for an SPD A (n, n)."""
    return np.linalg.solve(A, b)
