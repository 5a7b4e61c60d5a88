# cython: language_level=3
"""Compiled Dynamixel Protocol 1.0 / 2.0 codec (byte-exact with ``protocol.py``).

The C functions (``*_c``, declared in ``_codec.pxd``) run without the GIL on
caller-owned buffers and are what ``_busio`` uses in the hot path.  The
Python functions below wrap them for everything else: building any
instruction packet, parsing one packet (same results and same exception
types as :func:`firmware_bridge.protocol.parse_packet`), and decoding the
one-packet reply of Fast Sync Read.
"""

from libc.stdint cimport uint8_t, uint16_t
from libc.string cimport memmove

from servoloop.firmware_bridge.errors import ChecksumError, MalformedPacketError, UnsafeOperationError
from servoloop.firmware_bridge.protocol import Packet

__all__ = [
    "crc16", "checksum_v1", "stuff", "unstuff", "encode_into", "build_instruction",
    "build_status", "parse_packet", "find_header", "ping", "read", "write", "reg_write",
    "action", "reboot", "factory_reset", "clear_multi_turn", "sync_write", "sync_read",
    "fast_sync_read", "bulk_read", "bulk_write", "parse_fast_sync_read",
]

DEF MAX_PACKET = 65535 + 7

cdef uint16_t CRC_TABLE[256]


cdef void _init_crc_table() noexcept:
    cdef int i, j
    cdef unsigned int crc
    for i in range(256):
        crc = i << 8
        for j in range(8):
            if crc & 0x8000:
                crc = (crc << 1) ^ 0x8005
            else:
                crc = crc << 1
        CRC_TABLE[i] = crc & 0xFFFF


_init_crc_table()


cdef uint16_t crc16_c(const uint8_t* p, Py_ssize_t n, uint16_t crc) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        crc = ((crc << 8) ^ CRC_TABLE[((crc >> 8) ^ p[i]) & 0xFF]) & 0xFFFF
    return crc


