"""One exception hierarchy for the daemon (config, lifecycle, controllers, socket).

Foreign errors (YAML, OS, firmware_bridge) are translated at the boundary
into these, so the CLI can map each class to one exit code.
"""

from __future__ import annotations

__all__ = [
    "ControllerError",
    "ConfigError",
    "LifecycleError",
    "ConnectError",
    "FaultError",
    "ControllerParamError",
    "CommandError",
    "TelemetryFormatError",
]


class ControllerError(Exception):
    """Base of every error raised by the ``controller`` package."""


class ConfigError(ControllerError, ValueError):
    """A robot config that cannot be used; the message names the file, section and key."""

    def __init__(self, msg: str, path: str | None = None, key: str | None = None):
        where = f"{path}: " if path else ""
        super().__init__(where + msg)
        self.path = path
        self.key = key


class LifecycleError(ControllerError):
    """A state transition the lifecycle does not allow (names both states)."""


class ConnectError(ControllerError):
    """The bus could not be brought up: port, missing servo, wrong model."""


class FaultError(ControllerError):
    """The daemon ended in the fault state; ``faults`` lists what happened."""

    def __init__(self, msg: str, faults: list[str] | None = None):
        super().__init__(msg)
        self.faults = list(faults or [])


class ControllerParamError(ControllerError, ValueError):
    """A controller parameter or goal that is unknown, malformed or outside limits."""


class CommandError(ControllerError):
    """A command-socket request that cannot be served (the reply carries the message)."""


class TelemetryFormatError(ControllerError, ValueError):
    """A telemetry file that is not one, or is damaged; names the byte offset."""

    def __init__(self, msg: str, path: str | None = None, offset: int | None = None):
        where = f"{path}" if path else "telemetry"
        if offset is not None:
            where += f" @ byte {offset}"
        super().__init__(f"{where}: {msg}")
        self.path = path
        self.offset = offset
