"""``loop.read_ahead`` in the daemon: each tick's read goes out right after the previous
tick's goal write and is collected when the tick begins.

* lockstep (in-process virtual bus on a real pty): the quadruped with ``wbc`` stands as it
  does without read-ahead (the state is one period older), runs are bit-identical, the bus
  sees write -> read request -> (next tick) write ..., and no request is left outstanding
  when the loop stops, also through the fault path;
* the ``servoloop virtual-bus`` process behind a pty, on the wall clock: the quadruped
  with ``wbc`` stands for 3 s, no fault.
"""

from __future__ import annotations

import json
import math
import signal
import subprocess
from dataclasses import replace

import numpy as np
import pytest

from servoloop.controller.clock import MonotonicClock
from servoloop.controller.config import ControllerConfig, builtin_config
from servoloop.controller.daemon import Daemon
from servoloop.controller.runtime import VirtualBusProcess, make_bus
from servoloop.controller.telemetry_format import read_telemetry
from servoloop.firmware_bridge import protocol as P
from tests.hil.test_daemon_lockstep import LockstepRig, short_config
from tests.hil.test_daemon_wbc import run_daemon

pytestmark = pytest.mark.hil


def _quadruped_wbc(read_ahead: bool):
    cfg = builtin_config("quadruped")
    return replace(cfg, controller=ControllerConfig(name="wbc", params={}),
                   loop=replace(cfg.loop, read_ahead=read_ahead))


def test_wbc_stands_the_quadruped_with_read_ahead_as_without():
    plants = {}
    out = {}
    for ahead in (False, True):
        p = []
        summary, s, status, _ = run_daemon(_quadruped_wbc(ahead), 2.0, p)
        plants[ahead], out[ahead] = p[0].base_state(), (summary, s, status)
    for ahead in (False, True):
        summary, s, status = out[ahead]
        assert summary["state"] == "done", summary["faults"]
        assert summary["read_ahead"] is ahead
        assert summary["bus_errors"] == {} and summary["missed"] == 0
        assert status["running"] and status["id_failures"] == 0
        assert s[:, 2].min() > 0.2 and s[:, 3].max() < 3.0      # on its legs, level, all along
        assert np.ptp(s[-10:, 2]) < 0.003                        # and settled
    # the same stance: one period older state moves it by a few mm at most
    a, b = plants[False], plants[True]
    assert np.allclose(a["base_position_in_world"], b["base_position_in_world"], atol=0.005)
    assert np.allclose(a["base_rpy"], b["base_rpy"], atol=0.01)
    # and the run is not the same one: read-ahead did change what the loop saw
    assert not np.array_equal(out[False][1], out[True][1])


def _arm(**loop):
    cfg = short_config("arm", loop=dict(read_ahead=True, **loop))
    return replace(cfg, safety=replace(cfg.safety, monitor_every=7))


def test_lockstep_runs_with_read_ahead_are_bit_identical(tmp_path):
    rows = []
    for k in range(2):
        rig = LockstepRig(_arm(), telemetry_path=tmp_path / f"t{k}.sltl")
        try:
            summary = rig.daemon.run(0.3)
        finally:
            rig.close()
        assert summary["state"] == "done" and summary["read_ahead"] is True
        t = read_telemetry(tmp_path / f"t{k}.sltl")
        rows.append(np.stack([t.column(c) for c in t.columns if c.startswith(("q.", "goal."))]))
    assert rows[0].shape[1] > 250
    assert np.array_equal(rows[0], rows[1])


def _bulk_lengths(pkt) -> tuple[int, ...]:
    """Byte counts a BULK READ asks of each device (params: id, address, length per device)."""
    p = bytes(pkt.params)
    return tuple(p[k + 3] | (p[k + 4] << 8) for k in range(0, len(p), 5))


