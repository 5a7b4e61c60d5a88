"""Least-squares solvers for W theta = tau: unconstrained, physically consistent, friction only.

* :func:`solve_ols` -- ordinary least squares on the base regressor (unique pi).
* :func:`solve_sdp` -- problem (32) of Zhang et al. 2024 written on theta:
  ``min ||W theta - tau||^2`` s.t. Fc, Fv, Ia >= 0 and every body's
  pseudo-inertia ``>= eps I``.  (32) optimises (pi, theta_d); the map to
  theta is a bijection (eq. 17), so this is the same problem, and it is a
  convex SDP: no multistart.  Only pi is unique; theta is one point of a flat
  valley unless ``prior_weight > 0`` picks the one nearest a prior.
* :func:`solve_friction` -- the paper's legs variant: inertia fixed (e.g. to
  the URDF's), bounded least squares on friction/armature only, no SDP.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.optimize

from servoloop.calibration.errors import FitError
from servoloop.calibration.inertial.consistency import pseudo_inertia
from servoloop.calibration.inertial.layout import ParameterLayout

__all__ = ["SolverResult", "solve_ols", "solve_sdp", "solve_friction", "DEFAULT_EPS", "SDP_SOLVER"]

# LMI margin [kg m^2].  Servo-sized links have pseudo-inertia eigenvalues of
# ~1e-6 (the built-in arm: 5e-6, the humanoid: 7e-7), so the paper's
# suggested 1e-6 would exclude the true parameters; 1e-9 keeps them inside.
DEFAULT_EPS = 1e-9
SDP_SOLVER = "CLARABEL"
# Tighter than Clarabel's 1e-8 defaults: noise-free data must give pi to ~1e-9
# (the variables are column-normalised, so these are relative).
_SOLVER_OPTIONS = {"CLARABEL": {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10}}


@dataclass
class SolverResult:
    """x: the solution (theta (p,) or pi (r,)); cost: ||W x - tau||^2; status: solver's word."""

    x: np.ndarray
    cost: float
    status: str


def _column_scale(W):
    norms = np.linalg.norm(W, axis=0)
    return np.where(norms > 1e-12 * max(norms.max(), 1e-300), norms, 1.0)


def _gram(A, b):
    """A^T A and A^T b: one GEMM each.  Tall LAPACK QR/SVD calls on (M, p)
    are 10-40x slower than this on a loaded machine with threaded BLAS."""
    return A.T @ A, A.T @ b


def solve_ols(Y: np.ndarray, tau: np.ndarray) -> SolverResult:
    """Unconstrained least squares ``min ||Y pi - tau||^2``.

    Normal equations on unit-norm columns when they are well conditioned
    (cond(Y) < 1e4, so at most ~1e-8 relative loss), else LAPACK ``gelsy``.

    Parameters
    ----------
    Y : ndarray (M, r), full column rank (a base regressor)
    tau : ndarray (M,)
    """
    Y = np.asarray(Y, dtype=float)
    tau = np.asarray(tau, dtype=float).reshape(-1)
    s = _column_scale(Y)
    Ys = Y / s
    G, g = _gram(Ys, tau)
    w = np.linalg.eigvalsh(G)
    if w[0] > 1e-8 * w[-1]:
        x = scipy.linalg.cho_solve(scipy.linalg.cho_factor(G), g)
    else:
        x = scipy.linalg.lstsq(Ys, tau, lapack_driver="gelsy")[0]
    pi = x / s
    r = Y @ pi - tau
    return SolverResult(pi, float(r @ r), "optimal")


def _lmi_basis():
    # pseudo_inertia is linear: J(p) = sum_k p_k E_k
    return [pseudo_inertia(np.eye(10)[k]) for k in range(10)]


