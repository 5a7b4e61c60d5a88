"""The contact LCP solvers, in one place.

- :func:`solve_lcp_pgs`: projected Gauss-Seidel on the boxed (friction
  pyramid or cone) contact LCP, the compiled ``pgs_solve`` of
  ``core_cy/contact/_kernels.pyx`` that the simulator's rigid step cimports;
- :func:`lemke`: Lemke's complementary pivoting for a general LCP
  ``w = Q z + r >= 0, z >= 0, z^T w = 0`` (seed 003 digest §4), and
  :func:`lemke_regularized` with the authors' Tikhonov ladder;
- :func:`ppm`: the modified principal pivoting method I (seed 003 Alg. 2)
  for PSD LCPs, warm-started from a previous active set.

Lemke and PPM are compiled (``_pivot.pyx``, nogil, cimported by the
compiled inverse dynamics); failures raise :class:`LCPError` with the
largest constraint violation in ``residual``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from servoloop.core_cy.contact import _kernels as _k
from servoloop.core_cy.contact import _pivot
from servoloop.core_cy.contact.laws import CONES
from servoloop.core_cy.errors import CoreError

__all__ = ["LCPError", "LCPResult", "solve_lcp_pgs", "lemke", "lemke_regularized", "ppm"]

#: Tikhonov terms tried in turn by :func:`lemke_regularized` (Moby's ladder)
REGULARIZATION_LADDER = _pivot.LADDER


class LCPError(CoreError, ArithmeticError):
    """An LCP solver found no solution.

    ``residual`` is the largest constraint violation found (units of ``w``).
    """

    def __init__(self, message: str, residual: float = float("nan")):
        super().__init__(message)
        self.residual = residual


def _vec(x, name: str, shape=None) -> np.ndarray:
    a = np.ascontiguousarray(x, dtype=np.float64)
    if shape is not None and a.shape != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {a.shape}")
    return a


# --------------------------------------------------------------------------
# projected Gauss-Seidel (compiled)
@dataclass
class LCPResult:
    """Rigid-contact LCP solution: impulses (3nc,) [N s], w = W lam + b (3nc,) [m/s]."""

    impulses: np.ndarray
    velocity: np.ndarray
    iterations: int
    residual: float
    complementarity: float


def solve_lcp_pgs(W, b, mu, warm_start=None, max_iter: int = 100, tol: float = 1e-8,
                  cone: str = "per_axis") -> LCPResult:
    """Projected Gauss-Seidel for the friction-pyramid (or cone) contact LCP.

    Parameters
    ----------
    W : (3nc, 3nc) Delassus matrix J M^-1 J^T [m/s per N s], rows (t1, t2, n) per contact
    b : (3nc,) contact velocity without impulses plus stabilisation [m/s]
    mu : (nc,) friction coefficients
    warm_start : (3nc,) initial impulses (previous step's), default zeros
    cone : "per_axis": the square pyramid |lam_t1|, |lam_t2| <= mu lam_n (faces along
        t1, t2, as ODE; it contains the cone, while seed 003's 4-edge pyramid
        |lam_t1| + |lam_t2| <= mu lam_n lies inside it), or "elliptic": the cone itself

    Returns
    -------
    LCPResult with the natural-map residual [m/s] and max |lam w| of the solution.
    """
    if cone not in CONES:
        raise ValueError(f"solve_lcp_pgs: cone {cone!r}; choose one of {', '.join(CONES)}")
    mu = _vec(np.atleast_1d(mu), "mu").ravel()
    nc = mu.shape[0]
    W = _vec(W, "W", (3 * nc, 3 * nc))
    b = _vec(b, "b", (3 * nc,))
    lam = np.zeros(3 * nc) if warm_start is None else _vec(warm_start, "warm_start", (3 * nc,)).copy()
    w = np.empty(3 * nc)
    it, res, comp = _k.pgs_solve_np(W, b, mu, lam, w, int(max_iter), float(tol), CONES[cone])
    return LCPResult(lam, w, it, res, comp)


# --------------------------------------------------------------------------
# Lemke (seed 003 digest §4): complementary pivoting with covering vector 1,
# compiled in core_cy/contact/_pivot.pyx (the inverse dynamics cimports it)
def lemke(Q, r, max_iter: int | None = None, tol: float | None = None):
    """Solve the LCP w = Q z + r >= 0, z >= 0, z^T w = 0 by Lemke's method.

    Parameters
    ----------
    Q : (n, n) matrix (copositive-plus for a guaranteed answer)
    r : (n,) vector
    max_iter : pivot limit, default max(1000, 50 n)
    tol : pivot tolerance, default n 1e-13 max(1, |Q|, |r|)

    Returns
    -------
    (z, w, pivots): z (n,) >= 0, w = Q z + r (n,), the number of pivots.

    Raises
    ------
    LCPError on ray termination or at the pivot limit.

    Ties in the ratio test go to the artificial variable first (it ends the
    run), then to the lowest row.
    """
    Q = np.ascontiguousarray(Q, dtype=float)
    r = np.ascontiguousarray(r, dtype=float)
    n = r.shape[0]
    if Q.shape != (n, n):
        raise ValueError(f"lemke: Q must be ({n}, {n}) for r of length {n}, got {Q.shape}")
    max_iter = max_iter or max(1000, 50 * n)  # Moby's cap is min(1000, 50n); ours is looser
    scale = max(1.0, np.abs(Q).max(initial=0.0), np.abs(r).max(initial=0.0))
    tol = tol or n * 1e-13 * scale
    z, w, rc = _pivot.lemke_np(Q, r, 0.0, int(max_iter), float(tol))
    if rc == -1:
        raise LCPError("Lemke: ray termination (no solution from this start)", float(-r.min()))
    if rc < 0:
        raise LCPError(f"Lemke: no solution within {max_iter} pivots", float(-r.min()))
    return z, w, rc


def lemke_regularized(Q, r):
    """Lemke on Q, then on Q + eps I for eps = 1e-20 ... 1e-4 (authors' ladder, digest §4).

    Returns
    -------
    (z, w, pivots, eps): the first answer that passes the complementarity
    check, w = Q z + r for the unregularised Q, the pivots of every try, and
    the eps that gave it (0 = none needed).

    Raises
    ------
    LCPError when even eps = 1e-4 gives no answer.
    """
    Q = np.ascontiguousarray(Q, dtype=float)
    r = np.ascontiguousarray(r, dtype=float)
    z, w, rc, eps, piv, res = _pivot.lemke_ladder_np(Q, r)
    if rc != 0:
        why = {-1: "ray termination", -2: "pivot limit"}.get(rc, "fails the complementarity check")
        raise LCPError(f"Lemke: no solution even with regularisation 1e-4 (last try: {why})",
                       float(res) if res >= 0 else float(-r.min()))
    return z, w, piv, eps


# --------------------------------------------------------------------------
# principal pivoting (seed 003 Alg. 2), compiled in core_cy/contact/_pivot.pyx
def ppm(Q, r, active=(), tol: float | None = None, max_iter: int | None = None):
    """Alg. 2 (modified PPM I) for the PSD LCP w = Q z + r, warm-started.

    Parameters
    ----------
    Q : (n, n) symmetric PSD; r : (n,)
    active : the previous call's active set (indices with z > 0, the
        paper's "non-basic" set, erratum E9); if a solution with that set
        exists it is the one returned, so the answer does not jump between
        calls (§4.6)
    tol : default 1e-10 max(1, |Q|, |r|); max_iter : ignored (4 n + 10)

    Returns
    -------
    (z, w, iterations, active) or None when a sub-block Q[a, a] is singular
    (rank(Q) < |a|, erratum E9), it cycles or stalls (the caller then falls
    back to :func:`lemke`).
    """
    Q = np.ascontiguousarray(Q, dtype=float)
    r = np.ascontiguousarray(r, dtype=float)
    scale = max(1.0, np.abs(Q).max(initial=0.0), np.abs(r).max(initial=0.0))
    tol = tol or 1e-10 * scale
    z, w, it, act = _pivot.ppm_np(Q, r, list(active), float(tol))
    if it < 0:
        return None
    return z, w, max(it, 0), [int(i) for i in np.flatnonzero(act)]