def test_the_read_request_follows_the_goal_write_and_every_other_transaction():
    """In the run, every tick's bus traffic is the goal write, then the next tick's read
    request: one transaction, also on the monitor's ticks (every 7th), whose request is the
    wider one (present_current 126 .. present_temperature 146: the monitor's registers ride
    along, no SYNC_READ of its own).  Nothing goes out between a request and its collect, and
    the collect itself sends nothing.  The arm mixes two models (XM430: current, XL430:
    load), two sync reads without read-ahead: with it, one BULK READ."""
    rig = LockstepRig(_arm())
    pending_between_ticks = []
    rig.hooks.append(lambda t: pending_between_ticks.append(rig.lock.bus.pending is not None))
    try:
        summary = rig.daemon.run(0.2)
    finally:
        rig.close()
    assert summary["state"] == "done" and summary["bus_errors"] == {}
    assert summary["comm"]["failed_ticks"] == 0
    # between ticks a request is outstanding (not before the first tick's own read)
    assert sum(pending_between_ticks) >= len(pending_between_ticks) - 5
    pkts = [pkt for _t, pkt in rig.instructions()]
    ins = [pkt.instruction for pkt in pkts]
    op = P.Instruction
    first = ins.index(op.SYNC_WRITE, ins.index(op.SYNC_WRITE) + 1)   # the ticks after the first
    tail = ins[first:]
    writes = [k for k, x in enumerate(tail) if x == op.SYNC_WRITE]
    assert len(writes) > 150
    ticks = [tuple(tail[a + 1:b]) for a, b in zip(writes, writes[1:], strict=False)]
    assert set(ticks) == {(op.BULK_READ,)}        # the monitored ticks too: one transaction
    lengths = [_bulk_lengths(pkts[first + a + 1]) for a in writes[:-1]]
    n = len(rig.daemon.cfg.servos)
    # the state block (10 bytes) or the wide one (21), plus the fresh-reply tag's 0..3 bytes
    wide = [k for k, ls in enumerate(lengths) if len(ls) == n and all(21 <= x <= 24 for x in ls)]
    plain = [k for k, ls in enumerate(lengths) if len(ls) == n and all(10 <= x <= 13 for x in ls)]
    assert len(wide) + len(plain) == len(lengths)
    assert len(wide) >= len(lengths) // 7 - 1
    assert set(np.diff(wide)) == {7}             # every 7th tick, as safety.monitor_every says


def test_no_request_is_left_outstanding_after_a_fault():
    """An exception between two ticks (here: from the clock, while the next tick's read
    request is on the wire): the fault path drains the request first, then turns every
    servo's torque off (writes that would otherwise collide with the owed replies)."""
    rig = LockstepRig(_arm())
    d = rig.daemon
    bus = rig.lock.bus
    outstanding = []

    def boom(t):
        if t > 0.2:
            outstanding.append(bus.pending is not None)
            raise RuntimeError("clock bug")

    rig.hooks.append(boom)
    try:
        summary = d.run(1.0)
    finally:
        rig.close()
    assert summary["state"] == "fault" and "clock bug" in summary["faults"][0]
    assert outstanding == [True]                 # a request was on the wire at the fault
    assert bus.pending is None
    assert not [w for w in summary["warnings"] if "torque off" in w]
    assert not any(rig.servo(s.id).torque_enabled for s in d.cfg.servos)


def _stop_reading_stats(vb: VirtualBusProcess) -> dict:
    """SIGTERM the virtual bus and return its ``--json`` summary (its counters), {} if it gave none."""
    p = vb.proc
    try:
        p.send_signal(signal.SIGTERM)
        out, _err = p.communicate(timeout=10.0)
    except (OSError, subprocess.TimeoutExpired):
        vb.stop()
        return {}
    lines = out.decode(errors="replace").strip().splitlines()
    try:
        return json.loads(lines[-1]) if lines else {}
    except ValueError:
        return {}


