"""``servoloop scan`` against the virtual bus (and against an empty pty)."""

import json
import os
import subprocess
import sys
import tty
from pathlib import Path

import pytest

pytestmark = pytest.mark.hil

ROOT = Path(__file__).resolve().parents[2]


def scan(*args, timeout=120):
    cmd = [sys.executable, "-m", "servoloop.cli", "scan", *args]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_scan_protocol2_finds_every_servo_at_its_baud(virtual_bus):
    path = virtual_bus(servos="1-3:XM430-W350,7:XL330-M288", baud=1_000_000)
    r = scan("--port", path, "--baud", "57600", "1000000", "--protocol", "2", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [(x["id"], x["model"], x["model_number"], x["protocol"], x["baud"]) for x in rows] == [
        (1, "XM430-W350", 1020, 2, 1_000_000), (2, "XM430-W350", 1020, 2, 1_000_000),
        (3, "XM430-W350", 1020, 2, 1_000_000), (7, "XL330-M288", 1200, 2, 1_000_000)]
    assert all(isinstance(x["firmware"], int) for x in rows)


def test_scan_protocol1_pings_each_id(virtual_bus):
    path = virtual_bus(servos="2:AX-12A,5:AX-18A", protocol=1, baud=1_000_000)
    # one ping per id: a generous margin so a loaded CI machine misses no reply
    r = scan("--port", path, "--baud", "1000000", "--protocol", "1", "--margin-ms", "25", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [(x["id"], x["model"], x["protocol"]) for x in rows] == [(2, "AX-12A", 1), (5, "AX-18A", 1)]


def test_scan_table_output(virtual_bus):
    path = virtual_bus(servos="1:XM430-W350", baud=1_000_000)
    r = scan("--port", path, "--baud", "1000000", "--protocol", "2")
    assert r.returncode == 0 and "id   1  XM430-W350" in r.stdout


def test_nobody_answers_exit_3_with_the_usual_causes():
    master, slave = os.openpty()
    tty.setraw(slave)
    try:
        r = scan("--port", os.ttyname(slave), "--baud", "1000000", "--protocol", "2", "--json")
    finally:
        os.close(master)
        os.close(slave)
    assert r.returncode == 3
    assert json.loads(r.stdout) == []
    for cause in ("baud rate or protocol mismatch", "57600", "power", "latency timer", "half-duplex"):
        assert cause in r.stderr


def test_missing_port_exit_3():
    r = scan("--port", "/dev/does-not-exist", "--baud", "57600", "--protocol", "2")
    assert r.returncode == 3 and "/dev/does-not-exist" in r.stderr
