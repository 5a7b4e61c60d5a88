"""servoloop: run robots made of Dynamixel servos from Python.

One import namespace over the repository's folders::

    import servoloop
    servoloop.__version__
    from servoloop import core_cy, firmware_bridge, controller
    model = servoloop.core_cy.Model.from_urdf("robot.urdf")

==========================  ===================================================
``servoloop.firmware_bridge``  bytes on the wire: codecs, control tables, units, bus, scan
``servoloop.virtual_bus``      emulated servos with physics behind a pseudo-terminal
``servoloop.core_cy``          compiled math: dynamics, servo model, contact, simulator
``servoloop.controller``       the daemon: config, lifecycle, the tick, controllers
``servoloop.calibration``      bench identification of servo and inertial models
``servoloop.robots``           built-in robot descriptions (URDF + config)
``servoloop.bench``            benchmarks against the anchors
``servoloop.experiments``      reproductions of the papers' tables and figures
==========================  ===================================================

Subpackages are imported on first attribute access, so ``import servoloop``
costs nothing beyond this file (the CLI's start-up time depends on it).
"""

import importlib as _importlib

__version__ = "0.2.0"

__all__ = [
    "__version__",
    "firmware_bridge",
    "virtual_bus",
    "core_cy",
    "controller",
    "calibration",
    "robots",
    "bench",
    "experiments",
]

_SUBPACKAGES = frozenset(__all__[1:])


def __getattr__(name):
    if name in _SUBPACKAGES:
        return _importlib.import_module(f"servoloop.{name}")
    raise AttributeError(f"module 'servoloop' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _SUBPACKAGES)
