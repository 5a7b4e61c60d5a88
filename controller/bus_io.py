"""Group reads over servos of mixed models, in the config's servo order.

``Bus.sync_reader`` needs every servo of a reader to have the same register
layout; a robot mixing e.g. XM430 (present_current, A) and XL430
(present_load, fraction) gets one reader per model here, merged into (n,)
arrays in config order.  With one model (the usual case) the arrays are the
bus reader's own, with no copy per tick.
"""

from __future__ import annotations

import numpy as np

from servoloop.firmware_bridge.errors import (
    BridgeError,
    BusTimeoutError,
    ChecksumError,
    HardwareErrorStatus,
    MalformedPacketError,
    PortError,
    ServoStatusError,
)

__all__ = ["JointReader", "PartSwitch", "effort_register", "error_kind", "BusErrorCounts"]

#: bus error class -> its key in the summary's ``bus_errors`` (most specific first)
ERROR_KINDS = (
    (BusTimeoutError, "timeout"),
    (ChecksumError, "checksum"),
    (MalformedPacketError, "malformed"),
    (HardwareErrorStatus, "hardware_error"),
    (ServoStatusError, "status"),
    (PortError, "port"),
)


def error_kind(exc: BaseException) -> str:
    """Short name of a bus error, the key of ``bus_errors`` in the summary (``other`` if unknown)."""
    for cls, kind in ERROR_KINDS:
        if isinstance(exc, cls):
            return kind
    return "other"


class BusErrorCounts(dict):
    """Bus errors per kind (:func:`error_kind`), one count per failed servo of a group read."""

    def count(self, exc: BaseException) -> None:
        """Count ``exc``, or each of its ``failures`` when it reports a group read."""
        failures = getattr(exc, "failures", None) or {}
        for e in (failures.values() if failures else (exc,)):
            k = error_kind(e)
            self[k] = self.get(k, 0) + 1


def effort_register(table) -> str | None:
    """The register a servo reports its effort in: present_current, else present_load, else None."""
    for name in ("present_current", "present_load"):
        if name in table.registers:
            return name
    return None


def _past(twin, bus, regs, ids) -> int:
    """Bytes a sync read of ``regs`` asks at least so that its request lengths differ from
    every variant of ``twin`` (0: the same block, or already longer than all of them);
    never past the end of a servo's control table (the variants then shrink)."""
    start = min(bus.register(ids[0], r).address for r in regs)
    end = max(bus.register(ids[0], r).address + bus.register(ids[0], r).size for r in regs)
    if (start, end - start) == (twin.address, twin.length) or start != twin.address:
        return 0
    want = twin.length + twin.ntags
    room = min(bus.table(sid).size for sid in ids) - start
    return min(want, room) if end - start < want else 0


