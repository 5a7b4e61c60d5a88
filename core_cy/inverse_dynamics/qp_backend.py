"""The QP backend of inverse dynamics: qpsolvers, then an active-set polish.

One call, :func:`qp_solve`, for Stage I and II of the QP variant and the
§4.5 fallback of the no-slip variant.  qpsolvers is imported on first use
(it pulls in HiGHS and clarabel, ~0.3 s).
"""

from __future__ import annotations

import warnings

import numpy as np

from servoloop.core_cy.inverse_dynamics.errors import InfeasibleError

__all__ = ["DEFAULT_QP_SOLVER", "STAGE2_SOLVER", "qp_solve"]

# HiGHS's QP solver is a primal active-set method that accepts a PSD cost:
# it returns the optimum to round-off where clarabel (interior point) stops
# ~1e-5 N off and needs the polish below (measured: bench/inverse_dynamics.py)
DEFAULT_QP_SOLVER = "highs"
# ... but Stage II (a huge optimal face when contacts are many or duplicated)
# stalls HiGHS's active set (5 s at 40 contacts); clarabel + polish takes ms
STAGE2_SOLVER = {"highs": "clarabel"}


def qp_solve(P, q, G, h, A=None, b=None, lb=None, solver=DEFAULT_QP_SOLVER, what="QP"):
    """qpsolvers call (then, for an interior-point backend, a polish).

    Clarabel to 1e-9 is robust but leaves ~1e-5 relative error in the
    forces; the polish solves the KKT system of the active set it identified
    (OSQP's idea) and is kept only if it is feasible with multipliers of the
    right sign.  HiGHS (active set) runs with 1e-12 feasibility tolerances.
    """
    from qpsolvers import Problem, solve_problem

    prob = Problem(P, q, G, h, A, b, lb, None)
    opts = {"clarabel": {"tol_gap_abs": 1e-9, "tol_gap_rel": 1e-9, "tol_feas": 1e-9,
                         "max_iter": 200},
            "highs": {"primal_feasibility_tolerance": 1e-12,
                      "dual_feasibility_tolerance": 1e-12}}.get(solver, {})
    with warnings.catch_warnings():
        # dense matrices are converted to sparse, and "AlmostSolved" is
        # judged below by the primal residual instead
        warnings.simplefilter("ignore")
        sol = solve_problem(prob, solver=solver, **opts)
    res = _primal_residual(prob, sol.x)
    scale = max(1.0, np.abs(h).max() if h is not None and h.size else 1.0,
                np.abs(b).max() if b is not None and b.size else 1.0)
    if not (sol.found or res < 1e-6 * scale):
        raise InfeasibleError(f"{what}: {solver} found no solution "
                              f"(status {sol.extras.get('status', '?')}, primal residual "
                              f"{res:.3g})", res)
    # HiGHS is an active-set method: its answer is a vertex of the active
    # set already; interior-point answers get polished
    x = _polish(prob, sol)
    return x if x is not None else np.maximum(sol.x, 0.0 if lb is not None else -np.inf)


def _polish(prob, sol):
    """Exact solve on the active set of an interior-point answer, or None.

    P is singular here (many optimal forces), so the KKT system of the
    guessed active set is solved for the smallest step (dx, multipliers)
    from the solver's x by least squares: the point stays on the optimal
    face next to x instead of jumping to a far minimum-norm one.
    Constraints the polished point violates join the active set, ones with
    negative multipliers leave it, for a few rounds.
    """
    x0 = sol.x
    n = x0.size
    G = prob.G if prob.G is not None else np.zeros((0, n))
    h = prob.h if prob.h is not None else np.zeros(0)
    # every inequality as a row of Gall x <= hall (bounds as -x <= -lb)
    Gall = np.vstack([G, -np.eye(n)]) if prob.lb is not None else G
    hall = np.concatenate([h, -prob.lb]) if prob.lb is not None else h
    z = sol.z if sol.z is not None and sol.z.size == h.size else np.zeros(h.size)
    duals = z
    if prob.lb is not None:
        zb = -sol.z_box if sol.z_box is not None and sol.z_box.size == n else np.zeros(n)
        duals = np.concatenate([z, zb])
    act = duals > hall - Gall @ x0
    Aeq = prob.A if prob.A is not None else np.zeros((0, n))
    beq = prob.b if prob.b is not None else np.zeros(0)
    meq = Aeq.shape[0]
    scale = max(1.0, np.abs(prob.q).max(), np.abs(hall).max() if hall.size else 1.0,
                np.abs(beq).max() if beq.size else 1.0)
    for _ in range(10):
        C = np.vstack([Aeq, Gall[act]])
        d = np.concatenate([beq, hall[act]])
        m = C.shape[0]
        K = np.block([[prob.P, C.T], [C, np.zeros((m, m))]])
        r = np.concatenate([-prob.q - prob.P @ x0, d - C @ x0])
        step = np.linalg.lstsq(K, r, rcond=1e-12)[0]
        x, lam = x0 + step[:n], step[n:]
        if np.abs(K @ step - r).max() > 1e-7 * scale:
            return None                       # this active set has no KKT point
        viol = Gall @ x - hall > 1e-12 * scale
        neg = lam[meq:] < -1e-9 * scale
        if not viol.any() and not neg.any():
            break
        drop = np.flatnonzero(act)[neg]      # lam[meq:] follows the active rows' order
        act |= viol
        act[drop] = False
    else:
        return None
    if prob.lb is not None:
        x = np.maximum(x, prob.lb)
    return x


def _primal_residual(prob, x) -> float:
    """Largest violation of G x <= h, A x = b, x >= lb (inf when there is no x).

    Clarabel's "AlmostSolved" at our tight tolerances is still accurate, so
    it is accepted when this is small.
    """
    if x is None or not np.all(np.isfinite(x)):
        return float("inf")
    v = [0.0]
    if prob.G is not None:
        v.append(float(np.max(prob.G @ x - prob.h, initial=0.0)))
    if prob.A is not None:
        v.append(float(np.max(np.abs(prob.A @ x - prob.b), initial=0.0)))
    if prob.lb is not None:
        v.append(float(np.max(prob.lb - x, initial=0.0)))
    return max(v)
