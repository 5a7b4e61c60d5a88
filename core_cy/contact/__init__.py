"""Contact laws and solvers: Hertz compliant contact, friction cones, the contact LCP.

Compiled kernels in ``_kernels.pyx`` (cimported by the simulator); Python
entry points in :mod:`.laws` (force laws, plane detection) and :mod:`.lcp`
(every LCP solver of core_cy: projected Gauss-Seidel, Lemke, principal
pivoting); the NumPy reference in :mod:`.reference`.
"""

from servoloop.core_cy.contact.laws import *  # noqa: F403
from servoloop.core_cy.contact.laws import __all__ as _laws_all
from servoloop.core_cy.contact.lcp import *  # noqa: F403
from servoloop.core_cy.contact.lcp import __all__ as _lcp_all

__all__ = [*_laws_all, *_lcp_all]