class JointReader:
    """One logical group read of ``names`` (+ ``"effort"``) from every configured servo.

    Parameters
    ----------
    bus : firmware_bridge.bus.Bus (open)
    ids : sequence of int, servo ids in config order
    tables : sequence of ControlTable, same order
    names : registers to read from every servo
    effort : also read each servo's effort register into ``values["effort"]``
    free_turning : ids of servos turning continuously (velocity / wheel mode): their own
        group, read without the position plausibility check (their Present Position wraps)
    devices : sequence of (names, ids), other devices (an IMU board) to read in the same
        transaction: on Protocol 2.0 (every servo and device) one BULK READ carries the
        servos and them (:class:`~firmware_bridge.bulk.BulkReader`), and
        :attr:`device_parts` are their shares (values, ``check()``); otherwise (a
        Protocol 1.0 or mixed bus) :attr:`device_parts` is empty: read them on their own
    one_transaction : on Protocol 2.0, also servos of several models (several sync reads)
        are read in one BULK READ, so :meth:`request` / :meth:`collect` can split the read
    twin_of : JointReader or None, a reader of fewer registers from the same servos (and
        devices) used in turn with this one: each sync read asks enough bytes more than
        the twin's that no request variant of the one asks a length of the other's
        (:meth:`tells_apart`); see :meth:`follow`

    Attributes
    ----------
    values : dict name -> float64 (n,), SI, config order; NaN where a read failed
    effort_units : list of str, per servo (``"A"`` or ``"ratio"``), when ``effort``
    bulk : BulkReader or None, the one transaction when ``devices`` joined it
    """

    def __init__(self, bus, ids, tables, names, effort: bool = False, free_turning=(),
                 devices=(), one_transaction: bool = False, twin_of: JointReader | None = None) -> None:
        self.bus = bus
        self.ids = list(ids)
        n = len(self.ids)
        self.names = list(names)
        groups: dict[tuple, list[int]] = {}
        free = set(free_turning)
        for i, t in enumerate(tables):
            eff = effort_register(t) if effort else None
            groups.setdefault((t.name, eff, self.ids[i] in free), []).append(i)
        self.groups = []
        specs = [(self.names + ([eff] if eff else []), [self.ids[i] for i in idx], not turning)
                 for (_model, eff, turning), idx in groups.items()]
        devices = [(list(d[0]), list(d[1])) for d in devices]
        every = self.ids + [sid for _, dev_ids in devices for sid in dev_ids]
        self.bulk, self.device_parts = None, []
        if (devices or (one_transaction and len(specs) > 1)) and all(
                bus.protocol_of(sid) == 2 for sid in every):
            from servoloop.firmware_bridge.bulk import BulkReader

            # one transaction for servos and devices: one round trip per tick, not two
            self.bulk = BulkReader(bus, specs + [(n, d, False) for n, d in devices])
            readers = self.bulk.parts[:len(specs)]
            self.device_parts = self.bulk.parts[len(specs):]
        elif twin_of is not None:
            from servoloop.firmware_bridge.sync import SyncReader

            readers = [SyncReader(bus, regs, sids, plausibility=plaus, min_length=_past(twin[0], bus, regs, sids))
                       for (regs, sids, plaus), twin in zip(specs, twin_of.groups, strict=True)]
        else:
            readers = [bus.sync_reader(regs, ids=sids, plausibility=plaus) for regs, sids, plaus in specs]
        for reader, ((_model, eff, _turning), idx) in zip(readers, groups.items(), strict=True):
            self.groups.append((reader, np.array(idx, dtype=np.intp), eff))
        self.effort_units = []
        if effort:
            self.effort_units = [
                (t.registers[effort_register(t)].unit if effort_register(t) else "") for t in tables
            ]
        single = len(self.groups) == 1 and list(self.groups[0][1]) == list(range(n))
        self._copy = not single
        if single:
            reader, _, eff = self.groups[0]
            self.values = {name: reader.values[name] for name in self.names}
            self.values["effort"] = reader.values[eff] if eff else np.full(n, np.nan)
        else:
            self.values = {name: np.full(n, np.nan) for name in self.names}
            self.values["effort"] = np.full(n, np.nan)

    def _transactions(self) -> list:
        return [self.bulk] if self.bulk is not None else [reader for reader, _, _ in self.groups]

    def tells_apart(self, other: JointReader) -> bool:
        """True when every reply of this reader can be told from ``other``'s: for each servo
        (and device) the two readers' request variants ask either the same lengths (the same
        bytes: :meth:`follow` keeps them apart as one reader's variants) or disjoint ones."""
        mine, theirs = self._transactions(), other._transactions()
        if len(mine) != len(theirs):
            return False
        for a, b in zip(mine, theirs, strict=True):
            if getattr(a, "ids", None) != getattr(b, "ids", None):
                return False
            for la, lb in zip(a.request_lengths, b.request_lengths, strict=True):
                if la != lb and la & lb:
                    return False
        return True

    def follow(self, other: JointReader) -> None:
        """Continue ``other``'s request-variant rotation before this reader's next request
        (readers of the same servos used in turn, :meth:`tells_apart`)."""
        for a, b in zip(self._transactions(), other._transactions(), strict=True):
            a.follow(b)

    @property
    def exchanges(self) -> int:
        """Write + reply exchanges one read takes (1: :meth:`request` / :meth:`collect` apply)."""
        if self.bulk is not None:
            return 1
        return sum(reader.exchanges for reader, _, _ in self.groups)

    @property
    def requested(self) -> bool:
        """True between :meth:`request` and :meth:`collect`."""
        return (self.bulk or self.groups[0][0]).requested

    def request(self) -> None:
        """Send the read's one instruction and return (read-ahead: the replies wait in the
        port's buffer for :meth:`collect`; the bus takes them first if another transaction
        comes before it).

        Raises
        ------
        ValueError
            The read takes more than one exchange (:attr:`exchanges`).
        """
        if self.exchanges != 1:
            raise ValueError(f"a read of servos {self.ids} takes {self.exchanges} bus exchanges; "
                             "only a one-exchange read can be requested ahead")
        (self.bulk or self.groups[0][0]).request()

    def collect(self) -> None:
        """The replies to the last :meth:`request`, raised as :meth:`read` raises them."""
        self.read(collect=True)

    def poll(self, until: float) -> bool:
        """Wait for the last :meth:`request`'s replies until ``until`` (s, CLOCK_MONOTONIC) at
        most: True when all are in (:meth:`collect` takes them without waiting), False when
        some are still owed and the request stays outstanding (``loop.late_read``)."""
        return (self.bulk or self.groups[0][0]).poll(until)

    @property
    def reply_timeout_s(self) -> float:
        """How long the one transaction's replies may take before they count as lost, s."""
        return (self.bulk or self.groups[0][0]).timeout_s

    def read(self, collect: bool = False) -> None:
        """Read every group; on failure raise the first error with ``failures`` of all groups.

        ``collect``: take the replies of the last :meth:`request` instead of reading anew.
        A PortError is raised at once.  Failed servos read NaN.
        """
        first = None
        failures: dict = {}
        bulk = self.bulk
        if bulk is not None:
            # the one transaction; each part then raises its own failures
            if collect:
                bulk.collect()
            else:
                bulk.read()
        for reader, idx, eff in self.groups:
            try:
                if bulk is not None:
                    reader.check()
                elif collect:
                    reader.collect()
                else:
                    reader.read()
            except Exception as exc:
                if isinstance(exc, PortError) or not isinstance(exc, BridgeError):
                    raise
                if first is None:
                    first = exc
                failures.update(getattr(exc, "failures", None) or {})
            if self._copy:
                for name in self.names:
                    self.values[name][idx] = reader.values[name]
                if eff:
                    self.values["effort"][idx] = reader.values[eff]
        if first is not None:
            if len(self.groups) > 1:
                first.failures = failures
                first.failed_ids = tuple(sorted(failures))
            raise first


class PartSwitch:
    """A device's share (:attr:`JointReader.device_parts`) of whichever of two twin reads
    ran this tick, behind one set of arrays (the IMU reader attaches once).

    Parameters
    ----------
    narrow, wide : BulkPart, the device's share of the tick's usual read and of its wider
        twin (the monitor's registers riding along)

    Attributes
    ----------
    values : dict name -> float64 arrays, ``narrow``'s own; after a wide read :meth:`check`
        copies the wide part's values into them (NaN where its read failed)
    wide : bool, set by the read stage: this tick's read was the wide one
    """

    def __init__(self, narrow, wide) -> None:
        self.narrow, self.wide_part = narrow, wide
        self.values = narrow.values
        # (destination, source), made once: a tick copies, never allocates
        self._pairs = tuple((a, wide.values[name]) for name, a in narrow.values.items())
        self.wide = False

    def check(self) -> None:
        """Raise the failures of the part in use (see ``BulkPart.check``), its values in
        :attr:`values` first."""
        if not self.wide:
            self.narrow.check()
            return
        for dst, src in self._pairs:
            np.copyto(dst, src)
        self.wide_part.check()
