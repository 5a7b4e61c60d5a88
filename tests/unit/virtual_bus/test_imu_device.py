"""The emulated IMU board against the plant's base, read by firmware_bridge's ImuReader (lockstep)."""

import math

import numpy as np
import pytest

from servoloop.firmware_bridge.bus import Bus, ServoSpec
from servoloop.firmware_bridge.imu import ImuReader, get_imu_table
from servoloop.virtual_bus import InProcessVirtualBus
from servoloop.virtual_bus.imu_device import ImuEmulation, matrix_rpy, rpy_matrix
from servoloop.virtual_bus.robot_plant import RobotPlant

SERVOS = [(i, "XM430-W350") for i in range(1, 13)]
T = get_imu_table("OpenCR")


def _rig(spec):
    plant = RobotPlant.for_robot("quadruped")
    vb = InProcessVirtualBus(SERVOS, plant, 2, imu=spec)
    bus = Bus(vb.port, 1_000_000, 2, [ServoSpec(i, m) for i, m in SERVOS], on_after_write=vb.pump)
    bus.open()
    reader = ImuReader(bus, spec.id, T)
    info = reader.connect()
    reader.bind()
    return vb, bus, reader, plant, info


@pytest.fixture
def rig():
    made = []

    def make(**kw):
        r = _rig(ImuEmulation(**kw))
        made.append(r)
        return r

    yield make
    for vb, bus, *_ in made:
        bus.close()
        vb.close()


def test_at_rest_it_reads_gravity_and_the_true_attitude_quantised(rig):
    vb, bus, reader, plant, info = rig()
    assert info["model_number"] == 0x7400 and info["firmware"] == 2
    vb.advance(2.0)                     # the robot (torque off) settles on the ground
    reader.read()
    R = plant.base_rotation()
    assert np.allclose(reader.accel, R.T @ [0, 0, 9.81], atol=0.02)   # contact micro-motion
    assert np.allclose(reader.gyro, 0.0, atol=0.01)
    assert np.allclose(reader.rpy, matrix_rpy(R), atol=math.radians(0.1))
    # quantised as the registers are: whole LSBs
    for v, reg in zip(reader.accel, ("acc_x", "acc_y", "acc_z"), strict=True):
        assert (v / T[reg].scale) == pytest.approx(round(v / T[reg].scale), abs=1e-6)


def test_bias_noise_and_mounting_rotation(rig):
    bias = (0.05, -0.02, 0.01)
    vb, bus, reader, plant, _ = rig(rotation_rpy=(0.0, 0.0, math.pi), gyro_bias=bias, accel_noise=0.05, seed=3)
    vb.advance(0.5)
    acc, gyro = [], []
    for _ in range(200):
        vb.advance(0.001)
        reader.read()
        acc.append(reader.accel.copy())
        gyro.append(reader.gyro.copy())
    acc, gyro = np.array(acc), np.array(gyro)
    # half a turn about z: the board's x and y axes are the base's -x and -y (the OP3's mounting)
    R = plant.base_rotation() @ rpy_matrix(0, 0, math.pi)
    assert np.allclose(acc.mean(axis=0), R.T @ [0, 0, 9.81], atol=0.02)
    assert 0.03 < acc.std(axis=0).mean() < 0.07                  # the noise, per reading
    assert np.allclose(gyro.mean(axis=0), bias, atol=2e-3)        # the bias, in the board's axes
    yaw_board = reader.rpy[2]
    assert abs(abs(yaw_board) - math.pi) < 0.05


def test_it_answers_as_the_op3_firmware_does(rig):
    vb, bus, reader, plant, _ = rig()
    assert bus.ping(200) == 0x7400
    assert sorted(bus.broadcast_ping()) == [*range(1, 13), 200]
    from servoloop.firmware_bridge.errors import ServoStatusError

    with pytest.raises(ServoStatusError):
        bus.reboot(200)                 # no REBOOT in the OP3 firmware: Instruction Error
    bus.write(200, "led", 3)
    assert bus.read_raw(200, "led") == 3
    with pytest.raises(ValueError, match="read-only"):
        bus.write_raw(200, "gyro_x", 1)


def test_without_a_floating_base_the_board_lies_level_and_still():
    with InProcessVirtualBus("1:XM430-W350", None, 2, imu=ImuEmulation(accel_bias=(0.1, 0, 0))) as vb:
        bus = Bus(vb.port, 1_000_000, 2, [ServoSpec(1, "XM430-W350")], on_after_write=vb.pump)
        with bus:
            reader = ImuReader(bus, 200, T)
            reader.connect()
            reader.bind()
            vb.advance(0.01)
            reader.read()
        assert np.allclose(reader.accel, (0.1, 0.0, 9.81), atol=1e-3)
        assert np.allclose(reader.gyro, 0.0) and np.allclose(reader.rpy, 0.0)
    with pytest.raises(ValueError, match="also a servo's id"):
        InProcessVirtualBus(SERVOS, RobotPlant.for_robot("quadruped"), 2, imu=ImuEmulation(id=3))
