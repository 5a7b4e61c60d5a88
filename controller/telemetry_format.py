"""The telemetry file format (``.sltl``): self-delimiting, checksummed chunks.

::

    file   = MAGIC chunk*
    MAGIC  = b"SLTL\\x01\\n"
    chunk  = SYNC(4) kind(4) length(u32 LE) crc32(u32 LE) payload(length bytes)
    SYNC   = b"\\xa5SLC"
    kind   = b"HEAD"  JSON: {"version", "columns", "joint_names", "rate_hz", "robot", ...}
           | b"ROWS"  first_row(u64 LE) nrows(u32 LE) ncols(u32 LE) float64 LE rows
           | b"ZROW"  first_row(u64 LE) nrows(u32 LE) ncols(u32 LE) codec(u32 LE) packed rows
           | b"EVNT"  JSON: {"tick", "t_s", "kind", "message"}
           | b"STOP"  JSON: the run summary (only after a clean end)

ZROW (written since telemetry version 2; the reader takes ROWS and ZROW
alike) holds the same rows compressed: codec 1 = zlib over the byte
planes of the column-major float64 values (byte 0 of every value, then
byte 1, ...).  A column of a tick counter, a held temperature or a slowly
moving joint then has long runs of equal bytes: 5x (an arm moving) to
14x (holding still) smaller than ROWS, where plain zlib of the rows gains
little.

The HEAD chunk is written twice, so one damaged byte in it costs nothing.
A chunk whose length runs past the end of the file while another chunk
follows is damaged, not truncated: the reader resynchronises.  Chunks whose
checksum is right but whose content is not (a crafted or foreign file) are
reported in ``problems`` and skipped; only a file with no usable HEAD is an
error.  Past ``logging.max_mb`` the writer continues in ``NAME.partK.sltl``
(each part a whole file with its header).

Every chunk is written whole with one ``write`` by the telemetry thread, so
a crash or SIGKILL loses only rows not yet flushed (at most
``logging.flush_s``) and at worst leaves a truncated last chunk, which the
reader detects by its length or CRC and reports, keeping everything before.
A damaged chunk in the middle is skipped by searching for the next SYNC.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from servoloop.controller.errors import TelemetryFormatError

__all__ = [
    "MAGIC",
    "SYNC",
    "encode_chunk",
    "encode_rows",
    "rows_chunk_parts",
    "encode_json",
    "encode_zrows",
    "Telemetry",
    "read_telemetry",
]

MAGIC = b"SLTL\x01\n"
SYNC = b"\xa5SLC"
_HDR = struct.Struct("<4s4sII")  # sync, kind, length, crc32
_ROWS = struct.Struct("<QII")  # first_row, nrows, ncols
_ZROWS = struct.Struct("<QIII")  # first_row, nrows, ncols, codec
ZLIB_PLANES = 1  # the one codec so far (see the module docstring)
KINDS = (b"HEAD", b"ROWS", b"EVNT", b"STOP", b"ZROW")
#: largest decompressed ROWS payload accepted (a crafted length must not exhaust memory)
_MAX_ROWS_BYTES = 1 << 31


def encode_chunk(kind: bytes, payload: bytes) -> bytes:
    """One chunk: header (sync, kind, length, CRC-32 of the payload) + payload."""
    if kind not in KINDS:
        raise ValueError(f"telemetry chunk kind {kind!r} is not one of {KINDS}")
    return _HDR.pack(SYNC, kind, len(payload), zlib.crc32(payload)) + payload


def encode_json(kind: bytes, obj: dict) -> bytes:
    """A HEAD / EVNT / STOP chunk carrying ``obj`` as compact JSON."""
    return encode_chunk(kind, json.dumps(obj, separators=(",", ":"), allow_nan=True).encode())


def encode_rows(first_row: int, rows: np.ndarray) -> bytes:
    """A ROWS chunk: ``rows`` (nrows, ncols) float64, row index of the first one."""
    return b"".join(rows_chunk_parts(first_row, rows))


def rows_chunk_parts(first_row: int, rows: np.ndarray) -> list:
    """The ROWS chunk as buffers for one ``os.writev``, without copying the rows.

    ``rows`` is taken as it is when it is C-contiguous little-endian float64
    (a slice of the ring): the telemetry thread then allocates nothing the
    size of the data on each flush.
    """
    rows = np.ascontiguousarray(rows, dtype="<f8")
    nrows, ncols = rows.shape
    body = memoryview(rows).cast("B")
    sub = _ROWS.pack(first_row, nrows, ncols)
    crc = zlib.crc32(body, zlib.crc32(sub))
    return [_HDR.pack(SYNC, b"ROWS", len(sub) + len(body), crc), sub, body]


def encode_zrows(first_row: int, rows: np.ndarray, level: int = 6, piece_bytes: int = 0,
                 pause=None) -> bytes:
    """A ZROW chunk: ``rows`` (nrows, ncols) float64 compressed (codec 1, see the module docstring).

    Runs on the telemetry thread: zlib releases the GIL while it compresses,
    so the loop thread is not held up by it.

    Parameters
    ----------
    piece_bytes : int
        > 0: compress the byte planes ``piece_bytes`` at a time and call
        ``pause()`` between two pieces (one stream, the same chunk).  A
        quarter second of a 12-servo robot is ~250 kB and 7-15 ms of zlib;
        one such burst on the other core stalled the loop's bus replies
        (a virtual machine's vCPUs are not independent), short pieces with
        a sleep between do not (``TelemetryWriter``).
    pause : callable or None
        Called between pieces (e.g. ``time.sleep(0.001)``).
    """
    rows = np.asarray(rows, dtype="<f8")
    nrows, ncols = rows.shape
    # column-major, then byte planes: (ncols*nrows, 8) -> (8, ncols*nrows)
    planes = np.ascontiguousarray(np.ascontiguousarray(rows.T).view(np.uint8).reshape(-1, 8).T)
    if piece_bytes <= 0 or planes.nbytes <= piece_bytes:
        packed = zlib.compress(planes, level)
    else:
        flat = memoryview(planes).cast("B")
        z = zlib.compressobj(level)
        parts = []
        for i in range(0, len(flat), piece_bytes):
            if i and pause is not None:
                pause()
            parts.append(z.compress(flat[i:i + piece_bytes]))
        parts.append(z.flush())
        packed = b"".join(parts)
    return encode_chunk(b"ZROW", _ZROWS.pack(first_row, nrows, ncols, ZLIB_PLANES) + packed)


def _zrows_of(payload: bytes):
    """``(first_row, rows)`` of a ZROW payload, or a message saying why it is not one."""
    if len(payload) < _ZROWS.size:
        return f"ZROW chunk of {len(payload)} bytes is shorter than its {_ZROWS.size}-byte header"
    first, nrows, ncols, codec = _ZROWS.unpack_from(payload, 0)
    if codec != ZLIB_PLANES:
        return f"ZROW chunk has codec {codec}, this reader knows {ZLIB_PLANES}"
    size = 8 * nrows * ncols
    if ncols == 0 or size > _MAX_ROWS_BYTES:
        return f"ZROW chunk says {nrows} x {ncols} values"
    try:
        d = zlib.decompressobj()
        raw = d.decompress(payload[_ZROWS.size:], size)
    except zlib.error as exc:
        return f"ZROW chunk does not decompress ({exc})"
    if len(raw) != size or d.unconsumed_tail:
        return f"ZROW chunk says {nrows} x {ncols} values but holds {len(raw) / 8:g} or more"
    planes = np.frombuffer(raw, dtype=np.uint8).reshape(8, nrows * ncols)
    cols = np.ascontiguousarray(planes.T).view("<f8").reshape(ncols, nrows)
    return first, cols.T


@dataclass
class Telemetry:
    """A decoded telemetry file.

    Attributes
    ----------
    header : dict, the HEAD chunk
    columns : list of str, ncols names
    data : (N, ncols) float64, all rows in file order
    events : list of dict, EVNT chunks in order
    summary : dict or None, the STOP chunk (None after a crash)
    problems : list of str, each damaged or truncated chunk, with its byte offset
    truncated : bool, the file ends inside a chunk
    gaps : int, rows missing between ROWS chunks (ring overruns, damaged chunks)
    """

    header: dict
    columns: list[str]
    data: np.ndarray
    events: list[dict] = field(default_factory=list)
    summary: dict | None = None
    problems: list[str] = field(default_factory=list)
    truncated: bool = False
    gaps: int = 0

    def column(self, name: str) -> np.ndarray:
        """One column (N,) by name; KeyError lists the columns."""
        try:
            return self.data[:, self.columns.index(name)]
        except ValueError:
            raise KeyError(f"no telemetry column {name!r}; columns: {', '.join(self.columns)}") from None


def _rows_of(payload: bytes):
    """``(first_row, rows)`` of a ROWS payload, or a message saying why it is not one."""
    if len(payload) < _ROWS.size:
        return f"ROWS chunk of {len(payload)} bytes is shorter than its {_ROWS.size}-byte header"
    first, nrows, ncols = _ROWS.unpack_from(payload, 0)
    if ncols == 0 or len(payload) - _ROWS.size != 8 * nrows * ncols:
        return (f"ROWS chunk says {nrows} x {ncols} values but holds "
                f"{(len(payload) - _ROWS.size) / 8:g}")
    return first, np.frombuffer(payload, dtype="<f8", offset=_ROWS.size).reshape(nrows, ncols)


def read_telemetry(path: str | Path) -> Telemetry:
    """Decode a ``.sltl`` file, tolerating a truncated last chunk.

    Raises
    ------
    TelemetryFormatError
        Not a telemetry file, or no readable HEAD chunk (names the offset).
    """
    path = str(path)
    try:
        buf = Path(path).read_bytes()
    except OSError as exc:
        raise TelemetryFormatError(f"cannot read: {exc.strerror}", path) from exc
    if not buf.startswith(MAGIC):
        raise TelemetryFormatError("not a servoloop telemetry file (bad magic)", path, 0)
    pos = len(MAGIC)
    header = None
    blocks: list[np.ndarray] = []
    events: list[dict] = []
    summary = None
    problems: list[str] = []
    truncated = False
    next_row = None
    gaps = 0
    end = len(buf)
    while pos < end:
        if end - pos < _HDR.size:
            problems.append(f"byte {pos}: truncated chunk header ({end - pos} of {_HDR.size} bytes)")
            truncated = True
            break
        sync, kind, length, crc = _HDR.unpack_from(buf, pos)
        if sync != SYNC or kind not in KINDS:
            nxt = buf.find(SYNC, pos + 1)
            problems.append(f"byte {pos}: no chunk here; resynchronised at "
                            f"{nxt if nxt >= 0 else 'end of file'}")
            if nxt < 0:
                break
            pos = nxt
            continue
        body_at = pos + _HDR.size
        if body_at + length > end:
            nxt = buf.find(SYNC, pos + 1)
            if nxt >= 0:  # a chunk follows: this one's length field is damaged, not the file cut
                problems.append(f"byte {pos}: {kind.decode()} chunk length {length} runs past the end "
                                f"of the file; resynchronised at {nxt}")
                pos = nxt
                continue
            problems.append(
                f"byte {pos}: truncated last {kind.decode()} chunk ({end - body_at} of {length} bytes)"
            )
            truncated = True
            break
        payload = buf[body_at:body_at + length]
        if zlib.crc32(payload) != crc:
            nxt = buf.find(SYNC, pos + 1)
            problems.append(f"byte {pos}: {kind.decode()} chunk fails its CRC; skipped")
            if nxt < 0:
                break
            pos = nxt
            continue
        at = pos
        pos = body_at + length
        if kind in (b"ROWS", b"ZROW"):
            rows = _rows_of(payload) if kind == b"ROWS" else _zrows_of(payload)
            if isinstance(rows, str):
                problems.append(f"byte {at}: {rows}; skipped")
                continue
            first, rows = rows
            ncols = rows.shape[1]
            if header is not None and ncols != len(header["columns"]):
                problems.append(f"byte {at}: ROWS chunk has {ncols} columns, header {len(header['columns'])}")
                continue
            if next_row is not None and first > next_row:
                gaps += first - next_row
            next_row = first + rows.shape[0]
            blocks.append(rows)
        else:
            try:
                obj = json.loads(payload)
            except ValueError:
                problems.append(f"byte {at}: {kind.decode()} chunk is not JSON; skipped")
                continue
            if not isinstance(obj, dict):
                problems.append(f"byte {at}: {kind.decode()} chunk is not a JSON object; skipped")
                continue
            if kind == b"HEAD":
                cols = obj.get("columns")
                if not (isinstance(cols, list) and cols and all(isinstance(c, str) for c in cols)):
                    problems.append(f"byte {at}: HEAD chunk has no list of column names; skipped")
                    continue
                if header is None:
                    header = obj
                elif obj.get("columns") != header["columns"]:
                    problems.append(f"byte {at}: a second HEAD chunk with other columns; skipped")
            elif kind == b"EVNT":
                events.append(obj)
            else:
                summary = obj
    if header is None:
        raise TelemetryFormatError("no readable HEAD chunk", path, len(MAGIC))
    ncols = len(header["columns"])
    kept = [b for b in blocks if b.shape[1] == ncols]  # rows read before the header: judged now
    if len(kept) < len(blocks):
        problems.append(f"{len(blocks) - len(kept)} ROWS chunks before the header do not have its "
                        f"{ncols} columns; skipped")
    data = np.concatenate(kept) if kept else np.zeros((0, ncols))
    return Telemetry(header, list(header["columns"]), data.astype(float, copy=False),
                     events, summary, problems, truncated, gaps)
