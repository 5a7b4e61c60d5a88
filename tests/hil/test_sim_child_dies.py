"""``servoloop run`` on the built-in simulated robot: the virtual-bus child process dies with
the daemon, even when the daemon is killed with SIGKILL (no cleanup code runs)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.hil.test_daemon_process import wait_status, write_config

pytestmark = pytest.mark.hil

ROOT = Path(__file__).resolve().parents[2]


def children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        out += [int(c) for c in text]
    return out


def alive(pid: int) -> bool:
    """Running (a zombie waiting for init to reap it is dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_kill_9_of_the_daemon_leaves_no_virtual_bus(tmp_path):
    cfg = write_config(tmp_path)
    sock = tmp_path / "d.sock"
    cmd = [sys.executable, "-m", "servoloop.cli", "run", "--config", str(cfg), "--socket", str(sock),
           "--telemetry", str(tmp_path / "t.sltl"), "--quiet"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=tmp_path)
    kids = []
    try:
        wait_status(proc, sock, lambda s: s["state"] == "run")
        kids = children(proc.pid)
        assert kids and all(alive(k) for k in kids)        # the simulated robot runs as a child
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 10.0
        while any(alive(k) for k in kids) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not any(alive(k) for k in kids), f"orphaned virtual bus {kids}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for k in kids:                                      # never leave one behind, even on failure
            if alive(k):
                os.kill(k, signal.SIGKILL)
        proc.stderr.close()
