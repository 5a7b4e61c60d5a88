"""The servo actuator model (seed 000's law and the richer fitted models).

:mod:`.simulate` (the compiled kernel's checked wrapper), :mod:`.layout`
(the parameter vector), :mod:`.reference` (the NumPy reference).
"""

from servoloop.core_cy.actuator.layout import NP
from servoloop.core_cy.actuator.simulate import simulate, simulate_into

__all__ = ["simulate", "simulate_into", "NP"]
