"""The bus's hot path: one preallocated sync read and one sync write per tick.

:class:`SyncReader` and :class:`SyncWriter` are made by
:meth:`Bus.sync_reader <firmware_bridge.bus.Bus.sync_reader>` and
:meth:`Bus.sync_writer <firmware_bridge.bus.Bus.sync_writer>`; they encode
once, then read and write the descriptor from Cython with the GIL released.
A failed read sets the failed servos' values to NaN and raises one error
naming every failed servo: never a plausible number.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from servoloop.firmware_bridge import _busio, _codec
from servoloop.firmware_bridge.errors import BridgeError, HardwareErrorStatus, PortError

if TYPE_CHECKING:
    from servoloop.firmware_bridge.bus import Bus

__all__ = ["SyncReader", "SyncWriter", "raise_group"]

_ENC = {"u": 0, "s": 1, "sm": 2}   # register encodings as _busio numbers them

# Request variants that tell a late reply from a fresh one (see SyncReader): variant v
# reads v bytes more, at most 3 bytes (30 us at 1 Mbps) per servo and reply.
STALE_TAGS = 4
# Plausibility of a present position: the datasheet's no-load speed times this margin
# (a back-driven joint may run somewhat faster), plus this many rad of noise and quantisation.
PLAUSIBLE_SPEED_MARGIN = 2.0
PLAUSIBLE_ABS_TOL_RAD = 0.05


def raise_group(failures: dict[int, BridgeError], values_note=None):
    """Raise the first failure's exception, carrying every failed id."""
    ids = sorted(failures)
    first = failures[ids[0]]
    msg = (f"group read failed for servo ids {ids}: " +
           "; ".join(f"{i}: {failures[i]}" for i in ids))
    exc = _copy_with_message(first, msg)
    exc.failed_ids = tuple(ids)
    exc.failures = dict(failures)
    raise exc


def _copy_with_message(exc: BridgeError, msg: str) -> BridgeError:
    new = exc.__class__.__new__(exc.__class__)
    new.__dict__.update(exc.__dict__)
    new.args = (msg,)
    return new


