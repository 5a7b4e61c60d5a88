"""The bus against servos emulated on a pty's master side (protocol.py), pumped in lockstep.

``on_after_write=servos.pump`` answers inside each write: deterministic,
no threads, no sleeps.  Timeouts still run on the real clock, so a missing
reply costs the computed timeout (a few ms).
"""

import math
import os

import numpy as np
import pytest

from servoloop.firmware_bridge.bus import Bus, ServoSpec, reply_timeout_s
from servoloop.firmware_bridge.errors import (
    BusTimeoutError,
    ChecksumError,
    HardwareErrorStatus,
    ModelMismatchError,
    PortError,
    ServoStatusError,
    UnsafeOperationError,
)
from servoloop.firmware_bridge.latency import read_latency_timer, write_latency_timer
from tests.unit.firmware_bridge.pty_servos import PtyServos

IDS = list(range(1, 13))
NAMES = ["present_position", "present_velocity", "present_current"]


@pytest.fixture
def x12():
    servos = PtyServos({i: "XM430-W350" for i in IDS})
    for i in IDS:
        servos.set_raw(i, "present_position", 2048 + 100 * i)
        servos.set_raw(i, "present_velocity", -i)
        servos.set_raw(i, "present_current", 0xFFFF)  # -1 -> FF FF then FD: needs stuffing
        servos.set_raw(i, "return_delay_time", 0)
    bus = Bus(servos.port, 4_000_000, 2, [ServoSpec(i, "XM430-W350") for i in IDS],
              on_after_write=servos.pump, timeout_margin_s=0.02)
    with bus:
        yield servos, bus
    servos.close()


def test_connect_reports_models_and_latency(x12):
    servos, bus = x12
    rep = bus.connect()
    assert [s["id"] for s in rep.servos] == IDS
    assert all(s["model_number"] == 1020 and s["firmware"] == 45 for s in rep.servos)
    assert rep.latency_timer_ms == "n/a"
    assert bus.return_delay_s[3] == 0.0


def test_connect_model_mismatch_names_id_expected_found():
    servos = PtyServos({1: "XM430-W350", 2: "XL430-W250"})
    bus = Bus(servos.port, 1_000_000, 2, [ServoSpec(1, "XM430-W350"), ServoSpec(2, "XM430-W350")],
              on_after_write=servos.pump, timeout_margin_s=0.02)
    with bus, pytest.raises(ModelMismatchError, match=r"servo 2 .*expected XM430-W350.*found XL430-W250"):
        bus.connect()
    servos.close()


def test_connect_missing_servo_is_a_timeout_naming_it():
    servos = PtyServos({1: "XM430-W350"})
    bus = Bus(servos.port, 1_000_000, 2, [ServoSpec(1, "XM430-W350"), ServoSpec(9, "XM430-W350")],
              on_after_write=servos.pump, timeout_margin_s=0.005)
    with bus, pytest.raises(BusTimeoutError, match="servo 9"):
        bus.connect()
    servos.close()


def test_connect_fixes_return_delay(x12):
    servos, bus = x12
    servos.set_raw(4, "return_delay_time", 250)
    rep = bus.connect(fix_return_delay=True)
    assert rep.servos[3]["return_delay_fixed"] and servos.mem[4][9] == 0


def test_sync_read_values_in_si_and_in_place(x12):
    servos, bus = x12
    r = bus.sync_reader(NAMES)
    pos = r.values["present_position"]
    r.read()
    assert r.values["present_position"] is pos
    np.testing.assert_allclose(pos, [100 * i * 2 * math.pi / 4096 for i in IDS])
    np.testing.assert_allclose(r.values["present_velocity"], [-i * 0.229 * 2 * math.pi / 60 for i in IDS])
    np.testing.assert_allclose(r.values["present_current"], -0.00269)
    # one SYNC READ packet went out, for the 10-byte block 126..135
    assert servos.received[-1] == bytes.fromhex("ffff fd00 fe13 0082 7e00 0a00") + bytes(IDS) + servos.received[-1][-2:]
    assert bus.health[5].ok == 1


def test_sync_write_si_to_raw(x12):
    servos, bus = x12
    w = bus.sync_writer("goal_position")
    goal = np.linspace(-1.0, 1.0, 12)
    w.write(goal)
    for i, g in zip(IDS, goal, strict=True):
        raw = int.from_bytes(servos.mem[i][116:120], "little", signed=True)
        assert raw == round(g / (2 * math.pi / 4096)) + 2048
    with pytest.raises(ValueError, match="goal_position.*slot 3"):
        w.write(np.where(np.arange(12) == 3, np.nan, goal))


