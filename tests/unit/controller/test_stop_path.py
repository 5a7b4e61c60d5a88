"""Issue 10, check 5: nobody can block or spoof the stop path.

The default socket sits in a private 0700 directory of ours; a directory or
socket of another user (a squatter) is refused with a clear message on both
ends; a client of another uid is dropped (SO_PEERCRED); clients that never
read their replies do not delay ``stop``.  Another user is real when the
tests run as root (chown / setuid in a child), simulated otherwise.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import threading
import time

import pytest

from servoloop.cli import main
from servoloop.controller import command_socket as cs
from servoloop.controller.command_socket import CommandServer, default_socket_path, send_command
from servoloop.controller.errors import CommandError
from servoloop.controller.faults import FaultRaised
from servoloop.controller.outputs import Outputs

OTHER_UID = 54321
ROOT = os.geteuid() == 0


class Handler:
    def __init__(self, status_bytes=100):
        self.stopped = threading.Event()
        self.blob = "x" * status_bytes
        self.status_calls = 0

    def status(self):
        self.status_calls += 1
        return {"state": "run", "blob": self.blob}

    def request_stop(self, reason):
        self.stopped.set()

    def set_params(self, params):
        pass

    def set_goal(self, goal):
        pass


def become_other(monkeypatch, path):
    """Make ``path`` someone else's: chown it (root) or make us look like another uid."""
    if ROOT:
        os.chown(path, OTHER_UID, OTHER_UID)
    else:  # pragma: no cover - depends on who runs the tests
        real = os.getuid()
        monkeypatch.setattr(cs.os, "getuid", lambda: real + 1)


def test_default_socket_is_in_a_private_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    p = default_socket_path("arm")
    assert p == tmp_path / "servoloop" / "arm.sock"
    s = CommandServer(p, Handler(), private_dir=True)
    s.start()
    try:
        assert stat.S_IMODE(os.stat(p.parent).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
        assert send_command(p, {"cmd": "ping"}) == {"ok": True}
    finally:
        s.close()
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert default_socket_path("arm") == cs.Path("/tmp") / f"servoloop-{os.getuid()}" / "arm.sock"


def test_squatted_socket_directory_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    d = tmp_path / "servoloop"
    d.mkdir(mode=0o700)
    become_other(monkeypatch, d)
    with pytest.raises(CommandError, match=r"belongs to uid \d+, not to you.*squatting"):
        CommandServer(default_socket_path("arm"), Handler(), private_dir=True).start()


def test_socket_directory_open_to_others_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    d = tmp_path / "servoloop"
    d.mkdir()
    os.chmod(d, 0o777)
    with pytest.raises(CommandError, match="mode 0777 lets other users in"):
        CommandServer(default_socket_path("arm"), Handler(), private_dir=True).start()


def test_cli_refuses_a_squatters_socket(tmp_path, monkeypatch, capsys):
    # the impostor listens at the path and would answer "ok" to anything
    p = tmp_path / "arm.sock"
    imp = CommandServer(p, Handler())
    imp.start()
    try:
        become_other(monkeypatch, p)
        with pytest.raises(CommandError, match="not your daemon"):
            send_command(p, {"cmd": "stop"})
        assert not imp.handler.stopped.is_set()
        assert main(["stop", "--socket", str(p)]) == 1
        captured = capsys.readouterr()
        assert "not your daemon" in captured.err and "stop requested" not in captured.out
    finally:
        imp.close()


@pytest.mark.skipif(not ROOT, reason="needs root to run a client as another uid")
def test_server_drops_clients_of_other_users():
    import shutil
    import tempfile

    d = cs.Path(tempfile.mkdtemp(prefix="servoloop-peer-"))  # pytest's tmp dirs are 0700
    os.chmod(d, 0o755)
    p = d / "arm.sock"
    h = Handler()
    s = CommandServer(p, h)
    s.start()
    os.chmod(p, 0o666)  # even if the file mode let them in, their uid does not
    try:
        pid = os.fork()
        if pid == 0:  # the other user: try to stop our daemon
            try:
                os.setuid(OTHER_UID)
                c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                c.settimeout(5)
                c.connect(str(p))
                try:  # the server may already have closed it: a broken pipe is the same answer
                    c.sendall(b'{"cmd": "stop"}\n')
                    got = c.recv(100)
                except (BrokenPipeError, ConnectionResetError):
                    got = b""
                os._exit(0 if got == b"" else 3)
            except BaseException:  # noqa: BLE001
                os._exit(4)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0  # connection closed without a reply
        assert not h.stopped.is_set() and s.refused_peers == 1
        assert send_command(p, {"cmd": "ping"}) == {"ok": True}  # we still get in
    finally:
        s.close()
        shutil.rmtree(d, ignore_errors=True)


def test_ten_silent_clients_do_not_delay_stop(tmp_path):
    h = Handler(status_bytes=200_000)  # replies big enough to fill a socket buffer at once
    p = tmp_path / "arm.sock"
    s = CommandServer(p, h)
    s.start()
    silent = []
    try:
        for _ in range(10):
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.connect(str(p))
            c.sendall(b'{"cmd": "status"}\n' * 20)  # ask, never read
            silent.append(c)
        # the old server spent 1 s per blocked client (10 s): now the reply comes at once
        assert send_command(p, {"cmd": "stop"}, timeout=3.0) == {"ok": True}
        assert h.stopped.is_set()
        # a client that does not read gets no more work done (backpressure) ...
        assert h.status_calls < 10 * 20
        # ... and is dropped once its replies have waited CLIENT_TIMEOUT_S
        deadline = time.monotonic() + 10 * cs.CLIENT_TIMEOUT_S
        while s.dropped < 10 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert s.dropped == 10
    finally:
        for c in silent:
            c.close()
        s.close()


def test_unwritable_socket_path_is_reported_as_the_socket(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    out = Outputs(None, blocker / "arm.sock")  # a path under a regular file
    with pytest.raises(FaultRaised) as e:
        out.open(None, {}, 0.25, Handler())
    msg = e.value.fault.message
    assert msg.startswith("command socket") and "arm.sock" in msg and "telemetry" not in msg


def test_status_reply_json_roundtrip(tmp_path):
    p = tmp_path / "arm.sock"
    s = CommandServer(p, Handler(status_bytes=10))
    s.start()
    try:
        r = send_command(p, {"cmd": "status"})
        assert json.dumps(r) and r["status"]["state"] == "run"
    finally:
        s.close()
