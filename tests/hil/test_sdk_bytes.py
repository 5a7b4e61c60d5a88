"""Every packet our codec builds equals the bytes dynamixel_sdk writes for the same call.

The SDK's PortHandler is pointed at a pty slave; we read what it wrote from
the master side.  Calls that wait for a reply (ping, reboot, ...) time out
after the SDK's own ~34 ms: no servo is there, only the bytes matter.
"""

import os
import tty

import pytest

from servoloop.firmware_bridge import _codec as C
from servoloop.firmware_bridge import protocol as P
from servoloop.firmware_bridge.sdk import sdk as dxl

pytestmark = pytest.mark.hil


@pytest.fixture
def capture():
    master, slave = os.openpty()
    tty.setraw(slave)
    os.set_blocking(master, False)
    port = dxl.PortHandler(os.ttyname(slave))
    assert port.openPort() and port.setBaudRate(1_000_000)

    def drain() -> bytes:
        out = b""
        try:
            while True:
                out += os.read(master, 4096)
        except BlockingIOError:
            return out

    yield port, drain
    port.closePort()
    os.close(master)
    os.close(slave)


def le(v, n):
    return int(v).to_bytes(n, "little")


@pytest.mark.parametrize("protocol", [1, 2])
def test_single_servo_instructions(capture, protocol):
    port, drain = capture
    ph = dxl.PacketHandler(float(protocol))
    cases = [
        (lambda: ph.readTx(port, 7, 36, 2), C.read(protocol, 7, 36, 2)),
        (lambda: ph.writeTxOnly(port, 7, 30, 2, [0x00, 0x02]), C.write(protocol, 7, 30, b"\x00\x02")),
        (lambda: ph.write4ByteTxOnly(port, 200, 116, 0xFFFFFDFF), C.write(protocol, 200, 116, le(0xFFFFFDFF, 4))),
        (lambda: ph.regWriteTxOnly(port, 3, 104, 4, list(le(200, 4))), C.reg_write(protocol, 3, 104, le(200, 4))),
        (lambda: ph.ping(port, 1), C.ping(protocol, 1)),
        (lambda: ph.action(port, 0xFE), C.action(protocol, 0xFE)),
    ]
    if protocol == 2:
        cases += [
            (lambda: ph.reboot(port, 4), C.reboot(2, 4)),
            (lambda: ph.factoryReset(port, 4, 0x02), C.factory_reset(2, 4, 0x02, confirm=True)),
            (lambda: ph.clearMultiTurn(port, 4), C.clear_multi_turn(4)),
        ]
    else:
        cases += [(lambda: ph.factoryReset(port, 4), C.factory_reset(1, 4, confirm=True))]
    for call, ours in cases:
        drain()
        port.is_using = False  # readTx leaves the port "in use" until a readRx
        call()
        assert drain() == ours


def test_group_sync_read_and_write_v2(capture):
    port, drain = capture
    ph = dxl.PacketHandler(2.0)
    ids = list(range(1, 13))
    gr = dxl.GroupSyncRead(port, ph, 126, 10)
    for i in ids:
        gr.addParam(i)
    drain()
    gr.txPacket()
    assert drain() == C.sync_read(126, 10, ids)
    drain()
    port.is_using = False
    gr.fastSyncReadTxPacket()
    assert drain() == C.fast_sync_read(126, 10, ids)
    gw = dxl.GroupSyncWrite(port, ph, 116, 4)
    values = {i: 2048 + 100 * i for i in ids}
    for i in ids:
        gw.addParam(i, list(le(values[i], 4)))
    drain()
    port.is_using = False
    gw.txPacket()
    assert drain() == C.sync_write(2, 116, 4, [(i, le(values[i], 4)) for i in ids])


def _unstuffed(servo_id, payload):
    pkt = P.HEADER_V2 + bytes((servo_id, (len(payload) + 2) & 0xFF, (len(payload) + 2) >> 8)) + payload
    crc = P.crc16(pkt)
    return pkt + bytes((crc & 0xFF, crc >> 8))


def test_sdk_drops_tx_byte_stuffing_we_follow_the_emanual(capture):
    """A write whose data holds FF FF FD: the e-Manual says stuff it (FF FF FD FD).

    dynamixel_sdk 4.1.0 builds the stuffed packet in ``addStuffing`` but
    ``txPacket`` ignores its return value when the length changes, so it
    sends the unstuffed bytes.  We are byte-exact with the SDK everywhere
    else and with the e-Manual (and protocol.py) here; this test pins both
    facts so an SDK fix shows up.
    """
    port, drain = capture
    ph = dxl.PacketHandler(2.0)
    data = b"\xff\xff\xfd\x00"
    drain()
    ph.writeTxOnly(port, 3, 116, 4, list(data))
    sdk_bytes = drain()
    ours = C.write(2, 3, 116, data)
    assert ours == P.build_instruction(2, 3, 0x03, b"\x74\x00" + data)
    assert b"\xff\xff\xfd\xfd" in ours
    assert sdk_bytes == _unstuffed(3, b"\x03\x74\x00" + data)


def test_group_sync_write_v1_and_bulk(capture):
    port, drain = capture
    ph1 = dxl.PacketHandler(1.0)
    gw = dxl.GroupSyncWrite(port, ph1, 30, 2)
    for i in (1, 2, 3):
        gw.addParam(i, list(le(500 + i, 2)))
    drain()
    gw.txPacket()
    assert drain() == C.sync_write(1, 30, 2, [(i, le(500 + i, 2)) for i in (1, 2, 3)])
    gb = dxl.GroupBulkRead(port, ph1)
    gb.addParam(1, 36, 2)
    gb.addParam(2, 30, 4)
    gb.makeParam()
    drain()
    port.is_using = False
    # GroupBulkRead.txPacket passes a 2.0-only argument to the 1.0 handler (SDK bug):
    # drive the 1.0 handler with the group's own parameters instead
    ph1.bulkReadTx(port, gb.param, len(gb.param))
    assert drain() == C.bulk_read(1, [(1, 36, 2), (2, 30, 4)])
    ph2 = dxl.PacketHandler(2.0)
    gb2 = dxl.GroupBulkRead(port, ph2)
    gb2.addParam(1, 132, 4)
    gb2.addParam(5, 144, 2)
    drain()
    port.is_using = False
    gb2.txPacket()
    assert drain() == C.bulk_read(2, [(1, 132, 4), (5, 144, 2)])
    gbw = dxl.GroupBulkWrite(port, ph2)
    gbw.addParam(1, 116, 4, list(le(1234, 4)))
    gbw.addParam(2, 64, 1, [1])
    drain()
    port.is_using = False
    gbw.txPacket()
    assert drain() == C.bulk_write([(1, 116, le(1234, 4)), (2, 64, b"\x01")])
