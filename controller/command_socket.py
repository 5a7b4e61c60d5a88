"""The command socket: UNIX stream, mode 0600 in a 0700 per-user directory, one JSON object
per line each way.

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

Nobody can block or spoof the stop path (issue 10):

* the default socket lives in a private directory, ``$XDG_RUNTIME_DIR/servoloop/``
  or ``/tmp/servoloop-UID/``, created 0700 and refused unless it is ours and
  private (another user squatting it gets a clear error, not our commands);
* the server checks each client's uid (``SO_PEERCRED``) and drops other users;
* the client checks the socket's owner and the server's uid before talking;
* the server never blocks on a client: replies go to a bounded per-client
  buffer sent when the socket is writable; a client that does not read for
  ``CLIENT_TIMEOUT_S`` or lets ``MAX_PENDING`` bytes pile up is dropped, and
  at most ``MAX_CLIENTS`` are served at once.
"""

from __future__ import annotations

import json
import logging
import os
import selectors
import socket
import stat
import struct
import threading
import time
from pathlib import Path
from typing import Any, Protocol

from servoloop.controller.errors import CommandError

__all__ = ["CommandHandler", "CommandServer", "send_command", "default_socket_path", "socket_dir",
           "check_private_dir", "check_socket_owner", "COMMANDS"]

log = logging.getLogger(__name__)

COMMANDS = ("status", "stop", "set_params", "set_goal", "ping")
MAX_LINE = 65536  # bytes; a longer line is an error, not a memory leak
MAX_PENDING = 1 << 20  # bytes of replies a client may leave unread before it is dropped
CLIENT_TIMEOUT_S = 2.0  # s a client may leave replies unread
MAX_CLIENTS = 32
OUT_PAUSE = 65536  # bytes of unread replies after which a client's requests wait (backpressure)
LINES_PER_TURN = 8  # requests served per client before the next client's turn (fairness)


class CommandHandler(Protocol):
    """What the daemon provides to the server (each may raise; errors become replies)."""

    def status(self) -> dict: ...

    def request_stop(self, reason: str) -> None: ...

    def set_params(self, params: dict) -> None: ...

    def set_goal(self, goal: Any) -> None: ...


def socket_dir() -> Path:
    """The per-user socket directory: ``$XDG_RUNTIME_DIR/servoloop``, else ``/tmp/servoloop-UID``."""
    run = os.environ.get("XDG_RUNTIME_DIR")
    if run and os.path.isdir(run):
        return Path(run) / "servoloop"
    return Path("/tmp") / f"servoloop-{os.getuid()}"


def default_socket_path(robot: str) -> Path:
    """``socket_dir() / ROBOT.sock``."""
    return socket_dir() / f"{robot}.sock"


def check_private_dir(path: Path, create: bool) -> None:
    """Make (0700) or check the socket directory ``path``: a real directory, ours, private.

    Raises
    ------
    CommandError
        Naming the directory, its owner and mode: someone else's (squatted) or open to others.
    """
    path = Path(path)
    if create:
        try:
            path.mkdir(mode=0o700, parents=False, exist_ok=True)
        except OSError as exc:
            raise CommandError(f"cannot create the socket directory {path}: {exc.strerror or exc}") from exc
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise CommandError(f"no socket directory {path} (is `servoloop run` running?)") from None
    if not stat.S_ISDIR(st.st_mode):
        raise CommandError(f"refusing the socket directory {path}: it is not a directory (a symlink?)")
    if st.st_uid != os.getuid():
        raise CommandError(f"refusing the socket directory {path}: it belongs to uid {st.st_uid}, not to "
                           f"you (uid {os.getuid()}); another user may be squatting it. Remove it or "
                           "give --socket PATH in a directory of yours")
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise CommandError(f"refusing the socket directory {path}: mode {stat.S_IMODE(st.st_mode):04o} lets "
                           "other users in; it must be 0700 (chmod 700 it or remove it)")


