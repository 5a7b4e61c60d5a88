"""The virtual servo bus: emulated Dynamixel servos with physics, on a pseudo-terminal.

- :class:`BusEngine`: servos (control-table memory, every instruction of
  Protocol 1.0 and 2.0, status errors as real servos set them), physics,
  fault injection; bytes in, replies out.
- :class:`PtyServer`: the engine in real time on a pty (``servoloop virtual-bus``).
- :class:`InProcessVirtualBus`: the engine in the caller's process, driven
  by simulated time, for bit-reproducible lockstep runs.
- :class:`Plant` / :class:`IndependentServosPlant`: the physics interface
  and its one-load-per-servo implementation on the one servo model
  (:class:`Actuator` = :class:`core_cy.actuator.ServoModel` + :class:`JointLoad`).
"""

from servoloop.virtual_bus.actuator import AX18A_REFERENCE, Actuator, JointLoad, default_actuator
from servoloop.virtual_bus.engine import BusEngine
from servoloop.virtual_bus.faults import Fault, FaultSpecError, parse_faults
from servoloop.virtual_bus.inprocess import InProcessVirtualBus
from servoloop.virtual_bus.plant import IndependentServosPlant, Plant
from servoloop.virtual_bus.server import PtyServer
from servoloop.virtual_bus.spec import (
    ServoSpecError,
    normalize_servos,
    parse_servo_spec,
    robot_servos,
)

__all__ = [
    "BusEngine",
    "PtyServer",
    "InProcessVirtualBus",
    "Plant",
    "IndependentServosPlant",
    "Actuator",
    "JointLoad",
    "AX18A_REFERENCE",
    "default_actuator",
    "Fault",
    "FaultSpecError",
    "parse_faults",
    "ServoSpecError",
    "parse_servo_spec",
    "normalize_servos",
    "robot_servos",
]
