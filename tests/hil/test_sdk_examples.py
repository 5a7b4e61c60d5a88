"""The operations of DynamixelSDK's Python example scripts (``python/tests``), replayed on the virtual bus.

One test per example, the same calls in the same order, with the examples'
own addresses (X series: Torque Enable 64, LED 65, Goal Position 116, Moving
122, Present Position 132, Baud Rate 8).  The Protocol 1.0 examples use
those X addresses too: they are written for X / MX(2.0) servos whose
Protocol Type is set to 1, so they run here on XM430-W350s switched to
Protocol 1.0 over Protocol 2.0 first.  ``indirect_address.py``,
``clear_multi_turn.py``, ``reboot.py`` and ``protocol_combined.py`` are in
``test_sdk_fidelity.py``.  Loops that wait for a motion poll with a deadline.
"""

from __future__ import annotations

import dynamixel_sdk as dxl
import pytest

from tests.hil.sdk_helpers import TxRxFailed, ok

pytestmark = pytest.mark.hil

TORQUE, LED, GOAL, MOVING, PRESENT, BAUD, PROTOCOL_TYPE = 64, 65, 116, 122, 132, 8, 13




def to_protocol1(port, ids):
    ph2 = dxl.PacketHandler(2.0)
    for i in ids:
        ok(ph2.write1ByteTxRx(port, i, PROTOCOL_TYPE, 1))


def le4(v):
    return [dxl.DXL_LOBYTE(dxl.DXL_LOWORD(v)), dxl.DXL_HIBYTE(dxl.DXL_LOWORD(v)),
            dxl.DXL_LOBYTE(dxl.DXL_HIWORD(v)), dxl.DXL_HIBYTE(dxl.DXL_HIWORD(v))]


def reach(poll_until, read, goals, threshold=20, max_timeouts=3):
    """Poll until every servo reads within ``threshold`` of its goal.  A read whose reply did
    not come in time is read again, as the SDK's examples do in their loops (they print the
    result and go on): a loaded test machine can hold the virtual servos' process past the
    SDK's packet timeout.  More than ``max_timeouts`` such reads, or any other failure, fail."""
    timeouts = []

    def near(i, g):
        try:
            return abs(read(i) - g) <= threshold
        except TxRxFailed as exc:
            if exc.comm != dxl.COMM_RX_TIMEOUT or len(timeouts) >= max_timeouts:
                raise
            timeouts.append(i)
            return False

    assert poll_until(lambda: all([near(i, g) for i, g in goals.items()]), timeout=20), timeouts


# ---------------------------------------------------------------- Protocol 1.0 examples
def test_p1_ping(virtual_bus, sdk_port):
    port = sdk_port(virtual_bus(servos="1:XM430-W350"))
    to_protocol1(port, [1])
    assert ok(dxl.PacketHandler(1.0).ping(port, 1)) == 1020


@pytest.mark.parametrize("example", ["read_write", "sync_write", "bulk_read"])
def test_p1_motion_examples(virtual_bus, sdk_port, poll_until, example):
    port = sdk_port(virtual_bus(servos="1-2:XM430-W350"))
    to_protocol1(port, [1, 2])
    ph = dxl.PacketHandler(1.0)
    ids = [1] if example == "read_write" else [1, 2]
    for i in ids:
        ok(ph.write1ByteTxRx(port, i, TORQUE, 1))
    for goals in ({i: 100 for i in ids}, {i: 4000 for i in ids}):
        if example == "sync_write":
            sw = dxl.GroupSyncWrite(port, ph, GOAL, 4)
            for i, g in goals.items():
                assert sw.addParam(i, le4(g))
            assert sw.txPacket() == dxl.COMM_SUCCESS
        else:
            for i, g in goals.items():
                ok(ph.write4ByteTxRx(port, i, GOAL, g))
        if example == "bulk_read":
            # GroupBulkRead.txRxPacket of dynamixel_sdk 4.x passes a 2.0-only argument to the
            # 1.0 handler (an SDK bug that fails on real servos as well): the same packet by hand
            br = dxl.GroupBulkRead(port, ph)
            assert br.addParam(1, PRESENT, 4) and br.addParam(2, MOVING, 1)
            br.makeParam()

            def read(i, br=br):
                assert ph.bulkReadTx(port, br.param, len(br.param)) == dxl.COMM_SUCCESS
                got = {}
                for sid, length in ((1, 4), (2, 1)):
                    data, comm, err = ph.readRx(port, sid, length)
                    assert comm == dxl.COMM_SUCCESS and err == 0
                    got[sid] = int.from_bytes(bytes(data), "little")
                assert got[2] in (0, 1)                      # servo 2's Moving
                return got[1] if i == 1 else ok(ph.read4ByteTxRx(port, i, PRESENT))
        else:
            def read(i):
                return ok(ph.read4ByteTxRx(port, i, PRESENT))
        reach(poll_until, read, goals)
    for i in ids:
        ok(ph.write1ByteTxRx(port, i, TORQUE, 0))


def test_p1_factory_reset(virtual_bus, sdk_port):
    """``protocol1_0/factory_reset.py`` on an MX-28 (Protocol 1.0 firmware: Baud Rate at 4)."""
    port = sdk_port(virtual_bus(servos="1:MX-28", baud=1_000_000))
    ph = dxl.PacketHandler(1.0)
    # the example passes an option the 1.0 handler does not take (TypeError in dynamixel_sdk 4.x):
    # Protocol 1.0 FACTORY RESET has no option
    ok(ph.factoryReset(port, 1))
    assert port.setBaudRate(57_600)                         # the factory rate: 34 -> 57142 bps (0.8 %)
    assert ok(ph.read1ByteTxRx(port, 1, 4)) == 34
    ok(ph.write1ByteTxRx(port, 1, 4, 1))                    # 1 Mbps
    assert port.setBaudRate(1_000_000)
    assert ok(ph.read1ByteTxRx(port, 1, 4)) == 1


