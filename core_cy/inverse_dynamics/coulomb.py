"""Variant B, ID LCP,mu (seed 003 §4): the Anitescu-Potra LCP with the 4-edge pyramid.

Solved by Lemke with the regularisation ladder of the authors' code
(:func:`core_cy.contact.lcp.lemke_regularized`).
"""

from __future__ import annotations

import numpy as np

from servoloop.core_cy.inverse_dynamics.lcp import lemke_regularized
from servoloop.core_cy.inverse_dynamics.problem import NB, ContactProblem, pyramid_rows

__all__ = ["solve_coulomb"]


def solve_coulomb(p: ContactProblem):
    """(f_n, f_t1, f_t2, a_b, a_q, info) of variant B (finite mu only)."""
    A, d_b = p.base_terms()
    Ainv = np.linalg.inv(A)
    k = p.k
    R = pyramid_rows(p)
    Rb = R[:NB]
    Nrows, Frows = R[:, :k].T, R[:, k:].T            # (k, nv), (4k, nv)
    a_star = np.concatenate([Ainv @ d_b, p.a_q])      # zero contact force
    bias_F = np.concatenate([p.bias_s, -p.bias_s, p.bias_t, -p.bias_t])
    E = np.tile(np.eye(k), (4, 1))                   # (4k, k)
    finite = np.isfinite(p.mu)
    if not finite.all():
        raise ValueError(f"mu: lcp_coulomb needs finite friction coefficients, got {p.mu} "
                         "(lcp_noslip is the mu = inf model)")
    W = Rb.T @ Ainv @ Rb                              # (5k, 5k)
    Q = np.zeros((6 * k, 6 * k))
    Q[:5 * k, :5 * k] = W
    Q[k:5 * k, 5 * k:] = E
    Q[5 * k:, :k] = np.diag(p.mu)
    Q[5 * k:, k:5 * k] = -E.T
    r = np.concatenate([Nrows @ a_star + p.bias_n, Frows @ a_star + bias_F, np.zeros(k)])
    z, w, it, eps = lemke_regularized(Q, r, "Coulomb LCP")
    f = z[:5 * k]
    a_b = Ainv @ (d_b + Rb @ f)
    f_n = f[:k]
    f_t1 = f[k:2 * k] - f[2 * k:3 * k]
    f_t2 = f[3 * k:4 * k] - f[4 * k:5 * k]
    comp = float(np.abs(z * w).max()) if z.size else 0.0
    return f_n, f_t1, f_t2, a_b, p.a_q, {"iterations": it, "regularization": eps,
                                         "complementarity": comp, "lam": z[5 * k:]}
