"""What the daemon writes besides servo goals: the telemetry file, the command socket, the live view.

Both are opened before the real-time settings (their threads then get a
priority below the loop's) and closed after the servos are stopped; closing
never raises, and the telemetry file ends with the run summary.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from servoloop.controller.errors import CommandError
from servoloop.controller.faults import Fault, FaultKind, FaultRaised
from servoloop.controller.telemetry import TelemetryWriter

__all__ = ["Outputs", "resolve_telemetry_path", "resolve_socket_path"]

log = logging.getLogger("servoloop.daemon")


def resolve_telemetry_path(cfg, path: Any) -> Path | None:
    """``"auto"``: the config's ``logging.telemetry`` (itself ``auto``: ``runs/ROBOT-STAMP.sltl``)."""
    if path == "auto":
        path = cfg.logging.telemetry
        if path == "auto":
            stamp = time.strftime("%Y%m%d-%H%M%S")
            return Path("runs") / f"{cfg.robot}-{stamp}.sltl"
    return Path(path) if path else None


def resolve_socket_path(cfg, path: Any) -> Path | None:
    """``"auto"``: the config's ``socket.path`` (itself ``auto``: the per-user default for the robot)."""
    if path == "auto":
        path = cfg.socket.path
        if path == "auto":
            from servoloop.controller.command_socket import default_socket_path

            return default_socket_path(cfg.robot)
    return Path(path) if path else None


class Outputs:
    """The telemetry writer and the command server of one run.

    Parameters
    ----------
    telemetry_path, socket_path : Path or None (none: not opened)
    """

    def __init__(self, telemetry_path: Path | None, socket_path: Path | None) -> None:
        self.telemetry_path = telemetry_path
        self.socket_path = socket_path
        self.writer: TelemetryWriter | None = None
        self.server = None
        self.live = None  # a controller.live.LiveView to open with the others (run --live)

    def open(self, ring, header: dict, flush_s: float, handler, max_mb: float | None = None,
             max_files: int = 4) -> None:
        """Start the telemetry writer on ``ring`` (size cap ``max_mb`` per file, ``max_files``
        parts kept) and the command server for ``handler``.

        Raises
        ------
        FaultRaised
            The telemetry file cannot be created, or the socket cannot be (another daemon
            holds it, another user squats it, the path is not writable): each says which.
        """
        if self.telemetry_path is not None:
            try:
                self.writer = TelemetryWriter(self.telemetry_path, ring, header, flush_s, max_mb, max_files)
                self.writer.start()
            except OSError as exc:
                raise FaultRaised(Fault(FaultKind.OUTPUT,
                                        f"telemetry {self.telemetry_path}: {exc.strerror or exc}")) from exc
        if self.socket_path is not None:
            from servoloop.controller.command_socket import CommandServer, socket_dir

            private = self.socket_path.parent == socket_dir()
            try:
                self.server = CommandServer(self.socket_path, handler, private_dir=private)
                self.server.start()
            except CommandError as exc:
                raise FaultRaised(Fault(FaultKind.OUTPUT, f"command socket: {exc}")) from exc
            except OSError as exc:
                raise FaultRaised(Fault(FaultKind.OUTPUT, f"command socket {self.socket_path}: "
                                                          f"{exc.strerror or exc}")) from exc
        if self.live is not None:
            from servoloop.controller.live import LiveViewError

            try:
                self.live.open(handler)
            except LiveViewError as exc:
                raise FaultRaised(Fault(FaultKind.OUTPUT, str(exc))) from exc

    def event(self, kind: str, message: str, tick: int, t_s: float, fault: Fault | None = None) -> None:
        """Queue a telemetry event (and a live-view log message, with a live view)."""
        if self.writer is not None:
            self.writer.event(kind, message, tick, t_s, None if fault is None else fault.as_dict())
        if self.live is not None:
            self.live.event(kind, message, tick, t_s)

    def threads(self) -> list:
        """The writer and server threads (they take the GIL: the loop raises their priority)."""
        return [o._thread for o in (self.writer, self.server) if o is not None] + (
            self.live.threads() if self.live is not None else [])

    def close(self, summary: dict) -> str | None:
        """Stop the socket, flush telemetry with ``summary``; never raises.

        Returns
        -------
        str or None
            The telemetry writer's error (disk full, ...), for the run's warnings.
        """
        if self.server is not None:
            try:
                self.server.close()
            except Exception as exc:  # noqa: BLE001 - closing must not fail
                log.warning("closing the command socket: %s", exc)
            self.server = None
        if self.live is not None:
            self.live.close()
        if self.writer is not None:
            try:
                self.writer.close(summary)
            except Exception as exc:  # noqa: BLE001
                log.warning("closing telemetry: %s", exc)
            return self.writer.error
        return None
