"""Contact laws and solvers: Hertz compliant contact, friction cones, LCP (PGS).

Compiled kernels in ``_kernels.pyx`` (cimported by the simulator), Python
entry points in :mod:`.laws`, the NumPy reference in :mod:`.reference`.
"""

from servoloop.core_cy.contact.laws import *  # noqa: F403
from servoloop.core_cy.contact.laws import __all__  # noqa: F401
