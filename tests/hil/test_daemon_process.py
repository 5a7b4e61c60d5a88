"""The daemon against the virtual bus process on a pty.

SIGTERM ends in a clean shutdown with torque off (read back from the
servos afterwards), SIGKILL leaves a readable telemetry file that lost at
most its last flush, ``servoloop status`` / ``stop`` / goals work over
the command socket, and 10 000 ticks keep no Python object (tracemalloc).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tracemalloc
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from servoloop.controller.clock import SimulatedClock
from servoloop.controller.command_socket import send_command
from servoloop.controller.config import builtin_config, config_from_dict
from servoloop.controller.daemon import Daemon
from servoloop.controller.errors import CommandError
from servoloop.controller.runtime import make_bus
from servoloop.controller.telemetry_format import read_telemetry

pytestmark = pytest.mark.hil

ROOT = Path(__file__).resolve().parents[2]
RATE_HZ = 250.0  # gentle on a shared machine; the loop is the same at 1 kHz


def write_config(tmp_path: Path, robot: str = "quadruped") -> Path:
    """Built-in config with a short ramp, a modest rate and faults that tolerate a busy machine."""
    from servoloop.robots import config_path

    src = config_path(robot)
    doc = yaml.safe_load(src.read_text())
    doc["model"]["urdf"] = str(src.parent / doc["model"]["urdf"])
    doc["startup"] = {"ramp_s": 0.2}
    doc["loop"] = {"rate_hz": RATE_HZ}
    # the 0.2 s ramp without the crouch tips the quadruped over (test_daemon_stands.py's negative
    # control); these tests are about the process, so its fall is only reported
    doc["safety"] = {"max_consecutive_missed": None, "comm_timeout_s": 2.0, "on_fall": "warn"}
    doc["logging"] = {"flush_s": 0.1, "ring_s": 4.0}
    path = tmp_path / f"{robot}.yaml"
    path.write_text(yaml.safe_dump(doc))
    config_from_dict(doc, path)
    return path


@pytest.fixture
def quadruped_port(virtual_bus):
    """The built-in quadruped on the virtual bus process (tests/hil/conftest.py); its pty path."""
    return virtual_bus(robot="quadruped")


def start_daemon(tmp_path, port, *extra):
    cfg = write_config(tmp_path)
    sock = tmp_path / "d.sock"
    tel = tmp_path / "t.sltl"
    cmd = [sys.executable, "-m", "servoloop.cli", "run", "--config", str(cfg), "--port", port,
           "--socket", str(sock), "--telemetry", str(tel), "--json", "--quiet", *extra]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path)
    return proc, sock, tel


def wait_status(proc, sock, pred, timeout=60.0):
    """Poll the daemon's status until ``pred(status)``; fail with its stderr if it dies."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"daemon exited with {proc.returncode}: {proc.stderr.read().decode()[-3000:]}")
        try:
            reply = send_command(sock, {"cmd": "status"}, timeout=2.0)
            last = reply.get("status")
            if last and pred(last):
                return last
        except CommandError:
            pass
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"daemon never reached the expected status; last: {last}")


def finish(proc, timeout=60.0):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out.decode(), err.decode()


def torque_states(pty_client, port) -> list[int]:
    """Torque Enable of every servo, read by a byte-level client of its own."""
    c = pty_client(port, protocol=2, baud=4_000_000)
    return [c.read_int(s.id, 64, 1) for s in builtin_config("quadruped").servos]


