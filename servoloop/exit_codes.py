"""The one table from error classes to ``servoloop`` exit codes, for every command.

======  ==============================================================
code    meaning
======  ==============================================================
0       ok
1       a failure the command reports (a fault, a failed fit, no daemon)
2       bad usage or bad input (config, file, arguments, URDF, recording)
3       a bus or hardware error (port, servo missing or not answering)
130     interrupted (Ctrl-C)
======  ==============================================================

Classes are named by module and class, and matched with ``isinstance``
only when their module is already imported: an exception can only be an
instance of a class whose module has been loaded, so looking a class up
never imports a package (the CLI stays fast) and never misses a match.
The first matching row wins, so subclasses come before their bases.
"""

from __future__ import annotations

import sys

__all__ = ["EXIT_OK", "EXIT_FAILURE", "EXIT_USAGE", "EXIT_BUS", "EXIT_INTERRUPTED", "EXIT_CODES",
           "MEANINGS", "exit_code_for", "epilog"]

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_BUS, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

#: (module, class name, exit code), most specific first
EXIT_CODES: tuple[tuple[str, str, int], ...] = (
    ("builtins", "KeyboardInterrupt", EXIT_INTERRUPTED),
    # controller
    ("servoloop.controller.errors", "ConfigError", EXIT_USAGE),
    ("servoloop.controller.errors", "ControllerParamError", EXIT_USAGE),
    ("servoloop.controller.errors", "TelemetryFormatError", EXIT_USAGE),
    ("servoloop.controller.errors", "ConnectError", EXIT_BUS),
    ("servoloop.controller.errors", "FaultError", EXIT_FAILURE),
    ("servoloop.controller.errors", "CommandError", EXIT_FAILURE),
    ("servoloop.controller.errors", "ControllerError", EXIT_FAILURE),
    # firmware_bridge: a model name that does not exist, a destructive operation not confirmed
    ("servoloop.firmware_bridge.errors", "UnknownModelError", EXIT_USAGE),
    ("servoloop.firmware_bridge.errors", "UnsafeOperationError", EXIT_USAGE),
    ("servoloop.firmware_bridge.errors", "BridgeError", EXIT_BUS),
    # calibration
    ("servoloop.calibration.errors", "RecordingError", EXIT_USAGE),
    ("servoloop.calibration.errors", "FitError", EXIT_FAILURE),
    ("servoloop.calibration.errors", "CalibrationError", EXIT_FAILURE),
    # core_cy: a robot description that cannot be used is bad input
    ("servoloop.core_cy.errors", "ModelError", EXIT_USAGE),
    ("servoloop.core_cy.errors", "CoreError", EXIT_FAILURE),
    # virtual_bus: bad --servos / --faults specs
    ("servoloop.virtual_bus.spec", "ServoSpecError", EXIT_USAGE),
    ("servoloop.virtual_bus.faults", "FaultSpecError", EXIT_USAGE),
    # files the user named
    ("builtins", "FileNotFoundError", EXIT_USAGE),
    ("builtins", "IsADirectoryError", EXIT_USAGE),
    ("builtins", "NotADirectoryError", EXIT_USAGE),
    ("builtins", "PermissionError", EXIT_USAGE),
)


def exit_code_for(exc: BaseException) -> int | None:
    """The exit code of ``exc`` from :data:`EXIT_CODES`, or None when no row matches (a bug)."""
    for module, name, code in EXIT_CODES:
        mod = sys.modules.get(module)
        cls = getattr(mod, name, None) if mod is not None else None
        if cls is not None and isinstance(exc, cls):
            return code
    return None


#: what each exit code means, for ``servoloop --help``
MEANINGS = {
    EXIT_OK: "ok",
    EXIT_FAILURE: "a failure the command reports (a fault, a failed fit, no daemon)",
    EXIT_USAGE: "bad usage or input (config, file, arguments)",
    EXIT_BUS: "bus or hardware error",
    EXIT_INTERRUPTED: "interrupted",
}


def epilog() -> str:
    """The exit-code table for ``servoloop --help`` (pre-formatted lines)."""
    return "exit codes:\n" + "\n".join(f"  {code:<4} {text}" for code, text in MEANINGS.items())