class SyncReader:
    """One preallocated group read; ``values[name]`` are float64 (n,) SI arrays, in place.

    Protocol 2.0: one SYNC READ of the contiguous block covering every
    register, or with ``fast=True`` one FAST SYNC READ (0x8A: a single reply
    packet that every servo extends; X firmware v45+, XL330 v46+, not MX) --
    one missing servo then fails them all.  Protocol 1.0: one READ per servo
    behind the same API (AX has no sync read).  Mixed models share one packet
    when the registers sit at the same addresses; each servo's values are
    converted with its own model's scale (XM430 vs XL330 current, say).

    Fresh feedback only: Dynamixel replies carry no sequence number, so a
    reply later than the timeout would be taken for the next request's.
    Each request therefore reads one of ``STALE_TAGS`` lengths (a few
    bytes more than needed), changing after every exchange that left bytes
    unaccounted for; a reply of another length answers an earlier request
    and is discarded, counted per servo as ``ServoHealth.stale``.  With
    ``present_position`` among the names, a position that moved faster than
    the servo can (datasheet no-load speed x ``PLAUSIBLE_SPEED_MARGIN`` x
    elapsed time + ``PLAUSIBLE_ABS_TOL_RAD``) since the last good read is a
    corrupted read that passed the checksum: NaN and a ChecksumError,
    counted as ``ServoHealth.implausible``.  ``plausibility=False`` turns
    that check off: servos turning continuously (wheel / velocity mode) wrap
    their Present Position from one end of its range to the other.

    On a mixed bus (:data:`~firmware_bridge.bus.MIXED`) every servo of one
    reader must speak the same protocol (ValueError naming them otherwise).

    ``min_length`` (bytes, default 0): ask at least that many bytes, the block grown at
    its end (a wider twin of another reader whose request lengths must differ from that
    reader's, see :meth:`follow`).  ValueError when the control table ends before.
    """

    def __init__(self, bus: Bus, names: list[str], ids: list[int], fast: bool = False,
                 plausibility: bool = True, min_length: int = 0):
        bus._require_open()
        if not ids:
            raise ValueError("sync reader needs at least one servo")
        protocol = bus.group_protocol(ids, "sync read")
        if fast and protocol != 2:
            raise ValueError("fast sync read needs Protocol 2.0 (X firmware v45+, not MX)")
        self.protocol = protocol
        self.bus = bus
        self.names = list(names)
        self.ids = list(ids)
        regs0 = [bus.register(ids[0], n) for n in names]
        per_slot = [[bus.register(sid, n) for sid in ids] for n in names]
        for n, r0, regs in zip(names, regs0, per_slot, strict=True):
            for sid, r in zip(ids, regs, strict=True):
                # one packet for every servo: the bytes must sit at the same place;
                # scale and zero may differ (mixed models, e.g. XM430 and XL330 current)
                if (r.address, r.size, r.encoding) != (r0.address, r0.size, r0.encoding):
                    raise ValueError(f"register {n} is at a different address/size/encoding on "
                                     f"servo {ids[0]} ({bus.table(ids[0]).name}) and servo {sid} "
                                     f"({bus.table(sid).name}); use one reader per model")
        start = min(r.address for r in regs0)
        end = max(r.address + r.size for r in regs0)
        if end - start < min_length:
            end = start + min_length
            short = [sid for sid in ids if bus.table(sid).size < end]
            if short:
                raise ValueError(f"sync read of {names} from {min_length} bytes at {start}: the control "
                                 f"table of servo {short[0]} ({bus.table(short[0]).name}) ends at "
                                 f"{bus.table(short[0]).size}")
        self.address, self.length = start, end - start
        self.registers = dict(zip(names, regs0, strict=True))
        fields = [(r0.address - start, r0.size, _ENC[r0.encoding], [r.zero_raw for r in regs],
                   [r.scale for r in regs]) for r0, regs in zip(regs0, per_slot, strict=True)]
        # as many variants as every servo's control table has bytes after the block
        room = min(bus.table(sid).size for sid in ids) - end
        ntags = max(1, min(STALE_TAGS, room + 1))
        parts, splits, off = [], [], 0
        for v in range(ntags):
            length = self.length + v
            reply = (11 if protocol == 2 else 6) + length
            if protocol == 2:
                build = _codec.fast_sync_read if fast else _codec.sync_read
                p = build(start, length, ids)
                t = bus._timeout(len(p), len(ids) * reply, len(ids), ids)
                parts.append(p)
                splits.append((off, len(p), 0, len(ids), t))
                off += len(p)
            else:
                for i, sid in enumerate(ids):
                    p = _codec.read(1, sid, start, length)
                    parts.append(p)
                    splits.append((off, len(p), i, 1, bus._timeout(len(p), reply, 1, [sid])))
                    off += len(p)
        tx = b"".join(parts)
        per_tag = len(splits) // ntags
        tag_len = [len(ids) * (self.length + v + 4) - 3 if fast else self.length + v
                   for v in range(ntags)]
        self.timeout_s = max(sum(s[4] for s in splits[v * per_tag:(v + 1) * per_tag])
                             for v in range(ntags))
        self.fast = fast
        self.ntags = ntags
        pos_field, max_rate = -1, None
        if "present_position" in names and plausibility:
            pos_field = list(names).index("present_position")
            max_rate = [_max_speed(bus, sid) for sid in ids]
            if any(r is None for r in max_rate):
                pos_field, max_rate = -1, None       # a model without datasheet figures
        self._io = _busio.GroupIO(bus.fd, protocol, ids, tx, splits, self.length, fields,
                                  bus.on_after_write, bus._dirty, fast, ntags, tag_len,
                                  pos_field, max_rate, PLAUSIBLE_ABS_TOL_RAD)
        self._io.set_slots(ids)
        bus._ok_sources.append((self.ids, self._io.ok_counts, self._io.stale_counts))
        out = self._io.out
        self.values: dict[str, np.ndarray] = {n: out[k] for k, n in enumerate(names)}
        self.alert_ids: tuple[int, ...] = ()

    @property
    def stale_counts(self):
        """Late replies discarded per servo since the last ``Bus.health`` access, int64 (n,)."""
        return self._io.stale_counts

    def reset_plausibility(self) -> None:
        """Take the next position as it is (after a reboot, a homing offset change, ...)."""
        self._io.reset_plausibility()

    @property
    def request_lengths(self) -> list[set[int]]:
        """Per servo, the byte counts its request variants ask (fresh-reply tags)."""
        return [set(range(self.length, self.length + self.ntags))] * len(self.ids)

    def follow(self, other) -> None:
        """Continue ``other``'s request-variant rotation (a reader used in turn with this one on
        the same servos, e.g. a tick's read and its wider twin): where their variants ask the
        same lengths, a late reply to one is then told from the other's fresh one as within
        one reader."""
        self._io.follow(other._io)

    def read(self) -> None:
        """One group read.  On failure raises (first failed servo's error class,
        ``failed_ids`` on it) and leaves NaN in the failed servos' entries."""
        bus = self.bus
        if bus._pending is not None:
            bus.settle()
        if self._io.read():
            self._fail()

    def request(self) -> None:
        """First half of :meth:`read`: send the instruction, return without waiting (read-ahead).

        The bus knows the request is outstanding: its next transaction of any kind first
        takes the replies into this reader (:meth:`Bus.settle <firmware_bridge.bus.Bus.settle>`).
        A port error shows at :meth:`collect`.  Only for a read that is one exchange
        (Protocol 2.0): on 1.0 the other servos' reads would go out at ``collect``.
        """
        bus = self.bus
        if bus._pending is not None:
            bus.settle()
        self._io.request()
        bus._pending = self

    def collect(self) -> None:
        """Second half of :meth:`read`: the replies to the last :meth:`request` (waiting up to
        its reply timeout, counted from the request), decoded; raises as :meth:`read`.

        Raises
        ------
        RuntimeError
            No request outstanding.
        """
        if self.bus._pending is self:
            self.bus._pending = None
        if self._io.collect():
            self._fail()

    @property
    def requested(self) -> bool:
        """True between :meth:`request` and :meth:`collect`."""
        return self._io.requested != 0

    def poll(self, until: float) -> bool:
        """Wait for the outstanding request's replies until ``until`` (s, CLOCK_MONOTONIC, as
        ``_busio.monotonic``) at most; True when all are in (:meth:`collect` then returns them
        without waiting), False when some are still owed: the request stays outstanding
        (``loop.late_read``: the tick runs on the last reading, the next one polls again)."""
        return self._io.poll(until) != 0

    @property
    def exchanges(self) -> int:
        """Write + reply exchanges per read: 1 on Protocol 2.0, one per servo on 1.0."""
        return 1 if self.protocol == 2 else len(self.ids)

    def _fail(self) -> None:
        bus = self.bus
        if self._io.port_error:
            raise PortError(f"{bus.port}: the port failed during a sync read (unplugged?)")
        codes, errs, counts = self._io.codes, self._io.errors, self._io.counts
        failures: dict[int, BridgeError] = {}
        length = self.length + self._io.tag      # this request's variant read that many
        for i, sid in enumerate(self.ids):
            if codes[i] == _busio.SLOT_OK and errs[i] == 0 and counts[i] == length:
                continue  # counted as good by the compiled reader already
            reply = (int(codes[i]), int(errs[i]), b"\0" * int(counts[i]))
            try:
                bus._check_reply(sid, reply, self.timeout_s, length, "sync read")
            except BridgeError as exc:
                # no traceback: a kept error must not keep this tick's frames alive
                failures[sid] = exc.with_traceback(None)
        self.alert_ids = tuple(s for s, e in failures.items() if isinstance(e, HardwareErrorStatus))
        if failures:
            raise_group(failures)


