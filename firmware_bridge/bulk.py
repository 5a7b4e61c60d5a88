"""One BULK READ per tick for devices whose registers sit at different addresses.

A SYNC READ asks every device for the same bytes, so a robot's servos and its
IMU board (the OpenCR at ID 200: gyro at 32, the servos' present values at
126) took two transactions, two pty or USB round trips, per tick.  A Protocol
2.0 BULK READ (0x92) carries one (id, start address, length) per device and
every device answers with its own status packet, in the order of the request
(ROBOTIS e-Manual, Protocol 2.0, "Bulk Read (0x92)"; DynamixelSDK's
GroupBulkRead builds the same packet).  :class:`BulkReader` is that read,
preallocated and compiled (:class:`firmware_bridge._busio.GroupIO` with a
length per slot), with the same guarantees as
:class:`~firmware_bridge.sync.SyncReader`: fresh replies only (request
variants; a device whose table ends at its block grows the request at the
front instead), a servo's position that moved faster than it can is a
corrupted read, and failures leave NaN, never a plausible number.

>>> bulk = BulkReader(bus, [(["present_position", "present_velocity"], [1, 2, 3]),
...                         (list(IMU_REGISTERS), [200], False)])
>>> bulk.read()                  # one transaction; True when every device answered
>>> servos, imu = bulk.parts
>>> servos.values["present_position"]   # (3,) rad, in place
>>> imu.check()                  # raises the IMU's own failure (BridgeError), if any

Each part raises only its own devices' failures (:meth:`BulkPart.check`),
so a lost IMU reply does not count against the servos' comm ladder.  Fast
Bulk Read (0x9A) is not used: the OpenCR OP3 firmware does not answer it.
"""

from __future__ import annotations

import numpy as np

from servoloop.firmware_bridge import _busio, _codec
from servoloop.firmware_bridge.errors import BridgeError, HardwareErrorStatus, PortError
from servoloop.firmware_bridge.sync import (
    _ENC,
    PLAUSIBLE_ABS_TOL_RAD,
    STALE_TAGS,
    _max_speed,
    raise_group,
)

__all__ = ["BulkReader", "BulkPart"]

_STATUS_BYTES = 11    # a Protocol 2.0 status packet without its parameters


class BulkPart:
    """One group of devices of a :class:`BulkReader` with the same registers.

    Attributes
    ----------
    names : list of str, registers
    ids : list of int
    values : dict name -> float64 (len(ids),) SI, in place (NaN where the read failed)
    alert_ids : ids whose last reply carried a hardware error status
    """

    def __init__(self, reader: BulkReader, names, ids, first_slot: int, rows: list[int]) -> None:
        self.reader = reader
        self.names = list(names)
        self.ids = list(ids)
        self.slots = range(first_slot, first_slot + len(self.ids))
        out = reader._io.out
        self.values: dict[str, np.ndarray] = {
            n: out[r, first_slot:first_slot + len(self.ids)] for n, r in zip(names, rows, strict=True)}
        self.alert_ids: tuple[int, ...] = ()

    def check(self) -> None:
        """Raise this part's failures of the last :meth:`BulkReader.read` (none: return).

        Raises
        ------
        BridgeError
            The first failed device's error class, ``failed_ids`` / ``failures`` naming all.
        """
        r = self.reader
        if r.bad == 0:
            self.alert_ids = ()
            return
        io, bus = r._io, r.bus
        codes, errs, counts = io.codes, io.errors, io.counts
        failures: dict[int, BridgeError] = {}
        for i, sid in zip(self.slots, self.ids, strict=True):
            length = r.lengths[i] + io.tag          # this request's variant asked that many
            if codes[i] == _busio.SLOT_OK and errs[i] == 0 and counts[i] == length:
                continue
            try:
                bus._check_reply(sid, (int(codes[i]), int(errs[i]), b"\0" * int(counts[i])),
                                 r.timeout_s, length, "bulk read")
            except BridgeError as exc:
                failures[sid] = exc.with_traceback(None)    # keep no tick frames alive
        self.alert_ids = tuple(s for s, e in failures.items() if isinstance(e, HardwareErrorStatus))
        if failures:
            raise_group(failures)

    def read(self) -> None:
        """The whole bulk read, then :meth:`check` (for a part read on its own)."""
        self.reader.read()
        self.check()

    def reset_plausibility(self) -> None:
        """Take the next positions as they are (after a reboot)."""
        self.reader._io.reset_plausibility()


