"""Compiled codec: byte-exact with protocol.py and with the e-Manual's example packets."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servoloop.firmware_bridge import _codec as C
from servoloop.firmware_bridge import protocol as P
from servoloop.firmware_bridge.errors import (
    ChecksumError,
    MalformedPacketError,
    UnsafeOperationError,
)

H = bytes.fromhex

# Protocol 2.0 e-Manual examples (XM430-W210), docs/en/dxl/protocol2.md
V2_INSTRUCTIONS = [
    (C.ping(2, 1), "FF FF FD 00 01 03 00 01 19 4E"),
    (C.ping(2, 0xFE), "FF FF FD 00 FE 03 00 01 31 42"),
    (C.read(2, 1, 132, 4), "FF FF FD 00 01 07 00 02 84 00 04 00 1D 15"),
    (C.write(2, 1, 116, (512).to_bytes(4, "little")), "FF FF FD 00 01 09 00 03 74 00 00 02 00 00 CA 89"),
    (C.reg_write(2, 1, 104, (200).to_bytes(4, "little")), "FF FF FD 00 01 09 00 04 68 00 C8 00 00 00 AE 8E"),
    (C.action(2, 1), "FF FF FD 00 01 03 00 05 02 CE"),
    (C.factory_reset(2, 1, 0x01, confirm=True), "FF FF FD 00 01 04 00 06 01 A1 E6"),
    (C.reboot(2, 1), "FF FF FD 00 01 03 00 08 2F 4E"),
    (C.clear_multi_turn(1), "FF FF FD 00 01 08 00 10 01 44 58 4C 22 B1 DC"),
    (C.sync_read(132, 4, [1, 2]), "FF FF FD 00 FE 09 00 82 84 00 04 00 01 02 CE FA"),
    (C.sync_write(2, 116, 4, [(1, (150).to_bytes(4, "little")), (2, (170).to_bytes(4, "little"))]),
     "FF FF FD 00 FE 11 00 83 74 00 04 00 01 96 00 00 00 02 AA 00 00 00 82 87"),
    (C.bulk_read(2, [(1, 144, 2), (2, 146, 1)]),
     "FF FF FD 00 FE 0D 00 92 01 90 00 02 00 02 92 00 01 00 1A 05"),
]


@pytest.mark.parametrize("built,expected", V2_INSTRUCTIONS)
def test_emanual_v2_instruction_bytes(built, expected):
    assert built == H(expected)


# (status packet, id, error, decoded value, value size) from the same page
V2_STATUS = [
    ("FF FF FD 00 01 07 00 55 00 06 04 26 65 5D", 1, 0, 1030, 2),  # ping: model 1030
    ("FF FF FD 00 02 07 00 55 00 06 04 26 6F 6D", 2, 0, 1030, 2),
    ("FF FF FD 00 01 08 00 55 00 A6 00 00 00 8C C0", 1, 0, 166, 4),  # present position 166
    ("FF FF FD 00 02 08 00 55 00 1F 08 00 00 BA BE", 2, 0, 2079, 4),
    ("FF FF FD 00 01 06 00 55 00 77 00 C3 69", 1, 0, 119, 2),  # voltage 11.9 V
    ("FF FF FD 00 02 05 00 55 00 24 8B A9", 2, 0, 36, 1),  # temperature 36
    ("FF FF FD 00 01 04 00 55 00 A1 0C", 1, 0, None, 0),
]


@pytest.mark.parametrize("pkt,sid,err,value,size", V2_STATUS)
def test_emanual_v2_status_decodes(pkt, sid, err, value, size):
    p, n = C.parse_packet(H(pkt), 2, status=True)
    assert n == len(H(pkt)) and (p.servo_id, p.error) == (sid, err)
    if value is not None:
        assert int.from_bytes(p.params[:size], "little") == value
    assert C.build_status(2, sid, err, p.params) == H(pkt)


# Protocol 1.0 (e-Manual protocol1 examples, AX-12A)
V1 = [
    (C.ping(1, 1), "FF FF 01 02 01 FB"),
    (C.read(1, 1, 43, 1), "FF FF 01 04 02 2B 01 CC"),
]


@pytest.mark.parametrize("built,expected", V1)
def test_emanual_v1_instruction_bytes(built, expected):
    assert built == H(expected)


def test_emanual_v1_status_decodes_temperature_32():
    p, n = C.parse_packet(H("FF FF 01 03 00 20 DB"), 1, status=True)
    assert (p.servo_id, p.error, p.params, n) == (1, 0, b"\x20", 7)


def test_stuffing_both_directions():
    # present_current = -1 gives FF FF, then a 0xFD byte: the rustypot bug (FIELD-NOTES a3)
    params = b"\xff\xff\xfd\x00\x01"
    pkt = C.build_status(2, 3, 0, params)
    assert pkt == P.build_status(2, 3, 0, params)
    assert b"\xff\xff\xfd\xfd" in pkt
    p, n = C.parse_packet(pkt, 2, status=True)
    assert p.params == params and n == len(pkt)
    for data in (b"\xff\xff\xfd", b"\xff\xff\xfd\xff\xff\xfd", b"\xfd\xff\xff\xfd\xfd"):
        assert C.stuff(data) == P.stuff(data)
        assert C.unstuff(C.stuff(data)) == data


def test_factory_reset_is_guarded():
    with pytest.raises(UnsafeOperationError, match="servo 3.*confirm=True"):
        C.factory_reset(2, 3)
    assert C.factory_reset(1, 3, confirm=True) == P.build_instruction(1, 3, 0x06)


def test_encode_into_preallocated_buffer():
    buf = bytearray(64)
    n = C.encode_into(memoryview(buf), 2, 1, 0x02, b"\x84\x00\x04\x00")
    assert bytes(buf[:n]) == H("FF FF FD 00 01 07 00 02 84 00 04 00 1D 15")
    with pytest.raises(ValueError):
        C.encode_into(memoryview(bytearray(8)), 2, 1, 0x02, b"\x84\x00\x04\x00")


def test_v1_bulk_read_and_sync_write_match_reference():
    assert C.bulk_read(1, [(1, 30, 2), (2, 36, 4)]) == P.build_instruction(1, 0xFE, 0x92, bytes((0, 2, 1, 30, 4, 2, 36)))
    assert C.sync_write(1, 30, 2, [(1, b"\x00\x02"), (2, b"\x10\x01")]) == P.build_instruction(
        1, 0xFE, 0x83, bytes((30, 2, 1, 0, 2, 2, 0x10, 1)))
    assert C.bulk_write([(1, 116, b"\x01\x02\x03\x04")]) == P.build_instruction(
        2, 0xFE, 0x93, bytes((1, 116, 0, 4, 0, 1, 2, 3, 4)))
    with pytest.raises(ValueError, match="servo 2"):
        C.sync_write(2, 116, 4, [(2, b"\x00")])


def _fast_reply(ids, data_by_id, errors=None):
    errors = errors or {}
    L = len(next(iter(data_by_id.values())))
    length = 1 + len(ids) * (L + 4)
    pkt = bytearray(P.HEADER_V2 + bytes((0xFE, length & 0xFF, length >> 8, 0x55)))
    for sid in ids:
        pkt += bytes((errors.get(sid, 0), sid)) + data_by_id[sid]
        crc = P.crc16(bytes(pkt))
        pkt += bytes((crc & 0xFF, crc >> 8))
    return bytes(pkt)


def test_fast_sync_read_reply_decodes_and_checks_crc():
    data = {3: b"\xa6\x00\x00\x00", 7: b"\x1f\x08\x00\x00"}
    pkt = _fast_reply([3, 7], data, {7: 0x80})
    out = C.parse_fast_sync_read(pkt, [3, 7], 4)
    assert out == {3: (0, data[3]), 7: (0x80, data[7])}
    bad = bytearray(pkt)
    bad[12] ^= 1
    with pytest.raises(ChecksumError):
        C.parse_fast_sync_read(bytes(bad), [3, 7], 4)
    with pytest.raises(MalformedPacketError, match="id 7 .* expected 9"):
        C.parse_fast_sync_read(pkt, [3, 9], 4)
    assert C.fast_sync_read(132, 4, [3, 7])[7] == 0x8A


@settings(max_examples=300, deadline=None, derandomize=True)
@given(protocol=st.sampled_from([1, 2]), sid=st.integers(0, 0xFE), inst=st.integers(0, 255),
       params=st.binary(max_size=80))
def test_build_matches_reference(protocol, sid, inst, params):
    assert C.build_instruction(protocol, sid, inst, params) == P.build_instruction(protocol, sid, inst, params)
    assert C.build_status(protocol, sid, inst, params) == P.build_status(protocol, sid, inst, params)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(protocol=st.sampled_from([1, 2]), sid=st.integers(0, 0xFD), err=st.integers(0, 255),
       params=st.binary(max_size=60), status=st.booleans())
def test_round_trip(protocol, sid, err, params, status):
    pkt = (C.build_status if status else C.build_instruction)(protocol, sid, err, params)
    p, n = C.parse_packet(pkt + b"\x00\x01", protocol, status)
    assert n == len(pkt) and p.params == params and p.servo_id == sid
    assert (p.error if status else p.instruction) == err
    assert C.crc16(b"123456789") == P.crc16(b"123456789")
