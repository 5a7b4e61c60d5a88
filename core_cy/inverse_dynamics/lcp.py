"""The contact LCP solvers as inverse dynamics calls them.

The solvers are :mod:`core_cy.contact.lcp`'s (Lemke, its regularisation
ladder, Alg. 2 principal pivoting); this boundary only turns their
:class:`~core_cy.contact.lcp.LCPError` into :class:`InfeasibleError`, so a
caller of :func:`core_cy.inverse_dynamics.solve` catches one hierarchy.
"""

from __future__ import annotations

from contextlib import contextmanager

from servoloop.core_cy.contact import lcp as _lcp
from servoloop.core_cy.contact.lcp import ppm
from servoloop.core_cy.inverse_dynamics.errors import InfeasibleError

__all__ = ["lemke", "lemke_regularized", "ppm", "lcp_failures_as_infeasible"]


@contextmanager
def lcp_failures_as_infeasible(what: str = ""):
    """Re-raise an LCPError inside the block as InfeasibleError (prefix ``what: ``)."""
    try:
        yield
    except _lcp.LCPError as e:
        msg = f"{what}: {e}" if what else str(e)
        raise InfeasibleError(msg, e.residual) from e


def lemke(Q, r, max_iter: int | None = None, tol: float | None = None):
    """:func:`core_cy.contact.lcp.lemke`, raising InfeasibleError.

    Returns (z, w, pivots) for the LCP w = Q z + r >= 0, z >= 0, z^T w = 0.
    """
    with lcp_failures_as_infeasible():
        return _lcp.lemke(Q, r, max_iter, tol)


def lemke_regularized(Q, r, what: str = "LCP"):
    """:func:`core_cy.contact.lcp.lemke_regularized`, raising InfeasibleError.

    Returns (z, w, pivots, eps).
    """
    with lcp_failures_as_infeasible(what):
        return _lcp.lemke_regularized(Q, r)
