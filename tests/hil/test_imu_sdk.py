"""The emulated IMU board (the OP3's OpenCR at ID 200) read by dynamixel_sdk, ROBOTIS's own client.

``servoloop virtual-bus --robot quadruped`` puts the config's ``imu:`` board on the
bus beside the twelve servos, fed by the contact simulator's base (the robot lies
at rest where it fell).  The SDK pings it, reads its registers one by one, in a
GroupSyncRead and in one GroupBulkRead together with a servo, at the addresses of
ROBOTIS's OP3 firmware (dxl_node_op3.h) and with the OP3's unit conversions.
"""

import math

import dynamixel_sdk as dxl
import pytest

from servoloop.firmware_bridge.imu import get_imu_table
from tests.hil.sdk_helpers import ok

pytestmark = pytest.mark.hil

T = get_imu_table("OpenCR")
A = {n: r.address for n, r in T.registers.items()}
XM_PRESENT_POSITION = 132
G_ACC, ACCEL_FACTOR = 9.80665, 2.0 / 32768      # ROBOTIS-OP3 open_cr_module.h
GYRO_FACTOR = 2000.0 / 32800                   # deg/s per LSB


def _s16(b0, b1):
    v = b0 | (b1 << 8)
    return v - 65536 if v >= 32768 else v


@pytest.fixture
def imu_port(virtual_bus, sdk_port):
    return sdk_port(virtual_bus(robot="quadruped"), baud=4_000_000)


def test_ping_and_single_reads_give_gravity_and_a_level_board(imu_port):
    ph = dxl.PacketHandler(2.0)
    assert ok(ph.ping(imu_port, 200)) == 0x7400 == T.model_number
    assert ok(ph.read1ByteTxRx(imu_port, 200, A["firmware_version"])) == 2
    acc = [_s16(*ok(ph.readTxRx(imu_port, 200, A[f"acc_{k}"], 2))) * ACCEL_FACTOR * G_ACC for k in "xyz"]
    assert abs(math.hypot(*acc) - 9.81) < 0.01                # at rest: gravity's specific force
    gyro = [_s16(*ok(ph.readTxRx(imu_port, 200, A[f"gyro_{k}"], 2))) * GYRO_FACTOR for k in "xyz"]
    assert max(abs(g) for g in gyro) < 1.0                   # deg/s, at rest
    roll, pitch = (_s16(*ok(ph.readTxRx(imu_port, 200, A[k], 2))) / 10.0 for k in ("roll", "pitch"))
    # the orientation registers agree with the accelerometer's tilt (OP3 firmware: deg x 10)
    assert abs(math.degrees(math.atan2(acc[1], acc[2])) - roll) < 0.2
    assert abs(math.degrees(math.atan2(-acc[0], math.hypot(acc[1], acc[2]))) - pitch) < 0.2
    # read-only registers stay read-only; an LED is writable
    assert ph.write2ByteTxRx(imu_port, 200, A["acc_z"], 0)[1] != 0
    ok(ph.write1ByteTxRx(imu_port, 200, A["led"], 5))
    assert ok(ph.read1ByteTxRx(imu_port, 200, A["led"])) == 5
    pinged, comm = ph.broadcastPing(imu_port)
    assert comm == dxl.COMM_SUCCESS and sorted(pinged) == [*range(1, 13), 200]
    assert pinged[200][0] == T.model_number


def test_group_sync_read_and_bulk_read_with_a_servo(imu_port):
    ph = dxl.PacketHandler(2.0)
    n = A["yaw"] + 2 - A["gyro_x"]
    sr = dxl.GroupSyncRead(imu_port, ph, A["gyro_x"], n)
    assert sr.addParam(200)
    assert sr.txRxPacket() == dxl.COMM_SUCCESS and sr.isAvailable(200, A["acc_z"], 2)
    acc_z = _s16(sr.getData(200, A["acc_z"], 1), sr.getData(200, A["acc_z"] + 1, 1))
    assert acc_z * ACCEL_FACTOR * G_ACC > 9.0
    br = dxl.GroupBulkRead(imu_port, ph)
    assert br.addParam(3, XM_PRESENT_POSITION, 4) and br.addParam(200, A["gyro_x"], n)
    assert br.txRxPacket() == dxl.COMM_SUCCESS
    assert br.isAvailable(3, XM_PRESENT_POSITION, 4) and br.isAvailable(200, A["acc_x"], 6)
    acc = [_s16(br.getData(200, A[f"acc_{k}"], 1), br.getData(200, A[f"acc_{k}"] + 1, 1)) for k in "xyz"]
    assert abs(math.hypot(*acc) * ACCEL_FACTOR * G_ACC - 9.81) < 0.01


