"""Per-tick telemetry: a preallocated ring buffer and a background writer thread.

The loop copies each tick into the next row of :class:`TelemetryRing`
(numpy, allocated before the loop; no Python object is kept per tick).
:class:`TelemetryWriter` wakes every ``flush_s`` seconds, copies the new
rows out of the ring and appends them to the file as one self-delimiting
chunk (:mod:`controller.telemetry_format`), so a SIGKILL loses at most the
last ``flush_s`` of data.  Events (state changes, faults) go through a
thread-safe deque and become EVNT chunks.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from pathlib import Path

import numpy as np

from servoloop.controller.telemetry_format import MAGIC, encode_json, encode_zrows, rows_chunk_parts

__all__ = [
    "servo_header",
    "SCALAR_COLUMNS",
    "JOINT_FIELDS",
    "MONITOR_FIELDS",
    "UNITS",
    "BASE_COLUMNS",
    "columns_for",
    "TelemetryRing",
    "TelemetryWriter",
    "TickRecorder",
]

log = logging.getLogger(__name__)

#: compressed telemetry: bytes zlib takes in one go (~0.5 ms of CPU), and the sleep between two
#: pieces. Measured (quadruped, wbc, 1 kHz, 20 s, SCHED_FIFO): one 7-15 ms compression burst per
#: flush cost 130-280 missed ticks (the virtual bus's replies stalled), none at all 16, pieces of
#: 16 kB with 1 ms between 22 (BENCHMARKS.md, "Telemetry and the 1 kHz loop").
_PIECE_BYTES = 16384
_PAUSE_S = 1e-3


def _pause() -> None:
    time.sleep(_PAUSE_S)

#: per-tick scalars; ``late_us`` = wake-up time - deadline, ``cost_us`` = work time (bus waits
#: included), ``bus_us`` = its part spent waiting on the bus; ``missed_<cause>``: missed ticks so
#: far per cause (controller.loop_stats), adding up to ``missed`` (files written before they
#: existed lack the last four: readers must cope)
SCALAR_COLUMNS = ("tick", "t_s", "late_us", "period_us", "cost_us", "state", "missed",
                  "comm_errors", "read_ok", "bus_us", "missed_compute", "missed_bus", "missed_wakeup",
                  "stale_reads")
#: per-joint fields, each a block of n columns ``FIELD.JOINT``; the last three are the
#: servo's, held from the monitor stage's last read (every ``safety.monitor_every`` ticks)
JOINT_FIELDS = ("q", "dq", "current", "goal", "tau_ff", "temperature", "voltage", "hw_error")
#: the monitor's fields: files written before they existed lack them (readers must cope)
MONITOR_FIELDS = ("temperature", "voltage", "hw_error")
UNITS = {
    "tick": "", "t_s": "s", "late_us": "us", "period_us": "us", "cost_us": "us",
    "state": "servoloop.controller.lifecycle.State", "missed": "ticks", "comm_errors": "count",
    "read_ok": "bool", "bus_us": "us", "missed_compute": "ticks", "missed_bus": "ticks",
    "missed_wakeup": "ticks", "stale_reads": "ticks", "q": "rad", "dq": "rad/s",
    "current": "A (present_current) or fraction (present_load), joint sign",
    "goal": "rad (joint goal after safety)", "tau_ff": "N*m (feed-forward torque)",
    "temperature": "degC (last monitor read; NaN before it)",
    "voltage": "V (input voltage, last monitor read; NaN before it)",
    "hw_error": "hardware_error_status bits (last monitor read; 0 = none, NaN: not read)",
    "base.x": "m (estimated base position, world; .y, .z alike)",
    "base.roll": "rad (estimated base orientation, ZYX; .pitch, .yaw alike)",
    "base.vx": "m/s (estimated base velocity, world; .vy, .vz alike)",
    "base.wx": "rad/s (base angular velocity, base frame; .wy, .wz alike)",
    "base.valid": "bool (the estimate's inputs were good this tick)",
    "contact": "bool (estimated stance, one column contact.FOOT per foot)",
}
#: the floating base's estimate, after the joint blocks (a robot with an IMU only)
BASE_COLUMNS = ("base.x", "base.y", "base.z", "base.roll", "base.pitch", "base.yaw", "base.vx", "base.vy",
                "base.vz", "base.wx", "base.wy", "base.wz", "base.valid")


def servo_header(cfg, tables) -> dict:
    """HEAD fields that make a log usable without its config: each servo's model, the register
    its ``current`` column comes from, and N*m per unit of that column (``effort_nm_per_unit``:
    the datasheet's stall torque / stall current for ``present_current`` in A, the stall torque
    for ``present_load`` as a fraction; None when unknown).  Torque = column * factor."""
    from servoloop.controller.bus_io import effort_register

    regs, scale = [], []
    for t in tables:
        reg = effort_register(t)
        regs.append(reg)
        k = (t.torque_constant_nm_per_a if reg == "present_current"
             else t.stall_torque_nm if reg == "present_load" else None)
        scale.append(float(k) if k else None)
    return {"servo_models": [s.model for s in cfg.servos], "effort_registers": regs,
            "effort_nm_per_unit": scale}


def columns_for(joint_names) -> list[str]:
    """Column names: the scalars, then ``FIELD.JOINT`` blocks in :data:`JOINT_FIELDS` order."""
    cols = list(SCALAR_COLUMNS)
    for f in JOINT_FIELDS:
        cols.extend(f"{f}.{j}" for j in joint_names)
    return cols


class TelemetryRing:
    """Fixed-size ring of float64 rows, filled by the loop thread.

    Parameters
    ----------
    joint_names : sequence of str
    capacity : int, rows (ticks) held; the writer must drain faster than this.
    extra_columns : names of columns after the joint blocks (the base estimate's)

    Attributes
    ----------
    buf : (capacity, ncols) float64
    head : int, rows committed so far (the writer reads rows < head)
    col : dict, column name -> index; ``joint_slice[field]`` -> slice of the n columns
    """

    def __init__(self, joint_names, capacity: int, extra_columns=()) -> None:
        if capacity < 2:
            raise ValueError(f"TelemetryRing capacity must be >= 2, got {capacity}")
        self.columns = columns_for(joint_names) + list(extra_columns)
        self.n = len(joint_names)
        self.capacity = int(capacity)
        self.buf = np.full((self.capacity, len(self.columns)), np.nan)
        self.head = 0
        self.col = {c: i for i, c in enumerate(self.columns)}
        ns = len(SCALAR_COLUMNS)
        self.joint_slice = {
            f: slice(ns + k * self.n, ns + (k + 1) * self.n) for k, f in enumerate(JOINT_FIELDS)
        }
        end = ns + len(JOINT_FIELDS) * self.n
        self.extra_slice = slice(end, end + len(extra_columns))

    def row(self) -> np.ndarray:
        """The row the current tick fills (a view; commit() publishes it)."""
        return self.buf[self.head % self.capacity]

    def commit(self) -> None:
        self.head += 1

    def last(self, count: int) -> np.ndarray:
        """Copy of the last ``count`` committed rows, oldest first."""
        count = min(count, self.head, self.capacity)
        idx = (np.arange(self.head - count, self.head)) % self.capacity
        return self.buf[idx]


class TickRecorder:
    """The record stage: copies one tick into the next ring row (no allocation).

    Parameters
    ----------
    ring : TelemetryRing
    position, velocity, current, goal, effort : (n,) arrays the loop fills
        (``q``, ``dq``, ``current``, ``goal`` and ``tau_ff`` columns)
    temperature, voltage, hw_error : (n,) arrays the monitor stage fills (degC, V,
        hardware_error_status bits), or None (those columns stay NaN)
    extra : array of the ring's extra columns (the base estimate), or None
    """

    def __init__(self, ring: TelemetryRing, position, velocity, current, goal, effort,
                 temperature=None, voltage=None, hw_error=None, extra=None) -> None:
        self.ring = ring
        sl = ring.joint_slice
        blocks = [(sl["q"], position), (sl["dq"], velocity), (sl["current"], current),
                  (sl["goal"], goal), (sl["tau_ff"], effort)]
        for name, values in (("temperature", temperature), ("voltage", voltage), ("hw_error", hw_error)):
            if values is not None:
                blocks.append((sl[name], values))
        if extra is not None:
            blocks.append((ring.extra_slice, extra))
        self._blocks = tuple(blocks)

    def run(self, tick: int, t_s: float, late_us: float, period_us: float, cost_us: float,
            state: int, missed: int, comm_errors: int, ok: bool, bus_us: float = float("nan"),
            missed_compute: int = 0, missed_bus: int = 0, missed_wakeup: int = 0,
            stale_reads: int = 0) -> None:
        """Write the scalars (see :data:`SCALAR_COLUMNS`) and the joint blocks; publish the row."""
        r = self.ring.row()
        r[0] = tick
        r[1] = t_s
        r[2] = late_us
        r[3] = period_us
        r[4] = cost_us
        r[5] = state
        r[6] = missed
        r[7] = comm_errors
        r[8] = 1.0 if ok else 0.0
        r[9] = bus_us
        r[10] = missed_compute
        r[11] = missed_bus
        r[12] = missed_wakeup
        r[13] = stale_reads
        for sl, values in self._blocks:
            r[sl] = values
        self.ring.commit()


class TelemetryWriter:
    """Background thread appending ring rows and events to a ``.sltl`` file.

    Parameters
    ----------
    path : path-like, the file (created or truncated)
    ring : TelemetryRing
    header : dict, extra HEAD fields (robot, rate_hz, ...)
    flush_s : float, seconds between flushes
    max_mb : float or None, size cap of one file (MB); past it the writer continues in a new part
    max_files : int, parts kept
    compress : bool, rows as compressed ZROW chunks (default) or plain ROWS chunks
    """

    def __init__(self, path, ring: TelemetryRing, header: dict, flush_s: float = 0.25,
                 max_mb: float | None = None, max_files: int = 4, compress: bool = True) -> None:
        self.path = Path(path)
        self.first_path = self.path
        self.max_bytes = None if max_mb is None else int(max_mb * 1e6)
        self.max_files = int(max_files)
        self.part = 1
        self.part_bytes = 0
        self.ring = ring
        self.flush_s = float(flush_s)
        self.header = dict(header)
        self.compress = bool(compress)
        # version 2: ZROW chunks (a version-1 reader would skip them as unknown)
        self.header.update({"version": 2 if self.compress else 1, "columns": ring.columns,
                            "units": UNITS, "created_unix": time.time()})
        self.events: collections.deque = collections.deque()
        # compression in short pieces with a sleep between (see encode_zrows): the periodic
        # flushes paced, the final one (close) at once
        self.piece_bytes = _PIECE_BYTES
        self._pause = _pause
        self.written = 0
        self.lost_rows = 0
        self.bytes_written = 0
        self._stop = threading.Event()
        self._summary: dict | None = None
        self._fd: int | None = None
        self._thread = threading.Thread(target=self._run, name="servoloop-telemetry", daemon=True)
        self.error: str | None = None

    # -- loop-thread side ---------------------------------------------------
    def event(self, kind: str, message: str, tick: int = -1, t_s: float = float("nan"),
              fault: dict | None = None) -> None:
        """Queue an event (thread-safe, cheap): becomes an EVNT chunk at the next flush.

        ``fault`` (a ``Fault.as_dict()``) is kept in the event when the event reports one.
        """
        ev = {"tick": tick, "t_s": t_s, "kind": kind, "message": message}
        if fault is not None:
            ev["fault"] = fault
        self.events.append(ev)

    def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._open_part()
        self._thread.start()

    def _open_part(self) -> None:
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.part_bytes = 0
        head = encode_json(b"HEAD", dict(self.header, part=self.part, first_row=self.written))
        # the header twice: one flipped byte in it must not cost the whole log (the
        # reader skips a chunk that fails its CRC and finds the copy)
        self._write(MAGIC + head + head)

    def part_path(self, k: int) -> Path:
        """File of part ``k`` (1: the path given, k > 1: ``STEM.partK.sltl``)."""
        p = self.first_path
        return p if k == 1 else p.with_name(f"{p.stem}.part{k}{p.suffix}")

    def _rotate(self) -> None:
        """Past ``max_mb``: close this part, start the next, keep the last ``max_files`` parts."""
        nxt = self.part_path(self.part + 1)
        self._write(encode_json(b"EVNT", {"tick": -1, "t_s": float("nan"), "kind": "telemetry",
                                          "message": f"size cap logging.max_mb reached: continued in {nxt}"}))
        os.close(self._fd)
        self.part += 1
        self.path = nxt
        self._open_part()
        old = self.part - self.max_files
        if old >= 1:
            try:
                self.part_path(old).unlink()
            except OSError:
                pass

    def close(self, summary: dict | None = None) -> None:
        """Flush everything, append the STOP chunk (the summary) and close; never raises."""
        self._summary = summary
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10.0)
        self._pause = None
        if self._fd is not None:
            try:
                self.flush()
                if summary is not None:
                    self._write(encode_json(b"STOP", summary))
                os.fsync(self._fd)
            except OSError as exc:
                log.error("telemetry %s: final flush failed: %s", self.path, exc)
            finally:
                os.close(self._fd)
                self._fd = None

    # -- writer-thread side -------------------------------------------------
    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        self.bytes_written += len(data)
        self.part_bytes += len(data)

    def _writev(self, parts: list) -> None:
        total = sum(len(p) for p in parts)
        n = os.writev(self._fd, parts)
        if n < total:  # a short write (signal, full disk): finish the chunk, then go on
            view = memoryview(b"".join(bytes(p) for p in parts)[n:])
            while view:
                view = view[os.write(self._fd, view):]
        self.bytes_written += total
        self.part_bytes += total

    def _run(self) -> None:
        while not self._stop.wait(self.flush_s):
            try:
                self.flush()
            except OSError as exc:  # disk full: keep the loop running, say so once
                if self.error is None:
                    self.error = f"telemetry write to {self.path} failed: {exc}"
                    log.error(self.error)

    def flush(self) -> None:
        """Write pending events, then the rows committed since the last flush."""
        while self.events:
            self._write(encode_json(b"EVNT", self.events.popleft()))
        ring = self.ring
        head = ring.head
        cap = ring.capacity
        if head - self.written > cap - 1:
            # the loop lapped us: those rows are gone; keep a margin from the writer's head
            skip = head - self.written - cap // 2
            self.lost_rows += skip
            self._write(encode_json(b"EVNT", {"tick": -1, "t_s": float("nan"), "kind": "telemetry",
                                              "message": f"ring overrun: {skip} rows lost"}))
            self.written += skip
        while self.written < head:
            i0 = self.written % cap
            count = min(head - self.written, cap - i0)
            if self.max_bytes is not None and self.part_bytes >= self.max_bytes:
                self._rotate()  # before rows, not after: the last part is never empty
            if self.compress:
                self._write(encode_zrows(self.written, ring.buf[i0:i0 + count],
                                         piece_bytes=self.piece_bytes, pause=self._pause))
            else:
                self._writev(rows_chunk_parts(self.written, ring.buf[i0:i0 + count]))
            self.written += count
