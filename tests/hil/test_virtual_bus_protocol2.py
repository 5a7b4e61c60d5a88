"""The virtual bus on a pty answers every Protocol 2.0 instruction as a real X servo does.

The host side builds instructions and parses replies with firmware_bridge.protocol
(the byte reference), so these tests exercise the bytes a real servo would see.
"""

import pytest

from servoloop.firmware_bridge import protocol as P
from servoloop.firmware_bridge.control_table import get_table

pytestmark = pytest.mark.hil

XM = get_table("XM430-W350")
A = {name: r.address for name, r in XM.registers.items()}
BROADCAST = 0xFE


def u16(x):
    return x.to_bytes(2, "little")


def u32(x, signed=False):
    return x.to_bytes(4, "little", signed=signed)


@pytest.fixture
def bus3(virtual_bus, pty_client):
    return pty_client(virtual_bus(servos="1-3:XM430-W350"), protocol=2)


def test_ping_unicast_and_broadcast_in_id_order(bus3):
    pkt = bus3.txrx(2, P.Instruction.PING)
    assert pkt.servo_id == 2 and pkt.error == 0
    assert int.from_bytes(pkt.params[:2], "little") == 1020
    bus3.send(BROADCAST, P.Instruction.PING)
    replies = [bus3.status() for _ in range(3)]
    assert [r.servo_id for r in replies] == [1, 2, 3]
    assert all(int.from_bytes(r.params[:2], "little") == 1020 for r in replies)
    assert bus3.quiet()


def test_read_write_1_2_4_bytes(bus3):
    assert bus3.write(1, A["led"], b"\x01").error == 0
    assert bus3.read_int(1, A["led"], 1) == 1
    assert bus3.write(1, A["position_p_gain"], u16(640)).error == 0
    assert bus3.read_int(1, A["position_p_gain"], 2) == 640
    assert bus3.write(1, A["profile_velocity"], u32(123)).error == 0
    assert bus3.read_int(1, A["profile_velocity"], 4) == 123
    assert bus3.read_int(1, A["model_number"], 2) == 1020
    # a present position near the centre of a servo at rest
    assert abs(bus3.read_int(1, A["present_position"], 4, signed=True) - 2048) <= 3


def test_write_errors_as_real_servos_set_them(bus3):
    # read-only register -> Access Error
    assert bus3.write(1, A["present_position"], u32(5)).error == 0x07
    # half of a 4-byte register -> Data Length Error
    assert bus3.write(1, A["goal_position"], u16(5)).error == 0x05
    # outside the register's range -> Data Range Error
    assert bus3.write(1, A["led"], b"\x02").error == 0x04
    # goal outside Max Position Limit in position mode -> Data Limit Error
    assert bus3.write(1, A["goal_position"], u32(5000)).error == 0x06
    # goal current above Current Limit
    assert bus3.write(1, A["goal_current"], u16(1194)).error in (0x04, 0x06)


def test_eeprom_write_refused_while_torque_on(bus3):
    assert bus3.write(1, A["return_delay_time"], b"\x05").error == 0
    assert bus3.write(1, A["torque_enable"], b"\x01").error == 0
    assert bus3.write(1, A["return_delay_time"], b"\x00").error == 0x07
    assert bus3.read_int(1, A["return_delay_time"], 1) == 5
    assert bus3.write(1, A["torque_enable"], b"\x00").error == 0
    assert bus3.write(1, A["return_delay_time"], b"\x00").error == 0
    assert bus3.read_int(1, A["return_delay_time"], 1) == 0


def test_reboot_restores_ram_defaults_and_keeps_eeprom(bus3, poll_until):
    bus3.write(2, A["return_delay_time"], b"\x07")           # EEPROM: survives
    bus3.write(2, A["position_p_gain"], u16(100))            # RAM: back to 800
    bus3.write(2, A["led"], b"\x01")
    bus3.write(2, A["torque_enable"], b"\x01")
    assert bus3.txrx(2, P.Instruction.REBOOT).error == 0
    assert bus3.txrx(2, P.Instruction.PING, timeout=0.1) is None     # silent while it boots
    assert bus3.txrx(1, P.Instruction.PING).error == 0               # the others are not
    assert poll_until(lambda: bus3.txrx(2, P.Instruction.PING, timeout=0.1))
    assert bus3.read_int(2, A["torque_enable"], 1) == 0
    assert bus3.read_int(2, A["led"], 1) == 0
    assert bus3.read_int(2, A["position_p_gain"], 2) == 800
    assert bus3.read_int(2, A["return_delay_time"], 1) == 7


def test_factory_reset_options(bus3):
    bus3.write(3, A["return_delay_time"], b"\x09")
    assert bus3.txrx(3, P.Instruction.FACTORY_RESET, b"\x02").error == 0
    assert bus3.read_int(3, A["return_delay_time"], 1) == 250
    assert bus3.txrx(3, P.Instruction.FACTORY_RESET, b"\xff").error == 0
    bus3.send(3, P.Instruction.PING)
    assert bus3.quiet()                                        # id 3 went back to the factory id 1
    assert bus3.read_int(1, A["id"], 1) == 1


