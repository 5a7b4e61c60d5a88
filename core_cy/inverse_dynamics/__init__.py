"""Inverse dynamics with rigid contact and friction (seed 003).

No-slip and Coulomb LCPs and the two-stage QP, in :mod:`.solvers`.
"""

from servoloop.core_cy.inverse_dynamics.solvers import *  # noqa: F403
from servoloop.core_cy.inverse_dynamics.solvers import __all__  # noqa: F401
