"""docs/command-socket.md against a real daemon (``servoloop run`` on the built-in virtual bus pty):
every documented request gets the documented reply; ``servoloop goal`` moves a joint there over
seconds; ``servoloop zero`` records the offsets from the daemon, or from the servos when none runs."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.hil

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "command-socket.md"
CONFIG = """\
# the two-joint arm of docs/command-socket.md
robot: doc_arm   # names the default socket
servos:
  - {id: 1, model: XM430-W350, joint: shoulder, min: -1.5, max: 1.5}   # base
  - {id: 2, model: XM430-W350, joint: elbow, min: -1.5, max: 1.5}
loop: {rate_hz: 100}
startup: {ramp_s: 0.2}
simulation: {plant: independent}
logging: {level: warning}
"""
DEADLINE_S = 60.0


def cli(*args, timeout=120):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "servoloop.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


def examples() -> list[tuple[str, dict]]:
    """(request line, documented reply) pairs of every ```jsonl block, in order."""
    pairs, block, request = [], False, None
    for line in DOC.read_text().splitlines():
        if line.startswith("```"):
            block = line.strip() == "```jsonl"
            continue
        if block and line.startswith("> "):
            request = line[2:]
        elif block and line.startswith("< "):
            pairs.append((request, json.loads(line[2:])))
    return pairs


class Client:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(5.0)
        self.s.connect(str(path))
        self.buf = b""

    def ask(self, line: str) -> dict:
        self.s.sendall(line.encode() + b"\n")
        while b"\n" not in self.buf:
            chunk = self.s.recv(65536)
            assert chunk, "the daemon closed the connection"
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)


def check_reply(request: str, got: dict, want: dict) -> None:
    assert got["ok"] == want["ok"], (request, got)
    assert got.get("id") == want.get("id"), (request, got)
    if "error" in want:
        head = want["error"].split("...")[0]
        assert got["error"].startswith(head) if "..." in want["error"] else got["error"] == want["error"], \
            (request, got["error"], want["error"])
    if "status" in want:
        missing = set(want["status"]) - set(got["status"])
        assert not missing, f"status lacks documented fields {missing}"
        assert set(want["status"]["jitter_us"]) <= set(got["status"]["jitter_us"])
        assert set(got["status"]["joints"]) == {"shoulder", "elbow"}


def wait_for(fn, what, deadline_s=DEADLINE_S):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        value = fn()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what() if callable(what) else what}")


@pytest.fixture
def daemon(tmp_path):
    cfg = tmp_path / "arm.yaml"
    cfg.write_text(CONFIG)
    sock = tmp_path / "s" / "doc.sock"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "servoloop.cli", "run", "--config", str(cfg), "--socket",
                             str(sock), "--telemetry", "none", "--quiet"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def running():
        if proc.poll() is not None:
            raise AssertionError(f"the daemon exited: {proc.stderr.read()}")
        if not sock.exists():
            return None
        try:
            st = Client(sock).ask('{"cmd": "status"}')["status"]
        except OSError:
            return None
        return st if st["state"] == "run" else None

    wait_for(running, "the daemon's run state")
    yield proc, cfg, sock
    if proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=20)
    proc.stdout.close()
    proc.stderr.close()


def test_every_documented_example_and_the_goal_and_zero_commands(daemon, tmp_path):
    proc, cfg, sock = daemon
    c = Client(sock)

    def joint(name):
        st = c.ask('{"cmd": "status"}')["status"]
        assert st["state"] == "run", st["faults"]
        return st["joints"][name]

    # servoloop goal: the joint gets there, ramped, over simulated-servo seconds
    r = cli("goal", "shoulder=0.4", "--socket", str(sock))
    assert r.returncode == 0 and "goal accepted: shoulder = +0.4000 rad" in r.stdout, r.stderr
    seen = []
    wait_for(lambda: seen.append(joint("shoulder")) or abs(seen[-1] - 0.4) < 0.01,
             lambda: f"shoulder at 0.4 rad (last readings {seen[-5:]})")
    r = cli("goal", "knee=0.1", "--socket", str(sock))
    assert r.returncode == 1 and "the daemon refused the goal: ControllerParamError: goal: unknown joint 'knee'; joints are shoulder, elbow" in r.stderr
    # servoloop zero from the daemon: a new file, comments kept
    out = tmp_path / "zeroed.yaml"
    r = cli("zero", "--config", str(cfg), "--socket", str(sock), "--joints", "shoulder", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "the running daemon's status" in r.stdout and "a new file" in r.stdout
    text = out.read_text()
    assert "# the two-joint arm" in text and "# base" in text
    servos = yaml.safe_load(text)["servos"]
    assert servos[0]["offset"] == pytest.approx(0.4, abs=0.01) and "offset" not in servos[1]
    assert cfg.read_text() == CONFIG                       # --out: the original untouched

    pairs = examples()
    assert len(pairs) == 14   # every ```jsonl block of the page is read (wbc/trot ones: test_daemon_wbc.py)
    stops = [p for p in pairs if '"stop"' in p[0]]
    for request, want in [p for p in pairs if p not in stops] + stops:
        check_reply(request, c.ask(request), want)
    assert proc.wait(timeout=DEADLINE_S) == 0
    assert "stop: end of the socket examples" in proc.stdout.read()


def test_zero_without_a_daemon_reads_the_servos_and_updates_the_config_in_place(tmp_path, virtual_bus):
    port = virtual_bus(servos="1:XM430-W350,2:XM430-W350")
    cfg = tmp_path / "arm.yaml"
    cfg.write_text(CONFIG)
    r = cli("zero", "--config", str(cfg), "--port", port)
    assert r.returncode == 0, r.stderr
    assert f"the servos on {port}" in r.stdout and "updated in place, comments kept" in r.stdout
    text = cfg.read_text()
    assert "# the two-joint arm" in text and "# names the default socket" in text
    offsets = [s["offset"] for s in yaml.safe_load(text)["servos"]]
    assert all(abs(o) < 0.05 for o in offsets)            # the emulated servos rest at their centre
    r = cli("zero", "--config", str(cfg), "--joints", "wrist", "--port", port)
    assert r.returncode == 2 and "no joint 'wrist'; joints: shoulder, elbow" in r.stderr