def solve_sdp(W: np.ndarray, tau: np.ndarray, layout: ParameterLayout, eps: float = DEFAULT_EPS,
              prior=None, prior_weight: float = 0.0, solver: str = SDP_SOLVER) -> SolverResult:
    """Physically consistent least squares (paper eq. 32), as a convex SDP.

    Parameters
    ----------
    W : ndarray (M, p), stacked full regressor (any rank)
    tau : ndarray (M,), torques [N m]
    layout : ParameterLayout of theta
    eps : float, pseudo-inertia margin [kg m^2]
    prior : ndarray (p,) or None, theta to stay near along unidentifiable directions
    prior_weight : float, weight of ``||N^T (theta - prior)||`` (N: null space of W,
        column-normalised units) added to ``||W theta - tau||``; 0 = off.  Unconstrained it
        never changes pi; where the LMI couples the two, keep it small (default 1e-3 in
        :func:`identify`).
    solver : str, a cvxpy SDP solver name (Clarabel by default, SCS works too)

    Returns
    -------
    SolverResult with x = theta (p,)
    """
    import cvxpy as cp

    W = np.asarray(W, dtype=float)
    tau = np.asarray(tau, dtype=float).reshape(-1)
    p = layout.n_params
    if W.shape != (tau.size, p):
        raise FitError(f"solve_sdp: W {W.shape} and tau {tau.shape} do not match the layout ({p} params)")
    # theta = x / s with unit-norm columns: masses and inertias differ by 1e4
    # in SI and the interior-point tolerances are absolute.
    s = _column_scale(W)
    # ||W theta - tau||^2 = ||R x - z||^2 + const with R^T R = W^T W: a p x p
    # problem, not M x p.  R from the eigen-decomposition of the Gram matrix
    # (W is rank deficient: only its range counts).
    G, g = _gram(W / s, tau)
    lam, Vg = np.linalg.eigh(G)
    keep = lam > 1e-13 * lam[-1]
    R = np.sqrt(lam[keep])[:, None] * Vg[:, keep].T
    z = (Vg[:, keep].T @ g) / np.sqrt(lam[keep])
    x = cp.Variable(p)
    theta = cp.multiply(1.0 / s, x)
    # Minimise the norm, not its square (same minimiser): the solver's
    # tolerance then bounds the residual itself, not its square, which is
    # what makes noise-free data come back to ~1e-8 even when an inequality
    # is active at the optimum (e.g. a true Ia = 0).
    objective = cp.norm(R @ x - z, 2)
    null = Vg[:, ~keep]
    if prior_weight > 0.0 and null.shape[1]:
        if prior is None:
            raise FitError("solve_sdp: prior_weight > 0 needs a prior theta")
        # Only along the null space of W: breaks the ties of the flat valley
        # (e.g. the mass of a body that only turns about a fixed axis) without
        # biasing any identifiable combination.  A separate norm, not one
        # stacked residual: stacked, the data misfit would enter at second
        # order next to a non-zero pull and come back ~1e-5 off.
        objective = objective + prior_weight * cp.norm(null.T @ (x - s * np.asarray(prior, dtype=float)), 2)
    cons = []
    nn = layout.nonnegative_indices()
    if nn.size:
        cons.append(theta[nn] >= 0)
    E = _lmi_basis()
    for b in range(layout.n_bodies):
        sl = layout.body_slice(b)
        J = sum(theta[sl.start + k] * E[k] for k in range(10))
        cons.append(0.5 * (J + J.T) - eps * np.eye(4) >> 0)
    prob = cp.Problem(cp.Minimize(objective), cons)
    try:
        prob.solve(solver=solver, **_SOLVER_OPTIONS.get(solver, {}))
    except cp.error.SolverError as exc:
        raise FitError(f"solve_sdp: solver {solver} failed: {exc}") from exc
    if prob.status not in ("optimal", "optimal_inaccurate"):
        raise FitError(f"solve_sdp: solver {solver} ended with status {prob.status!r}")
    th = _polish(np.asarray(x.value) / s, layout, eps)
    r = W @ th - tau
    return SolverResult(th, float(r @ r), prob.status)


def _polish(theta, layout: ParameterLayout, eps: float) -> np.ndarray:
    """Move the solver's answer the last ~1e-10 into the feasible set.

    Interior-point feasibility tolerances leave a pseudo-inertia eigenvalue a
    few 1e-10 kg m^2 below eps on bodies whose constraint is active.  Adding
    d I to the pseudo-inertia (m += d, Ixx, Iyy, Izz += 2 d) lifts every
    eigenvalue by d and changes the torques by ~d; friction is clipped at 0.
    """
    theta = theta.copy()
    for b in range(layout.n_bodies):
        sl = layout.body_slice(b)
        lo = np.linalg.eigvalsh(pseudo_inertia(theta[sl]))[0]
        if lo < eps:
            d = max(1.001 * eps, 1e-12) - lo  # a hair over, so roundoff stays above eps
            theta[sl.start] += d
            theta[[sl.start + 4, sl.start + 6, sl.start + 9]] += 2.0 * d
    nn = layout.nonnegative_indices()
    theta[nn] = np.maximum(theta[nn], 0.0)
    return theta


def solve_friction(W: np.ndarray, tau: np.ndarray, layout: ParameterLayout,
                   theta_inertial) -> SolverResult:
    """Legs variant: inertial block fixed, Fc, Fv, Ia >= 0 by bounded least squares.

    Parameters
    ----------
    W : ndarray (M, p), stacked full regressor
    tau : ndarray (M,)
    theta_inertial : ndarray (n_inertial,) or (p,), the fixed inertial parameters

    Returns
    -------
    SolverResult with x = theta (p,): the fixed inertial block and the fitted friction
    """
    W = np.asarray(W, dtype=float)
    tau = np.asarray(tau, dtype=float).reshape(-1)
    ni = layout.n_inertial
    th_i = np.asarray(theta_inertial, dtype=float)[:ni]
    A = W[:, ni:]
    b = tau - W[:, :ni] @ th_i
    s = _column_scale(A)
    lb = np.full(A.shape[1], -np.inf)
    lb[layout.nonnegative_indices() - ni] = 0.0
    res = scipy.optimize.lsq_linear(A / s, b, bounds=(lb * s, np.full(A.shape[1], np.inf)),
                                    method="bvls", tol=1e-12)
    th = np.concatenate([th_i, res.x / s])
    r = W @ th - tau
    return SolverResult(th, float(r @ r), "optimal" if res.success else res.message)