cdef uint8_t checksum_c(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    cdef unsigned int s = 0
    cdef Py_ssize_t i
    for i in range(n):
        s += p[i]
    return (~s) & 0xFF


cdef Py_ssize_t stuff_c(const uint8_t* src, Py_ssize_t n, uint8_t* dst) noexcept nogil:
    """Copy with an extra 0xFD after every FF FF FD; dst needs n + n // 3 + 1 bytes."""
    cdef Py_ssize_t i, k = 0
    cdef int ff = 0
    cdef uint8_t b
    for i in range(n):
        b = src[i]
        dst[k] = b
        k += 1
        if b == 0xFD and ff >= 2:
            dst[k] = 0xFD
            k += 1
            ff = 0
        elif b == 0xFF:
            ff += 1
        else:
            ff = 0
    return k


cdef Py_ssize_t unstuff_c(const uint8_t* src, Py_ssize_t n, uint8_t* dst) noexcept nogil:
    """Drop the 0xFD that follows every FF FF FD (output context, as protocol.unstuff)."""
    cdef Py_ssize_t i = 0, k = 0
    cdef int ff = 0
    cdef uint8_t b
    while i < n:
        b = src[i]
        dst[k] = b
        k += 1
        i += 1
        if b == 0xFD and ff >= 2:
            if i < n and src[i] == 0xFD:
                i += 1
            ff = 0
        elif b == 0xFF:
            ff += 1
        else:
            ff = 0
    return k


cdef Py_ssize_t encode_c(int protocol, int servo_id, int first, int second, bint has_second,
                         const uint8_t* params, Py_ssize_t n, uint8_t* out,
                         Py_ssize_t cap) noexcept nogil:
    """Write one packet into ``out``; returns its length, or -1 if ``cap`` is too small.

    ``first`` is the instruction (or the Protocol 1.0 error byte); Protocol 2.0
    status packets pass first=0x55, second=error, has_second=1.
    """
    cdef Py_ssize_t i, k, length
    cdef int ff = 0
    cdef uint8_t b
    cdef uint16_t crc
    if protocol == 1:
        length = n + 2 + (1 if has_second else 0)
        if length > 0xFF or cap < length + 4:
            return -1
        out[0] = 0xFF
        out[1] = 0xFF
        out[2] = <uint8_t>servo_id
        out[3] = <uint8_t>length
        out[4] = <uint8_t>first
        k = 5
        if has_second:
            out[k] = <uint8_t>second
            k += 1
        for i in range(n):
            out[k + i] = params[i]
        k += n
        out[k] = checksum_c(out + 2, k - 2)
        return k + 1
    # Protocol 2.0: worst case every third byte is stuffed
    if cap < 7 + (n + 2) + (n + 2) // 3 + 1 + 2:
        return -1
    out[0] = 0xFF
    out[1] = 0xFF
    out[2] = 0xFD
    out[3] = 0x00
    out[4] = <uint8_t>servo_id
    k = 7
    for i in range(-2, n):
        if i == -2:
            b = <uint8_t>first
        elif i == -1:
            if not has_second:
                continue
            b = <uint8_t>second
        else:
            b = params[i]
        out[k] = b
        k += 1
        if b == 0xFD and ff >= 2:
            out[k] = 0xFD
            k += 1
            ff = 0
        elif b == 0xFF:
            ff += 1
        else:
            ff = 0
    length = k - 7 + 2
    if length > 0xFFFF:
        return -1
    out[5] = length & 0xFF
    out[6] = (length >> 8) & 0xFF
    crc = crc16_c(out, k, 0)
    out[k] = crc & 0xFF
    out[k + 1] = crc >> 8
    return k + 2


cdef Py_ssize_t find_header_c(const uint8_t* buf, Py_ssize_t n, int protocol,
                              Py_ssize_t start) noexcept nogil:
    cdef Py_ssize_t i
    if protocol == 1:
        for i in range(start, n - 1):
            if buf[i] == 0xFF and buf[i + 1] == 0xFF:
                return i
        return -1
    for i in range(start, n - 3):
        if buf[i] == 0xFF and buf[i + 1] == 0xFF and buf[i + 2] == 0xFD and buf[i + 3] == 0x00:
            return i
    return -1


cdef int parse_c(const uint8_t* buf, Py_ssize_t n, int protocol, bint status,
                 uint8_t* params_out, Py_ssize_t params_cap, ParseResult* res,
                 bint unstuff=1) noexcept nogil:
    """Decode the packet at buf[0]; same decisions as protocol.parse_packet.

    ``unstuff=0`` keeps the payload as sent: Fast Sync/Bulk Read replies are
    not byte-stuffed (``dynamixel_sdk`` reads them the same way).
    """
    cdef Py_ssize_t length, total, m, skip
    cdef uint16_t crc_rx
    res.consumed = 0
    res.nparams = 0
    res.is_status = status
    if protocol == 1:
        if n < 2:
            return PARSE_NEED_MORE
        if buf[0] != 0xFF or buf[1] != 0xFF:
            return PARSE_BAD_HEADER
        if n < 4:
            return PARSE_NEED_MORE
        res.servo_id = buf[2]
        length = buf[3]
        if buf[2] == 0xFF:
            return PARSE_BAD_ID
        if length < 2:
            return PARSE_BAD_LENGTH
        total = 4 + length
        if n < total:
            return PARSE_NEED_MORE
        res.consumed = total
        if checksum_c(buf + 2, total - 3) != buf[total - 1]:
            return PARSE_CHECKSUM
        res.code = buf[4]
        m = length - 2
        if m > params_cap:
            return PARSE_TOO_LONG
        memmove(params_out, buf + 5, m)
        res.nparams = m
        return PARSE_OK
    if n < 4:
        return PARSE_NEED_MORE
    if buf[0] != 0xFF or buf[1] != 0xFF or buf[2] != 0xFD or buf[3] != 0x00:
        return PARSE_BAD_HEADER
    if n < 7:
        return PARSE_NEED_MORE
    res.servo_id = buf[4]
    length = buf[5] | (buf[6] << 8)
    if buf[4] > 0xFE:
        return PARSE_BAD_ID
    if length < (4 if status else 3):
        return PARSE_BAD_LENGTH
    total = 7 + length
    if n < total:
        return PARSE_NEED_MORE
    res.consumed = total
    crc_rx = buf[total - 2] | (buf[total - 1] << 8)
    if crc16_c(buf, total - 2, 0) != crc_rx:
        return PARSE_CHECKSUM
    if length - 2 > params_cap:
        return PARSE_TOO_LONG
    if unstuff:
        m = unstuff_c(buf + 7, length - 2, params_out)
    else:
        memmove(params_out, buf + 7, length - 2)
        m = length - 2
    if status:
        if params_out[0] != 0x55:
            res.code = params_out[0]
            return PARSE_NOT_STATUS
        res.code = params_out[1]
        skip = 2
    else:
        res.code = params_out[0]
        skip = 1
    memmove(params_out, params_out + skip, m - skip)
    res.nparams = m - skip
    return PARSE_OK


# ---------------------------------------------------------------- Python API

def crc16(data, unsigned int crc=0):
    """CRC-16 (poly 0x8005) of Protocol 2.0 over ``data``."""
    cdef const uint8_t[::1] d = bytes(data)
    if d.shape[0] == 0:
        return crc
    return crc16_c(&d[0], d.shape[0], crc)


def checksum_v1(data):
    """Protocol 1.0 checksum over ID, LEN, INST/ERR and the parameters."""
    cdef const uint8_t[::1] d = bytes(data)
    if d.shape[0] == 0:
        return 0xFF
    return checksum_c(&d[0], d.shape[0])


def stuff(data):
    cdef const uint8_t[::1] d = bytes(data)
    cdef Py_ssize_t n = d.shape[0]
    out = bytearray(n + n // 3 + 1)
    cdef uint8_t[::1] o = out
    if n == 0:
        return b""
    return bytes(out[:stuff_c(&d[0], n, &o[0])])


def unstuff(data):
    cdef const uint8_t[::1] d = bytes(data)
    cdef Py_ssize_t n = d.shape[0]
    out = bytearray(n + 1)
    cdef uint8_t[::1] o = out
    if n == 0:
        return b""
    return bytes(out[:unstuff_c(&d[0], n, &o[0])])


cdef inline void _check_protocol(int protocol) except *:
    if protocol != 1 and protocol != 2:
        raise ValueError(f"protocol must be 1 or 2, not {protocol!r}")


def encode_into(uint8_t[::1] out, int protocol, int servo_id, int instruction, params=b""):
    """Build an instruction packet into the preallocated ``out``; returns its length."""
    _check_protocol(protocol)
    if not 0 <= servo_id <= 0xFE:
        raise ValueError(f"servo id {servo_id} out of range 0..254")
    cdef const uint8_t[::1] p = bytes(params)
    cdef uint8_t dummy = 0
    cdef const uint8_t* pp = &p[0] if p.shape[0] else &dummy
    cdef Py_ssize_t k = encode_c(protocol, servo_id, instruction, 0, 0, pp, p.shape[0],
                                 &out[0], out.shape[0])
    if k < 0:
        raise ValueError(f"packet does not fit: {p.shape[0]} parameter bytes, buffer {out.shape[0]}"
                         + (" (Protocol 1.0 allows 253)" if protocol == 1 else ""))
    return k


cdef bytes _build(int protocol, int servo_id, int first, int second, bint has_second, params):
    _check_protocol(protocol)
    if not 0 <= servo_id <= 0xFE:
        raise ValueError(f"servo id {servo_id} out of range 0..254")
    cdef const uint8_t[::1] p = bytes(params)
    cdef Py_ssize_t n = p.shape[0]
    buf = bytearray(n + n // 3 + 16)
    cdef uint8_t[::1] o = buf
    cdef uint8_t dummy = 0
    cdef const uint8_t* pp = &p[0] if n else &dummy
    cdef Py_ssize_t k = encode_c(protocol, servo_id, first, second, has_second, pp, n, &o[0], o.shape[0])
    if k < 0:
        raise ValueError(f"Protocol {protocol}.0 packet too long: {n} parameter bytes")
    return bytes(buf[:k])


def build_instruction(int protocol, int servo_id, int instruction, params=b""):
    """One instruction packet (same bytes as protocol.build_instruction)."""
    return _build(protocol, servo_id, instruction, 0, 0, params)


def build_status(int protocol, int servo_id, int error, params=b""):
    """One status packet as a servo sends it (same bytes as protocol.build_status)."""
    if protocol == 2:
        return _build(2, servo_id, 0x55, error, 1, params)
    return _build(protocol, servo_id, error, 0, 0, params)


_MESSAGES = {
    PARSE_BAD_HEADER: "no packet header at offset 0",
    PARSE_BAD_ID: "invalid servo id",
    PARSE_BAD_LENGTH: "length field too small",
    PARSE_NOT_STATUS: "expected a status packet (0x55)",
    PARSE_TOO_LONG: "packet longer than allowed",
}
_OFFSETS = {PARSE_BAD_HEADER: 0, PARSE_BAD_ID: 4, PARSE_BAD_LENGTH: 5, PARSE_NOT_STATUS: 7,
            PARSE_TOO_LONG: 5}
_OFFSETS_V1 = {PARSE_BAD_HEADER: 0, PARSE_BAD_ID: 2, PARSE_BAD_LENGTH: 3}


def parse_packet(buf, int protocol, bint status):
    """Decode the packet at ``buf[0]``: ``(Packet, consumed)`` or ``(None, 0)`` for more bytes.

    Raises MalformedPacketError / ChecksumError exactly where
    :func:`firmware_bridge.protocol.parse_packet` does.
    """
    _check_protocol(protocol)
    cdef bytes data = bytes(buf)
    cdef const uint8_t[::1] d = data
    cdef Py_ssize_t n = d.shape[0]
    out = bytearray(n + 1)
    cdef uint8_t[::1] o = out
    cdef ParseResult res
    cdef int rc
    if n == 0:
        return None, 0
    rc = parse_c(&d[0], n, protocol, status, &o[0], o.shape[0], &res)
    if rc == PARSE_NEED_MORE:
        return None, 0
    raw = data[:res.consumed] if res.consumed else data[:10]
    if rc == PARSE_CHECKSUM:
        what = "checksum" if protocol == 1 else "CRC"
        raise ChecksumError(f"Protocol {protocol}.0 {what} mismatch from id {res.servo_id}",
                            raw, res.servo_id)
    if rc != PARSE_OK:
        off = _OFFSETS[rc] if protocol == 2 else _OFFSETS_V1.get(rc, 3)
        raise MalformedPacketError(f"Protocol {protocol}.0: {_MESSAGES[rc]} (byte offset {off})",
                                   raw, off)
    params = bytes(out[:res.nparams])
    if status:
        pkt = Packet(protocol, res.servo_id, None, res.code, params, raw)
    else:
        pkt = Packet(protocol, res.servo_id, res.code, None, params, raw)
    return pkt, res.consumed


def find_header(buf, int protocol, Py_ssize_t start=0):
    """Index of the next packet header at or after ``start``, or -1."""
    cdef bytes data = bytes(buf)
    cdef const uint8_t[::1] d = data
    if d.shape[0] == 0 or start < 0:
        return -1 if d.shape[0] == 0 else find_header_c(&d[0], d.shape[0], protocol, 0)
    return find_header_c(&d[0], d.shape[0], protocol, start)


# ------------------------------------------------------------- instructions

cdef bytes _le(int value, int size):
    return int(value).to_bytes(size, "little")


def ping(int protocol, int servo_id):
    return build_instruction(protocol, servo_id, 0x01)


def read(int protocol, int servo_id, int address, int length):
    """READ ``length`` bytes at ``address`` (1-byte fields on Protocol 1.0, 2-byte on 2.0)."""
    size = 1 if protocol == 1 else 2
    return build_instruction(protocol, servo_id, 0x02, _le(address, size) + _le(length, size))


def write(int protocol, int servo_id, int address, data):
    size = 1 if protocol == 1 else 2
    return build_instruction(protocol, servo_id, 0x03, _le(address, size) + bytes(data))


def reg_write(int protocol, int servo_id, int address, data):
    size = 1 if protocol == 1 else 2
    return build_instruction(protocol, servo_id, 0x04, _le(address, size) + bytes(data))


def action(int protocol, int servo_id=0xFE):
    return build_instruction(protocol, servo_id, 0x05)


def reboot(int protocol, int servo_id):
    return build_instruction(protocol, servo_id, 0x08)


def clear_multi_turn(int servo_id):
    """Protocol 2.0 CLEAR (0x10) of the multi-turn count (X / MX(2.0) firmware v42+)."""
    return build_instruction(2, servo_id, 0x10, b"\x01\x44\x58\x4c\x22")


def factory_reset(int protocol, int servo_id, int option=0xFF, *, confirm=False):
    """FACTORY_RESET: wipes the EEPROM (ID, baud, limits, offsets).

    Guarded: pass ``confirm=True``.  ``option`` (Protocol 2.0 only): 0xFF
    all, 0x01 all but ID, 0x02 all but ID and baud rate.
    """
    if confirm is not True:
        raise UnsafeOperationError(
            f"factory reset of servo {servo_id} erases its EEPROM (ID, baud rate, limits); "
            "pass confirm=True to build it")
    if protocol == 1:
        return build_instruction(1, servo_id, 0x06)
    if option not in (0xFF, 0x01, 0x02):
        raise ValueError(f"factory reset option must be 0xFF, 0x01 or 0x02, not {option:#x}")
    return build_instruction(2, servo_id, 0x06, bytes((option,)))


def sync_write(int protocol, int address, int length, items):
    """SYNC WRITE of ``length`` bytes at ``address``: items = [(id, data bytes), ...]."""
    size = 1 if protocol == 1 else 2
    body = bytearray(_le(address, size) + _le(length, size))
    for servo_id, data in items:
        data = bytes(data)
        if len(data) != length:
            raise ValueError(f"sync write to servo {servo_id}: {len(data)} bytes, expected {length}")
        body.append(servo_id)
        body += data
    return build_instruction(protocol, 0xFE, 0x83, bytes(body))


def sync_read(int address, int length, ids):
    """SYNC READ (Protocol 2.0 only; Protocol 1.0 has no sync read)."""
    return build_instruction(2, 0xFE, 0x82, _le(address, 2) + _le(length, 2) + bytes(ids))


def fast_sync_read(int address, int length, ids):
    """FAST SYNC READ (0x8A; X firmware v45+/XL330 v46+, not MX): one reply packet for all."""
    return build_instruction(2, 0xFE, 0x8A, _le(address, 2) + _le(length, 2) + bytes(ids))


def bulk_read(int protocol, items):
    """BULK READ: items = [(id, address, length), ...].  Protocol 1.0: MX only, not AX."""
    body = bytearray()
    if protocol == 1:
        body.append(0x00)
        for servo_id, address, length in items:
            body += bytes((length, servo_id, address))
        return build_instruction(1, 0xFE, 0x92, bytes(body))
    for servo_id, address, length in items:
        body.append(servo_id)
        body += _le(address, 2) + _le(length, 2)
    return build_instruction(2, 0xFE, 0x92, bytes(body))


def bulk_write(items):
    """BULK WRITE (Protocol 2.0): items = [(id, address, data bytes), ...]."""
    body = bytearray()
    for servo_id, address, data in items:
        data = bytes(data)
        body.append(servo_id)
        body += _le(address, 2) + _le(len(data), 2) + data
    return build_instruction(2, 0xFE, 0x93, bytes(body))


def parse_fast_sync_read(packet, ids, int length):
    """Split a Fast Sync Read reply into ``{id: (error, data bytes)}``.

    Reply layout (no byte stuffing): FF FF FD 00 FE LEN_L LEN_H 55, then per
    servo ERR ID DATA[length] CRC16, the last CRC being the packet's.  Raises
    ChecksumError if the packet CRC fails, MalformedPacketError if the
    layout or an id does not match.
    """
    data = bytes(packet)
    ids = list(ids)
    n = len(ids)
    total = 8 + n * (length + 4)
    if len(data) < 11 or data[:5] != b"\xff\xff\xfd\x00\xfe" or data[7] != 0x55:
        raise MalformedPacketError("Fast Sync Read: not a broadcast status packet", data[:10], 0)
    declared = data[5] | (data[6] << 8)
    if declared + 7 != total or len(data) < total:
        raise MalformedPacketError(
            f"Fast Sync Read: length {declared + 7} bytes, expected {total} for {n} servos",
            data[:10], 5)
    if crc16(data[:total - 2]) != (data[total - 2] | (data[total - 1] << 8)):
        raise ChecksumError("Fast Sync Read: packet CRC mismatch", data[:total], None)
    out = {}
    k = 8
    for expected in ids:
        err, sid = data[k], data[k + 1]
        if sid != expected:
            raise MalformedPacketError(f"Fast Sync Read: id {sid} at byte {k + 1}, expected {expected}",
                                       data[:total], k + 1)
        out[sid] = (err, data[k + 2:k + 2 + length])
        k += length + 4
    return out
