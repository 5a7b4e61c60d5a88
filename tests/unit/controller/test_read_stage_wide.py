"""The read stage's wide twin (the monitor's registers riding in the tick's read), on a
pseudo-terminal of emulated XM430 servos and an IMU board in one bulk read."""

import gc

import numpy as np

from servoloop.controller.bus_io import BusErrorCounts
from servoloop.controller.bus_stages import MonitorStage, ReadStage
from servoloop.firmware_bridge.control_table import get_table
from servoloop.firmware_bridge.imu import IMU_REGISTERS
from tests.unit.firmware_bridge.test_bulk_read import _rig

XM = get_table("XM430-W350")


class _Faults:
    def __init__(self):
        self.handled = []

    def handle(self, exc):
        self.handled.append(exc)


class _Safety:
    """Records what the monitor judged."""

    def __init__(self):
        self.seen = []

    def check_monitor(self, temperature, voltage):
        self.seen.append((temperature.copy(), voltage.copy()))


def _stage(read_ahead=False):
    servos, bus = _rig()
    errors = BusErrorCounts()
    stage = ReadStage(errors, _Faults(), read_ahead)
    stage.bind(bus, [1, 2, 3], [XM] * 3, devices=[(list(IMU_REGISTERS), [200])],
               extra=MonitorStage.registers([XM] * 3))
    monitor = MonitorStage(_Safety(), errors, 3)
    monitor.bind(bus, [1, 2, 3], [XM] * 3, ride=stage)
    return servos, bus, stage, monitor, errors


def test_the_wide_read_fills_the_same_state_arrays_and_carries_the_monitor_registers():
    servos, bus, stage, monitor, errors = _stage()
    try:
        assert monitor.rides and stage.wide.bulk is not None
        for sid, deg in ((1, 41), (2, 42), (3, 43)):
            servos.set_raw(sid, "present_temperature", deg)
            servos.set_raw(sid, "present_position", 2048 + 100 * sid)
        pos = stage.reader.values["present_position"]
        assert stage.run() and not stage.rode
        narrow = pos.copy()
        for sid in (1, 2, 3):
            servos.set_raw(sid, "present_position", 2048 + 100 * sid + 7)
        assert stage.run(wide=True) and stage.rode
        assert np.allclose(pos - narrow, 7 * XM["present_position"].scale)   # the wide read's state
        assert monitor.run() is None
        temperature, voltage = monitor.safety.seen[-1]
        assert list(temperature) == [41.0, 42.0, 43.0] and np.isfinite(voltage).all()
        assert list(monitor.temperature) == [41.0, 42.0, 43.0]
        # the board's share of the wide read, through the switch the IMU reader attaches to
        stage.device_parts[0].check()
        assert np.isfinite(stage.device_parts[0].values[IMU_REGISTERS[0]]).all()
        assert errors == {}
        # alternating reads allocate nothing per tick
        was = gc.isenabled()
        gc.collect()
        gc.disable()
        try:
            before = len(gc.get_objects())
            for k in range(100):
                stage.run(wide=k % 10 == 0)
                stage.device_parts[0].check()
            kept = len(gc.get_objects()) - before
        finally:
            if was:
                gc.enable()
        assert kept < 20
    finally:
        bus.close()
        servos.close()


def test_a_failed_wide_read_is_nan_counted_once_and_not_judged():
    servos, bus, stage, monitor, errors = _stage()
    try:
        assert stage.run(wide=True) and monitor.run() is None
        judged = len(monitor.safety.seen)
        held = monitor.temperature.copy()
        servos.drop = {2}
        assert not stage.run(wide=True) and stage.rode and stage.wide_error is not None
        pos = stage.reader.values["present_position"]
        assert np.isnan(pos[1]) and np.isfinite(pos[[0, 2]]).all()   # NaN, never last tick's
        assert list(stage.failed) == [False, True, False]
        assert monitor.run() is None and len(monitor.safety.seen) == judged   # no new values
        assert np.array_equal(monitor.temperature, held)                      # held
        assert errors == {"timeout": 1}          # the one transaction, counted once
    finally:
        bus.close()
        servos.close()


def test_read_ahead_requests_the_wide_read_for_the_next_tick():
    servos, bus, stage, monitor, errors = _stage(read_ahead=True)
    try:
        assert stage.run()                      # nothing requested: reads anew
        servos.set_raw(2, "present_temperature", 77)   # the emulator answers at the request
        stage.request(wide=True)
        assert bus.pending is stage.wide.bulk
        sent = len(servos.received)
        assert stage.run() and stage.rode       # the collect sends nothing
        assert len(servos.received) == sent
        monitor.run()
        assert monitor.temperature[1] == 77.0
        stage.request()
        assert bus.pending is stage.reader.bulk
        assert stage.run() and not stage.rode
    finally:
        bus.close()
        servos.close()


def test_protocol1_twin_asks_lengths_the_usual_read_never_asks():
    """AX-18A: state 36..41 (6 bytes, variants 6..9), voltage 42 and temperature 43: the block
    36..43 alone (8..11) would share lengths 8 and 9 with the usual read's variants, so a late
    reply to the one could pass for the other's; the twin asks 10..13 instead."""
    from servoloop.controller.bus_io import JointReader
    from servoloop.firmware_bridge.bus import Bus, ServoSpec
    from tests.unit.firmware_bridge.pty_servos import PtyServos

    ax = PtyServos({1: "AX-18A", 2: "AX-18A"}, protocol=1)
    ax_table = get_table("AX-18A")
    with Bus(ax.port, 1_000_000, 1, [ServoSpec(1, "AX-18A"), ServoSpec(2, "AX-18A")],
             on_after_write=ax.pump, timeout_margin_s=0.003) as bus:
        names = ["present_position", "present_velocity"]
        extra = MonitorStage.registers([ax_table] * 2)
        assert extra == ["present_input_voltage", "present_temperature"]
        narrow = JointReader(bus, [1, 2], [ax_table] * 2, names, effort=True)
        plain = JointReader(bus, [1, 2], [ax_table] * 2, names + extra, effort=True)
        twin = JointReader(bus, [1, 2], [ax_table] * 2, names + extra, effort=True, twin_of=narrow)
        assert narrow.groups[0][0].request_lengths[0] == {6, 7, 8, 9}
        assert not plain.tells_apart(narrow)
        assert twin.groups[0][0].request_lengths[0] == {10, 11, 12, 13} and twin.tells_apart(narrow)
        ax.set_raw(2, "present_temperature", 51)
        twin.read()
        assert twin.values["present_temperature"][1] == 51.0
        assert np.isfinite(twin.values["present_position"]).all()
    ax.close()
