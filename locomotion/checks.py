"""Acceptance checks of a solved step that need more than the NLP's own residuals (digest A4).

The NLP's constraints hold to IPOPT's tolerance by construction; what they
do not show is how far the Hermite-Simpson polynomial is from the true
motion.  :func:`reintegration_defect` integrates the full-order dynamics
over each interval from the knot's state with the torque the scheme
assumes (linear between knots, so the midpoint gets the knots' mean), and
reports how far the end lands from the next knot.
"""

from __future__ import annotations

import numpy as np
from scipy.integrate import solve_ivp

from servoloop.locomotion.five_link import SWAP, five_link
from servoloop.locomotion.task import DURATION

__all__ = ["REINTEGRATION_TOL", "reintegration_defect", "periodicity_error"]

REINTEGRATION_TOL = 1e-3   #: rad, the digest's A4 bound on the re-integrated defect


def reintegration_defect(prob, sol) -> float:
    """Largest |q(t_{i+1}) - q_{i+1}| over the intervals of ``sol`` [rad] (pinned coordinates).

    Parameters
    ----------
    prob : the :class:`~servoloop.locomotion.trajopt.StepProblem` that solved ``sol``
    sol : a :class:`~servoloop.locomotion.trajopt.Solution`

    Each interval is integrated alone (RK45, rtol 1e-10): the defect is the
    collocation's local error, not an accumulated drift.
    """
    m = five_link()
    x = prob.unpack(sol.w)
    n = prob.n_knots
    dt = DURATION / (n - 1)
    B = np.asarray(m.B)
    worst = 0.0
    for i in range(n - 1):
        u0, du = x["u"][i], x["u"][i + 1] - x["u"][i]

        def f(t, s, u0=u0, du=du):
            u = u0 + du * t / dt
            a = np.linalg.solve(np.array(m.M(s[:5])), B @ u - np.array(m.h(s[:5], s[5:])).ravel())
            return np.r_[s[5:], a]

        end = solve_ivp(f, (0.0, dt), np.r_[x["q"][i], x["v"][i]], rtol=1e-10, atol=1e-12).y[:5, -1]
        worst = max(worst, float(np.abs(end - x["q"][i + 1]).max()))
    return worst


def periodicity_error(prob, sol) -> float:
    """Largest mismatch between the step's start and its relabelled post-impact end.

    Positions [rad] and velocities [rad/s] together: the start must be the
    mirrored end (q) and the impact map of the end (v).
    """
    m = five_link()
    x = prob.unpack(sol.w)
    q, v = x["q"], x["v"]
    v_plus, _ = (np.array(z).ravel() for z in m.impact(q[-1], v[-1]))
    return float(max(np.abs(q[0] - q[-1][list(SWAP)]).max(), np.abs(v[0] - v_plus).max()))
