"""Fixtures for HIL tests: the virtual servo bus as a subprocess on a pty.

``virtual_bus(servos=..., protocol=..., faults=..., baud=..., wire_timing=..., extra=[...])``
starts ``servoloop virtual-bus`` and returns the pty path (the first line
it prints); every process a test started is terminated at teardown.
``pty_client(path, protocol)`` opens that path as a raw byte-level host
(instructions built and replies parsed with ``firmware_bridge.protocol``).
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
import serial

from servoloop.firmware_bridge import protocol as P

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 30.0


def _start(servos=None, robot=None, protocol=None, faults=None, baud=None, wire_timing=False,
           extra=()):
    cmd = [sys.executable, "-m", "servoloop.cli", "virtual-bus"]
    cmd += ["--robot", robot] if robot else ["--servos", servos or "1:XM430-W350"]
    if protocol is not None:
        cmd += ["--protocol", str(protocol)]
    if faults:
        cmd += ["--faults", faults]
    if baud is not None:
        cmd += ["--baud", str(baud)]
    if wire_timing:
        cmd += ["--wire-timing"]
    cmd += list(extra)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + START_TIMEOUT_S
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, left))
        if not ready:
            _stop(proc)
            raise RuntimeError(f"virtual-bus printed no path within {START_TIMEOUT_S} s: {cmd}")
        ch = os.read(proc.stdout.fileno(), 1)
        if not ch:
            err = proc.stderr.read().decode(errors="replace")
            proc.wait()
            raise RuntimeError(f"virtual-bus exited with {proc.returncode}: {err.strip()} ({cmd})")
        line += ch
    return proc, line.decode().strip()


def _stop(proc) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for f in (proc.stdout, proc.stderr):
        if f:
            f.close()


@pytest.fixture
def virtual_bus_process():
    """Factory: start ``servoloop virtual-bus`` -> (Popen, pty path); stopped at teardown."""
    procs = []

    def start(**kw):
        proc, path = _start(**kw)
        procs.append(proc)
        return proc, path

    yield start
    for p in procs:
        _stop(p)


@pytest.fixture
def virtual_bus(virtual_bus_process):
    """Factory: start ``servoloop virtual-bus`` with these options -> pty path; stopped at teardown.

    Keywords: servos ("1-12:XM430-W350"), robot ("quadruped"), protocol (1|2),
    faults (SPEC), baud (int), wire_timing (bool), extra (more CLI arguments).
    """

    def start(**kw):
        return virtual_bus_process(**kw)[1]

    return start


class PtyClient:
    """A byte-level host on the virtual bus: send instructions, collect status packets."""

    def __init__(self, path: str, protocol: int = 2, baud: int = 1_000_000):
        self.protocol = protocol
        self.port = serial.Serial(path, baud, timeout=0)
        self.fd = self.port.fileno()
        self.buf = bytearray()

    def close(self):
        self.port.close()

    def send(self, servo_id: int, instruction: int, params: bytes = b"") -> None:
        self.send_raw(P.build_instruction(self.protocol, servo_id, instruction, params))

    def send_raw(self, data: bytes) -> None:
        os.write(self.fd, data)

    def read_bytes(self, n: int, timeout: float = 2.0) -> bytes:
        """Up to ``n`` bytes, waiting at most ``timeout`` s for them."""
        deadline = time.monotonic() + timeout
        while len(self.buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                self.buf += os.read(self.fd, 4096)
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def status(self, timeout: float = 2.0):
        """The next status packet (protocol.Packet), or None if none came within ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                i = P.find_header(self.buf, self.protocol)
                if i > 0:
                    del self.buf[:i]
                if i >= 0:
                    pkt, used = P.parse_packet(self.buf, self.protocol, status=True)
                    if pkt is not None:
                        del self.buf[:used]
                        return pkt
            except Exception:
                del self.buf[:1]
                raise
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                self.buf += os.read(self.fd, 4096)

    def quiet(self, wait: float = 0.15) -> bool:
        """True if no byte arrives within ``wait`` s (the servo stayed silent)."""
        return self.read_bytes(1, timeout=wait) == b""

    def txrx(self, servo_id: int, instruction: int, params: bytes = b"", timeout: float = 2.0):
        self.send(servo_id, instruction, params)
        return self.status(timeout)

    # Protocol 2.0 conveniences
    def read(self, servo_id: int, address: int, length: int):
        if self.protocol == 2:
            return self.txrx(servo_id, 0x02, address.to_bytes(2, "little") + length.to_bytes(2, "little"))
        return self.txrx(servo_id, 0x02, bytes((address, length)))

    def write(self, servo_id: int, address: int, data: bytes):
        if self.protocol == 2:
            return self.txrx(servo_id, 0x03, address.to_bytes(2, "little") + bytes(data))
        return self.txrx(servo_id, 0x03, bytes((address,)) + bytes(data))

    def read_int(self, servo_id: int, address: int, length: int, signed: bool = False) -> int:
        pkt = self.read(servo_id, address, length)
        assert pkt is not None and pkt.error & 0x7F == 0, f"read of {address} from {servo_id}: {pkt}"
        return int.from_bytes(pkt.params, "little", signed=signed)


@pytest.fixture
def pty_client():
    """Factory: PtyClient(path, protocol=2, baud=1_000_000); closed at teardown."""
    clients = []

    def open_client(path, protocol=2, baud=1_000_000):
        c = PtyClient(path, protocol, baud)
        clients.append(c)
        return c

    yield open_client
    for c in clients:
        c.close()


def _poll_until(predicate, timeout: float = 5.0, interval: float = 0.01):
    """Call ``predicate`` until it returns a truthy value or ``timeout`` s pass; return its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


@pytest.fixture
def poll_until():
    """``poll_until(predicate, timeout=5.0)``: poll with a deadline (never a bare sleep to wait)."""
    return _poll_until


@pytest.fixture
def sdk_port():
    """Factory: open ``path`` with dynamixel_sdk's PortHandler at ``baud``; closed at teardown."""
    import dynamixel_sdk as dxl

    ports = []

    def open_port(path, baud=1_000_000):
        port = dxl.PortHandler(path)
        assert port.openPort() and port.setBaudRate(baud)
        ports.append(port)
        return port

    yield open_port
    for p in ports:
        p.closePort()
