"""Typed faults: what ended a run in the fault state, as data rather than text to parse.

A :class:`Fault` names its ``kind`` (one of :class:`FaultKind`), the servo
id and joint it concerns (None for the whole robot) and a human message.
The daemon records every fault in order; the summary, the status reply and
the telemetry events carry them as :meth:`Fault.as_dict`, and the CLI turns
the first one into an exception class (:func:`fault_error`) whose exit code
comes from the one table in :mod:`servoloop.exit_codes`.

Inside the loop a stage raises :class:`FaultRaised` to leave the tick for
the fault path; nothing else uses that exception.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from servoloop.controller.errors import ConfigError, ConnectError, ControllerError, FaultError

__all__ = ["FaultKind", "Fault", "FaultRaised", "fault_error"]


class FaultKind(str, enum.Enum):
    """Why the daemon went to the fault state (the value is the JSON form)."""

    CONNECT = "connect"            # the bus could not be brought up: port, servo missing, wrong model
    CONFIG = "config"              # the config asks for what the hardware cannot do
    OUTPUT = "output"              # telemetry file or command socket unavailable
    STARTUP = "startup"            # no first reading, start pose far outside the limits, torque on failed
    PORT = "port"                  # the serial port went away (unplug)
    COMM = "comm"                  # too many ticks with bus errors (in a row or in the window)
    HARDWARE_ERROR = "hardware_error"  # a servo's alert bit (overload, overheating, ...), reboot failed
    LIMIT = "limit"                # a measured joint position past its limit + margin
    TEMPERATURE = "temperature"    # a servo above safety.max_temperature_c
    VOLTAGE = "voltage"            # input voltage outside safety.min/max_voltage_v
    LATE = "late"                  # safety.max_consecutive_missed late ticks in a row
    SIGNAL = "signal"              # a second SIGINT/SIGTERM during shutdown
    SHUTDOWN = "shutdown"          # torque off failed during a clean shutdown
    FALL = "fall"                  # the robot fell (safety.fall_tilt_rad; reaction safety.on_fall)
    CONTROL = "control"            # the controller found no command for too long (e.g. its contact ID)
    INTERNAL = "internal"          # a bug or an interrupt inside the loop


@dataclass(frozen=True)
class Fault:
    """One fault.

    Attributes
    ----------
    kind : FaultKind
    message : str, names the servo, joint, value and config key where they apply
    servo : int or None, servo id the fault concerns
    joint : str or None, joint name the fault concerns
    also : tuple of Fault, found in the same tick without deciding the reaction (a fall and
        another fault: :func:`controller.fall.graded`); recorded after this one
    """

    kind: FaultKind
    message: str
    servo: int | None = None
    joint: str | None = None
    also: tuple = ()

    def __str__(self) -> str:
        return self.message

    def as_dict(self) -> dict:
        """JSON form: ``{"kind", "servo", "joint", "message"}``."""
        return {"kind": self.kind.value, "servo": self.servo, "joint": self.joint, "message": self.message}


class FaultRaised(Exception):
    """Leave the loop for the fault path with ``fault`` (internal to the daemon's stages)."""

    def __init__(self, fault: Fault) -> None:
        super().__init__(fault.message)
        self.fault = fault


#: the exception a run that ended in a fault of this kind reports to the CLI (FaultError otherwise)
_ERROR_OF_KIND: dict[FaultKind, type[ControllerError]] = {
    FaultKind.CONNECT: ConnectError,
    FaultKind.CONFIG: ConfigError,
}


def fault_error(faults: list[Fault]) -> ControllerError:
    """The exception that reports a run ended by ``faults`` (the first one decides the class).

    A connect fault is a :class:`ConnectError` (bus or hardware: exit 3), a
    config the hardware cannot honour a :class:`ConfigError` (exit 2), any
    other a :class:`FaultError` (exit 1) carrying every fault.
    """
    if not faults:
        return FaultError("the run ended in the fault state", [])
    first = faults[0]
    cls = _ERROR_OF_KIND.get(first.kind)
    if cls is None:
        return FaultError(f"fault: {first.message}", list(faults))
    return cls(first.message)