def _where_it_tipped(path) -> dict:
    """From the run's telemetry: the first tick the base estimate left the stance (tilt over
    0.05 rad or height under 0.2 m) and what the loop saw in the 0.2 s before it."""
    t = read_telemetry(path)
    c = {k: t.column(k) for k in ("t_s", "state", "missed", "read_ok", "bus_us", "base.z",
                                  "base.roll", "base.pitch", "base.valid")}
    run = c["state"] == 3
    off = run & ((np.hypot(c["base.roll"], c["base.pitch"]) > 0.05) | (c["base.z"] < 0.2))
    if not off.any():
        return {"tipped": None}
    i = int(np.argmax(off))
    w = slice(max(0, i - 200), i + 1)
    return {"tick": i, "t_s": float(c["t_s"][i]), "run_from_s": float(c["t_s"][np.argmax(run)]),
            "z_roll_pitch": [float(c[k][i]) for k in ("base.z", "base.roll", "base.pitch")],
            "missed_before": float(np.ptp(c["missed"][w])), "failed_reads_before": int((c["read_ok"][w] == 0).sum()),
            "bus_us_max_before": float(np.nanmax(c["bus_us"][w])), "invalid_before": int((c["base.valid"][w] == 0).sum())}


def test_quadruped_wbc_read_ahead_stands_through_the_virtual_bus_process(tmp_path):
    """Wall clock, the ``servoloop virtual-bus`` process on a pty, 1 kHz, 3 s of run.

    SCHED_FIFO for both ends, as ``servoloop run --sched-fifo`` does: without it a loaded
    machine (the full suite, other sessions) starves the loop with or without read-ahead
    (measured: 90 % of the ticks skipped, the robot never stood up).  Telemetry is on, as in
    ``servoloop run``: a failure says where the base left its stance and what the bus and the
    virtual servos counted."""
    cfg = _quadruped_wbc(True)
    # this test judges read-ahead, not the shared machine's timing: late ticks are counted only
    cfg = replace(cfg, safety=replace(cfg.safety, max_consecutive_missed=None),
                  loop=replace(cfg.loop, sched_fifo=True))
    vb = VirtualBusProcess(cfg, extra=["--json"])
    port = vb.start()
    vb.make_realtime(cfg.loop.priority - 1)      # a refusal is only a warning, as in `run`
    tel = tmp_path / "run.sltl"
    try:
        d = Daemon(cfg, make_bus(cfg, port), MonotonicClock(), telemetry_path=tel, socket_path=None)
        summary = d.run(duration_s=3.0)
    finally:
        stats = _stop_reading_stats(vb)
    assert summary["state"] == "done", summary["faults"]
    assert summary["read_ahead"] is True and summary["faults"] == []
    assert summary["ticks"] > 100      # however loaded the machine (late ticks are skipped)
    timing = {k: summary[k] for k in ("ticks", "missed", "missed_by_cause", "realtime", "bus_errors")}
    if summary["missed"] > summary["ticks"]:
        # most deadlines skipped (another SCHED_FIFO process, a saturated machine): the plant
        # ran on without control, as it would without read-ahead; nothing to judge here
        pytest.skip(f"the machine starved the loop: {timing}")
    est = summary["estimate"]
    # short, the numbers that tell the causes apart first (a CI log shows one line of it)
    vbk = ("watchdog_trips", "malformed", "bad_checksum", "physics_slices", "fast_reads", "slow_chunks")
    why = (f"z {est['base_position_in_world'][2]:.3f} rpy {[round(x, 3) for x in est['base_rpy']]}; "
           f"left stance {_where_it_tipped(tel)}; loop watchdog trips {summary['bus_watchdog_trips']} "
           f"{timing}; virtual bus {({k: stats.get(k) for k in vbk})}")
    assert est["valid"], why
    assert est["base_position_in_world"][2] > 0.2, why        # standing
    assert math.hypot(*est["base_rpy"][:2]) < 0.05, why       # level
