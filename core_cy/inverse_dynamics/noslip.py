"""Variant A, ID LCP,inf (seed 003 §4): sticking contacts, normal complementarity.

Alg. 1 (:func:`find_indices`) keeps the linearly independent tangent rows;
the MLCP becomes an LCP in the normal forces (App. C), solved by Alg. 2
(:func:`core_cy.contact.lcp.ppm`, warm-started from a :class:`WarmStart`)
or Lemke if that cycles.  An inconsistent desired acceleration (a leg splay)
falls back to the nearest consistent joint acceleration (§4.5), reported in
``diagnostics.fallback``.
"""

from __future__ import annotations

import numpy as np

from servoloop.core_cy.inverse_dynamics.errors import InfeasibleError
from servoloop.core_cy.inverse_dynamics.lcp import lemke_regularized, ppm
from servoloop.core_cy.inverse_dynamics.problem import NB, ContactProblem
from servoloop.core_cy.inverse_dynamics.qp_backend import qp_solve

__all__ = ["find_indices", "solve_noslip"]


# Alg. 1 (Find-Indices) in reduced form: X^T M^-1 X nonsingular with X = [P^T, rows^T]
# is equivalent to rows_b A^-1 rows_b^T nonsingular (Schur complement on P).
def find_indices(Ainv, S_b, T_b, rel_tol: float = 1e-10):
    """Indices (kept_s, kept_t) of linearly independent tangent rows (Alg. 1).

    Ainv (6, 6) base inverse inertia, S_b, T_b (k, 6) base columns of the
    tangent rows.  Cholesky pivots below rel_tol of the diagonal count as
    singular (roundoff makes a rank-deficient Gram matrix factor anyway).
    """
    kept_s, kept_t = [], []

    def ok(rows):
        G = rows @ Ainv @ rows.T
        try:
            L = np.linalg.cholesky(G)
        except np.linalg.LinAlgError:
            return False
        return np.min(np.diag(L)) ** 2 > rel_tol * max(np.max(np.diag(G)), 1e-300)

    for i in range(S_b.shape[0]):
        if len(kept_s) + len(kept_t) >= NB:
            break
        if ok(np.vstack([S_b[kept_s + [i]], T_b[kept_t]])):
            kept_s.append(i)
        if len(kept_s) + len(kept_t) < NB and ok(np.vstack([S_b[kept_s], T_b[kept_t + [i]]])):
            kept_t.append(i)
    return kept_s, kept_t



def solve_noslip(p: ContactProblem, warm=None):
    """(f_n, f_t1, f_t2, a_b, a_q, info) of variant A; ``warm`` a :class:`WarmStart` or None."""
    A, d_b = p.base_terms()
    Ainv = np.linalg.inv(A)
    ks, kt = find_indices(Ainv, p.S[:, :NB], p.T[:, :NB])
    info = {"fallback": False}
    a_q = p.a_q
    f_n, f_t, a_b, it, viol = _noslip_lcp(p, Ainv, ks, kt, a_q, warm)
    if viol > _kin_tol(p):
        # §4.5: the desired joint acceleration cannot be met without slipping;
        # take the nearest one that can, then solve the LCP again (E10: we keep
        # f_n complementary by re-solving rather than fixing f_n)
        a_q = _consistent_joint_accel(p)
        info["fallback"] = True
        f_n, f_t, a_b, it2, viol = _noslip_lcp(p, Ainv, ks, kt, a_q, warm)
        it += it2
        if viol > _kin_tol(p):
            raise InfeasibleError(f"no-slip inverse dynamics: contact constraints violated by "
                                  f"{viol:.3g} m/s^2 even after the §4.5 fallback", viol)
    f_t1 = np.zeros(p.k)
    f_t2 = np.zeros(p.k)
    f_t1[ks] = f_t[:len(ks)]
    f_t2[kt] = f_t[len(ks):]
    info.update(iterations=it, kept=(ks, kt))
    return f_n, f_t1, f_t2, a_b, a_q, info


def _kin_tol(p):
    """Contact-acceleration error [m/s^2] below which qdd_des counts as consistent.

    Relative to gravity and the tangential/joint terms (not bias_n: a gap
    over dt^2 can be 1e5 m/s^2).  Settled stances leave ~2e-7 m/s^2 here.
    """
    return 1e-7 * max(9.81, np.abs(p.a_q).max(initial=0.0),
                      np.abs(p.bias_s).max(initial=0.0), np.abs(p.bias_t).max(initial=0.0))


def _noslip_lcp(p: ContactProblem, Ainv, ks, kt, a_q, warm=None):
    """MLCP -> LCP (App. C) with x = [a_b; f_t], z = f_n; returns violation of dropped rows."""
    B = p.M[:NB, NB:]
    d_b = -B @ a_q - p.h[:NB]
    K = np.vstack([p.S[ks, :NB], p.T[kt, :NB]])                    # kept tangent rows, base cols
    e_t = np.concatenate([p.S[ks, NB:] @ a_q + p.bias_s[ks], p.T[kt, NB:] @ a_q + p.bias_t[kt]])
    if K.shape[0]:
        G = K @ Ainv @ K.T
        AK = Ainv @ K.T
        Gi = np.linalg.inv(G)
        Phi = Ainv - AK @ Gi @ AK.T                                   # Phi_J, reduced
        a_star = Phi @ d_b - AK @ Gi @ e_t
    else:
        Phi, a_star, Gi = Ainv, Ainv @ d_b, np.zeros((0, 0))
    Nb = p.N[:, :NB]
    Q = Nb @ Phi @ Nb.T
    Q = 0.5 * (Q + Q.T)
    r = Nb @ a_star + p.N[:, NB:] @ a_q + p.bias_n
    out = ppm(Q, r, warm.active if warm is not None else ())
    if out is None:
        f_n, _, it, _ = lemke_regularized(Q, r, "no-slip LCP")
        active = [int(i) for i in np.flatnonzero(f_n > 0)]
    else:
        f_n, _, it, active = out
    if warm is not None:
        warm.active = active
    rhs = d_b + Nb.T @ f_n
    if K.shape[0]:
        f_t = -Gi @ (e_t + K @ Ainv @ rhs)
        a_b = Ainv @ (rhs + K.T @ f_t)
    else:
        f_t = np.zeros(0)
        a_b = Ainv @ rhs
    a = np.concatenate([a_b, a_q])
    viol = max(np.abs(p.S @ a + p.bias_s).max(), np.abs(p.T @ a + p.bias_t).max(),
               max(0.0, -(p.N @ a + p.bias_n).min()))
    return f_n, f_t, a_b, it, viol


def _consistent_joint_accel(p: ContactProblem):
    """§4.5 fallback QP: nearest a_q such that some a_b sticks every contact.

    min ||a_q - a_q_des||^2 over a = (a_b, a_q) s.t. S a + b_s = 0,
    T a + b_t = 0, N a + b_n >= 0 (tiny weight on a_b keeps it PD).
    """
    nv = p.nv
    P = np.eye(nv)
    P[:NB, :NB] *= 1e-9
    q = np.concatenate([np.zeros(NB), -p.a_q])
    Aeq = np.vstack([p.S, p.T])
    beq = -np.concatenate([p.bias_s, p.bias_t])
    # clarabel: the equalities are redundant when contacts repeat, which HiGHS rejects
    sol = qp_solve(P, q, -p.N, p.bias_n, Aeq, beq, solver="clarabel", what="§4.5 fallback QP (nearest joint "
                    "acceleration that keeps every contact sticking)")
    return sol[NB:]
