"""Telemetry: chunk format, writer thread, truncated last chunk, damaged chunk, export."""

import csv
import os

import numpy as np
import pytest

from servoloop.controller.errors import TelemetryFormatError
from servoloop.controller.telemetry import TelemetryRing, TelemetryWriter, columns_for
from servoloop.controller.telemetry_format import (
    MAGIC,
    SYNC,
    encode_json,
    encode_rows,
    read_telemetry,
)

JOINTS = ["a", "b"]


def fill(ring, k0, k1):
    for k in range(k0, k1):
        r = ring.row()
        r[:] = k
        r[0] = k
        ring.commit()


def make_file(tmp_path, rows=100, flush=True, summary=True, compress=True):
    ring = TelemetryRing(JOINTS, 64)
    w = TelemetryWriter(tmp_path / "t.sltl", ring, {"robot": "r", "rate_hz": 100.0, "joint_names": JOINTS},
                        flush_s=10.0, compress=compress)
    w.start()
    for k0 in range(0, rows, 20):
        fill(ring, k0, min(rows, k0 + 20))
        w.event("state", f"at {k0}", k0, k0 * 0.01)
        w.flush()
    w.close({"ticks": rows} if summary else None)
    return tmp_path / "t.sltl"


def test_columns_layout():
    cols = columns_for(JOINTS)
    assert cols[:3] == ["tick", "t_s", "late_us"]
    assert "q.a" in cols and "tau_ff.b" in cols
    ring = TelemetryRing(JOINTS, 8)
    assert [cols[i] for i in range(*ring.joint_slice["q"].indices(len(cols)))] == ["q.a", "q.b"]


def test_roundtrip(tmp_path):
    tel = read_telemetry(make_file(tmp_path))
    assert tel.header["robot"] == "r" and tel.columns == columns_for(JOINTS)
    assert tel.data.shape == (100, len(tel.columns))
    np.testing.assert_array_equal(tel.column("tick"), np.arange(100))
    assert [e["message"] for e in tel.events][:2] == ["at 0", "at 20"]
    assert tel.summary == {"ticks": 100}
    assert not tel.truncated and not tel.problems and tel.gaps == 0


def test_truncated_last_chunk_keeps_everything_before(tmp_path):
    p = make_file(tmp_path, summary=False)
    data = p.read_bytes()
    last = data.rfind(SYNC)
    for cut in (last + 5, last + 30, len(data) - 1):
        p.write_bytes(data[:cut])
        tel = read_telemetry(p)
        assert tel.truncated and "truncated" in tel.problems[0]
        assert str(last) in tel.problems[0]  # names the byte offset
        assert tel.data.shape[0] == 80  # the last 20-row chunk is lost, nothing else
        np.testing.assert_array_equal(tel.column("tick"), np.arange(80))


@pytest.mark.parametrize("compress,kind", [(False, b"ROWS"), (True, b"ZROW")])
def test_damaged_middle_chunk_is_skipped_and_reported(tmp_path, compress, kind):
    p = make_file(tmp_path, compress=compress)
    data = bytearray(p.read_bytes())
    # flip a byte inside the second rows chunk's payload
    first_rows = data.find(kind)
    second = data.find(kind, first_rows + 4)
    data[second + 40] ^= 0xFF
    p.write_bytes(bytes(data))
    tel = read_telemetry(p)
    assert any("CRC" in m for m in tel.problems)
    assert tel.data.shape[0] == 80 and tel.gaps == 20
    assert tel.summary == {"ticks": 100}


def test_not_a_telemetry_file(tmp_path):
    p = tmp_path / "x.sltl"
    p.write_bytes(b"hello world")
    with pytest.raises(TelemetryFormatError, match="bad magic"):
        read_telemetry(p)
    p.write_bytes(MAGIC + encode_rows(0, np.zeros((1, 3))))
    with pytest.raises(TelemetryFormatError, match="no readable HEAD"):
        read_telemetry(p)


