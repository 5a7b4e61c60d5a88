"""What the pty server publishes to its compiled reply path, and when that path is used.

The byte-for-byte comparison with the Python engine is
tests/hil/test_virtual_bus_fast_path.py; here: the CRC the C path uses, the
raw ranges a sync write may set in C (the engine's range, limit and
goal-limit rules; nothing while the Bus Watchdog has tripped, nothing on the
IMU board) and the switch.
"""

from __future__ import annotations

import random

import pytest

from servoloop.firmware_bridge.protocol import crc16
from servoloop.virtual_bus._fastpath import crc16 as c_crc16
from servoloop.virtual_bus.engine import BusEngine
from servoloop.virtual_bus.fastpath import writable_registers
from servoloop.virtual_bus.imu_device import ImuEmulation
from servoloop.virtual_bus.server import PtyServer


def test_crc_is_protocol_2s():
    rng = random.Random(3)
    for n in (1, 2, 7, 64, 300):
        data = bytes(rng.randrange(256) for _ in range(n))
        assert c_crc16(data) == crc16(data)


def _writable(s) -> dict:
    names = {r.address: r.name for r in s.info.reg.values()}
    return {names[a]: (size, signed, lo, hi) for a, size, signed, lo, hi in writable_registers(s)}


def test_sync_writable_ranges_follow_the_engine_rules():
    e = BusEngine([(1, "XM430-W350"), (2, "AX-18A")], imu=ImuEmulation(id=200))
    x, ax = e.servos
    w = _writable(x)
    assert w["goal_position"] == (4, True, 0, 4095)          # Min / Max Position Limit (mode 3)
    vlim = x.info.reg["velocity_limit"]
    v = int.from_bytes(x.mem[vlim.address:vlim.address + 4], "little")
    assert w["goal_velocity"] == (4, True, -v, v)            # |goal| <= Velocity Limit
    # every range is one the engine stores verbatim at both ends and refuses past them
    goal = x.info.reg["goal_position"]
    assert x.write(goal.address, (4095).to_bytes(4, "little", signed=True)) == 0
    assert x.write(goal.address, (4096).to_bytes(4, "little", signed=True)) != 0
    vel = x.info.reg["goal_velocity"]
    assert x.write(vel.address, (-v).to_bytes(4, "little", signed=True)) == 0
    assert x.write(vel.address, (v + 1).to_bytes(4, "little", signed=True)) != 0
    assert _writable(ax)["goal_position"] == (2, False, 0, 1023)   # AX: Angle Limits 0..1023
    assert writable_registers(e.devices[0]) == ()           # the IMU board: nothing
    # Bus Watchdog Error: goals read-only, so nothing may be written in C
    x.mem[x.info.a_wd] = 0xFF
    assert x.watchdog_tripped and writable_registers(x) == ()


@pytest.mark.parametrize(("kwargs", "fast"), [
    ({"fast": True}, True), ({}, False), ({"fast": True, "wire_timing": True}, False),
    ({"fast": True, "physics": "inline"}, False)])
def test_fast_path_only_beside_without_wire_timing(kwargs, fast):
    server = PtyServer(BusEngine([(1, "XM430-W350")]), **kwargs)
    try:
        assert (server._fast is not None) is fast
        assert {"fast_reads", "fast_writes", "slow_chunks"} <= set(server.stats)
    finally:
        server.close()


def test_cli_switch():
    import argparse

    from servoloop.virtual_bus.cli import add_arguments

    p = argparse.ArgumentParser()
    add_arguments(p)
    assert p.parse_args(["--servos", "1:XM430-W350"]).fast_path is False
    assert p.parse_args(["--servos", "1:XM430-W350", "--fast-path"]).fast_path is True
