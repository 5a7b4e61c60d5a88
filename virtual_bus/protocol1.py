"""Protocol 1.0 on the virtual bus: framing, status packets, every instruction.

The e-Manual's Protocol 1.0 page: header FF FF, an 8-bit inverted-sum
checksum, instructions PING, READ, WRITE, REG WRITE, ACTION, RESET, REBOOT,
SYNC WRITE and (MX) BULK READ.
"""

from __future__ import annotations

from servoloop.virtual_bus.memory import ERR

__all__ = ["Protocol1"]

BROADCAST = 0xFE


class Protocol1:
    """Protocol 1.0 framing and instructions over a :class:`BusEngine`."""

    def __init__(self, engine):
        self.engine = engine

    def frame(self, rx: bytearray, once: bool = False) -> list:
        """Instruction packets framed from ``rx`` (consumed), each run: [(length, replies)].

        ``once``: stop after the first thing consumed (a packet or skipped bytes), so
        a mixed-protocol bus can look at what follows.
        """
        e = self.engine
        out = []
        while True:
            i = rx.find(b"\xff\xff")
            if i < 0:
                if len(rx) > 1 or rx[-1:] != b"\xff":
                    del rx[: len(rx) - (1 if rx[-1:] == b"\xff" else 0)]
                return out
            if i:
                del rx[:i]
            if len(rx) < 4:
                return out
            if rx[2] == 0xFF:            # FF FF FF ...: the header starts one byte later
                del rx[:1]
                if once:
                    return out
                continue
            sid, length = rx[2], rx[3]
            if length < 2:
                del rx[:1]
                e.stats["malformed"] += 1
                if once:
                    return out
                continue
            total = 4 + length
            if len(rx) < total:
                return out
            pkt = bytes(rx[:total])
            if (~sum(pkt[2:-1])) & 0xFF != pkt[-1]:
                e.stats["bad_checksum"] += 1
                servo = e.by_id.get(sid)
                if servo is None or sid == BROADCAST:
                    del rx[:1]
                    if once:
                        return out
                    continue
                del rx[:total]
                out.append((total, e.reply(servo, ERR.CRC)))
                if once:
                    return out
                continue
            del rx[:total]
            e.stats["instructions"] += 1
            out.append((total, e.dispatch(sid, pkt[4], pkt[5:-1])))
            if once:
                return out

    def handlers(self) -> dict:
        e = self.engine
        return {0x01: self.ping, 0x02: self.read, 0x03: self.write,
                0x04: self.reg_write, 0x05: e.do_action, 0x06: e.do_factory_reset,
                0x08: e.do_reboot, 0x83: self.sync_write, 0x92: self.bulk_read}

    def ping(self, sid, params):
        e = self.engine
        s = e.by_id.get(sid)
        return e.ping_reply(s) if s is not None and sid != BROADCAST else []

    def read(self, sid, params):
        e = self.engine
        if len(params) != 2:
            return e.malformed(sid)
        return e.do_read(sid, params[0], params[1])

    def write(self, sid, params):
        e = self.engine
        if len(params) < 2:
            return e.malformed(sid)
        return e.do_write(sid, params[0], params[1:])

    def reg_write(self, sid, params):
        e = self.engine
        if len(params) < 2:
            return e.malformed(sid)
        return e.do_reg_write(sid, params[0], params[1:])

    def sync_write(self, sid, params):
        e = self.engine
        if sid != BROADCAST or len(params) < 2:
            return []
        address, length = params[0], params[1]
        step = length + 1
        by_id = e.by_id
        for k in range(2, len(params) - length, step):
            s = by_id.get(params[k])
            if s is not None:
                s.write(address, params[k + 1:k + step])
        return []

    def bulk_read(self, sid, params):
        e = self.engine
        """MX (1.0) Bulk Read: 00, then (length, id, address) per servo; AX servos ignore it."""
        if sid != BROADCAST or len(params) < 4 or (len(params) - 1) % 3:
            return []
        e.fresh_present()
        out = []
        for k in range(1, len(params), 3):
            s = e.by_id.get(params[k + 1])
            if s is not None and s.info.bulk_read:
                err, data = s.read(params[k + 2], params[k])
                out += e.reply(s, err, data or b"", level=1)
        return out

    def status(self, servo, err: int, data: bytes, sid: int | None = None) -> bytes:
        """The status packet of ``servo`` (error ``err``, payload ``data``, ID ``sid`` or its own)."""
        if sid is None:
            sid = servo.id
        bits = servo.status_bits(err)
        n = len(data) + 2
        return b"\xff\xff" + bytes((sid, n, bits)) + data + bytes(((~(sid + n + bits + sum(data))) & 0xFF,))
