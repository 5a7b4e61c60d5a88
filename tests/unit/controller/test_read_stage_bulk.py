"""The read stage on a bulk read (servos + IMU board): failures counted per part, and a failed
read keeps no object alive (the loop runs with the garbage collector off)."""

import gc

import numpy as np

from servoloop.controller.bus_io import BusErrorCounts
from servoloop.controller.bus_stages import ReadStage
from servoloop.firmware_bridge.control_table import get_table
from servoloop.firmware_bridge.imu import IMU_REGISTERS
from tests.unit.firmware_bridge.test_bulk_read import _rig


class _Faults:
    def handle(self, exc):
        pass


def test_failed_bulk_reads_are_counted_and_keep_no_objects():
    servos, bus = _rig()
    errors = BusErrorCounts()
    stage = ReadStage(errors, _Faults())
    reader = stage.bind(bus, [1, 2, 3], [get_table("XM430-W350")] * 3,
                        devices=[(list(IMU_REGISTERS), [200])])
    assert reader.bulk is not None and len(reader.device_parts) == 1
    assert stage.run() and np.isfinite(reader.values["present_position"]).all()
    servos.drop = {2, 200}
    for _ in range(5):
        assert not stage.run()
    assert list(stage.failed) == [False, True, False]      # the board is not a servo of the ladder
    assert errors == {"timeout": 5}                          # servo 2 only: the board is its stage's
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        before = len(gc.get_objects())
        for _ in range(100):
            stage.run()
        kept = len(gc.get_objects()) - before
    finally:
        if was:
            gc.enable()
    assert kept < 50          # one object per failed read would be 100
    bus.close()
    servos.close()