def test_ring_overrun_is_recorded_not_silent(tmp_path):
    ring = TelemetryRing(JOINTS, 16)
    w = TelemetryWriter(tmp_path / "o.sltl", ring, {"joint_names": JOINTS}, flush_s=10.0)
    w.start()
    fill(ring, 0, 40)  # more than the ring holds before any flush
    w.flush()
    w.close()
    tel = read_telemetry(tmp_path / "o.sltl")
    assert w.lost_rows > 0
    assert any("overrun" in e["message"] for e in tel.events)
    assert tel.data.shape[0] == 40 - w.lost_rows
    np.testing.assert_array_equal(tel.column("tick"), np.arange(w.lost_rows, 40))


def wait_written(w, rows, timeout_s=5.0):
    """Until the writer thread has written ``rows`` rows (or ``timeout_s`` passed)."""
    import time

    deadline = time.monotonic() + timeout_s
    while w.written < rows and time.monotonic() < deadline:
        time.sleep(0.005)


def test_writer_thread_flushes_on_its_own(tmp_path):
    ring = TelemetryRing(JOINTS, 256)
    w = TelemetryWriter(tmp_path / "w.sltl", ring, {"joint_names": JOINTS}, flush_s=0.01)
    w.start()
    fill(ring, 0, 10)
    wait_written(w, 10)
    assert w.written == 10
    # readable while the writer is still running (as after a SIGKILL)
    assert read_telemetry(tmp_path / "w.sltl").data.shape[0] == 10
    w.close()


def test_export_csv_and_mcap(tmp_path):
    from servoloop.controller.log_export import export_csv, export_mcap

    tel = read_telemetry(make_file(tmp_path, rows=40))
    n = export_csv(tel, tmp_path / "out.csv")
    with open(tmp_path / "out.csv") as f:
        rows = list(csv.reader(f))
    assert n == 40 and rows[0] == tel.columns and len(rows) == 41
    assert float(rows[5][0]) == 4.0
    pytest.importorskip("mcap")
    from mcap.reader import make_reader

    m = export_mcap(tel, tmp_path / "out.mcap")
    with open(tmp_path / "out.mcap", "rb") as f:
        topics = [ch.topic for _, ch, _ in make_reader(f).iter_messages()]
    assert m == len(topics) == 40 + len(tel.events)
    assert topics.count("/servoloop/telemetry") == 40
    assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]


