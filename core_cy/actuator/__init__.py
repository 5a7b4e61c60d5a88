"""The one servo model: parameters, compiled law and kernels.

:mod:`.model` (:class:`ServoModel`, the parameters), :mod:`.defaults`
(per-model defaults from the datasheet figures), ``_law.pxd`` (the compiled
torque law), :mod:`.independent` (independent joints on it), :mod:`.simulate`
(the bench kernel's checked wrapper), :mod:`.layout` (its parameter vector),
:mod:`.reference` (the NumPy references).
"""

from servoloop.core_cy.actuator.defaults import default_servo_model
from servoloop.core_cy.actuator.independent import IndependentServos
from servoloop.core_cy.actuator.layout import NP
from servoloop.core_cy.actuator.model import ALIASES, ServoModel, ServoModelError
from servoloop.core_cy.actuator.simulate import simulate, simulate_into

__all__ = ["ServoModel", "ServoModelError", "ALIASES", "default_servo_model", "IndependentServos",
           "simulate", "simulate_into", "NP"]