def test_group_read_failures_are_nan_and_name_the_servos(x12):
    servos, bus = x12
    r = bus.sync_reader(NAMES)
    servos.drop.add(5)
    servos.corrupt.add(7)
    with pytest.raises((BusTimeoutError, ChecksumError)) as ei:
        r.read()
    assert ei.value.failed_ids == (5, 7)
    assert isinstance(ei.value.failures[5], BusTimeoutError)
    assert isinstance(ei.value.failures[7], ChecksumError)
    pos = r.values["present_position"]
    assert np.isnan(pos[[4, 6]]).all() and np.isfinite(np.delete(pos, [4, 6])).all()
    assert bus.health[5].timeouts == 1 and bus.health[7].checksum_errors == 1
    servos.drop.clear()
    servos.corrupt.clear()
    r.read()
    assert np.isfinite(r.values["present_position"]).all()


def test_garbage_before_replies_is_skipped(x12):
    servos, bus = x12
    servos.garbage = b"\xff\xff\xfd\x00\x07\xff\xff\x00\xfd\xff"
    r = bus.sync_reader(NAMES)
    r.read()
    np.testing.assert_allclose(r.values["present_position"][0], 100 * 2 * math.pi / 4096)
    assert r._io.garbage_bytes > 0


def test_hardware_alert_reads_hardware_error_status(x12):
    servos, bus = x12
    servos.error[2] = 0x80
    servos.set_raw(2, "hardware_error_status", 0b100100)  # overheating + overload
    with pytest.raises(HardwareErrorStatus, match="overheating, overload") as ei:
        bus.read(2, "present_temperature")
    assert ei.value.servo_id == 2 and "alert" in ei.value.bits
    assert bus.health[2].last_hardware_error_status == 0b100100


def test_status_error_bits_decoded(x12):
    servos, bus = x12
    servos.error[3] = 0x07
    with pytest.raises(ServoStatusError, match="access_error") as ei:
        bus.write(3, "id", 9)
    assert not isinstance(ei.value, HardwareErrorStatus)


def test_single_register_io_and_reboot(x12):
    servos, bus = x12
    bus.write(1, "torque_enable", 1)
    assert bus.read_raw(1, "torque_enable") == 1
    bus.write(1, "goal_current", -0.5)
    assert bus.read_raw(1, "goal_current") == round(-0.5 / 0.00269)
    bus.reboot(1)
    assert bus.read_raw(1, "torque_enable") == 0
    assert bus.ping(1) == 1020
    with pytest.raises(UnsafeOperationError):
        bus.factory_reset(1)
    bus.write(1, "goal_velocity", 1.0, reg_write=True)
    assert bus.read_raw(1, "goal_velocity") == 0
    bus.action()
    assert bus.read_raw(1, "goal_velocity") == round(1.0 / (0.229 * 2 * math.pi / 60))


def test_bulk_read_and_broadcast_ping(x12):
    servos, bus = x12
    out = bus.bulk_read([(1, "present_input_voltage"), (2, "present_temperature")])
    assert set(out) == {1, 2}
    assert bus.broadcast_ping() == {i: (1020, 45) for i in IDS}


def test_protocol1_ax_read_one_by_one():
    ids = [1, 2, 3]
    servos = PtyServos({i: "AX-12A" for i in ids}, protocol=1)
    for i in ids:
        servos.set_raw(i, "present_position", 512 + i)
        servos.set_raw(i, "present_velocity", 1024 + 10 * i)  # CW: negative
    bus = Bus(servos.port, 1_000_000, 1, [ServoSpec(i, "AX-12A") for i in ids],
              on_after_write=servos.pump, timeout_margin_s=0.02)
    with bus:
        assert bus.connect().servos[0]["model_number"] == 12
        r = bus.sync_reader(["present_position", "present_velocity", "present_load"])
        r.read()
        np.testing.assert_allclose(r.values["present_position"], [i * math.radians(300) / 1024 for i in ids])
        assert (r.values["present_velocity"] < 0).all()
        assert sum(1 for p in servos.received if p[4] == 0x02) >= 3   # one READ per servo
        w = bus.sync_writer("goal_position")
        w.write(np.zeros(3))
        assert all(servos.mem[i][30:32] == (512).to_bytes(2, "little") for i in ids)
    servos.close()


