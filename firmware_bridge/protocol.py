"""Dynamixel Protocol 1.0 and 2.0 packets in plain Python: the reference.

This module is the readable, slow statement of the wire format.  The
compiled codec used in the hot path is tested byte for byte against it, and
the virtual servo bus uses it to parse instructions and build replies.

Protocol 1.0:  FF FF ID LEN INST|ERR P1..PN CHK
    LEN = N + 2, CHK = ~(ID + LEN + INST + sum(P)) & 0xFF
Protocol 2.0:  FF FF FD 00 ID LEN_L LEN_H INST [ERR] P1..PN CRC_L CRC_H
    LEN counts INST (+ERR) + stuffed params + 2 CRC bytes; the CRC-16
    (polynomial 0x8005, init 0, not reflected) covers the header through the
    last parameter.  Byte stuffing: inside INST..params, every FF FF FD gets
    an extra FD (FF FF FD FD), in both directions.
"""

from __future__ import annotations

from dataclasses import dataclass

from servoloop.firmware_bridge.errors import ChecksumError, MalformedPacketError

__all__ = [
    "Instruction",
    "BROADCAST_ID",
    "HEADER_V1",
    "HEADER_V2",
    "STATUS_INSTRUCTION",
    "Packet",
    "checksum_v1",
    "crc16",
    "stuff",
    "unstuff",
    "build_instruction",
    "build_status",
    "parse_packet",
    "find_header",
]

BROADCAST_ID = 0xFE
HEADER_V1 = b"\xff\xff"
HEADER_V2 = b"\xff\xff\xfd\x00"
STATUS_INSTRUCTION = 0x55  # Protocol 2.0 status packets carry this instruction byte
MAX_ID = 0xFC  # 253 is reserved, 254 broadcast


class Instruction:
    PING = 0x01
    READ = 0x02
    WRITE = 0x03
    REG_WRITE = 0x04
    ACTION = 0x05
    FACTORY_RESET = 0x06
    REBOOT = 0x08
    CLEAR = 0x10
    SYNC_READ = 0x82
    SYNC_WRITE = 0x83
    FAST_SYNC_READ = 0x8A
    BULK_READ = 0x92
    BULK_WRITE = 0x93
    FAST_BULK_READ = 0x9A


def _make_crc_table() -> tuple[int, ...]:
    table = []
    for i in range(256):
        crc = i << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x8005) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return tuple(table)


CRC_TABLE = _make_crc_table()


def crc16(data: bytes, crc: int = 0) -> int:
    """CRC-16 of Protocol 2.0 (as in the ROBOTIS e-Manual's ``update_crc``)."""
    for b in data:
        crc = ((crc << 8) ^ CRC_TABLE[((crc >> 8) ^ b) & 0xFF]) & 0xFFFF
    return crc


def checksum_v1(body: bytes) -> int:
    """Protocol 1.0 checksum over ID, LEN, INST/ERR and the parameters."""
    return (~sum(body)) & 0xFF


def stuff(data: bytes) -> bytes:
    """Insert 0xFD after every FF FF FD run (Protocol 2.0 byte stuffing)."""
    out = bytearray()
    for b in data:
        out.append(b)
        if b == 0xFD and len(out) >= 3 and out[-3] == 0xFF and out[-2] == 0xFF:
            out.append(0xFD)
    return bytes(out)


def unstuff(data: bytes) -> bytes:
    """Remove the stuffing byte after every FF FF FD run."""
    out = bytearray()
    i = 0
    n = len(data)
    while i < n:
        b = data[i]
        out.append(b)
        i += 1
        if b == 0xFD and len(out) >= 3 and out[-3] == 0xFF and out[-2] == 0xFF:
            if i < n and data[i] == 0xFD:
                i += 1  # drop the stuffing byte
    return bytes(out)


def _check_id(servo_id: int) -> None:
    if not (0 <= servo_id <= BROADCAST_ID):
        raise ValueError(f"servo id {servo_id} out of range 0..{BROADCAST_ID}")


def build_instruction(protocol: int, servo_id: int, instruction: int, params: bytes = b"") -> bytes:
    """One instruction packet, ready for the wire."""
    _check_id(servo_id)
    params = bytes(params)
    if protocol == 1:
        length = len(params) + 2
        if length > 0xFF:
            raise ValueError(f"Protocol 1.0 packet too long: {len(params)} parameter bytes")
        body = bytes((servo_id, length, instruction)) + params
        return HEADER_V1 + body + bytes((checksum_v1(body),))
    if protocol == 2:
        payload = stuff(bytes((instruction,)) + params)
        length = len(payload) + 2
        head = HEADER_V2 + bytes((servo_id, length & 0xFF, length >> 8))
        pkt = head + payload
        crc = crc16(pkt)
        return pkt + bytes((crc & 0xFF, crc >> 8))
    raise ValueError(f"protocol must be 1 or 2, not {protocol!r}")