def _max_speed(bus: Bus, servo_id: int) -> float | None:
    """Fastest plausible joint speed of a servo, rad/s (None: no datasheet figure)."""
    ds = bus.table(servo_id).datasheet
    return None if ds is None else ds.no_load_speed_rad_s * PLAUSIBLE_SPEED_MARGIN


class SyncWriter:
    """One preallocated SYNC WRITE of one register; ``write(values)`` takes SI, float64 (n,).

    Servos of different models share the packet when the register sits at
    the same address; each value is converted with its own model's scale.
    On a mixed bus every servo of one writer must speak the same protocol.
    """

    def __init__(self, bus: Bus, name: str, ids: list[int]):
        bus._require_open()
        protocol = bus.group_protocol(ids, f"sync write of {name}")
        reg = bus.register(ids[0], name)
        regs = [bus.register(sid, name) for sid in ids]
        for sid, r in zip(ids, regs, strict=True):
            if (r.address, r.size, r.encoding) != (reg.address, reg.size, reg.encoding):
                raise ValueError(f"register {name} is at a different address/size/encoding on "
                                 f"servo {ids[0]} and servo {sid}; use one writer per model")
        if not reg.writable:
            raise ValueError(f"register {name} is read-only")
        self.bus, self.name, self.ids, self.register = bus, name, list(ids), reg
        n_bytes = (8 if protocol == 1 else 14) + len(ids) * (1 + reg.size)
        self.protocol = protocol
        self._io = _busio.GroupWriteIO(bus.fd, protocol, ids, reg.address, reg.size,
                                       _ENC[reg.encoding], [r.zero_raw for r in regs],
                                       [r.scale for r in regs],
                                       bus._timeout(n_bytes, 0, 0), bus.on_after_write)

    @property
    def last_raw(self) -> np.ndarray:
        """Raw integers of the last write, int64 (n,)."""
        return self._io.last_raw

    def write(self, values) -> None:
        """Send one sync write of SI values, float64 (n,); ValueError on NaN/out of range."""
        if not (type(values) is np.ndarray and values.dtype == np.float64
                and values.flags.c_contiguous):
            values = np.ascontiguousarray(values, dtype=np.float64)
        bus = self.bus
        if bus._pending is not None and not bus.write_past_pending:
            bus.settle()      # half duplex: a read request's replies first
        try:
            rc = self._io.write(values)
        except ValueError as exc:
            raise ValueError(f"{self.name}: {exc} (servo ids {self.ids})") from None
        if rc != 0:
            raise PortError(f"{self.bus.port}: sync write of {self.name} failed (port closed?)")
