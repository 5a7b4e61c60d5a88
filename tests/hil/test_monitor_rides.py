"""The monitor's registers ride in the tick's own read (issue 11): no transaction of its own.

Lockstep daemons on the virtual bus (a real pty):

* the quadruped (XM430 + the OpenCR in one BULK READ): a temperature or over-limit voltage written into a servo's
  control table faults within ``safety.monitor_every`` ticks, with and without
  read-ahead, and the bus never sees a read of the monitor's registers alone;
* the humanoid (AX-18A, Protocol 1.0: one READ per servo): the same fault, one READ per
  servo and tick also on monitor ticks (at 36, the wider block reaching 43);
* runs are bit-identical, monitor columns included.
"""

from __future__ import annotations

import numpy as np
import pytest

from servoloop.controller.telemetry_format import read_telemetry
from servoloop.firmware_bridge import protocol as P
from servoloop.firmware_bridge.control_table import get_table
from tests.hil.test_daemon_lockstep import LockstepRig, fault_row, hook_at, short_config

pytestmark = pytest.mark.hil

EVERY = 10


def _rig(robot: str, read_ahead: bool, tmp_path, **safety) -> LockstepRig:
    cfg = short_config(robot, loop={"read_ahead": read_ahead}, safety={"monitor_every": EVERY, **safety})
    return LockstepRig(cfg, telemetry_path=tmp_path / "t.sltl")


def _record_p1(rig: LockstepRig) -> list:
    """Protocol 1.0 instruction packets the virtual bus receives (the rig parses 2.0 only)."""
    engine = rig.virtual.engine
    feed, stream, out = engine.feed, bytearray(), []

    def recording_feed(data):
        stream.extend(bytes(data))
        while True:
            start = P.find_header(bytes(stream), 1)
            if start < 0:
                break
            del stream[:start]
            try:
                pkt, used = P.parse_packet(bytes(stream), 1, status=False)
            except Exception:  # noqa: BLE001 - a 2.0 packet or a partial one: skip a byte
                del stream[:1]
                continue
            if pkt is None:
                break
            out.append(pkt)
            del stream[:used]
        return feed(data)

    engine.feed = recording_feed
    return out


def _set(rig: LockstepRig, servo_id: int, model: str, register: str, raw: int) -> None:
    reg = get_table(model)[register]
    rig.servo(servo_id).mem[reg.address:reg.address + reg.size] = raw.to_bytes(reg.size, "little")


def _run_to_fault(rig: LockstepRig, servo_id: int, model: str, register: str, raw: int, t_at: float = 0.1):
    hook_at(rig, t_at, lambda: _set(rig, servo_id, model, register, raw))
    try:
        return rig.daemon.run(1.0)
    finally:
        rig.close()


def _reads_per_tick(rig: LockstepRig) -> list[tuple]:
    """Per tick after the first, the read instructions (op, start address) between two goal
    writes (Protocol 2.0 packets)."""
    pkts = [pkt for _t, pkt in rig.instructions()]
    op = P.Instruction
    writes = [k for k, p in enumerate(pkts) if p.instruction == op.SYNC_WRITE]
    out = []
    for a, b in zip(writes[1:], writes[2:], strict=False):
        out.append(tuple((p.instruction, bytes(p.params)[0] | (bytes(p.params)[1] << 8))
                         for p in pkts[a + 1:b] if p.instruction != op.BULK_READ)
                   + tuple(p.instruction for p in pkts[a + 1:b] if p.instruction == op.BULK_READ))
    return out


@pytest.mark.parametrize("read_ahead", [True, False])
def test_quadruped_temperature_faults_within_monitor_every_ticks_without_a_monitor_read(
        tmp_path, read_ahead):
    rig = _rig("quadruped", read_ahead, tmp_path, max_temperature_c=70.0)
    s = _run_to_fault(rig, 7, "XM430-W350", "present_temperature", 80)
    assert rig.daemon.loop.monitor.rides
    assert s["state"] == "fault" and s["fault_details"][0]["kind"] == "temperature"
    assert s["fault_details"][0]["servo"] == 7 and "servo 7" in s["faults"][0]
    assert s["bus_errors"] == {} and s["comm"]["failed_ticks"] == 0
    tel = read_telemetry(tmp_path / "t.sltl")
    heated = int(round(0.1 * rig.daemon.cfg.loop.rate_hz))
    assert 0 <= fault_row(tel) - heated <= EVERY
    temp = tel.column("temperature.rf_hip_abad")
    assert temp[-1] == 80.0 and np.all(temp[EVERY:-EVERY - 1] < 70.0)   # held between monitor ticks
    ticks = _reads_per_tick(rig)
    assert len(ticks) > 90
    # the servos and the IMU board: one BULK READ per tick (read-ahead or not), monitor ticks too
    assert set(ticks) == {(P.Instruction.BULK_READ,)}


