"""The paper's gradient of J(theta): the equality-QP sensitivity of eqs. (8)-(11).

At a solution w* of the ROM-constrained step, keep the active constraints
(every equality, the inequalities and variable bounds within ``ACTIVE_TOL``
of their bound), with F = d(active)/dw and G = d(active)/dtheta, and solve
the KKT system of the local quadratic model

    [H  F^T] [Q]   [ 0]
    [F   0 ] [V] = [-G]          (9, one right-hand side per theta entry)

for Q = dw*/dtheta (n_w, n_theta); the gradient is Q^T b with b = dJ/dw
(eq. 11).  H is the cost's Hessian plus 1e-8 I, as in the authors' code;
the result does not depend on H (digest section 3.2: Q^T b = G^T nu).

Linearly dependent active rows are dropped greedily (pivoted QR of F^T,
tolerance ``RANK_TOL`` relative to the largest pivot), as the authors'
code does by SVD.  This module exists to check the envelope gradient the
learning uses (IPOPT's parameter multipliers, :attr:`Solution.grad`)
against the paper's own construction; the learning itself never calls it.
"""

from __future__ import annotations

import casadi as ca
import numpy as np
import scipy.linalg

__all__ = ["ACTIVE_TOL", "RANK_TOL", "kkt_gradient"]

ACTIVE_TOL = 1e-4     #: an inequality or bound this close to its bound is active (authors' value)
RANK_TOL = 1e-10      #: pivots below this fraction of the largest mark a dependent active row
H_REG = 1e-8          #: the authors' regulariser of the cost Hessian


def _derivatives(prob):
    """casadi Function (w, p) -> (dg/dw, dg/dp, df/dw, d2f/dw2), built once per problem."""
    fn = getattr(prob, "_sensitivity_fn", None)
    if fn is None:
        nlp = prob._nlp
        w, p, f, g = nlp["x"], nlp["p"], nlp["f"], nlp["g"]
        fn = ca.Function("sens", [w, p], [ca.jacobian(g, w), ca.jacobian(g, p), ca.gradient(f, w),
                                          ca.hessian(f, w)[0]]).expand()
        prob._sensitivity_fn = fn
    return fn


def kkt_gradient(prob, sol, theta) -> dict:
    """The paper's dJ/dtheta at a ROM solution ``sol`` of ``prob`` (a ROM :class:`StepProblem`).

    Parameters
    ----------
    prob : the ROM-constrained StepProblem that produced ``sol``
    sol : its Solution at ``theta``
    theta : the ROM parameters, shape (n_theta,)

    Returns
    -------
    dict with ``grad`` (Q^T b, (n_theta,)), ``g_nu`` (G^T nu with nu the active rows'
    multipliers from the KKT system itself, (n_theta,)), ``n_active`` (rows kept),
    ``n_dependent`` (active rows dropped as dependent) and ``stationarity``
    (max |b + F^T nu|, the check that the kept rows carry the solution's multipliers).
    """
    if prob.spec is None:
        raise ValueError("kkt_gradient: the full-order problem has no theta")
    p = prob.params(sol.task, theta)
    jw, jp, b, hess = (np.array(x) for x in _derivatives(prob)(sol.w, p))
    b = b.ravel()
    jp = jp[:, : prob.n_theta]
    g = np.concatenate([np.array(x).ravel() for x in prob.constraints(sol.w, p)])
    n_eq = prob.n_eq
    rows = list(range(n_eq)) + [n_eq + k for k in np.flatnonzero(g[n_eq:] < ACTIVE_TOL)]
    F, G = [jw[rows]], [jp[rows]]
    n_w = prob.n_w
    at_bound = np.flatnonzero((sol.w - prob.lbw < ACTIVE_TOL) | (prob.ubw - sol.w < ACTIVE_TOL))
    if at_bound.size:
        F.append(np.eye(n_w)[at_bound])
        G.append(np.zeros((at_bound.size, prob.n_theta)))
    F, G = np.vstack(F), np.vstack(G)
    # independent rows: pivoted QR of F^T ranks the rows, small pivots are dependent
    _, r, piv = scipy.linalg.qr(F.T, mode="economic", pivoting=True)
    diag = np.abs(np.diag(r))
    keep = np.sort(piv[: int(np.sum(diag > RANK_TOL * diag[0]))])
    F, G = F[keep], G[keep]
    k = F.shape[0]
    H = hess + H_REG * np.eye(n_w)
    kkt = np.block([[H, F.T], [F, np.zeros((k, k))]])
    # one factorisation, n_theta + 1 right-hand sides: -G for Q (eq. 9), and (-b, 0) for the
    # multipliers nu at theta~ = 0 (w~ = 0 solves it, so H 0 + F^T nu = -b)
    rhs = np.zeros((n_w + k, prob.n_theta + 1))
    rhs[n_w:, : prob.n_theta] = -G
    rhs[:n_w, -1] = -b
    lu = scipy.linalg.lu_factor(kkt)
    sol_kkt = scipy.linalg.lu_solve(lu, rhs)
    Q = sol_kkt[:n_w, : prob.n_theta]
    nu = sol_kkt[n_w:, -1]
    return {"grad": Q.T @ b, "g_nu": G.T @ nu, "n_active": k, "n_dependent": len(rows) + at_bound.size - k,
            "stationarity": float(np.abs(b + F.T @ nu).max()), "primal_step": float(np.abs(sol_kkt[:n_w, -1]).max())}
