"""Protocol 2.0 on the virtual bus: framing, status packets, every instruction.

The e-Manual's Protocol 2.0 page: header FF FF FD 00, byte stuffing, CRC-16
(IBM/ANSI, polynomial 0x8005), instructions 0x01-0x10 and the sync, bulk
and fast-sync/bulk reads and writes.  :class:`BusEngine` holds the servos and
the shared instruction semantics; this class turns bytes into instructions
and replies into bytes.
"""

from __future__ import annotations

from servoloop.firmware_bridge.protocol import HEADER_V2, build_status, unstuff
from servoloop.firmware_bridge.protocol import crc16 as P_crc16
from servoloop.virtual_bus.crc import crc16, crc16_continue, crc_to_state
from servoloop.virtual_bus.memory import ERR

__all__ = ["Protocol2"]

BROADCAST = 0xFE
_MAX_LEN_V2 = 2048          # longer length fields are taken as line noise, not waited for
_READ_INSTRUCTIONS = (0x01, 0x02, 0x82, 0x8A, 0x92, 0x9A)
_STUFF = b"\xff\xff\xfd"


class Protocol2:
    """Protocol 2.0 framing and instructions over a :class:`BusEngine`.

    Hot path: parsed read-type packets are cached by their bytes (the same
    sync read comes every tick, so its CRC is checked once) and status
    packets are assembled from a cached prefix whose CRC state is precomputed.
    """

    def __init__(self, engine):
        self.engine = engine
        self._prefix: dict = {}
        self._parse_cache: dict = {}

    def frame(self, rx: bytearray, once: bool = False) -> list:
        """Instruction packets framed from ``rx`` (consumed), each run: [(length, replies)].

        ``once``: stop after the first thing consumed (a packet or skipped bytes), so
        a mixed-protocol bus can look at what follows.
        """
        e = self.engine
        out = []
        cache = self._parse_cache
        while True:
            i = rx.find(HEADER_V2)
            if i < 0:
                # keep a possible header start for the next read
                keep = 3 if rx[-3:] == b"\xff\xff\xfd" else 2 if rx[-2:] == b"\xff\xff" else 1 if rx[-1:] == b"\xff" else 0
                if len(rx) > keep:
                    del rx[: len(rx) - keep]
                return out
            if i:
                del rx[:i]
            if len(rx) < 7:
                return out
            length = rx[5] | (rx[6] << 8)
            if length < 3 or length > _MAX_LEN_V2 or rx[4] in (0xFD, 0xFF):
                del rx[:1]
                e.stats["malformed"] += 1
                if once:
                    return out
                continue
            total = 7 + length
            if len(rx) < total:
                return out
            pkt = bytes(rx[:total])
            parsed = cache.get(pkt)
            if parsed is None:
                if crc16(memoryview(pkt)[:-2]) != (pkt[-2] | (pkt[-1] << 8)):
                    e.stats["bad_checksum"] += 1
                    sid = pkt[4]
                    servo = e.by_id.get(sid)
                    if servo is None or sid == BROADCAST:
                        del rx[:1]          # maybe not a packet at all: resynchronise
                        if once:
                            return out
                        continue
                    del rx[:total]
                    out.append((total, e.reply(servo, ERR.CRC)))
                    if once:
                        return out
                    continue
                body = pkt[7:-2]
                if _STUFF in body:
                    body = unstuff(body)
                parsed = (pkt[4], body[0], body[1:])
                if body[0] in _READ_INSTRUCTIONS:
                    if len(cache) > 256:
                        cache.clear()
                    cache[pkt] = parsed
            del rx[:total]
            e.stats["instructions"] += 1
            out.append((total, e.dispatch(*parsed)))
            if once:
                return out

    def status(self, servo, err: int, data: bytes, sid: int | None = None) -> bytes:
        """The status packet of ``servo`` (error ``err``, payload ``data``, ID ``sid`` or its own)."""
        if sid is None:
            sid = servo.id
        bits = servo.status_bits(err)
        if _STUFF in data:          # the error byte is never 0xFF: only the data can need stuffing
            return build_status(2, sid, bits, data)
        key = (sid, len(data), bits)
        pre = self._prefix.get(key)
        if pre is None:
            # header + id + length + 0x55 + error is fixed per (id, length, error): CRC it once
            n = len(data) + 4
            head = HEADER_V2 + bytes((sid, n & 0xFF, n >> 8, 0x55, bits))
            pre = self._prefix[key] = (head, crc_to_state(P_crc16(head)))
        crc = crc16_continue(pre[1], data)
        return pre[0] + data + bytes((crc & 0xFF, crc >> 8))

    def handlers(self) -> dict:
        e = self.engine
        return {0x01: self.ping, 0x02: self.read, 0x03: self.write,
                0x04: self.reg_write, 0x05: e.do_action, 0x06: e.do_factory_reset,
                0x08: e.do_reboot, 0x10: self.clear, 0x82: self.sync_read,
                0x83: self.sync_write, 0x8A: self.fast_sync_read, 0x92: self.bulk_read,
                0x93: self.bulk_write, 0x9A: self.fast_bulk_read}

    def ping(self, sid, params):
        e = self.engine
        out = []
        for s in e.targets(sid):   # broadcast: every servo, in id order
            out += e.ping_reply(s)
        return out

    def read(self, sid, params):
        e = self.engine
        if len(params) != 4:
            return e.malformed(sid)
        return e.do_read(sid, params[0] | (params[1] << 8), params[2] | (params[3] << 8))

    def write(self, sid, params):
        e = self.engine
        if len(params) < 3:
            return e.malformed(sid)
        return e.do_write(sid, params[0] | (params[1] << 8), params[2:])

    def reg_write(self, sid, params):
        e = self.engine
        if len(params) < 3:
            return e.malformed(sid)
        return e.do_reg_write(sid, params[0] | (params[1] << 8), params[2:])

    def clear(self, sid, params):
        e = self.engine
        if params[:1] != b"\x01" or params[1:5] != b"DXL\x22":
            return e.malformed(sid)
        out = []
        e.fresh_present()
        for s in e.targets(sid):
            if getattr(s, "bank", None) is None:
                continue            # not a servo (an IMU board): nothing turns
            # e-Manual, Protocol 2.0 "Clear (0x10)" (https://emanual.robotis.com/docs/en/dxl/
            # protocol2/#clear-0x10): Present Position back to within one turn (0-4095), only
            # while stopped (Result Fail otherwise)
            # "moving" as the Moving register says it (|velocity| > Moving Threshold)
            moving = abs(e.velocity[s.index]) > s.bank.moving_threshold
            if not moving:
                s.clear_multi_turn()
            if sid != BROADCAST:
                out += e.reply(s, ERR.RESULT_FAIL if moving else ERR.OK)
        return out

    def sync_read(self, sid, params):
        e = self.engine
        if sid != BROADCAST or len(params) < 5:
            return []
        address, length = params[0] | (params[1] << 8), params[2] | (params[3] << 8)
        e.fresh_present()
        out = []
        by_id = e.by_id
        end = address + length
        status = e.status_packet
        for i in params[4:]:
            s = by_id.get(i)
            if s is None:
                continue
            mem = s.mem
            span = s.info.ind_span
            if end > s.info.size or e.reply_faults or (span is not None and address < span[1] and end > span[0]):
                err, data = s.read(address, length)
                out += e.reply(s, err, data or b"", level=1)
            elif mem[s.info.a_srl]:
                # the every-tick path: inlined reply() (no faults configured)
                out.append((status(s, 0, bytes(mem[address:end])), mem[s.info.a_rdt] * 2e-6, 0.0))
                e.stats["replies"] += 1
        return out

    def bulk_read(self, sid, params):
        e = self.engine
        if sid != BROADCAST or len(params) < 5 or len(params) % 5:
            return []
        e.fresh_present()
        out = []
        for k in range(0, len(params), 5):
            s = e.by_id.get(params[k])
            if s is not None:
                address = params[k + 1] | (params[k + 2] << 8)
                length = params[k + 3] | (params[k + 4] << 8)
                err, data = s.read(address, length)
                out += e.reply(s, err, data or b"", level=1)
        return out

    def fast_sync_read(self, sid, params):
        if sid != BROADCAST or len(params) < 5:
            return []
        address, length = params[0] | (params[1] << 8), params[2] | (params[3] << 8)
        return self._fast_read([(i, address, length) for i in params[4:]])

    def fast_bulk_read(self, sid, params):
        if sid != BROADCAST or len(params) < 5 or len(params) % 5:
            return []
        items = [(params[k], params[k + 1] | (params[k + 2] << 8), params[k + 3] | (params[k + 4] << 8))
                 for k in range(0, len(params), 5)]
        return self._fast_read(items)

    def _fast_read(self, items) -> list:
        e = self.engine
        """Fast Sync/Bulk Read: one status packet from id 0xFE that every servo extends.

        Layout: FF FF FD 00 FE LEN_L LEN_H 55, then per servo ERR ID DATA CRC_L CRC_H
        where each CRC covers the packet from its first byte (the last one is
        the packet's CRC); LEN = 1 + sum(4 + data length).  The first servo
        sends the header with the length of the whole chain: a servo that does
        not answer leaves a short packet the host rejects.  No byte stuffing
        (``dynamixel_sdk`` reads these packets without unstuffing).
        """
        e.fresh_present()
        first = e.by_id.get(items[0][0]) if items else None
        if first is None or not first.info.fast_read or first.status_return_level < 1:
            return []
        n = 1 + sum(4 + length for _, _, length in items)
        pkt = bytearray(HEADER_V2 + bytes((BROADCAST, n & 0xFF, n >> 8, 0x55)))
        for i, address, length in items:
            s = e.by_id.get(i)
            if s is None or not s.info.fast_read:
                continue
            err, data = s.read(address, length)
            slot = bytearray((s.status_bits(err), s.id))
            slot += data if data is not None else bytes(length)
            if e.reply_faults:
                slot_pkt, _ = e.faults.filter_reply(s.bus_id0, e.time_s, bytes(slot))
                if slot_pkt is None:
                    continue
                slot = bytearray(slot_pkt)
            pkt += slot
            crc = crc16(pkt)
            pkt += bytes((crc & 0xFF, crc >> 8))
        e.stats["replies"] += 1
        return [(bytes(pkt), first.return_delay_s, 0.0)]

    def sync_write(self, sid, params):
        e = self.engine
        if sid != BROADCAST or len(params) < 4:
            return []
        address, length = params[0] | (params[1] << 8), params[2] | (params[3] << 8)
        step = length + 1
        by_id = e.by_id
        for k in range(4, len(params) - length, step):
            s = by_id.get(params[k])
            if s is not None:
                s.write(address, params[k + 1:k + step])
        return []

    def bulk_write(self, sid, params):
        e = self.engine
        if sid != BROADCAST:
            return []
        k = 0
        while k + 5 <= len(params):
            length = params[k + 3] | (params[k + 4] << 8)
            s = e.by_id.get(params[k])
            data = params[k + 5:k + 5 + length]
            if s is not None and len(data) == length:
                s.write(params[k + 1] | (params[k + 2] << 8), data)
            k += 5 + length
        return []
