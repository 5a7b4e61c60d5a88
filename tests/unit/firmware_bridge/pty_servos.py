"""Servos on the master side of a pseudo-terminal, pumped synchronously (test helper).

A minimal, deterministic servo emulator built on ``protocol.py`` (the byte
reference), independent of the compiled codec under test and of the
virtual-bus package.  ``Bus(..., on_after_write=servos.pump)`` makes every
transaction answer inside the write call: no threads, no sleeps.
Faults: ``drop`` (ids that do not answer), ``corrupt`` (ids whose reply gets
one byte flipped), ``garbage`` (bytes sent before every reply), ``error``
({id: error byte}), ``hardware_error_status`` ({id: value}).
"""

from __future__ import annotations

import os
import termios
import tty

from servoloop.firmware_bridge import protocol as P
from servoloop.firmware_bridge.control_table import get_table

__all__ = ["PtyServos"]


class PtyServos:
    def __init__(self, models: dict[int, str], protocol: int = 2):
        self.protocol = protocol
        self.master, slave = os.openpty()
        tty.setraw(slave)
        attrs = termios.tcgetattr(slave)
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        self.port = os.ttyname(slave)
        self._slave = slave  # keep the slave open so the master never sees EOF
        os.set_blocking(self.master, False)
        self.tables = {i: get_table(m) for i, m in models.items()}
        self.mem = {i: self._defaults(t) for i, t in self.tables.items()}
        self.drop: set[int] = set()
        self.corrupt: set[int] = set()
        self.garbage = b""
        self.error: dict[int, int] = {}
        self.mangle: dict = {}  # {id: function(reply bytes) -> bytes on the wire}
        self.received: list[bytes] = []
        self.registered: dict[int, tuple[int, bytes]] = {}
        self._buf = b""

    @staticmethod
    def _defaults(table):
        mem = bytearray(700)
        for r in table.registers.values():
            if r.default is not None:
                v = r.default & ((1 << (8 * r.size)) - 1)
                mem[r.address:r.address + r.size] = v.to_bytes(r.size, "little")
        return mem

    def set_raw(self, sid: int, name: str, wire: int) -> None:
        r = self.tables[sid][name]
        self.mem[sid][r.address:r.address + r.size] = (wire & ((1 << (8 * r.size)) - 1)).to_bytes(r.size, "little")

    def close(self) -> None:
        os.close(self.master)
        os.close(self._slave)

    # --------------------------------------------------------------- pump
    def pump(self) -> None:
        """Answer every complete instruction waiting on the master side."""
        try:
            while True:
                chunk = os.read(self.master, 4096)
                if not chunk:
                    break
                self._buf += chunk
        except BlockingIOError:
            pass
        while self._buf:
            i = P.find_header(self._buf, self.protocol)
            if i < 0:
                self._buf = b""
                return
            self._buf = self._buf[i:]
            try:
                pkt, n = P.parse_packet(self._buf, self.protocol, status=False)
            except Exception:
                self._buf = self._buf[1:]
                continue
            if pkt is None:
                return
            self._buf = self._buf[n:]
            self.received.append(pkt.raw)
            self._handle(pkt)

    def _reply(self, sid: int, params: bytes = b"", error: int = 0) -> None:
        if sid in self.drop:
            return
        error = self.error.get(sid, error)
        pkt = bytearray(P.build_status(self.protocol, sid, error, params))
        if sid in self.corrupt:
            pkt[-3] ^= 0x5A
        if sid in self.mangle:
            pkt = self.mangle[sid](bytes(pkt))
        os.write(self.master, self.garbage + bytes(pkt))

    def _addr(self, params: bytes, k: int) -> tuple[int, int]:
        if self.protocol == 1:
            return params[k], k + 1
        return params[k] | (params[k + 1] << 8), k + 2

    def _handle(self, pkt) -> None:
        inst, p, sid = pkt.instruction, pkt.params, pkt.servo_id
        ins = P.Instruction
        if inst == ins.PING:
            targets = sorted(self.mem) if sid == P.BROADCAST_ID else ([sid] if sid in self.mem else [])
            for t in targets:
                model = self.tables[t].model_number
                self._reply(t, bytes((model & 0xFF, model >> 8, 45)) if self.protocol == 2 else b"")
        elif inst == ins.READ and sid in self.mem:
            a, k = self._addr(p, 0)
            n, _ = self._addr(p, k)
            self._reply(sid, bytes(self.mem[sid][a:a + n]))
        elif inst in (ins.WRITE, ins.REG_WRITE) and sid in self.mem:
            a, k = self._addr(p, 0)
            if inst == ins.WRITE:
                self.mem[sid][a:a + len(p) - k] = p[k:]
            else:
                self.registered[sid] = (a, p[k:])
            self._reply(sid)
        elif inst == ins.ACTION:
            for t, (a, d) in list(self.registered.items()):
                self.mem[t][a:a + len(d)] = d
            self.registered.clear()
            if sid in self.mem:
                self._reply(sid)
        elif inst == ins.REBOOT and sid in self.mem:
            self.mem[sid] = self._defaults(self.tables[sid])
            self._reply(sid)
        elif inst == ins.SYNC_WRITE:
            a, k = self._addr(p, 0)
            n, k = self._addr(p, k)
            while k + 1 + n <= len(p):
                t = p[k]
                if t in self.mem:
                    self.mem[t][a:a + n] = p[k + 1:k + 1 + n]
                k += 1 + n
        elif inst == ins.SYNC_READ:
            a, k = self._addr(p, 0)
            n, k = self._addr(p, k)
            for t in p[k:]:
                if t in self.mem:
                    self._reply(t, bytes(self.mem[t][a:a + n]))
        elif inst == ins.BULK_READ:
            k = 0
            while k + 5 <= len(p):
                t = p[k]
                a = p[k + 1] | (p[k + 2] << 8)
                n = p[k + 3] | (p[k + 4] << 8)
                if t in self.mem:
                    self._reply(t, bytes(self.mem[t][a:a + n]))
                k += 5
