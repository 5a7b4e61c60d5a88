"""``servoloop run --live``: a Foxglove WebSocket client connects, subscribes and receives.

The daemon runs as a user runs it (a process, lockstep against the
in-process virtual bus of the built-in arm); the test is a plain WebSocket
client speaking the Foxglove protocol (subprotocol ``foxglove.sdk.v1``, the name
foxglove-sdk 0.30 gives the protocol first published as ``foxglove.websocket.v1``):
``serverInfo``, ``advertise``, ``subscribe``, then binary message data
(opcode 1, subscription id u32, log time u64, JSON payload).  The run is
then stopped over its command socket and must end ``done`` with exit 0.
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import time

import pytest

pytest.importorskip("foxglove")
ws_client = pytest.importorskip("websockets.sync.client")

from servoloop.controller.command_socket import send_command  # noqa: E402

pytestmark = pytest.mark.hil
ARM_JOINTS = ["base_yaw", "shoulder_pitch", "elbow_pitch", "forearm_roll", "wrist_pitch", "wrist_roll"]
DEADLINE_S = 60.0
SUBPROTOCOLS = ["foxglove.sdk.v1", "foxglove.websocket.v1"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _connect(port: int, proc):
    """Connect once the server listens (poll with a deadline; the daemon may be importing)."""
    end = time.monotonic() + DEADLINE_S
    while True:
        try:
            return ws_client.connect(f"ws://127.0.0.1:{port}", subprotocols=SUBPROTOCOLS,
                                     open_timeout=5)
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"the daemon ended before serving: {proc.communicate()}")
            if time.monotonic() > end:
                raise
            time.sleep(0.05)


def _receive_until(conn, done, what: str):
    end = time.monotonic() + DEADLINE_S
    while not done():
        left = end - time.monotonic()
        if left <= 0:
            pytest.fail(f"no {what} within {DEADLINE_S} s")
        yield conn.recv(timeout=left)


def test_live_view_streams_joint_states_to_a_foxglove_client(tmp_path):
    port = _free_port()
    sock = tmp_path / "d.sock"
    tel = tmp_path / "run.sltl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "servoloop.cli", "run", "--robot", "arm", "--lockstep", "--duration", "3600",
         "--live", str(port), "--socket", str(sock), "--telemetry", str(tel), "--quiet", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with _connect(port, proc) as conn:
            assert conn.subprotocol in SUBPROTOCOLS
            seen, channels = {}, {}
            for msg in _receive_until(conn, lambda: "info" in seen and "/joint_states" in channels
                                      and "/servoloop/log" in channels, "serverInfo/advertise"):
                m = json.loads(msg)
                if m["op"] == "serverInfo":
                    seen["info"] = m
                elif m["op"] == "advertise":
                    channels.update({c["topic"]: c for c in m["channels"]})
            assert "servoloop" in seen["info"]["name"]
            assert channels["/joint_states"]["schemaName"] == "servoloop.JointStates"
            assert channels["/servoloop/log"]["schemaName"] == "foxglove.Log"
            # the arm has a URDF: the 3D view's channels are there
            assert channels["/tf"]["schemaName"] == "foxglove.FrameTransforms"
            assert "/robot_description" in channels

            subs = {1: "/joint_states", 2: "/robot_description", 3: "/servos", 4: "/loop"}
            conn.send(json.dumps({"op": "subscribe", "subscriptions": [
                {"id": k, "channelId": channels[t]["id"]} for k, t in subs.items()]}))
            got: dict[str, list] = {t: [] for t in subs.values()}
            def monitored():   # a /servos message after the monitor's first read (not before it)
                return bool(got["/servos"]) and all(
                    s["voltage"] is not None for s in got["/servos"][-1]["servos"])

            for msg in _receive_until(conn, lambda: len(got["/joint_states"]) >= 5 and monitored()
                                      and got["/robot_description"] and got["/loop"], "messages"):
                if isinstance(msg, str):
                    continue  # more advertisements, status
                assert msg[0] == 1  # message data
                sub_id, log_time = struct.unpack_from("<IQ", msg, 1)
                assert log_time > 1_600_000_000 * 10**9  # wall clock, not loop time since 0
                got[subs[sub_id]].append(json.loads(msg[13:]))
            states = got["/joint_states"]
            assert states[0]["name"] == ARM_JOINTS
            assert all(len(s["position"]) == 6 and all(isinstance(q, float) for q in s["position"])
                       for s in states)
            t = [s["t_s"] for s in states]
            assert t == sorted(t) and t[-1] > t[0]  # the view follows the run
            servos = got["/servos"][-1]["servos"]
            assert [s["id"] for s in servos] == [1, 2, 3, 4, 5, 6]
            # the monitor has read them by now (X series: temperature, voltage, error bits)
            assert all(s["voltage"] is not None and 5.0 < s["voltage"] < 20.0 for s in servos)
            assert all(s["hardware_error"] == 0 for s in servos)
            assert "<robot" in got["/robot_description"][0]["data"]
            assert got["/loop"][-1]["state"] in ("startup", "run")
    finally:
        if proc.poll() is None and sock.exists():
            send_command(sock, {"cmd": "stop", "reason": "test done"})
        try:
            out, err = proc.communicate(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
    assert proc.returncode == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["state"] == "done" and summary["stop_reason"] == "test done"


def test_a_taken_or_invalid_port_is_a_clear_error_not_a_traceback(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "servoloop.cli", "run", "--robot", "arm", "--lockstep",
                            "--duration", "1", "--live", str(port), "--socket", "none", "--telemetry",
                            str(tmp_path / "t.sltl"), "--quiet"], capture_output=True, text=True,
                           timeout=DEADLINE_S * 5)
    assert r.returncode == 1 and f"127.0.0.1:{port}" in r.stderr and "--live PORT" in r.stderr
    assert "Traceback" not in r.stderr
    r = subprocess.run([sys.executable, "-m", "servoloop.cli", "run", "--robot", "arm", "--lockstep",
                        "--live", "70000"], capture_output=True, text=True, timeout=DEADLINE_S * 5)
    assert r.returncode == 2 and "port 70000" in r.stderr and "Traceback" not in r.stderr