def test_reg_write_action(bus3):
    assert bus3.txrx(1, P.Instruction.ACTION).error == 0x02      # nothing registered
    assert bus3.txrx(1, P.Instruction.REG_WRITE, u16(A["led"]) + b"\x01").error == 0
    assert bus3.read_int(1, A["registered_instruction"], 1) == 1
    assert bus3.read_int(1, A["led"], 1) == 0
    bus3.send(BROADCAST, P.Instruction.ACTION)
    assert bus3.quiet()
    assert bus3.read_int(1, A["led"], 1) == 1
    assert bus3.read_int(1, A["registered_instruction"], 1) == 0


def test_status_return_level(bus3):
    bus3.send(1, P.Instruction.WRITE, u16(A["status_return_level"]) + b"\x01")
    assert bus3.quiet()                                      # the new level already applies
    bus3.send(1, P.Instruction.WRITE, u16(A["led"]) + b"\x01")
    assert bus3.quiet()                                      # writes unanswered
    assert bus3.read_int(1, A["led"], 1) == 1                # reads answered
    bus3.send(1, P.Instruction.WRITE, u16(A["status_return_level"]) + b"\x00")
    assert bus3.quiet()
    bus3.send(1, P.Instruction.READ, u16(A["led"]) + u16(1))
    assert bus3.quiet()                                      # level 0: only ping
    assert bus3.txrx(1, P.Instruction.PING).error == 0


def test_unknown_instruction_and_bad_crc(bus3):
    assert bus3.txrx(1, 0x77).error == 0x02
    bad = bytearray(P.build_instruction(2, 1, P.Instruction.READ, u16(A["led"]) + u16(1)))
    bad[-1] ^= 0xFF
    bus3.send_raw(bytes(bad))
    pkt = bus3.status()
    assert pkt.servo_id == 1 and pkt.error == 0x03
    # garbage, then a good packet: the servo resynchronises
    bus3.send_raw(b"\x00\xff\x13\xff\xff")
    assert bus3.read_int(1, A["model_number"], 2) == 1020


def test_sync_read_and_sync_write(bus3):
    params = u16(A["goal_position"]) + u16(4)
    for sid, goal in ((1, 2100), (2, 2200), (3, 2300)):
        params += bytes((sid,)) + u32(goal)
    bus3.send(BROADCAST, P.Instruction.SYNC_WRITE, params)
    assert bus3.quiet()
    bus3.send(BROADCAST, P.Instruction.SYNC_READ, u16(A["goal_position"]) + u16(4) + bytes((3, 1, 2)))
    replies = [bus3.status() for _ in range(3)]
    assert [r.servo_id for r in replies] == [3, 1, 2]
    assert [int.from_bytes(r.params, "little") for r in replies] == [2300, 2100, 2200]


def test_bulk_read_and_bulk_write(bus3):
    params = bytes((1,)) + u16(A["led"]) + u16(1) + b"\x01"
    params += bytes((2,)) + u16(A["position_p_gain"]) + u16(2) + u16(555)
    bus3.send(BROADCAST, P.Instruction.BULK_WRITE, params)
    assert bus3.quiet()
    bus3.send(BROADCAST, P.Instruction.BULK_READ,
              bytes((2,)) + u16(A["position_p_gain"]) + u16(2) + bytes((1,)) + u16(A["led"]) + u16(1))
    r2, r1 = bus3.status(), bus3.status()
    assert (r2.servo_id, int.from_bytes(r2.params, "little")) == (2, 555)
    assert (r1.servo_id, r1.params) == (1, b"\x01")


def test_fast_sync_read_is_one_packet_with_chained_crcs(bus3):
    for sid in (1, 2, 3):
        bus3.write(sid, A["position_p_gain"], u16(100 * sid))
    bus3.send(BROADCAST, P.Instruction.FAST_SYNC_READ, u16(A["position_p_gain"]) + u16(2) + bytes((1, 2, 3)))
    pkt = bus3.status()                   # the whole packet's CRC checks out
    assert pkt.servo_id == BROADCAST and pkt.error == 0
    raw = pkt.raw
    assert int.from_bytes(raw[5:7], "little") == 1 + 3 * (4 + 2)
    # per servo: ERR ID DATA CRC, each CRC over the packet from its first byte
    k = 8
    for sid in (1, 2, 3):
        assert raw[k] == 0 and raw[k + 1] == sid
        assert int.from_bytes(raw[k + 2:k + 4], "little") == 100 * sid
        crc = int.from_bytes(raw[k + 4:k + 6], "little")
        assert crc == P.crc16(raw[:k + 4])
        k += 6
    assert k == len(raw)