def check_socket_owner(path: Path) -> None:
    """The client's check before talking: ``path`` is a socket owned by us.

    Raises
    ------
    CommandError
        No such socket, not a socket, or someone else's (it is not our daemon).
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise CommandError(f"no daemon listening on {path}: no such socket (is `servoloop run` running?)") from None
    except OSError as exc:
        raise CommandError(f"cannot check the daemon socket {path}: {exc.strerror or exc}") from exc
    if not stat.S_ISSOCK(st.st_mode):
        raise CommandError(f"{path} is not a socket")
    if st.st_uid != os.getuid():
        raise CommandError(f"refusing to talk to {path}: it belongs to uid {st.st_uid}, not to you "
                           f"(uid {os.getuid()}), so it is not your daemon")


def peer_uid(conn: socket.socket) -> int | None:
    """The uid of the process at the other end of a UNIX socket (SO_PEERCRED), or None."""
    opt = getattr(socket, "SO_PEERCRED", None)
    if opt is None:  # pragma: no cover - not Linux
        return None
    try:
        _pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, opt, struct.calcsize("3i")))
    except OSError:
        return None
    return uid


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


class _Client:
    """One connection: bytes received (up to a line) and replies not yet sent."""

    __slots__ = ("inbuf", "outbuf", "since")

    def __init__(self) -> None:
        self.inbuf = bytearray()
        self.outbuf = bytearray()
        self.since = 0.0  # monotonic time the oldest unsent reply was queued


class CommandServer:
    """Serves the command socket on a background thread; never blocks on one client.

    Parameters
    ----------
    path : path-like, socket file; a stale one (nobody listening) is replaced
    handler : CommandHandler
    private_dir : the socket's directory must be (and is made) 0700 and ours:
        True for the default path; an explicit ``--socket PATH`` only needs its file 0600
    """

    def __init__(self, path, handler: CommandHandler, private_dir: bool = False) -> None:
        self.path = Path(path)
        self.handler = handler
        self.private_dir = private_dir
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._run, name="servoloop-socket", daemon=True)
        self._clients: dict[socket.socket, _Client] = {}
        self._listener: socket.socket | None = None
        self._ready: set = set()  # clients with complete request lines still to serve
        self.refused_peers = 0
        self.dropped = 0

    def start(self) -> None:
        """Bind (mode 0600 before listen, so no one else can connect) and serve.

        Raises
        ------
        CommandError
            Another daemon already listens on this path, a socket of another user is
            there, the directory is not private, or the path cannot be created.
        """
        if self.private_dir:
            check_private_dir(self.path.parent, create=True)
        if self.path.exists() or self.path.is_symlink():
            st = os.lstat(self.path)
            if st.st_uid != os.getuid():
                raise CommandError(f"refusing {self.path}: it belongs to uid {st.st_uid}, not to you "
                                   f"(uid {os.getuid()}); another user may be squatting it")
            if _is_listening(self.path):
                raise CommandError(f"another daemon is already serving {self.path}")
            self.path.unlink()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            if not self.private_dir:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            old = os.umask(0o177)  # the socket file is born 0600: no window where others connect
            try:
                s.bind(str(self.path))
            finally:
                os.umask(old)
            os.chmod(self.path, stat.S_IRUSR | stat.S_IWUSR)
            s.listen(16)
        except OSError as exc:
            s.close()
            raise CommandError(f"cannot create the command socket {self.path}: {exc.strerror or exc}") from exc
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
        for conn in list(self._clients):
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

    def _drop(self, conn: socket.socket, why: str | None = None) -> None:
        if why:
            self.dropped += 1
            log.info("command socket: dropping a client: %s", why)
        try:
            self._sel.unregister(conn)
        except (KeyError, ValueError):
            pass
        self._clients.pop(conn, None)
        self._ready.discard(conn)
        conn.close()

    def _run(self) -> None:
        while True:
            for key, events in self._sel.select(timeout=0 if self._ready else 0.25):
                if key.data == "wake":
                    return
                if key.data == "accept":
                    self._accept()
                    continue
                conn = key.fileobj
                if events & selectors.EVENT_WRITE and conn in self._clients:
                    self._flush(conn)
                if events & selectors.EVENT_READ and conn in self._clients:
                    self._recv(conn)
            for conn in list(self._ready):  # one turn each: a flooding client cannot starve stop
                self._serve(conn)
            self._expire()

    def _accept(self) -> None:
        try:
            conn, _addr = self._listener.accept()
        except OSError:
            return
        uid = peer_uid(conn)
        if uid is not None and uid != os.getuid():
            self.refused_peers += 1
            log.warning("command socket: refused a client of uid %s (not ours)", uid)
            conn.close()
            return
        if len(self._clients) >= MAX_CLIENTS:
            self.dropped += 1
            conn.close()
            return
        conn.setblocking(False)
        self._clients[conn] = _Client()
        self._sel.register(conn, selectors.EVENT_READ, "conn")

    def _expire(self) -> None:
        """Drop clients that have left replies unread too long."""
        now = time.monotonic()
        for conn, c in list(self._clients.items()):
            if c.outbuf and now - c.since > CLIENT_TIMEOUT_S:
                self._drop(conn, f"replies unread for more than {CLIENT_TIMEOUT_S} s")

    def _recv(self, conn: socket.socket) -> None:
        try:
            data = conn.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._drop(conn)
            return
        self._clients[conn].inbuf.extend(data)
        self._ready.add(conn)

    def _serve(self, conn: socket.socket) -> None:
        """Serve up to LINES_PER_TURN complete requests of one client (none while its unread
        replies exceed OUT_PAUSE: a client that does not read gets no more work done)."""
        c = self._clients.get(conn)
        if c is None:
            self._ready.discard(conn)
            return
        buf = c.inbuf
        for _ in range(LINES_PER_TURN):
            if len(c.outbuf) >= OUT_PAUSE:
                self._ready.discard(conn)  # resumed by _flush once it reads
                return
            nl = buf.find(b"\n")
            if nl < 0:
                self._ready.discard(conn)
                if len(buf) > MAX_LINE:
                    self._reply(conn, {"ok": False, "error": f"request longer than {MAX_LINE} bytes"})
                    self._flush(conn)
                    self._drop(conn, "overlong request")
                return
            line = bytes(buf[:nl])
            del buf[:nl + 1]
            if line.strip():
                self._reply(conn, handle_request(self.handler, line))
                if conn not in self._clients:
                    return

    def _reply(self, conn: socket.socket, reply: dict) -> None:
        """Queue one reply and send what the socket takes now (never waits)."""
        c = self._clients.get(conn)
        if c is None:
            return
        try:
            data = json.dumps(_finite(reply), allow_nan=False, default=str).encode() + b"\n"
        except ValueError as exc:
            data = json.dumps({"ok": False, "error": f"reply not encodable: {exc}"}).encode() + b"\n"
        if not c.outbuf:
            c.since = time.monotonic()
        c.outbuf.extend(data)
        if len(c.outbuf) > MAX_PENDING:
            self._drop(conn, f"more than {MAX_PENDING} bytes of replies unread")
            return
        self._flush(conn)

    def _flush(self, conn: socket.socket) -> None:
        c = self._clients.get(conn)
        if c is None:
            return
        try:
            while c.outbuf:
                n = conn.send(c.outbuf)
                del c.outbuf[:n]
                c.since = time.monotonic()
        except BlockingIOError:
            pass
        except OSError as exc:
            self._drop(conn, str(exc))
            return
        paused = len(c.outbuf) >= OUT_PAUSE
        want = (0 if paused else selectors.EVENT_READ) | (selectors.EVENT_WRITE if c.outbuf else 0)
        try:
            self._sel.modify(conn, want, "conn")
        except (KeyError, ValueError):
            pass
        if not paused and b"\n" in c.inbuf:
            self._ready.add(conn)


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

    The socket must be ours (owner and, on Linux, the listening process's uid):
    a socket someone else put at the path never gets our commands.

    Raises
    ------
    CommandError
        No daemon at ``path``, a socket of another user, or no reply within ``timeout`` s.
    """
    path = Path(path)
    check_socket_owner(path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        try:
            s.connect(str(path))
        except OSError as exc:
            raise CommandError(f"no daemon listening on {path}: {exc.strerror or exc}") from exc
        uid = peer_uid(s)
        if uid is not None and uid != os.getuid():
            raise CommandError(f"refusing to talk to {path}: the process serving it runs as uid {uid}, "
                               f"not as you (uid {os.getuid()})")
        try:
            s.sendall(json.dumps(request).encode() + b"\n")
        except OSError as exc:
            raise CommandError(f"{path}: sending the request failed: {exc.strerror or exc}") from exc
        buf = bytearray()
        while b"\n" not in buf:
            try:
                chunk = s.recv(65536)
            except TimeoutError as exc:
                raise CommandError(f"no reply from {path} within {timeout} s") from exc
            except OSError as exc:
                raise CommandError(f"{path}: {exc.strerror or exc}") from exc
            if not chunk:
                raise CommandError(f"{path}: the daemon closed the connection without a reply")
            buf.extend(chunk)
        try:
            return json.loads(bytes(buf[: buf.find(b"\n")]))
        except ValueError as exc:
            raise CommandError(f"{path}: the reply is not JSON: {exc}") from exc
    finally:
        s.close()
