"""The command socket: UNIX stream, mode 0600, one JSON object per line each way.

Requests (``id`` is optional and echoed back)::

    {"cmd": "status"}                              -> {"ok": true, "status": {...}}
    {"cmd": "stop"}                                -> {"ok": true}
    {"cmd": "set_params", "params": {...}}         -> {"ok": true}
    {"cmd": "set_goal", "goal": {JOINT: rad, ...}} -> {"ok": true}
    {"cmd": "ping"}                                -> {"ok": true}

Anything else gets ``{"ok": false, "error": "..."}`` and the connection
stays usable; no request can raise out of the server thread.  Requests are
checked here (in the socket thread) and the daemon applies them between
ticks, so the loop never waits on a client.
"""

from __future__ import annotations

import json
import logging
import os
import selectors
import socket
import stat
import threading
from pathlib import Path
from typing import Any, Protocol

from servoloop.controller.errors import CommandError

__all__ = ["CommandHandler", "CommandServer", "send_command", "default_socket_path", "COMMANDS"]

log = logging.getLogger(__name__)

COMMANDS = ("status", "stop", "set_params", "set_goal", "ping")
MAX_LINE = 65536  # bytes; a longer line is an error, not a memory leak


class CommandHandler(Protocol):
    """What the daemon provides to the server (each may raise; errors become replies)."""

    def status(self) -> dict: ...

    def request_stop(self, reason: str) -> None: ...

    def set_params(self, params: dict) -> None: ...

    def set_goal(self, goal: Any) -> None: ...


def default_socket_path(robot: str) -> Path:
    """``$XDG_RUNTIME_DIR/servoloop-ROBOT.sock``, else ``/tmp/servoloop-UID-ROBOT.sock``."""
    run = os.environ.get("XDG_RUNTIME_DIR")
    if run and os.path.isdir(run):
        return Path(run) / f"servoloop-{robot}.sock"
    return Path("/tmp") / f"servoloop-{os.getuid()}-{robot}.sock"


def handle_request(handler: CommandHandler, line: bytes) -> dict:
    """Serve one request line; always returns a reply dict, never raises."""
    req_id = None
    try:
        try:
            req = json.loads(line)
        except ValueError as exc:
            raise CommandError(f"invalid JSON: {exc}") from None
        if not isinstance(req, dict):
            raise CommandError(f"a request must be a JSON object, got {type(req).__name__}")
        req_id = req.get("id")
        cmd = req.get("cmd")
        allowed = {"cmd", "id", "params", "goal", "reason"}
        extra = [k for k in req if k not in allowed]
        if extra:
            raise CommandError(f"unknown field {extra[0]!r} in request")
        if cmd == "ping":
            reply: dict = {"ok": True}
        elif cmd == "status":
            reply = {"ok": True, "status": handler.status()}
        elif cmd == "stop":
            handler.request_stop(str(req.get("reason", "stop command")))
            reply = {"ok": True}
        elif cmd == "set_params":
            if not isinstance(req.get("params"), dict):
                raise CommandError("set_params needs 'params': {...}")
            handler.set_params(req["params"])
            reply = {"ok": True}
        elif cmd == "set_goal":
            if "goal" not in req:
                raise CommandError("set_goal needs 'goal': {JOINT: rad, ...} or a list")
            handler.set_goal(req["goal"])
            reply = {"ok": True}
        else:
            raise CommandError(f"unknown command {cmd!r}; known: {', '.join(COMMANDS)}")
    except Exception as exc:  # every failure is a reply, never a crash
        reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}" if not isinstance(
            exc, CommandError) else str(exc)}
    if req_id is not None:
        reply["id"] = req_id
    return reply


