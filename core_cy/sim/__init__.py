"""The contact simulator (seed 002): compliant and rigid contact, servos at the joints.

:mod:`.simulator` (Simulator, BatchSimulator, SimConfig), :mod:`.model`
(ground, contact points, servo parameters), kernels in ``_kernels.pyx``,
the NumPy reference in :mod:`.reference`.
"""

from servoloop.core_cy.sim.model import ContactPoints, Ground, ServoParams, contact_points_from_urdf
from servoloop.core_cy.sim.simulator import BatchSimulator, SimConfig, SimulationError, Simulator

__all__ = [
    "Simulator",
    "BatchSimulator",
    "SimConfig",
    "SimulationError",
    "Ground",
    "ContactPoints",
    "ServoParams",
    "contact_points_from_urdf",
]