class BulkReader:
    """One preallocated Protocol 2.0 BULK READ of several parts, each (names, ids[, plausibility]).

    Within a part the registers must sit at the same addresses on every device
    (as for a sync read); parts may differ in everything.  An id may appear in
    one part only.

    Parameters
    ----------
    bus : firmware_bridge.bus.Bus, open; every id Protocol 2.0 (servos or ``add_device``)
    parts : list of (names, ids) or (names, ids, plausibility); ``plausibility`` (default
        True) checks a part's ``present_position`` against the servos' no-load speed

    Raises
    ------
    ValueError
        An id twice, a device on Protocol 1.0, or a register at different addresses
        within one part (naming them).
    """

    def __init__(self, bus, parts) -> None:
        bus._require_open()
        parts = [(list(p[0]), list(p[1]), bool(p[2]) if len(p) > 2 else True) for p in parts]
        ids = [sid for _, part_ids, _ in parts for sid in part_ids]
        if not ids:
            raise ValueError("bulk read needs at least one device")
        if len(set(ids)) != len(ids):
            raise ValueError(f"bulk read: an id appears twice in {ids}")
        if bus.group_protocol(ids, "bulk read") != 2:
            raise ValueError("bulk read of several register blocks needs Protocol 2.0 "
                             "(a Protocol 1.0 BULK READ is MX only; use one sync reader per part)")
        self.bus, self.ids = bus, ids
        n = len(ids)
        rows: dict[tuple, int] = {}       # (name, size, encoding) -> value row
        starts, lengths, room_after, room_before, layout = [], [], [], [], []
        for names, part_ids, _ in parts:
            regs = [[bus.register(sid, nm) for sid in part_ids] for nm in names]
            r0 = [col[0] for col in regs]
            for nm, col in zip(names, regs, strict=True):
                for sid, r in zip(part_ids, col, strict=True):
                    if (r.address, r.size, r.encoding) != (col[0].address, col[0].size, col[0].encoding):
                        raise ValueError(f"bulk read: register {nm} is at a different address/size/"
                                         f"encoding on device {part_ids[0]} and {sid}; use one part per model")
            start = min(r.address for r in r0)
            end = max(r.address + r.size for r in r0)
            part_rows = [rows.setdefault((nm, r.size, r.encoding), len(rows)) for nm, r in zip(names, r0, strict=True)]
            layout.append((part_rows, [r.address - start for r in r0], r0, regs))
            for sid in part_ids:
                starts.append(start)
                lengths.append(end - start)
                room_after.append(bus.table(sid).size - end)
                room_before.append(start)
        # request variants (see SyncReader): as many as every device has room for, after its
        # block or, where its table ends there, before it
        room = [max(a, b) for a, b in zip(room_after, room_before, strict=True)]
        ntags = max(1, min(STALE_TAGS, min(room) + 1))
        shift = np.zeros((ntags, n), dtype=np.intp)
        for v in range(ntags):
            for i in range(n):
                shift[v, i] = max(0, v - room_after[i])       # bytes asked in front of the block
        self.lengths = lengths
        self.ntags = ntags
        nrows = len(rows)
        offsets = np.full((nrows, n), -1, dtype=np.intc)
        zero = np.zeros((nrows, n), dtype=np.int64)
        scale = np.ones((nrows, n))
        size, enc = [0] * nrows, [0] * nrows
        slot = 0
        max_rate = np.zeros(n)
        self.parts_spec = []
        for (names, part_ids, plaus), (part_rows, offs, r0, regs) in zip(parts, layout, strict=True):
            for k, row in enumerate(part_rows):
                size[row], enc[row] = r0[k].size, _ENC[r0[k].encoding]
                for j in range(len(part_ids)):
                    offsets[row, slot + j] = offs[k]
                    zero[row, slot + j] = regs[k][j].zero_raw
                    scale[row, slot + j] = regs[k][j].scale
            if plaus and "present_position" in names:
                rates = [_max_speed(bus, sid) for sid in part_ids]
                if all(x is not None for x in rates):     # a model without datasheet figures: no check
                    max_rate[slot:slot + len(part_ids)] = rates
            self.parts_spec.append((names, part_ids, slot, part_rows))
            slot += len(part_ids)
        pos = [rows[k] for k in rows if k[0] == "present_position"]
        pos_field = pos[0] if len(pos) == 1 and max_rate.any() else -1
        fields = [(offsets[r], size[r], enc[r], zero[r], scale[r]) for r in range(nrows)]
        tx_parts, splits, off = [], [], 0
        for v in range(ntags):
            items = [(sid, starts[i] - shift[v, i], lengths[i] + v) for i, sid in enumerate(ids)]
            p = _codec.bulk_read(2, items)
            reply = sum(_STATUS_BYTES + length for _, _, length in items)
            t = bus._timeout(len(p), reply, n, ids)
            tx_parts.append(p)
            splits.append((off, len(p), 0, n, t))
            off += len(p)
        self.timeout_s = max(s[4] for s in splits)
        self._io = _busio.GroupIO(bus.fd, 2, ids, b"".join(tx_parts), splits, max(lengths), fields,
                                  bus.on_after_write, bus._dirty, False, ntags, list(range(ntags)),
                                  pos_field, max_rate if pos_field >= 0 else None, PLAUSIBLE_ABS_TOL_RAD,
                                  slot_len=lengths, slot_shift=shift)
        self._io.set_slots(ids)
        bus._ok_sources.append((self.ids, self._io.ok_counts, self._io.stale_counts))
        self.bad = 0
        self.parts = [BulkPart(self, names, part_ids, first, part_rows)
                      for names, part_ids, first, part_rows in self.parts_spec]

    @property
    def stale_counts(self):
        """Late replies discarded per device since the last ``Bus.health`` access, int64 (n,)."""
        return self._io.stale_counts

    @property
    def request_lengths(self) -> list[set[int]]:
        """Per device (request order), the byte counts its request variants ask."""
        return [set(range(n, n + self.ntags)) for n in self.lengths]

    def follow(self, other: BulkReader) -> None:
        """Continue ``other``'s request-variant rotation (see
        :meth:`SyncReader.follow <firmware_bridge.sync.SyncReader.follow>`)."""
        self._io.follow(other._io)

    def read(self) -> bool:
        """One bulk read; True when every device answered well (else see each part's ``check``).

        Raises
        ------
        PortError
            The port failed (unplugged adapter).
        """
        bus = self.bus
        if bus._pending is not None:
            bus.settle()
        return self._result(self._io.read())

    def request(self) -> None:
        """First half of :meth:`read`: send the BULK READ, return without waiting (read-ahead;
        see :meth:`SyncReader.request <firmware_bridge.sync.SyncReader.request>`)."""
        bus = self.bus
        if bus._pending is not None:
            bus.settle()
        self._io.request()
        bus._pending = self

    def collect(self) -> bool:
        """Second half of :meth:`read`: the last :meth:`request`'s replies (waiting up to its
        reply timeout, counted from the request); returns and raises as :meth:`read`."""
        if self.bus._pending is self:
            self.bus._pending = None
        return self._result(self._io.collect())

    @property
    def requested(self) -> bool:
        """True between :meth:`request` and :meth:`collect`."""
        return self._io.requested != 0

    def poll(self, until: float) -> bool:
        """See :meth:`SyncReader.poll <firmware_bridge.sync.SyncReader.poll>`."""
        return self._io.poll(until) != 0

    def _result(self, bad: int) -> bool:
        if bad < 0:
            self.bad = len(self.ids)
            raise PortError(f"{self.bus.port}: the port failed during a bulk read (unplugged?)")
        self.bad = bad
        return bad == 0
