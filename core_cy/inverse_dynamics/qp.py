"""Variant C, ID QP,mu (seed 003 §5; ``mu=inf`` gives QP,inf): the paper's two stages, NumPy.

The reference of the paper's own formulation, kept for comparison (the
compiled :class:`~core_cy.inverse_dynamics.ContactInverseDynamics` replaces
Stage I's kinetic-energy linear term by the contact-space one, see the
package docstring): Stage I minimises the kinetic energy of v+ under
non-penetration and the pyramid; Stage II picks the minimum-norm torque over
Stage I's optimal set (nullspace-free form, digest §5).
"""

from __future__ import annotations

import time

import numpy as np

from servoloop.core_cy.inverse_dynamics.problem import NB, ContactProblem, pyramid_rows
from servoloop.core_cy.inverse_dynamics.qp_backend import DEFAULT_QP_SOLVER, STAGE2_SOLVER, qp_solve

__all__ = ["solve_qp"]


def solve_qp(p: ContactProblem, solver=DEFAULT_QP_SOLVER):
    """(f_n, f_t1, f_t2, a_b, a_q, info) of variant C with the qpsolvers backend ``solver``."""
    A, d_b = p.base_terms()
    Ainv = np.linalg.inv(A)
    k = p.k
    R = pyramid_rows(p)
    Rb, Rq = R[:NB], R[NB:]
    # one pyramid row per finite-mu contact; mu = inf drops it (QP,inf, erratum E13)
    finite = np.flatnonzero(np.isfinite(p.mu))
    Gf = np.zeros((finite.size, 5 * k))
    for r_, i in enumerate(finite):
        Gf[r_, i] = -p.mu[i]
        Gf[r_, k + i::k] = 1.0
    # Stage I (digest §5, force units): min 1/2 v+^T M v+ / dt^2 over f >= 0
    B = p.M[:NB, NB:]
    mom_b = (p.M[:NB] @ p.v) / p.dt - p.h[:NB]        # ((M v)_b + dt f_ext,b) / dt
    P1 = Rb.T @ Ainv @ Rb
    q1 = Rb.T @ Ainv @ mom_b
    Nb = p.N[:, :NB]
    G1 = np.vstack([-Nb @ Ainv @ Rb, Gf])
    h1 = np.concatenate([Nb @ Ainv @ d_b + p.N[:, NB:] @ p.a_q + p.bias_n, np.zeros(finite.size)])
    t0 = time.perf_counter()
    s1 = qp_solve(0.5 * (P1 + P1.T), q1, G1, h1, lb=np.zeros(5 * k), solver=solver,
                   what="inverse dynamics Stage I")
    t1 = time.perf_counter()
    f0 = s1
    y0 = Rb @ f0
    a_b = Ainv @ (d_b + y0)
    info = {"stage_times": {"stage1": t1 - t0}, "iterations": -1}
    # Stage II: min 1/2 ||tau||^2 over Stage I's optimal set {R_b f = R_b f0}
    sv = np.linalg.svd(Rb, compute_uv=False)
    nullity = 5 * k - int(np.sum(sv > 1e-10 * max(sv.max(), 1e-300)))
    info["stage2"] = nullity > 0
    info["nullity"] = nullity
    f = f0
    t = B.T @ a_b + p.M[NB:, NB:] @ p.a_q + p.h[NB:]       # tau = t - R_q f
    info["tau_stage1"] = t - Rq @ f0
    info["qdd_stage1"] = np.concatenate([a_b, p.a_q])
    if nullity > 0:
        P2 = Rq.T @ Rq
        q2 = -Rq.T @ t
        s2 = qp_solve(0.5 * (P2 + P2.T), q2, Gf if finite.size else None,
                       np.zeros(finite.size) if finite.size else None, Rb, y0,
                       lb=np.zeros(5 * k), solver=STAGE2_SOLVER.get(solver, solver),
                       what="inverse dynamics Stage II")
        f = s2
        info["stage_times"]["stage2"] = time.perf_counter() - t1
        a_b = Ainv @ (d_b + Rb @ f)
    f_n = f[:k]
    f_t1 = f[k:2 * k] - f[2 * k:3 * k]
    f_t2 = f[3 * k:4 * k] - f[4 * k:5 * k]
    return f_n, f_t1, f_t2, a_b, p.a_q, info