def test_p1_multi_port(virtual_bus, sdk_port, poll_until):
    ports = [sdk_port(virtual_bus(servos=f"{i}:XM430-W350")) for i in (1, 2)]
    for i, port in enumerate(ports, start=1):
        to_protocol1(port, [i])
    ph = dxl.PacketHandler(1.0)
    for i, port in enumerate(ports, start=1):
        ok(ph.write1ByteTxRx(port, i, TORQUE, 1))
        ok(ph.write4ByteTxRx(port, i, GOAL, 3000))
    reach(poll_until, lambda i: ok(ph.read4ByteTxRx(ports[i - 1], i, PRESENT)), {1: 3000, 2: 3000})


# ---------------------------------------------------------------- Protocol 2.0 examples
def test_p2_ping_and_broadcast_ping(virtual_bus, sdk_port):
    port = sdk_port(virtual_bus(servos="1-3:XM430-W350"))
    ph = dxl.PacketHandler(2.0)
    assert ok(ph.ping(port, 1)) == 1020
    ids, comm = ph.broadcastPing(port)
    assert comm == dxl.COMM_SUCCESS and ids == {1: [1020, 48], 2: [1020, 48], 3: [1020, 48]}


@pytest.mark.parametrize("example", ["read_write", "sync_read_write", "bulk_read_write", "fast_sync_read",
                                     "fast_bulk_read"])
def test_p2_motion_examples(virtual_bus, sdk_port, poll_until, example):
    port = sdk_port(virtual_bus(servos="1-2:XM430-W350"))
    ph = dxl.PacketHandler(2.0)
    ids = [1] if example == "read_write" else [1, 2]
    for i in ids:
        ok(ph.write1ByteTxRx(port, i, TORQUE, 1))
    for k, g in enumerate((100, 4000)):
        if example == "read_write":
            ok(ph.write4ByteTxRx(port, 1, GOAL, g))
            reach(poll_until, lambda i: ok(ph.read4ByteTxRx(port, i, PRESENT)), {1: g})
        elif example in ("sync_read_write", "fast_sync_read"):
            sw = dxl.GroupSyncWrite(port, ph, GOAL, 4)
            sr = dxl.GroupSyncRead(port, ph, PRESENT, 4)
            for i in ids:
                assert sw.addParam(i, le4(g)) and sr.addParam(i)
            assert sw.txPacket() == dxl.COMM_SUCCESS

            def read(i, sr=sr):
                rx = sr.txRxPacket() if example == "sync_read_write" else sr.fastSyncRead()
                if rx != dxl.COMM_SUCCESS:      # reach() reads again after a timeout, fails otherwise
                    raise TxRxFailed(rx, 0)
                assert sr.isAvailable(i, PRESENT, 4)
                return sr.getData(i, PRESENT, 4)

            reach(poll_until, read, {i: g for i in ids})
        else:   # bulk: goal to servo 1, LED to servo 2; read present of 1 and LED of 2
            bw = dxl.GroupBulkWrite(port, ph)
            assert bw.addParam(1, GOAL, 4, le4(g)) and bw.addParam(2, LED, 1, [k])
            assert bw.txPacket() == dxl.COMM_SUCCESS
            br = dxl.GroupBulkRead(port, ph)
            assert br.addParam(1, PRESENT, 4) and br.addParam(2, LED, 1)

            def read(i, br=br, k=k):
                rx = br.txRxPacket() if example == "bulk_read_write" else br.fastBulkRead()
                if rx != dxl.COMM_SUCCESS:      # reach() reads again after a timeout, fails otherwise
                    raise TxRxFailed(rx, 0)
                assert br.isAvailable(1, PRESENT, 4) and br.isAvailable(2, LED, 1)
                assert br.getData(2, LED, 1) == k
                return br.getData(1, PRESENT, 4)

            reach(poll_until, read, {1: g})
    for i in ids:
        ok(ph.write1ByteTxRx(port, i, TORQUE, 0))


def test_p2_factory_reset(virtual_bus, sdk_port):
    port = sdk_port(virtual_bus(servos="1:XM430-W350", baud=1_000_000))
    ph = dxl.PacketHandler(2.0)
    ok(ph.factoryReset(port, 1, 0x01))                     # all but the ID: baud back to 57600
    assert port.setBaudRate(57_600)
    assert ok(ph.read1ByteTxRx(port, 1, BAUD)) == 1
    ok(ph.write1ByteTxRx(port, 1, BAUD, 3))                 # 1 Mbps
    assert port.setBaudRate(1_000_000)
    assert ok(ph.read1ByteTxRx(port, 1, BAUD)) == 3


def test_p2_multi_port(virtual_bus, sdk_port, poll_until):
    ports = [sdk_port(virtual_bus(servos=f"{i}:XM430-W350")) for i in (1, 2)]
    ph = dxl.PacketHandler(2.0)
    for i, port in enumerate(ports, start=1):
        ok(ph.write1ByteTxRx(port, i, TORQUE, 1))
        ok(ph.write4ByteTxRx(port, i, GOAL, 1000))
    reach(poll_until, lambda i: ok(ph.read4ByteTxRx(ports[i - 1], i, PRESENT)), {1: 1000, 2: 1000})
