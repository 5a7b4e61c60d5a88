"""The daemon reads its servos and the IMU board in one BULK READ per tick (lockstep).

On the quadruped (twelve XM430 and the OpenCR at ID 200, all Protocol 2.0) each
tick sends one 0x92 instruction that asks the twelve servos and the board, and no
read of its own for the board; the base estimate fed by it stays on the simulator's
truth.  On the humanoid's mixed bus (AX-18A on 1.0, the board on 2.0) no single
instruction reaches both: the board keeps its own sync read.
"""

from __future__ import annotations

import numpy as np
import pytest

from servoloop.controller.config import builtin_config
from servoloop.controller.daemon import Daemon
from servoloop.controller.runtime import make_lockstep

pytestmark = pytest.mark.hil

READS = (0x02, 0x82, 0x8A, 0x92, 0x9A)


def _ids_asked(inst: int, params: bytes) -> list[int]:
    if inst in (0x92, 0x9A):
        return [params[k] for k in range(0, len(params), 5)]
    if inst in (0x82, 0x8A):
        return list(params[4:])
    return []


def _run(robot: str, seconds: float):
    cfg = builtin_config(robot)
    lock = make_lockstep(cfg)
    engine = lock.virtual.engine
    seen: list[tuple[int, int, bytes]] = []
    dispatch = engine.dispatch

    def recording(sid, inst, params):
        if inst in READS:
            seen.append((sid, inst, bytes(params)))
        return dispatch(sid, inst, params)

    engine.dispatch = recording
    try:
        daemon = Daemon(cfg, lock.bus, lock.clock, telemetry_path=None, socket_path=None)
        summary = daemon.run(seconds)
        truth = engine.plant.base_state()
        loop = daemon.loop
    finally:
        lock.close()
    return cfg, summary, truth, loop, seen


def test_quadruped_servos_and_board_share_one_bulk_read_per_tick():
    cfg, summary, truth, loop, seen = _run("quadruped", 1.5)
    assert summary["state"] == "done" and summary["missed"] == 0 and not summary["bus_errors"]
    assert loop.read.reader.bulk is not None and loop.imu.reader.shared
    servo_ids = sorted(s.id for s in cfg.servos)
    board = cfg.imu.id
    bulk = [p for sid, inst, p in seen if inst == 0x92]
    # every tick one bulk read asking every servo and the board (plus the read that finds
    # the pose the startup ramp starts from) ...
    assert len(bulk) == loop.ticks + 1
    assert all(sorted(_ids_asked(0x92, p)) == sorted([*servo_ids, board]) for p in bulk)
    # ... and no other read of the board once the loop runs (connect pinged and read it once)
    board_reads = [inst for sid, inst, p in seen if board in (sid, *_ids_asked(inst, p)) and inst != 0x92]
    assert board_reads == [0x02]                 # its return delay time, at connect
    # the estimate fed by the bulk read's board values stands where the simulator does
    est = summary["estimate"]
    assert est["valid"]
    assert est["base_position_in_world"][2] == pytest.approx(truth["base_position_in_world"][2], abs=0.005)
    assert np.abs(np.asarray(est["base_rpy"][:2])).max() < 0.01
    assert loop.imu.failed == 0


def test_mixed_bus_keeps_the_board_on_its_own_sync_read():
    cfg, summary, _truth, loop, seen = _run("humanoid", 0.3)
    assert summary["state"] == "done"
    assert loop.read.reader.bulk is None and not loop.imu.reader.shared
    board = cfg.imu.id
    own = [p for sid, inst, p in seen if inst == 0x82 and _ids_asked(inst, p) == [board]]
    assert len(own) == loop.ticks + 1      # and one before torque on (a robot tipped over stays off)
    assert not any(inst == 0x92 for _, inst, _ in seen)