def test_sigterm_clean_shutdown_with_torque_off(tmp_path, quadruped_port, pty_client):
    port = quadruped_port
    proc, sock, tel = start_daemon(tmp_path, port)
    wait_status(proc, sock, lambda s: s["state"] == "run" and s["t_s"] > 0.5)
    proc.send_signal(signal.SIGTERM)
    rc, out, err = finish(proc)
    assert rc == 0, err[-3000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["state"] == "done" and summary["stop_reason"] == "SIGTERM", summary
    assert summary["faults"] == []
    assert set(summary) >= {"ticks", "rate_hz", "jitter_us", "missed", "bus_errors", "faults", "state"}
    assert torque_states(pty_client, port) == [0] * 12
    t = read_telemetry(tel)
    assert t.summary is not None and t.summary["state"] == "done"
    assert t.events[-1]["message"].startswith("shutdown -> done")
    assert not sock.exists()


def test_sigkill_leaves_intact_telemetry(tmp_path, quadruped_port):
    proc, sock, tel = start_daemon(tmp_path, quadruped_port)
    st = wait_status(proc, sock, lambda s: s["state"] == "run" and s["t_s"] > 1.0)
    proc.kill()
    proc.communicate(timeout=30)
    t = read_telemetry(tel)
    assert t.summary is None  # no clean end
    assert not [p for p in t.problems if "truncated" not in p], t.problems
    ticks = t.column("tick")
    assert ticks.size > 0 and np.all(np.diff(ticks) == 1) and ticks[0] == 1
    # everything up to one second before the kill is there (flush_s is 0.1 s)
    assert ticks[-1] >= st["tick"] - RATE_HZ * 1.0


def test_status_goal_and_stop_over_the_socket(tmp_path, quadruped_port):
    proc, sock, tel = start_daemon(tmp_path, quadruped_port)
    try:
        wait_status(proc, sock, lambda s: s["state"] == "run")
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        st = subprocess.run([sys.executable, "-m", "servoloop.cli", "status", "--socket", str(sock), "--json"],
                            capture_output=True, env=env, timeout=60)
        assert st.returncode == 0, st.stderr.decode()
        status = json.loads(st.stdout)
        assert status["robot"] == "quadruped" and status["state"] == "run"
        assert status["controller"]["name"] == "hold"
        bad = send_command(sock, {"cmd": "set_goal", "goal": {"lf_knee": -5.0}})
        assert not bad["ok"] and "outside its limits" in bad["error"]
        assert not send_command(sock, {"cmd": "fly"})["ok"]
        assert send_command(sock, {"cmd": "set_goal", "goal": {"lf_knee": -0.8}})["ok"]
        wait_status(proc, sock, lambda s: abs(s["joints"]["lf_knee"] + 0.8) < 0.05, timeout=30)
        stop = subprocess.run([sys.executable, "-m", "servoloop.cli", "stop", "--socket", str(sock)],
                              capture_output=True, env=env, timeout=60)
        assert stop.returncode == 0, stop.stderr.decode()
        rc, out, err = finish(proc)
        assert rc == 0, err[-3000:]
        summary = json.loads(out.strip().splitlines()[-1])
        assert summary["state"] == "done" and summary["stop_reason"] == "servoloop stop"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)


def test_tick_keeps_no_python_objects(quadruped_port):
    # Simulated time against the real-time bus process: no sleeping, each tick
    # is one real exchange on the pty, and the emulated servos' own work is
    # in the other process, out of the trace.
    cfg = builtin_config("quadruped")
    # a 10 ms stand-up against the real-time plant may tip the robot over: the fall is
    # watched (its detector runs each tick, in the trace) but only warned about
    cfg = replace(cfg, startup=replace(cfg.startup, ramp_s=0.01),
                  safety=replace(cfg.safety, comm_timeout_s=1e6, on_fall="warn"))
    d = Daemon(cfg, make_bus(cfg, quadruped_port), SimulatedClock(),
               telemetry_path=None, socket_path=None)
    try:
        d.connect()
        d.startup()
        d.run_loop(0.5)  # warm every cache: numpy ufunc loops, the histogram, error counters
        tracemalloc.start(1)
        before = tracemalloc.take_snapshot()
        d.run_loop(10.0)  # 10 000 ticks
        after = tracemalloc.take_snapshot()
        tracemalloc.stop()
        d.shutdown()
    finally:
        d.close_bus()
    assert d.run_ticks == 10_500 and d.lifecycle.state.label == "done"
    diff = after.compare_to(before, "filename")
    grown = sum(st.size_diff for st in diff if st.size_diff > 0)
    # any object kept per tick would be >= 10 000 * 16 bytes
    assert grown < 20_000, [str(st) for st in diff[:5]]