def test_over_limit_voltage_faults_on_the_monitor_tick(tmp_path):
    rig = _rig("quadruped", True, tmp_path, max_voltage_v=16.0)
    s = _run_to_fault(rig, 3, "XM430-W350", "present_input_voltage", 190)    # 19.0 V
    assert s["state"] == "fault" and s["fault_details"][0]["kind"] == "voltage"
    assert s["fault_details"][0]["servo"] == 3 and "above" in s["faults"][0]
    tel = read_telemetry(tmp_path / "t.sltl")
    assert 0 <= fault_row(tel) - int(round(0.1 * rig.daemon.cfg.loop.rate_hz)) <= EVERY


def test_protocol1_humanoid_temperature_rides_in_the_per_servo_reads(tmp_path):
    rig = _rig("humanoid", False, tmp_path, max_temperature_c=70.0)
    p1 = _record_p1(rig)
    s = _run_to_fault(rig, 4, "AX-18A", "present_temperature", 85, t_at=0.5)
    assert rig.daemon.loop.monitor.rides
    assert s["state"] == "fault" and s["fault_details"][0]["kind"] == "temperature"
    assert s["fault_details"][0]["servo"] == 4
    tel = read_telemetry(tmp_path / "t.sltl")
    heated = int(round(0.5 * rig.daemon.cfg.loop.rate_hz))
    assert 0 <= fault_row(tel) - heated <= EVERY
    n = len(rig.daemon.cfg.servos)
    first = next(k for k, p in enumerate(p1) if p.instruction == P.Instruction.SYNC_WRITE)
    reads = [p for p in p1[first:] if p.instruction == P.Instruction.READ]   # the run's reads
    assert {bytes(p.params)[0] for p in reads} == {36}      # never a READ of 42/43 alone
    lengths = [bytes(p.params)[1] for p in reads]
    # a tick reads n servos: 6 bytes (+ the fresh-reply tag's 0..3), the monitor's ticks 10..13
    wide = sum(1 for x in lengths if x >= 10)
    assert set(lengths) <= set(range(6, 14))
    ticks = fault_row(tel)
    assert abs(len(reads) - n * ticks) <= 2 * n       # one READ per servo and tick, no more
    assert abs(wide - n * (ticks // EVERY)) <= n


@pytest.mark.parametrize("robot, read_ahead", [("humanoid", False), ("quadruped", True)])
def test_lockstep_runs_with_riding_monitor_are_bit_identical(tmp_path, robot, read_ahead):
    rows = []
    for k in range(2):
        d = tmp_path / str(k)
        d.mkdir()
        rig = _rig(robot, read_ahead, d)
        try:
            s = rig.daemon.run(300 / rig.daemon.cfg.loop.rate_hz)
        finally:
            rig.close()
        assert s["state"] == "done" and rig.daemon.loop.monitor.rides
        tel = read_telemetry(d / "t.sltl")
        cols = [c for c in tel.columns if c.startswith(("q.", "goal.", "temperature.", "voltage."))]
        assert any(c.startswith("temperature.") for c in cols)
        rows.append(np.stack([tel.column(c) for c in cols]))
    assert rows[0].shape[1] > 200
    assert np.isfinite(rows[0][:, EVERY:]).all()
    assert np.array_equal(rows[0], rows[1], equal_nan=True)


def test_without_a_twin_read_the_monitor_reads_on_its_own(tmp_path, monkeypatch):
    """The fallback: no wider read whose replies could be told from the usual one's (forced
    here), so the monitor makes its own SYNC READ at 144 (voltage, temperature) on its ticks;
    the fault comes as before."""
    from servoloop.controller.bus_io import JointReader

    monkeypatch.setattr(JointReader, "tells_apart", lambda self, other: False)
    rig = _rig("quadruped", True, tmp_path, max_temperature_c=70.0)
    s = _run_to_fault(rig, 7, "XM430-W350", "present_temperature", 80)
    assert not rig.daemon.loop.monitor.rides and rig.daemon.loop.read.wide is None
    assert s["state"] == "fault" and s["fault_details"][0]["kind"] == "temperature"
    tel = read_telemetry(tmp_path / "t.sltl")
    assert 0 <= fault_row(tel) - int(round(0.1 * rig.daemon.cfg.loop.rate_hz)) <= EVERY
    ticks = _reads_per_tick(rig)
    monitored = ((P.Instruction.SYNC_READ, 144), P.Instruction.BULK_READ)
    assert set(ticks) == {(P.Instruction.BULK_READ,), monitored}
    assert abs(ticks.count(monitored) - len(ticks) / EVERY) <= 1
