"""Command socket protocol: JSON lines, errors as replies, mode 0600, never a crash."""

import json
import os
import socket
import stat

import pytest

from servoloop.controller.command_socket import CommandServer, handle_request, send_command
from servoloop.controller.errors import CommandError, ControllerParamError


class Handler:
    def __init__(self):
        self.stopped = None
        self.params = []
        self.goals = []

    def status(self):
        return {"state": "run", "value": float("nan")}

    def request_stop(self, reason):
        self.stopped = reason

    def set_params(self, params):
        if "bad" in params:
            raise ControllerParamError("controller 'hold': unknown parameter 'bad'")
        self.params.append(params)

    def set_goal(self, goal):
        if goal == "explode":
            raise RuntimeError("handler bug")
        self.goals.append(goal)


@pytest.mark.parametrize("line, ok, fragment", [
    (b'{"cmd": "ping"}', True, None),
    (b'{"cmd": "status"}', True, None),
    (b'{"cmd": "nope"}', False, "unknown command 'nope'"),
    (b'{"cmd": "status"', False, "invalid JSON"),
    (b'[1, 2]', False, "JSON object"),
    (b'{"cmd": "set_params", "params": 3}', False, "needs 'params'"),
    (b'{"cmd": "set_params", "params": {"bad": 1}}', False, "unknown parameter 'bad'"),
    (b'{"cmd": "set_goal"}', False, "needs 'goal'"),
    (b'{"cmd": "set_goal", "goal": "explode"}', False, "RuntimeError: handler bug"),
    (b'{"cmd": "stop", "extra": 1}', False, "unknown field 'extra'"),
    (b'\xff\xfe', False, "invalid JSON"),
])
def test_handle_request(line, ok, fragment):
    reply = handle_request(Handler(), line)
    assert reply["ok"] is ok
    if fragment:
        assert fragment in reply["error"]


def test_id_is_echoed():
    assert handle_request(Handler(), b'{"cmd": "ping", "id": 7}') == {"ok": True, "id": 7}


@pytest.fixture
def server(tmp_path):
    h = Handler()
    s = CommandServer(tmp_path / "d.sock", h)
    s.start()
    yield s, h
    s.close()


def test_socket_is_private_and_serves(server):
    s, h = server
    assert stat.S_IMODE(os.stat(s.path).st_mode) == 0o600
    reply = send_command(s.path, {"cmd": "status"})
    assert reply == {"ok": True, "status": {"state": "run", "value": None}}  # NaN -> null
    assert send_command(s.path, {"cmd": "stop", "reason": "test"}) == {"ok": True}
    assert h.stopped == "test"
    assert send_command(s.path, {"cmd": "set_goal", "goal": {"a": 0.1}})["ok"]
    assert h.goals == [{"a": 0.1}]


def test_connection_survives_bad_lines(server):
    s, _ = server
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.settimeout(5.0)
    c.connect(str(s.path))
    c.sendall(b'garbage\n{"cmd": "ping", "id": 1}\n\n{"cmd":"x"}\n')
    buf = b""
    while buf.count(b"\n") < 3:
        buf += c.recv(4096)
    replies = [json.loads(x) for x in buf.splitlines()]
    assert [r["ok"] for r in replies] == [False, True, False]
    c.close()
    assert send_command(s.path, {"cmd": "ping"}) == {"ok": True}  # server still alive


def test_overlong_line_is_refused(server):
    s, _ = server
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.settimeout(5.0)
    c.connect(str(s.path))
    c.sendall(b"x" * 70000)
    reply = json.loads(c.recv(4096).splitlines()[0])
    assert not reply["ok"] and "longer than" in reply["error"]
    c.close()


def test_second_server_on_same_path_is_refused(server, tmp_path):
    s, _ = server
    with pytest.raises(CommandError, match="already serving"):
        CommandServer(s.path, Handler()).start()


def test_stale_socket_file_is_replaced(tmp_path):
    p = tmp_path / "stale.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(p))
    dead.close()  # file stays, nobody listens
    s = CommandServer(p, Handler())
    s.start()
    assert send_command(p, {"cmd": "ping"}) == {"ok": True}
    s.close()
    assert not p.exists()


def test_client_error_when_no_daemon(tmp_path):
    with pytest.raises(CommandError, match="no daemon listening"):
        send_command(tmp_path / "none.sock", {"cmd": "ping"})
