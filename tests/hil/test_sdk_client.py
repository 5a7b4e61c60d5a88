"""dynamixel_sdk as a second client of the virtual bus (ROBOTIS's own reading of the bytes)."""

import dynamixel_sdk as dxl
import pytest

from servoloop.firmware_bridge.control_table import get_table
from tests.hil.sdk_helpers import ok

pytestmark = pytest.mark.hil

XM = {n: r.address for n, r in get_table("XM430-W350").registers.items()}
AX = {n: r.address for n, r in get_table("AX-18A").registers.items()}




def test_protocol2_ping_read_write(virtual_bus, sdk_port):
    port = sdk_port(virtual_bus(servos="1-4:XM430-W350"))
    ph = dxl.PacketHandler(2.0)
    assert ok(ph.ping(port, 3)) == 1020
    assert ok(ph.read1ByteTxRx(port, 3, XM["firmware_version"])) == 48
    ok(ph.write1ByteTxRx(port, 3, XM["led"], 1))
    assert ok(ph.read1ByteTxRx(port, 3, XM["led"])) == 1
    ok(ph.write2ByteTxRx(port, 3, XM["position_p_gain"], 900))
    assert ok(ph.read2ByteTxRx(port, 3, XM["position_p_gain"])) == 900
    ok(ph.write4ByteTxRx(port, 3, XM["profile_velocity"], 77))
    assert ok(ph.read4ByteTxRx(port, 3, XM["profile_velocity"])) == 77
    ok(ph.write1ByteTxRx(port, 3, XM["torque_enable"], 1))
    assert ph.write1ByteTxRx(port, 3, XM["return_delay_time"], 0)[1] == 7    # access error
    pinged, comm = ph.broadcastPing(port)
    assert comm == dxl.COMM_SUCCESS and sorted(pinged) == [1, 2, 3, 4]


def test_protocol2_group_sync_read_write_and_fast_sync_read(virtual_bus, sdk_port, poll_until):
    port = sdk_port(virtual_bus(servos="1-4:XM430-W350"))
    ph = dxl.PacketHandler(2.0)
    sw = dxl.GroupSyncWrite(port, ph, XM["torque_enable"], 1)
    for i in range(1, 5):
        sw.addParam(i, [1])
    assert sw.txPacket() == dxl.COMM_SUCCESS
    goals = {1: 2048 + 300, 2: 2048 - 300, 3: 2048 + 100, 4: 2048}
    sw = dxl.GroupSyncWrite(port, ph, XM["goal_position"], 4)
    for i, g in goals.items():
        sw.addParam(i, list(g.to_bytes(4, "little")))
    assert sw.txPacket() == dxl.COMM_SUCCESS
    sr = dxl.GroupSyncRead(port, ph, XM["present_position"], 4)
    for i in goals:
        sr.addParam(i)

    def settled():
        assert sr.txRxPacket() == dxl.COMM_SUCCESS
        return all(abs(sr.getData(i, XM["present_position"], 4) - g) <= 4 for i, g in goals.items())

    assert poll_until(settled, timeout=10)
    fr = dxl.GroupSyncRead(port, ph, XM["goal_position"], 4)
    for i in goals:
        fr.addParam(i)
    assert fr.fastSyncRead() == dxl.COMM_SUCCESS
    assert {i: fr.getData(i, XM["goal_position"], 4) for i in goals} == goals


def test_protocol2_group_bulk_read(virtual_bus, sdk_port):
    port = sdk_port(virtual_bus(servos="1-2:XM430-W350"))
    ph = dxl.PacketHandler(2.0)
    br = dxl.GroupBulkRead(port, ph)
    assert br.addParam(1, XM["model_number"], 2) and br.addParam(2, XM["status_return_level"], 1)
    assert br.txRxPacket() == dxl.COMM_SUCCESS
    assert br.getData(1, XM["model_number"], 2) == 1020
    assert br.getData(2, XM["status_return_level"], 1) == 2


def test_protocol1_read_write_and_sync_write(virtual_bus, sdk_port):
    port = sdk_port(virtual_bus(servos="1-3:AX-18A", protocol=1))
    ph = dxl.PacketHandler(1.0)
    assert ok(ph.ping(port, 2)) == 18
    ok(ph.write1ByteTxRx(port, 2, AX["led"], 1))
    assert ok(ph.read1ByteTxRx(port, 2, AX["led"])) == 1
    ok(ph.write2ByteTxRx(port, 2, AX["goal_position"], 700))
    assert ok(ph.read2ByteTxRx(port, 2, AX["goal_position"])) == 700
    sw = dxl.GroupSyncWrite(port, ph, AX["goal_position"], 2)
    for i, g in ((1, 300), (2, 400), (3, 500)):
        sw.addParam(i, list(g.to_bytes(2, "little")))
    assert sw.txPacket() == dxl.COMM_SUCCESS
    assert [ok(ph.read2ByteTxRx(port, i, AX["goal_position"])) for i in (1, 2, 3)] == [300, 400, 500]
    assert ok(ph.read2ByteTxRx(port, 3, AX["model_number"])) == 18


def test_protocol1_bulk_read_on_mx(virtual_bus, sdk_port):
    # GroupBulkRead of dynamixel_sdk 4.1 cannot send a Protocol 1.0 bulk read (it passes
    # bulkReadTx one argument too many), so drive the packet handler directly
    mx = {n: r.address for n, r in get_table("MX-28").registers.items()}
    port = sdk_port(virtual_bus(servos="1-2:MX-28", protocol=1))
    ph = dxl.PacketHandler(1.0)
    param = [2, 1, mx["model_number"], 1, 2, mx["id"]]       # (length, id, address) per servo
    assert ph.bulkReadTx(port, param, len(param)) == dxl.COMM_SUCCESS
    data1, comm1, err1 = ph.readRx(port, 1, 2)
    data2, comm2, err2 = ph.readRx(port, 2, 1)
    assert (comm1, err1, comm2, err2) == (dxl.COMM_SUCCESS, 0, dxl.COMM_SUCCESS, 0)
    assert data1[0] | (data1[1] << 8) == 29 and data2[0] == 2