def test_plot_writes_png(tmp_path):
    from servoloop.controller.log_plot import plot_telemetry

    tel = read_telemetry(make_file(tmp_path, rows=40))
    out = plot_telemetry(tel, tmp_path / "p.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_encode_json_chunk_is_self_describing():
    c = encode_json(b"EVNT", {"a": 1})
    assert c.startswith(SYNC + b"EVNT")
    with pytest.raises(ValueError):
        encode_json(b"NOPE", {})


def _head_span(buf: bytes) -> tuple[int, int]:
    """(start, end) bytes of the first HEAD chunk."""
    import struct

    start = len(MAGIC)
    _sync, kind, length, _crc = struct.unpack_from("<4s4sII", buf, start)
    assert kind == b"HEAD"
    return start, start + 16 + length


@pytest.mark.parametrize("where", ["payload", "length", "kind"])
def test_one_flipped_byte_in_the_header_loses_nothing(tmp_path, where):
    p = make_file(tmp_path)
    clean = read_telemetry(p)
    buf = bytearray(p.read_bytes())
    start, end = _head_span(bytes(buf))
    at = {"payload": (start + end) // 2, "length": start + 10, "kind": start + 5}[where]
    buf[at] ^= 0x5A
    p.write_bytes(bytes(buf))
    tel = read_telemetry(p)
    assert tel.problems  # reported ...
    assert tel.data.shape == clean.data.shape and np.array_equal(tel.data, clean.data)  # ... nothing lost
    assert tel.summary == {"ticks": 100} and len(tel.events) == len(clean.events)


def test_crafted_chunks_with_valid_checksums_are_problems_not_tracebacks(tmp_path):
    from servoloop.controller.telemetry_format import encode_chunk

    p = make_file(tmp_path)
    good = p.read_bytes()
    crafted = [
        encode_chunk(b"ROWS", b"\x00" * 5),                                   # shorter than its header
        encode_chunk(b"ROWS", (0).to_bytes(8, "little") + (1000).to_bytes(4, "little")
                     + (3).to_bytes(4, "little") + b"\x00" * 16),             # says 3000 values, holds 2
        encode_json(b"EVNT", [1, 2]),                                          # not an object
        encode_json(b"HEAD", {"columns": 7}),                                  # no column names
        encode_json(b"STOP", "x"),
    ]
    p.write_bytes(good + b"".join(crafted))
    tel = read_telemetry(p)
    assert len(tel.problems) == len(crafted) and tel.data.shape[0] == 100
    # a file whose only header is crafted: one clear error naming the file
    bad = tmp_path / "bad.sltl"
    bad.write_bytes(MAGIC + encode_json(b"HEAD", {"columns": "nope"}) + crafted[1])
    with pytest.raises(TelemetryFormatError, match="no readable HEAD"):
        read_telemetry(bad)


def test_size_cap_rotates_into_parts_and_keeps_the_last_ones(tmp_path):
    ring = TelemetryRing(JOINTS, 256)
    row_bytes = 8 * len(ring.columns)
    w = TelemetryWriter(tmp_path / "t.sltl", ring, {"robot": "r", "rate_hz": 100.0, "joint_names": JOINTS},
                        flush_s=10.0, max_mb=200 * row_bytes / 1e6, max_files=2, compress=False)
    w.start()
    for k0 in range(0, 1000, 100):
        fill(ring, k0, k0 + 100)
        w.flush()
    w.close({"ticks": 1000})
    parts = sorted(tmp_path.glob("t*.sltl"))
    assert w.part >= 4 and len(parts) == 2  # capped: only the last max_files parts stay
    assert all(q.stat().st_size < 300 * row_bytes for q in parts)
    last = read_telemetry(w.path)
    assert last.summary == {"ticks": 1000} and last.header["part"] == w.part
    assert last.column("tick")[-1] == 999 and not last.problems
    first_kept = read_telemetry(w.part_path(w.part - 1))
    assert any("continued in" in e["message"] for e in first_kept.events)


def _noisy_rows(n, ncols, seed=1):
    """Rows like a run's: a counter, time, noisy joint signals, NaN gaps, held monitor values."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) * 1e-3
    rows = np.empty((n, ncols))
    rows[:, 0] = np.arange(n)
    rows[:, 1] = t
    for c in range(2, ncols):
        rows[:, c] = np.sin(2 * np.pi * (0.3 + 0.1 * c) * t) + 1e-3 * rng.standard_normal(n)
    rows[5:9, 3] = np.nan
    rows[:, -1] = 41.0  # a held temperature
    return rows


def test_compressed_chunks_read_back_bit_exact_and_smaller(tmp_path):
    from servoloop.controller.telemetry_format import encode_zrows

    rows = _noisy_rows(250, 25)
    z = encode_zrows(7, rows)
    plain = encode_rows(7, rows)
    p = tmp_path / "z.sltl"
    head = encode_json(b"HEAD", {"columns": [f"c{i}" for i in range(25)]})
    p.write_bytes(MAGIC + head + z + encode_rows(257, rows))  # ZROW and ROWS mixed: both read
    tel = read_telemetry(p)
    assert not tel.problems and tel.gaps == 0
    np.testing.assert_array_equal(tel.data[:250], rows)  # NaN where NaN, every bit of the rest
    np.testing.assert_array_equal(tel.data[250:], rows)
    assert len(z) < 0.8 * len(plain)


def test_writer_default_is_compressed_and_old_plain_files_still_read(tmp_path):
    new = read_telemetry(make_file(tmp_path / "n", compress=True))
    old = read_telemetry(make_file(tmp_path / "o", compress=False))
    assert new.header["version"] == 2 and old.header["version"] == 1
    assert b"ZROW" in (tmp_path / "n" / "t.sltl").read_bytes()
    assert b"ROWS" not in (tmp_path / "n" / "t.sltl").read_bytes()
    np.testing.assert_array_equal(new.data, old.data)
    assert new.events == old.events and new.summary == old.summary


def test_crafted_zrow_chunks_are_reported_not_trusted(tmp_path):
    import struct
    import zlib

    from servoloop.controller.telemetry_format import encode_chunk

    head = encode_json(b"HEAD", {"columns": ["a", "b"]})
    bad = [
        encode_chunk(b"ZROW", b"\x00" * 5),                                         # short header
        encode_chunk(b"ZROW", struct.pack("<QIII", 0, 2, 2, 9) + zlib.compress(b"\x00" * 32)),  # codec
        encode_chunk(b"ZROW", struct.pack("<QIII", 0, 2, 2, 1) + b"not zlib"),
        encode_chunk(b"ZROW", struct.pack("<QIII", 0, 4, 2, 1) + zlib.compress(b"\x00" * 32)),  # short
        encode_chunk(b"ZROW", struct.pack("<QIII", 0, 2**31, 2**31, 1) + zlib.compress(b"")),  # huge
    ]
    p = tmp_path / "c.sltl"
    p.write_bytes(MAGIC + head + b"".join(bad))
    tel = read_telemetry(p)
    assert tel.data.shape == (0, 2)
    assert len(tel.problems) == len(bad) and all("ZROW" in m for m in tel.problems)


def test_paced_compression_is_one_chunk_read_back_bit_exact(tmp_path):
    """Compressed in pieces with a pause between (the writer thread's flushes): the same rows,
    one ZROW chunk, the pause called between every two pieces and never after the last."""
    from servoloop.controller.telemetry_format import encode_zrows

    rows = _noisy_rows(250, 25)                  # 50 000 bytes of planes
    pauses = []
    z = encode_zrows(3, rows, piece_bytes=4096, pause=lambda: pauses.append(1))
    assert len(pauses) == -(-rows.nbytes // 4096) - 1
    p = tmp_path / "p.sltl"
    head = encode_json(b"HEAD", {"columns": [f"c{i}" for i in range(25)]})
    p.write_bytes(MAGIC + head + z)
    tel = read_telemetry(p)
    assert not tel.problems and tel.gaps == 0 and tel.data.shape == rows.shape
    np.testing.assert_array_equal(tel.data, rows)
    assert len(z) < 1.05 * len(encode_zrows(3, rows))     # one stream: no worse than one piece


def test_writer_paces_its_periodic_flushes_not_the_last_one(tmp_path, monkeypatch):
    """The background flush sleeps between compression pieces (a long zlib burst on the other
    core stalled the loop's bus replies); close() writes what is left at once."""
    from servoloop.controller import telemetry

    calls = []
    monkeypatch.setattr(telemetry, "_pause", lambda: calls.append(1))
    monkeypatch.setattr(telemetry, "_PIECE_BYTES", 512)
    ring = TelemetryRing(JOINTS, 1024)
    w = TelemetryWriter(tmp_path / "q.sltl", ring, {"joint_names": JOINTS}, flush_s=0.01)
    w.start()
    fill(ring, 0, 400)
    wait_written(w, 400)
    assert w.written == 400 and len(calls) > 0
    n = len(calls)
    w._stop.set()                    # the thread stops before these rows come:
    w._thread.join(timeout=5.0)
    fill(ring, 400, 800)
    w.close()                        # close() flushes them, unpaced
    assert len(calls) == n
    tel = read_telemetry(tmp_path / "q.sltl")
    np.testing.assert_array_equal(tel.column("tick"), np.arange(800))
