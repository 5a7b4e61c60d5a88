"""InProcessVirtualBus: deterministic, threadless, simulated time; two runs are bit-identical."""

import os
import select

import numpy as np
import pytest

from servoloop.firmware_bridge import protocol as P
from servoloop.virtual_bus import InProcessVirtualBus

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


def _bus_run(ticks=200):
    bus_mod = pytest.importorskip("servoloop.firmware_bridge.bus")
    vb = InProcessVirtualBus("1-6:XM430-W350", protocol=2, seed=11)
    specs = [bus_mod.ServoSpec(id=i, model="XM430-W350") for i in range(1, 7)]
    positions = []
    try:
        with bus_mod.Bus(port=vb.port, baud=4_000_000, protocol=2, servos=specs,
                         on_after_write=vb.pump) as bus:
            bus.connect()
            reader = bus.sync_reader(["present_position", "present_velocity", "present_current"])
            writer = bus.sync_writer("goal_position")
            for i in range(1, 7):
                bus.write(i, "torque_enable", 1)
            for k in range(ticks):
                reader.read()
                positions.append(reader.values["present_position"].copy())
                writer.write(np.full(6, 0.4 * np.sin(0.02 * k)))
                vb.advance(0.001)
    finally:
        vb.close()
    return np.array(positions)


def test_bus_in_lockstep_is_bit_identical():
    a, b = _bus_run(), _bus_run()
    assert np.array_equal(a, b)
    assert np.ptp(a[:, 0]) > 0.2          # it tracked the moving goal


def test_pump_recovers_from_a_packet_that_never_completes():
    with InProcessVirtualBus("1:XM430-W350") as bus:
        fd = os.open(bus.port, os.O_RDWR | os.O_NOCTTY)
        try:
            # a header claiming 500 bytes, then a good ping: the ping still gets its answer
            os.write(fd, b"\xff\xff\xfd\x00\x01\xf4\x01\x02" + P.build_instruction(2, 1, 0x01))
            bus.pump(timeout=0.2)
            ready, _, _ = select.select([fd], [], [], 2.0)
            reply = os.read(fd, 64) if ready else b""
        finally:
            os.close(fd)
    pkt, _ = P.parse_packet(reply, 2, status=True)
    assert pkt.servo_id == 1 and pkt.error == 0
