"""The virtual servo bus: emulated Dynamixel servos with physics, on a pseudo-terminal.

- :class:`BusEngine`: servos (control-table memory, every instruction of
  Protocol 1.0 and 2.0, status errors as real servos set them), physics,
  fault injection; bytes in, replies out.  Protocol 1.0 and 2.0 servos may
  share one bus (each answers its own protocol; an X servo follows its
  Protocol Type register); Indirect Address/Data work for any table that
  names them ``indirect_address_N`` / ``indirect_data_N``.
- :class:`PtyServer`: the engine in real time on a pty (``servoloop virtual-bus``).
- :class:`InProcessVirtualBus`: the engine in the caller's process, driven
  by simulated time, for bit-reproducible lockstep runs.
- :class:`Plant` / :class:`IndependentServosPlant`: the physics interface
  and its one-load-per-servo implementation on the one servo model
  (:class:`Actuator` = :class:`core_cy.actuator.ServoModel` + :class:`JointLoad`);
  :mod:`.robot_plant`: the contact simulator behind the bus.

Codec: the emulator frames packets with its own code (:mod:`.protocol2`,
:mod:`.protocol1`) and builds replies from :mod:`firmware_bridge.protocol`,
the pure-Python reference codec, never from the compiled ``_codec`` /
``_busio`` the bus uses.  Every HIL test therefore checks the compiled wire
path against an independent implementation, on purpose.

Names are imported on first use, so ``servoloop --help`` does not load the
engine and its physics.
"""

import importlib as _importlib

_LAZY = {
    "AX18A_REFERENCE": "actuator", "Actuator": "actuator", "JointLoad": "actuator",
    "default_actuator": "actuator", "BusEngine": "engine", "Fault": "faults",
    "FaultSpecError": "faults", "parse_faults": "faults", "InProcessVirtualBus": "inprocess",
    "IndependentServosPlant": "plant", "Plant": "plant", "PtyServer": "server",
    "ServoSpecError": "spec", "normalize_servos": "spec", "parse_servo_spec": "spec",
    "robot_servos": "spec",
}

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


def __getattr__(name):
    if name in _LAZY:
        return getattr(_importlib.import_module(f"servoloop.virtual_bus.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'servoloop.virtual_bus' has no attribute {name!r}")
