"""Python side of the virtual bus's compiled reply path (:mod:`._fastpath`).

The compiled reader answers the every-tick packets (Protocol 2.0 SYNC READ,
BULK READ, READ, PING; Protocol 1.0 READ, PING, BULK READ; SYNC WRITE of goal
registers, both protocols) from a mirror
of the control tables without the GIL, and queues every chunk it reads.
:class:`FastReplies` is what the pty server needs of it:

- :meth:`FastReplies.publish_meta`: which targets may be answered in C (the
  engine's listening servos at the host's baud, no colliding ids, no faults
  configured), each one's status byte and the registers a sync write may set
  with the raw range the engine would store verbatim (its range, limit and
  goal-limit rules; none while the Bus Watchdog has tripped);
- :meth:`FastReplies.sync`: copy the control tables into the mirror (after
  each physics slice and each drain);
- :meth:`FastReplies.drain`: feed every queued chunk to the engine in order,
  exactly as the Python reader did; a chunk C answered has its engine replies
  discarded, the others are answered as before.

The engine stays the one place servo semantics live: C only copies bytes the
engine published, and answers only what the engine would answer the same way
from them (see ``tests/hil/test_virtual_bus_fast_path.py``).
"""

from __future__ import annotations

import threading

from servoloop.virtual_bus._fastpath import KIND_CONTROL, KIND_SLOW, FastPath
from servoloop.virtual_bus.servo import VirtualServo

__all__ = ["FastReplies", "GOAL_REGISTERS"]

BROADCAST = 0xFE
#: RAM goal registers a sync write may set in C (stored verbatim by the engine when in range)
GOAL_REGISTERS = ("goal_position", "goal_velocity", "goal_current", "goal_pwm")
_TIOCPKT_FLUSHREAD = 0x01
_TIOCPKT_FLUSHWRITE = 0x02
_INT64 = (-(1 << 63), (1 << 63) - 1)


def _raw_bounds(r) -> tuple[int, int]:
    bits = 8 * r.size
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if r.encoding == "s" else (0, (1 << bits) - 1)
    if r.min_raw is not None:
        lo = max(lo, r.min_raw)
    if r.max_raw is not None:
        hi = min(hi, r.max_raw)
    return lo, hi


def writable_registers(s) -> tuple:
    """(address, size, signed, lo, hi) of each goal register servo ``s`` stores verbatim when
    ``lo <= raw <= hi`` (:meth:`VirtualServo.write`'s rules for a whole-register write)."""
    if not isinstance(s, VirtualServo) or s.watchdog_tripped:
        return ()     # a device (IMU board), or the Bus Watchdog made the goals read-only
    from servoloop.virtual_bus.memory import decode

    info = s.info
    out = []
    for name in GOAL_REGISTERS:
        r = info.reg.get(name)
        if (r is None or r.eeprom or r.access != "RW" or r.encoding not in ("u", "s")
                or r.size not in (1, 2, 4)):
            continue
        lo, hi = _raw_bounds(r)
        if r is info.goal:
            for lim in (s.position_limits, s.angle_limits):
                if lim is not None:
                    lo, hi = max(lo, lim[0]), min(hi, lim[1])
        else:
            limit = info.limits.get(name)      # Data Limit Error past |limit|
            if limit is not None:
                v = decode(limit, s.mem)
                lo, hi = max(lo, -v), min(hi, v)
        if lo <= hi:
            out.append((r.address, r.size, r.encoding == "s", lo, hi))
    return tuple(out)


class FastReplies:
    """The compiled reader of a :class:`~virtual_bus.server.PtyServer` and its publishing.

    Parameters
    ----------
    engine : BusEngine
    master : int
        Pty master fd.
    notify_w : int
        Write end of the server's wake-up pipe.
    packet_mode : bool
        The master runs in TIOCPKT mode.
    """

    def __init__(self, engine, master: int, notify_w: int, packet_mode: bool):
        self.engine = engine
        self.devices = [*engine.servos, *engine.devices]
        self.fp = FastPath(master, notify_w, packet_mode, len(self.devices))
        for k, d in enumerate(self.devices):
            self.fp.set_source(k, d.mem)
        self._index = {id(d): k for k, d in enumerate(self.devices)}
        self._seen = None
        self.thread: threading.Thread | None = None
        self.publish_meta()

    # ------------------------------------------------------------------ thread
    def start(self) -> None:
        self.thread = threading.Thread(target=self.fp.run, name="virtual-bus-fast-reader", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.fp.stop()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout=1.0)
        self.thread = None

    # ------------------------------------------------------------------ publishing
    def _signature(self) -> tuple:
        e = self.engine
        return (e._by_proto, e.client_baud, e.stats["watchdog_trips"], e._next_boot, e.unplugged)

    def publish_meta(self) -> None:
        """Publish eligibility, status bytes and fast-writable registers from the engine now."""
        e = self.engine
        enabled = not e.faults.faults and not e.unplugged
        protocols = (1, 2) if e.mixed else (e.protocol,)
        idmap = []
        for p in (1, 2):
            collide = e._collide_proto[p]
            for sid, s in e._by_proto[p].items():
                if sid != BROADCAST and sid not in collide:
                    idmap.append((p, sid, self._index[id(s)]))
        rows = []
        for d in self.devices:
            info = d.info
            lo, hi = info.ind_span or (0, 0)
            reg = info.reg
            a_model = reg["model_number"].address if "model_number" in reg else -1
            a_fw = reg["firmware_version"].address if "firmware_version" in reg else -1
            rows.append((d.status_bits(0), d.status_return_level, lo, hi, a_model, a_fw,
                         bool(getattr(info, "bulk_read", False)), writable_registers(d)))
        self.fp.set_meta(enabled, e.client_baud, e.pending_bytes() > 0, protocols, idmap, rows)
        self._seen = self._signature()

    def sync(self) -> None:
        """After a physics slice: the tables into the mirror (and the meta if the step changed it)."""
        if self._signature() != self._seen:
            self.publish_meta()
        self.fp.sync()

    # ------------------------------------------------------------------ drain
    def drain(self, server) -> None:
        """Feed every queued chunk to the engine in order; send the replies of SLOW chunks."""
        e, fp, stats = self.engine, self.fp, server.stats
        item = fp.pop()
        if item is None:
            return
        while item is not None:
            t, baud, prev, data, status, kind = item
            if kind == KIND_CONTROL:
                # the host flushed: a real servo does not know and still sends what it owes
                if status & _TIOCPKT_FLUSHREAD:
                    stats["host_input_flushes"] += 1
                if status & _TIOCPKT_FLUSHWRITE:
                    stats["host_output_flushes"] += 1
                item = fp.pop()
                continue
            if e.unplugged:
                if kind == KIND_SLOW:
                    fp.slow_done(False)
                item = fp.pop()
                continue
            server._last_rx = t
            out = e.feed_at(data, baud, prev)
            if kind == KIND_SLOW:
                server._schedule(out, t)
                self.publish_meta()
                fp.sync()
                fp.slow_done(e.pending_bytes() > 0)
            # else: C sent these replies already
            item = fp.pop()
        fp.sync()
        stats["fast_reads"], stats["fast_writes"], stats["slow_chunks"] = fp.counts

    def partial_dropped(self) -> None:
        """The server dropped a stalled partial packet (the engine may have run what followed)."""
        self.publish_meta()
        self.fp.sync()
