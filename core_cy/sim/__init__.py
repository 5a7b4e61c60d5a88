"""The contact simulator (seed 002): compliant and rigid contact, servos at the joints.

:mod:`.simulator` (Simulator, BatchSimulator, SimConfig), :mod:`.model`
(ground, contact points, the servos' models and joint settings), kernels in ``_kernels.pyx``,
the NumPy reference in :mod:`.reference`.
"""

from servoloop.core_cy.sim.model import (
    ContactPoints,
    Ground,
    JointSettings,
    contact_points_from_urdf,
    simulator_servo_model,
)
from servoloop.core_cy.sim.simulator import BatchSimulator, SimConfig, SimulationError, Simulator

__all__ = [
    "Simulator",
    "BatchSimulator",
    "SimConfig",
    "SimulationError",
    "Ground",
    "ContactPoints",
    "JointSettings",
    "simulator_servo_model",
    "contact_points_from_urdf",
]