def test_init_and_scan_name_the_board_and_keep_it_out_of_the_servos(virtual_bus, tmp_path):
    import subprocess
    import sys

    import yaml

    port = virtual_bus(robot="quadruped")
    out = tmp_path / "robot.yaml"
    r = subprocess.run([sys.executable, "-m", "servoloop", "init", "--port", port, "--baud", "4000000",
                        "--protocol", "2", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert [s["id"] for s in yaml.safe_load(text)["servos"]] == list(range(1, 13))
    assert "# imu: {id: 200, model: OpenCR}" in text
    from servoloop.firmware_bridge.control_table import model_name

    assert model_name(0x7400) == "OpenCR" and model_name(4242) == "unknown(4242)"


def test_sdk_and_our_bulk_read_of_twelve_servos_and_the_board_agree(imu_port, virtual_bus):
    """dynamixel_sdk's GroupBulkRead (ROBOTIS's own client) and our compiled BulkReader
    send the same kind of request for the twelve servos plus the board, and read the same
    robot at rest: every device answers both, positions and gravity agree."""
    import numpy as np

    from servoloop.firmware_bridge.bulk import BulkReader
    from servoloop.firmware_bridge.bus import Bus, ServoSpec
    from servoloop.firmware_bridge.imu import IMU_REGISTERS, ImuReader

    ph = dxl.PacketHandler(2.0)
    n = A["yaw"] + 2 - A["gyro_x"]
    br = dxl.GroupBulkRead(imu_port, ph)
    for sid in range(1, 13):
        assert br.addParam(sid, 126, 10)         # present current, velocity, position (XM430)
    assert br.addParam(200, A["gyro_x"], n)
    import time

    def sdk_positions():
        assert br.txRxPacket() == dxl.COMM_SUCCESS
        out = []
        for sid in range(1, 13):
            assert br.isAvailable(sid, XM_PRESENT_POSITION, 4)
            raw = br.getData(sid, XM_PRESENT_POSITION, 4)
            out.append(raw - (1 << 32) if raw >= 1 << 31 else raw)
        return np.array(out)

    # the powered-off robot falls and settles after the bus starts: wait until it lies still
    prev, t_end = sdk_positions(), time.monotonic() + 20.0
    while time.monotonic() < t_end:
        time.sleep(0.2)
        sdk_pos = sdk_positions()
        if np.abs(sdk_pos - prev).max() <= 1:
            break
        prev = sdk_pos
    assert br.isAvailable(200, A["acc_x"], 6)
    sdk_acc = [_s16(br.getData(200, A[f"acc_{k}"], 1), br.getData(200, A[f"acc_{k}"] + 1, 1))
               * ACCEL_FACTOR * G_ACC for k in "xyz"]
    imu_port.closePort()
    port = imu_port.getPortName()
    with Bus(port, 4_000_000, 2, [ServoSpec(i, "XM430-W350") for i in range(1, 13)],
             timeout_margin_s=0.05) as bus:
        imu = ImuReader(bus, 200, T)
        r = BulkReader(bus, [(["present_position"], list(range(1, 13))), (list(IMU_REGISTERS), [200], False)])
        imu.attach(r.parts[1])
        for _ in range(3):
            assert r.read()
        r.parts[0].check()
        imu.read()
        pos = r.parts[0].values["present_position"]
        reg = bus.register(1, "present_position")
        ours = np.round(pos / reg.scale + reg.zero_raw)
        # the robot lies at rest: the same position to a few ticks of sensor noise
        assert np.abs(ours - sdk_pos).max() <= 3
        assert np.linalg.norm(imu.accel) == pytest.approx(9.81, abs=0.02)
        assert np.allclose(imu.accel, sdk_acc, atol=0.02)
