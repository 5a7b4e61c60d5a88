"""Wire timing, baud-rate matching and the command line of ``servoloop virtual-bus``."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from servoloop.firmware_bridge import protocol as P

pytestmark = pytest.mark.hil
ROOT = Path(__file__).resolve().parents[2]


def test_wire_timing_delays_by_bytes_at_the_baud(virtual_bus, pty_client):
    # 9600 baud: a 10-byte ping + a 14-byte status is 24 bytes * 10 bits = 25 ms, plus 0.5 ms RDT
    c = pty_client(virtual_bus(servos="1:XM430-W350", baud=9600, wire_timing=True), baud=9600)
    wire_s = 24 * 10 / 9600 + 250 * 2e-6
    t = time.monotonic()
    pkt = c.txrx(1, P.Instruction.PING, timeout=5.0)
    elapsed = time.monotonic() - t
    assert pkt is not None
    assert elapsed >= 0.95 * wire_s          # never earlier than the wire allows


def test_servos_answer_only_at_their_baud(virtual_bus, pty_client):
    path = virtual_bus(servos="1:XM430-W350", baud=1_000_000)
    slow = pty_client(path, baud=57600)
    slow.send(1, P.Instruction.PING)
    assert slow.quiet()
    slow.port.baudrate = 1_000_000
    assert slow.txrx(1, P.Instruction.PING) is not None
    # writing Baud Rate moves the servo off the host's rate
    assert slow.write(1, 8, b"\x01").error == 0          # 57600
    slow.send(1, P.Instruction.PING)
    assert slow.quiet()
    slow.port.baudrate = 57600
    assert slow.txrx(1, P.Instruction.PING) is not None


def test_robot_option_serves_its_servo_map(virtual_bus, pty_client):
    c = pty_client(virtual_bus(robot="humanoid"), protocol=1)   # 18 x AX-18A, 1 Mbps, Protocol 1.0
    assert c.txrx(18, P.Instruction.PING) is not None
    c.send(19, P.Instruction.PING)
    assert c.quiet()


def _cli(*args, timeout=30):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "servoloop.cli", "virtual-bus", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("args, needle", [
    (["--servos", "1-3:XM999"], "XM999"),
    (["--servos", "1-3"], "IDS:MODEL"),
    (["--servos", "1:XM430-W350", "--faults", "drop:idx=2"], "idx"),
    (["--servos", "1:XM430-W350", "--faults", "drop:id=9"], "9"),
    (["--servos", "1:AX-18A", "--protocol", "2"], "Protocol"),
])
def test_bad_input_exits_2_naming_the_token(args, needle):
    r = _cli(*args)
    assert r.returncode == 2
    assert needle in r.stderr and r.stdout == ""


def test_sigterm_is_a_clean_exit_with_json_summary():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.Popen([sys.executable, "-m", "servoloop.cli", "virtual-bus", "--servos",
                          "1:XM430-W350", "--json"], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    try:
        path = p.stdout.readline().strip()
        assert path.startswith("/dev/")
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["port"] == path and summary["servos"] == [[1, "XM430-W350"]]
