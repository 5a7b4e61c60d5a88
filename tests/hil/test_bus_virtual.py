"""Our Bus against the virtual servo bus on a pty: every instruction and every fault kind.

Timeouts get a generous host margin (the virtual bus is another process on
a shared machine): the tests check what happens, never how fast.
"""

import math

import numpy as np
import pytest

from servoloop.firmware_bridge.bus import Bus, ServoSpec
from servoloop.firmware_bridge.errors import (
    BusTimeoutError,
    ChecksumError,
    HardwareErrorStatus,
    MalformedPacketError,
    ModelMismatchError,
    PortError,
    ServoStatusError,
    UnsafeOperationError,
)

pytestmark = pytest.mark.hil

MARGIN = 0.05
NAMES = ["present_current", "present_velocity", "present_position"]


def make_bus(path, n=4, model="XM430-W350", protocol=2, baud=1_000_000):
    return Bus(path, baud, protocol, [ServoSpec(i, model) for i in range(1, n + 1)],
               timeout_margin_s=MARGIN)


def _wait_rebooted(bus, sid, timeout=5.0):
    """A servo is silent while it boots after REBOOT (virtual bus: 0.4 s): ping until it answers."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        try:
            return bus.ping(sid)
        except BusTimeoutError:
            if time.monotonic() > deadline:
                raise


def test_connect_and_every_single_servo_instruction(virtual_bus):
    with make_bus(virtual_bus(servos="1-4:XM430-W350")) as bus:
        rep = bus.connect(fix_return_delay=True)
        assert [s["model_number"] for s in rep.servos] == [1020] * 4
        assert all(s["return_delay_time_raw"] == 0 for s in rep.servos)
        assert rep.latency_timer_ms == "n/a"
        assert bus.ping(3) == 1020
        assert bus.broadcast_ping(wait_s=0.3).keys() == {1, 2, 3, 4}
        bus.write(2, "led", 1)
        assert bus.read_raw(2, "led") == 1
        bus.write(2, "profile_velocity", 1.0)               # rad/s
        assert bus.read(2, "profile_velocity") == pytest.approx(1.0, abs=0.024)
        bus.write(2, "position_p_gain", 900, reg_write=True)
        assert bus.read_raw(2, "position_p_gain") == 800
        bus.action(2)
        assert bus.read_raw(2, "position_p_gain") == 900
        bus.reboot(2)                                       # RAM back to defaults
        _wait_rebooted(bus, 2)
        assert bus.read_raw(2, "position_p_gain") == 800
        with pytest.raises(UnsafeOperationError):
            bus.factory_reset(4)
        bus.factory_reset(4, 0x02, confirm=True)            # keeps ID and baud: still there
        assert bus.ping(4) == 1020
        out = bus.bulk_read([(1, "present_temperature"), (3, "present_input_voltage")])
        assert out[1] > 0 and 5.0 < out[3] < 20.0
        bus.bulk_write([(1, "led", 1), (3, "led", 1)])
        assert bus.read_raw(3, "led") == 1


def test_eeprom_write_with_torque_on_is_an_access_error(virtual_bus):
    with make_bus(virtual_bus(servos="1:XM430-W350"), n=1) as bus:
        bus.write(1, "torque_enable", 1)
        with pytest.raises(ServoStatusError, match="access_error"):
            bus.write(1, "return_delay_time", 0.0)


def test_model_mismatch_names_id_expected_found(virtual_bus):
    path = virtual_bus(servos="1:XM430-W350,2:XL430-W250")
    with Bus(path, 1_000_000, 2, [ServoSpec(1, "XM430-W350"), ServoSpec(2, "XM430-W350")],
             timeout_margin_s=MARGIN) as bus:
        with pytest.raises(ModelMismatchError, match="servo 2.*XM430-W350.*XL430-W250.*1060"):
            bus.connect()


def test_sync_read_and_write_move_the_servos(virtual_bus, poll_until):
    with make_bus(virtual_bus(servos="1-4:XM430-W350")) as bus:
        bus.connect()
        reader = bus.sync_reader(NAMES)
        writer = bus.sync_writer("goal_position")
        torque = bus.sync_writer("torque_enable")
        reader.read()
        goal = reader.values["present_position"] + np.array([0.3, -0.3, 0.2, 0.0])
        torque.write(np.ones(4))
        writer.write(goal)

        def close_enough():
            reader.read()
            return np.all(np.abs(reader.values["present_position"] - goal) < 0.05)

        assert poll_until(close_enough, timeout=10.0)
        assert np.isfinite(reader.values["present_current"]).all()
        assert bus.health[1].ok > 0 and bus.health[1].failures == 0


def test_protocol1_ax_servos_read_one_by_one(virtual_bus, poll_until):
    path = virtual_bus(servos="1-3:AX-18A", protocol=1)
    with make_bus(path, n=3, model="AX-18A", protocol=1) as bus:
        rep = bus.connect()
        assert [s["model_number"] for s in rep.servos] == [18] * 3
        reader = bus.sync_reader(["present_position", "present_velocity", "present_load"])
        reader.read()
        start = reader.values["present_position"].copy()
        assert np.all(np.abs(start) <= math.radians(150))
        bus.sync_writer("torque_enable").write(np.ones(3))
        goal = start + 0.2
        bus.sync_writer("goal_position").write(goal)

        def arrived():
            reader.read()
            return np.all(np.abs(reader.values["present_position"] - goal) < 0.05)

        assert poll_until(arrived, timeout=10.0)
        assert bus.read_raw(2, "model_number") == 18


def test_dropped_reply_is_a_timeout_naming_the_servo_and_nan(virtual_bus):
    with make_bus(virtual_bus(servos="1-4:XM430-W350", faults="drop:id=3")) as bus:
        reader = bus.sync_reader(NAMES)
        with pytest.raises(BusTimeoutError) as ei:
            reader.read()
        assert ei.value.failed_ids == (3,)
        pos = reader.values["present_position"]
        assert np.isnan(pos[2]) and np.isfinite(pos[[0, 1, 3]]).all()
        assert bus.health[3].timeouts == 1 and bus.health[1].timeouts == 0


def test_corrupted_reply_is_never_a_value(virtual_bus):
    with make_bus(virtual_bus(servos="1-2:XM430-W350", faults="corrupt:id=2"), n=2) as bus:
        reader = bus.sync_reader(NAMES)
        for _ in range(5):
            with pytest.raises((ChecksumError, MalformedPacketError, BusTimeoutError)) as ei:
                reader.read()
            assert ei.value.failed_ids == (2,)
            assert np.isnan(reader.values["present_position"][1])
            assert np.isfinite(reader.values["present_position"][0])
        h = bus.health[2]
        assert h.checksum_errors + h.malformed + h.timeouts == 5


def test_delayed_reply_beyond_the_timeout(virtual_bus, poll_until):
    with make_bus(virtual_bus(servos="1-2:XM430-W350", faults="delay:id=1:us=200000"), n=2) as bus:
        with pytest.raises(BusTimeoutError, match="servo 1"):
            bus.read(1, "present_temperature")

        def servo2():
            # the late reply of servo 1 holds the line for a while, as on a real bus
            try:
                return bus.read(2, "present_temperature")
            except BusTimeoutError:
                return None

        assert poll_until(servo2, timeout=10.0) > 0
        assert bus.health[1].timeouts == 1


def test_hardware_error_decodes_hardware_error_status(virtual_bus, poll_until):
    path = virtual_bus(servos="1-2:XM430-W350", faults="hwerror:id=2:bits=overload:at=0.3")
    with make_bus(path, n=2) as bus:
        reader = bus.sync_reader(NAMES)

        def failing():
            try:
                reader.read()
            except HardwareErrorStatus as exc:
                return exc
            return None

        exc = poll_until(failing, timeout=10.0)
        assert exc is not None and exc.failed_ids == (2,)
        assert "overload" in str(exc) and "alert" in exc.failures[2].bits
        assert bus.health[2].last_hardware_error_status == 0x20
        assert np.isnan(reader.values["present_position"][1])
        bus.reboot(2)
        _wait_rebooted(bus, 2)
        reader.read()                      # a reboot clears the latch
        assert np.isfinite(reader.values["present_position"]).all()


def test_vanished_servo_then_back(virtual_bus, poll_until):
    path = virtual_bus(servos="1-2:XM430-W350", faults="vanish:id=1:at=0.2:until=1.0")
    with make_bus(path, n=2) as bus:
        def gone():
            try:
                bus.ping(1)
            except BusTimeoutError:
                return True
            return False

        assert poll_until(gone, timeout=10.0)
        assert bus.ping(2) == 1020
        assert poll_until(lambda: not gone(), timeout=10.0)


def test_power_cycle_resets_ram(virtual_bus, poll_until):
    path = virtual_bus(servos="1:XM430-W350", faults="powercycle:at=1.0:down=0.1")
    with make_bus(path, n=1) as bus:
        bus.write(1, "led", 1)
        assert bus.read_raw(1, "led") == 1

        def led_off():
            try:
                return bus.read_raw(1, "led") == 0
            except BusTimeoutError:
                return False

        assert poll_until(led_off, timeout=10.0)


def test_unplug_is_a_port_error(virtual_bus, poll_until):
    path = virtual_bus(servos="1-2:XM430-W350", faults="unplug:at=0.5")
    with make_bus(path, n=2) as bus:
        reader = bus.sync_reader(NAMES)

        def unplugged():
            try:
                reader.read()
            except PortError:
                return True
            except BusTimeoutError:
                return False
            return False

        assert poll_until(unplugged, timeout=10.0)


def test_fast_sync_read_bytes_are_answered(virtual_bus):
    """The virtual bus answers our FAST SYNC READ packet with one packet for all servos."""
    from servoloop.firmware_bridge import _busio, _codec

    with make_bus(virtual_bus(servos="1-3:XM430-W350"), n=3) as bus:
        tx = _codec.fast_sync_read(132, 4, [1, 2, 3])
        # the whole reply is one status packet from the broadcast id
        replies, _, _ = _busio.transact(bus.fd, 2, tx, [0xFE], 0.2, 3 * 8)
        code, err, params = replies[0xFE]
        assert code == _busio.SLOT_OK
        # ERR1 is the status error byte; params: ID1 DATA1 CRC1 ERR2 ID2 DATA2 CRC2 ERR3 ID3 DATA3
        assert err == 0 and len(params) == 3 * 8 - 3   # less ERR1 and the final CRC
        assert (params[0], params[8], params[16]) == (1, 2, 3)


def test_fast_sync_read_reader(virtual_bus):
    with make_bus(virtual_bus(servos="1-4:XM430-W350")) as bus:
        slow = bus.sync_reader(NAMES)
        fast = bus.sync_reader(NAMES, fast=True)
        slow.read()
        fast.read()
        np.testing.assert_allclose(fast.values["present_position"], slow.values["present_position"], atol=0.01)
        assert bus.health[4].ok == 2


def test_fast_sync_read_one_silent_servo_fails_them_all(virtual_bus):
    with make_bus(virtual_bus(servos="1-3:XM430-W350", faults="drop:id=2")) as bus:
        fast = bus.sync_reader(NAMES, fast=True)
        with pytest.raises((BusTimeoutError, ChecksumError, MalformedPacketError)) as ei:
            fast.read()
        assert set(ei.value.failed_ids) >= {2}
        assert np.isnan(fast.values["present_position"][1])