def test_protocol1_bus_refuses_nothing_but_protocol2_refuses_ax():
    with pytest.raises(ValueError, match="Protocol 1.0 only"):
        Bus("/dev/null", 1_000_000, 2, [ServoSpec(1, "AX-12A")])


def test_port_closed_is_a_port_error(x12):
    servos, bus = x12
    r = bus.sync_reader(NAMES)
    servos.close()
    with pytest.raises(PortError):
        r.read()
    servos.master = os.open("/dev/null", os.O_RDONLY)  # let the fixture's close succeed
    servos._slave = os.open("/dev/null", os.O_RDONLY)


def test_open_missing_port_is_a_port_error():
    with pytest.raises(PortError, match="/dev/does-not-exist"):
        Bus("/dev/does-not-exist", 57600, 2, []).open()


def test_timeout_from_baud_bytes_and_return_delay():
    # 12 servos, sync read of 10 B at 4 Mbps, RDT 0: wire + turnaround + margin, not 16 ms
    t = reply_timeout_s(4_000_000, 26, 12 * 21, 12, 0.0, 0.001)
    assert t == pytest.approx((26 + 252) * 10 / 4e6 + 12 * 100e-6 + 0.001)
    assert reply_timeout_s(57600, 14, 15, 1, 500e-6, 0.0) > reply_timeout_s(1_000_000, 14, 15, 1, 0, 0.0)


def test_latency_timer_sysfs(tmp_path):
    d = tmp_path / "ttyUSB7"
    d.mkdir()
    (d / "latency_timer").write_text("16\n")
    assert read_latency_timer("/dev/ttyUSB7", tmp_path) == 16
    assert write_latency_timer("/dev/ttyUSB7", 1, tmp_path)[0]
    assert read_latency_timer("/dev/ttyUSB7", tmp_path) == 1
    assert read_latency_timer("/dev/pts/3", tmp_path) == "n/a"
    assert not write_latency_timer("/dev/ttyACM0", 1, tmp_path)[0]


def test_protocol1_length_byte_error_that_passes_the_checksum_is_caught():
    """Protocol 1.0's 8-bit sum lets a damaged LENGTH byte through when the shorter
    packet's last data byte equals its checksum (the fuzzer found it); the reply
    size check turns it into MalformedPacketError and NaN, never a value."""
    servos = PtyServos({1: "MX-28", 2: "MX-28"}, protocol=1)
    lo = 0x10
    hi = (~(1 + 3 + 0 + lo)) & 0xFF           # checksum of FF FF 01 03 00 <lo>
    servos.set_raw(1, "present_position", lo | (hi << 8))
    servos.mangle[1] = lambda pkt: pkt[:3] + bytes((pkt[3] - 1,)) + pkt[4:]
    bus = Bus(servos.port, 1_000_000, 1, [ServoSpec(1, "MX-28"), ServoSpec(2, "MX-28")],
              on_after_write=servos.pump, timeout_margin_s=0.01)
    with bus:
        r = bus.sync_reader(["present_position"])
        with pytest.raises(Exception) as ei:
            r.read()
        assert ei.value.failed_ids == (1,)
        assert type(ei.value).__name__ == "MalformedPacketError"
        assert np.isnan(r.values["present_position"][0]) and np.isfinite(r.values["present_position"][1])
    servos.close()


def test_one_sync_read_for_mixed_models_converts_each_with_its_scale():
    servos = PtyServos({1: "XM430-W350", 2: "XL330-M288"})
    for i in (1, 2):
        servos.set_raw(i, "present_current", 100)
        servos.set_raw(i, "present_position", 2048 + 1024)
    bus = Bus(servos.port, 1_000_000, 2, [ServoSpec(1, "XM430-W350"), ServoSpec(2, "XL330-M288")],
              on_after_write=servos.pump, timeout_margin_s=0.02)
    with bus:
        r = bus.sync_reader(NAMES)
        n_before = len(servos.received)
        r.read()
        assert len(servos.received) == n_before + 1            # one SYNC READ for both
        np.testing.assert_allclose(r.values["present_current"], [100 * 0.00269, 100 * 0.001])
        np.testing.assert_allclose(r.values["present_position"], [math.pi / 2, math.pi / 2])
        bus.sync_writer("goal_current").write(np.array([0.269, 0.1]))
        assert [int.from_bytes(servos.mem[i][102:104], "little") for i in (1, 2)] == [100, 100]
        with pytest.raises(KeyError, match="XM430-W350 has no register 'present_load'"):
            bus.sync_reader(["present_load"])
    servos.close()
