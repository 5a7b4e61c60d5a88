"""The IMU board's control table (OpenCR, ROBOTIS OP3 firmware) and Bus.add_device."""

import math

import pytest

from servoloop.firmware_bridge.bus import Bus, ServoSpec
from servoloop.firmware_bridge.control_table import MODELS
from servoloop.firmware_bridge.errors import UnknownModelError
from servoloop.firmware_bridge.imu import IMU_REGISTERS, ImuReader, get_imu_table, imu_models
from servoloop.firmware_bridge.units import to_si


def test_opencr_table_is_the_op3_firmware_memory_map():
    t = get_imu_table("OpenCR")
    assert (t.model_number, t.protocol) == (0x7400, 2)
    # dxl_node_op3.h: Gyro_X 32, Acc_X 38, Roll 44, IMU_Control 50; int16 each
    addr = {n: (t[n].address, t[n].size, t[n].encoding) for n in IMU_REGISTERS}
    assert addr["gyro_x"] == (32, 2, "s") and addr["acc_x"] == (38, 2, "s") and addr["roll"] == (44, 2, "s")
    assert [t[n].address for n in IMU_REGISTERS] == list(range(32, 50, 2))
    assert t["id"].default == 200 and t["imu_control"].address == 50 and t.size == 51
    assert not t["gyro_x"].writable and t["led"].writable


def test_units_are_the_op3_conversions():
    t = get_imu_table("open-cr")
    assert to_si(t["gyro_z"], 32800) == pytest.approx(math.radians(2000.0))     # +-2000 deg/s full scale
    assert to_si(t["acc_z"], 16384) == pytest.approx(9.80665)                    # 1 g at half scale
    assert to_si(t["roll"], -900) == pytest.approx(math.radians(-90.0))          # deg x 10
    assert to_si(t["present_input_voltage"], 120) == pytest.approx(12.0)


def test_boards_are_not_servo_models_and_unknown_boards_are_named():
    assert imu_models() == ["OpenCR"] and "OpenCR" not in MODELS
    assert get_imu_table("OpenCR-OP3") is get_imu_table("OPEN-CR")
    with pytest.raises(UnknownModelError, match=r"no IMU board 'BNO055'; known: OpenCR"):
        get_imu_table("BNO055")


def test_bus_add_device_refuses_taken_ids_and_other_protocols():
    t = get_imu_table("OpenCR")
    bus = Bus("/dev/null", 1_000_000, 2, [ServoSpec(1, "XM430-W350")])
    with pytest.raises(ValueError, match="id 1 is out of range 0..252 or already used"):
        bus.add_device(1, t)
    bus.add_device(200, t)
    assert bus.protocol_of(200) == 2 and bus.table(200) is t and [s.id for s in bus.servos] == [1]
    p1 = Bus("/dev/null", 1_000_000, 1, [ServoSpec(1, "AX-18A")])
    with pytest.raises(ValueError, match="speaks Protocol 2.0.*mixed"):
        p1.add_device(200, t)
    mixed = Bus("/dev/null", 1_000_000, "mixed", [ServoSpec(1, "AX-18A")])
    mixed.add_device(200, t)
    assert (mixed.protocol_of(1), mixed.protocol_of(200)) == (1, 2)


def test_imu_reader_needs_the_imu_registers():
    bus = Bus("/dev/null", 1_000_000, 2, [])
    with pytest.raises(ValueError, match="lacks IMU registers"):
        ImuReader(bus, 200, MODELS["XM430-W350"])