def build_status(protocol: int, servo_id: int, error: int, params: bytes = b"") -> bytes:
    """One status (reply) packet, as a servo sends it."""
    if protocol == 1:
        return build_instruction(1, servo_id, error, params)
    if protocol == 2:
        payload = stuff(bytes((STATUS_INSTRUCTION, error)) + bytes(params))
        length = len(payload) + 2
        pkt = HEADER_V2 + bytes((servo_id, length & 0xFF, length >> 8)) + payload
        crc = crc16(pkt)
        return pkt + bytes((crc & 0xFF, crc >> 8))
    raise ValueError(f"protocol must be 1 or 2, not {protocol!r}")


@dataclass(frozen=True)
class Packet:
    """A decoded packet.

    For an instruction packet ``instruction`` is the instruction and
    ``error`` is None.  For a status packet (Protocol 2.0: instruction 0x55;
    Protocol 1.0: decided by the caller, the format is the same) ``error``
    holds the error byte and ``params`` the data after it.
    """

    protocol: int
    servo_id: int
    instruction: int | None
    error: int | None
    params: bytes
    raw: bytes


def find_header(buf: bytes, protocol: int, start: int = 0) -> int:
    """Index of the next packet header in ``buf`` at or after ``start``, or -1."""
    return bytes(buf).find(HEADER_V2 if protocol == 2 else HEADER_V1, start)


def parse_packet(buf: bytes, protocol: int, status: bool) -> tuple[Packet | None, int]:
    """Decode the first complete packet that starts at ``buf[0]``.

    Returns ``(packet, consumed)``; ``(None, 0)`` if more bytes are needed.
    Raises :class:`MalformedPacketError` or :class:`ChecksumError` when the
    bytes cannot be this packet; the caller resynchronises by searching the
    next header after byte 0.
    """
    buf = bytes(buf)
    if protocol == 1:
        return _parse_v1(buf, status)
    if protocol == 2:
        return _parse_v2(buf, status)
    raise ValueError(f"protocol must be 1 or 2, not {protocol!r}")


def _parse_v1(buf: bytes, status: bool) -> tuple[Packet | None, int]:
    if len(buf) < 2:
        return None, 0
    if buf[:2] != HEADER_V1:
        raise MalformedPacketError("Protocol 1.0: no FF FF header at offset 0", buf[:8], 0)
    if len(buf) < 4:
        return None, 0
    servo_id, length = buf[2], buf[3]
    if servo_id == 0xFF:
        raise MalformedPacketError("Protocol 1.0: id 0xFF is not a valid id", buf[:8], 2)
    if length < 2:
        raise MalformedPacketError(f"Protocol 1.0: length field {length} < 2", buf[:8], 3)
    total = 4 + length
    if len(buf) < total:
        return None, 0
    body = buf[2 : total - 1]
    chk = buf[total - 1]
    if checksum_v1(body) != chk:
        raise ChecksumError(
            f"Protocol 1.0 checksum mismatch from id {servo_id}: got 0x{chk:02X}, "
            f"expected 0x{checksum_v1(body):02X}",
            buf[:total],
            servo_id,
        )
    code = buf[4]
    params = buf[5 : total - 1]
    pkt = Packet(1, servo_id, None if status else code, code if status else None, params, buf[:total])
    return pkt, total


def _parse_v2(buf: bytes, status: bool) -> tuple[Packet | None, int]:
    if len(buf) < 4:
        return None, 0
    if buf[:4] != HEADER_V2:
        raise MalformedPacketError("Protocol 2.0: no FF FF FD 00 header at offset 0", buf[:10], 0)
    if len(buf) < 7:
        return None, 0
    servo_id = buf[4]
    length = buf[5] | (buf[6] << 8)
    min_len = 4 if status else 3
    if servo_id > BROADCAST_ID:
        raise MalformedPacketError(f"Protocol 2.0: id {servo_id} out of range", buf[:10], 4)
    if length < min_len:
        raise MalformedPacketError(f"Protocol 2.0: length field {length} < {min_len}", buf[:10], 5)
    total = 7 + length
    if len(buf) < total:
        return None, 0
    crc_rx = buf[total - 2] | (buf[total - 1] << 8)
    crc = crc16(buf[: total - 2])
    if crc != crc_rx:
        raise ChecksumError(
            f"Protocol 2.0 CRC mismatch from id {servo_id}: got 0x{crc_rx:04X}, expected 0x{crc:04X}",
            buf[:total],
            servo_id,
        )
    payload = unstuff(buf[7 : total - 2])
    inst = payload[0]
    if status:
        if inst != STATUS_INSTRUCTION:
            raise MalformedPacketError(
                f"Protocol 2.0: expected a status packet (0x55), got instruction 0x{inst:02X}",
                buf[:total],
                7,
            )
        pkt = Packet(2, servo_id, None, payload[1], payload[2:], buf[:total])
    else:
        pkt = Packet(2, servo_id, inst, None, payload[1:], buf[:total])
    return pkt, total