class CommandServer:
    """Serves the command socket on a background thread.

    Parameters
    ----------
    path : path-like, socket file; a stale one (nobody listening) is replaced
    handler : CommandHandler
    """

    def __init__(self, path, handler: CommandHandler) -> None:
        self.path = Path(path)
        self.handler = handler
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._run, name="servoloop-socket", daemon=True)
        self._buffers: dict[socket.socket, bytearray] = {}
        self._listener: socket.socket | None = None

    def start(self) -> None:
        """Bind (mode 0600 before listen, so no one else can connect) and serve.

        Raises
        ------
        CommandError
            Another daemon already listens on this path.
        """
        if self.path.exists() or self.path.is_symlink():
            if _is_listening(self.path):
                raise CommandError(f"another daemon is already serving {self.path}")
            self.path.unlink()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(str(self.path))
        os.chmod(self.path, stat.S_IRUSR | stat.S_IWUSR)
        s.listen(8)
        s.setblocking(False)
        self._listener = s
        self._sel.register(s, selectors.EVENT_READ, "accept")
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._thread.start()

    def close(self) -> None:
        """Stop the thread, close every connection and remove the socket file; never raises."""
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)
        for conn in list(self._buffers):
            self._drop(conn)
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass
        if self._listener is not None:
            self._listener.close()
            try:
                self.path.unlink()
            except OSError:
                pass
            self._listener = None

    def _drop(self, conn: socket.socket) -> None:
        try:
            self._sel.unregister(conn)
        except (KeyError, ValueError):
            pass
        self._buffers.pop(conn, None)
        conn.close()

    def _run(self) -> None:
        while True:
            for key, _ in self._sel.select():
                if key.data == "wake":
                    return
                if key.data == "accept":
                    try:
                        conn, _addr = self._listener.accept()
                    except OSError:
                        continue
                    conn.setblocking(False)
                    self._buffers[conn] = bytearray()
                    self._sel.register(conn, selectors.EVENT_READ, "conn")
                else:
                    self._serve(key.fileobj)

    def _serve(self, conn: socket.socket) -> None:
        try:
            data = conn.recv(65536)
        except OSError:
            data = b""
        if not data:
            self._drop(conn)
            return
        buf = self._buffers[conn]
        buf.extend(data)
        while True:
            nl = buf.find(b"\n")
            if nl < 0:
                if len(buf) > MAX_LINE:
                    self._reply(conn, {"ok": False, "error": f"request longer than {MAX_LINE} bytes"})
                    self._drop(conn)
                return
            line = bytes(buf[:nl])
            del buf[:nl + 1]
            if line.strip():
                if not self._reply(conn, handle_request(self.handler, line)):
                    return

    def _reply(self, conn: socket.socket, reply: dict) -> bool:
        try:
            conn.setblocking(True)
            conn.settimeout(1.0)
            conn.sendall(json.dumps(_finite(reply), allow_nan=False, default=str).encode() + b"\n")
            conn.setblocking(False)
            return True
        except (OSError, ValueError) as exc:
            log.info("command socket: dropping a client: %s", exc)
            self._drop(conn)
            return False


def _finite(obj):
    """Strict JSON has no NaN/inf: they become null."""
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _is_listening(path: Path) -> bool:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(0.5)
        s.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        s.close()


def send_command(path, request: dict, timeout: float = 2.0) -> dict:
    """Send one request to a daemon and return its reply.

    Raises
    ------
    CommandError
        No daemon at ``path``, or no reply within ``timeout`` s.
    """
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        try:
            s.connect(str(path))
        except OSError as exc:
            raise CommandError(f"no daemon listening on {path}: {exc.strerror or exc}") from exc
        s.sendall(json.dumps(request).encode() + b"\n")
        buf = bytearray()
        while b"\n" not in buf:
            try:
                chunk = s.recv(65536)
            except TimeoutError as exc:
                raise CommandError(f"no reply from {path} within {timeout} s") from exc
            if not chunk:
                raise CommandError(f"{path}: the daemon closed the connection without a reply")
            buf.extend(chunk)
        return json.loads(bytes(buf[: buf.find(b"\n")]))
    finally:
        s.close()
