"""InProcessVirtualBus: deterministic, threadless, simulated time; two runs are bit-identical."""

import os
import select

import numpy as np
import pytest

from firmware_bridge import protocol as P
from firmware_bridge.virtual_bus import InProcessVirtualBus

pytestmark = pytest.mark.hil


def _exchange(fd, bus, packet: bytes, expect: int) -> bytes:
    os.write(fd, packet)
    bus.pump()
    out = b""
    while len(out) < expect:
        ready, _, _ = select.select([fd], [], [], 2.0)
        assert ready, "no reply from the in-process bus"
        out += os.read(fd, 4096)
    return out


def _run(ticks=300):
    bus = InProcessVirtualBus("1-4:XM430-W350", protocol=2, faults="drop:id=3:p=0.1", seed=7)
    fd = os.open(bus.port, os.O_RDWR | os.O_NOCTTY)
    try:
        on = P.build_instruction(2, 0xFE, 0x83, bytes([64, 0, 1, 0]) + b"".join(bytes((i, 1)) for i in range(1, 5)))
        os.write(fd, on)
        bus.pump()
        record = []
        sr = P.build_instruction(2, 0xFE, 0x82, bytes([126, 0, 10, 0, 1, 2, 4]))
        for k in range(ticks):
            goal = 2048 + int(400 * np.sin(k * 0.05))
            sw = bytes([116, 0, 4, 0]) + b"".join(bytes((i,)) + goal.to_bytes(4, "little") for i in range(1, 5))
            os.write(fd, P.build_instruction(2, 0xFE, 0x83, sw))
            bus.pump()
            record.append(_exchange(fd, bus, sr, 3 * 21))
            bus.advance(0.001)
        return b"".join(record), bus.time_s
    finally:
        os.close(fd)
        bus.close()


def test_two_lockstep_runs_are_bit_identical():
    a, ta = _run()
    b, tb = _run()
    assert a == b and ta == tb
    # and the servos did move: positions differ across the run
    assert len({a[k:k + 21] for k in range(0, len(a), 63)}) > 50


def test_advance_moves_the_servo_towards_its_goal():
    with InProcessVirtualBus({1: "AX-18A"}, protocol=1) as bus:
        fd = os.open(bus.port, os.O_RDWR | os.O_NOCTTY)
        try:
            _exchange(fd, bus, P.build_instruction(1, 1, 0x03, bytes((24, 1))), 6)       # torque on
            _exchange(fd, bus, P.build_instruction(1, 1, 0x03, bytes((30,)) + (612).to_bytes(2, "little")), 6)
            before = _exchange(fd, bus, P.build_instruction(1, 1, 0x02, bytes((36, 2))), 8)
            bus.advance(0.5)
            after = _exchange(fd, bus, P.build_instruction(1, 1, 0x02, bytes((36, 2))), 8)
        finally:
            os.close(fd)
    assert abs(int.from_bytes(before[5:7], "little") - 512) <= 1
    assert abs(int.from_bytes(after[5:7], "little") - 612) <= 3
