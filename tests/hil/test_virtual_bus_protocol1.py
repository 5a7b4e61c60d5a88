"""Protocol 1.0 on the virtual bus: AX-18A (no sync read, no bulk read) and MX-28 (bulk read)."""

import pytest

from servoloop.firmware_bridge import protocol as P
from servoloop.firmware_bridge.control_table import get_table

pytestmark = pytest.mark.hil

AX = {n: r.address for n, r in get_table("AX-18A").registers.items()}
MX = {n: r.address for n, r in get_table("MX-28").registers.items()}
BROADCAST = 0xFE


@pytest.fixture
def ax(virtual_bus, pty_client):
    return pty_client(virtual_bus(servos="1-3:AX-18A", protocol=1), protocol=1)


def test_ping_read_write(ax):
    pkt = ax.txrx(2, P.Instruction.PING)
    assert (pkt.servo_id, pkt.error, pkt.params) == (2, 0, b"")
    assert ax.read_int(2, AX["model_number"], 2) == 18
    assert ax.write(2, AX["led"], b"\x01").error == 0
    assert ax.read_int(2, AX["led"], 1) == 1
    assert ax.write(2, AX["goal_position"], (600).to_bytes(2, "little")).error == 0
    assert ax.read_int(2, AX["goal_position"], 2) == 600
    ax.send(BROADCAST, P.Instruction.PING)        # Protocol 1.0: broadcast gets no status
    assert ax.quiet()


def test_errors_are_status_bits(ax):
    assert ax.write(1, AX["present_position"], b"\x00\x00").error == 0x08      # range error bit
    assert ax.write(1, AX["torque_enable"], b"\x01").error == 0
    assert ax.write(1, AX["return_delay_time"], b"\x00").error == 0x08         # EEPROM, torque on
    assert ax.write(1, AX["cw_angle_limit"], (100).to_bytes(2, "little")).error == 0x08
    assert ax.txrx(1, P.Instruction.REBOOT).error == 0x40                      # AX: no reboot
    bad = bytearray(P.build_instruction(1, 1, P.Instruction.PING))
    bad[-1] ^= 0x55
    ax.send_raw(bytes(bad))
    assert ax.status().error == 0x10                                           # checksum error bit


def test_sync_write_and_no_sync_or_bulk_read_on_ax(ax):
    params = bytes((AX["goal_position"], 2))
    for sid, goal in ((1, 400), (2, 500), (3, 700)):
        params += bytes((sid,)) + goal.to_bytes(2, "little")
    ax.send(BROADCAST, P.Instruction.SYNC_WRITE, params)
    assert ax.quiet()
    assert [ax.read_int(i, AX["goal_position"], 2) for i in (1, 2, 3)] == [400, 500, 700]
    ax.send(BROADCAST, P.Instruction.SYNC_READ, bytes((AX["present_position"], 2, 1, 2)))
    assert ax.quiet()
    ax.send(BROADCAST, P.Instruction.BULK_READ, bytes((0, 2, 1, AX["present_position"])))
    assert ax.quiet()


def test_mx_bulk_read_and_reboot(virtual_bus, pty_client, poll_until):
    mx = pty_client(virtual_bus(servos="1-2:MX-28", protocol=1), protocol=1)
    mx.send(BROADCAST, P.Instruction.BULK_READ,
            bytes((0, 2, 2, MX["model_number"], 1, 1, MX["id"])))
    r2, r1 = mx.status(), mx.status()
    assert (r2.servo_id, int.from_bytes(r2.params, "little")) == (2, 29)
    assert (r1.servo_id, r1.params) == (1, b"\x01")
    mx.write(1, MX["led"], b"\x01")
    assert mx.txrx(1, P.Instruction.REBOOT).error == 0
    assert poll_until(lambda: mx.txrx(1, P.Instruction.PING, timeout=0.1))   # silent while it boots
    assert mx.read_int(1, MX["led"], 1) == 0
