"""Our Bus driven in lockstep with the in-process virtual bus (``on_after_write=vb.pump``).

Deterministic: no thread, no wall clock in the replies; two runs with the
same calls read bit-identical values.
"""

import numpy as np
import pytest

from servoloop.firmware_bridge.bus import Bus, ServoSpec
from servoloop.firmware_bridge.errors import BusTimeoutError
from servoloop.virtual_bus import InProcessVirtualBus

pytestmark = pytest.mark.hil

NAMES = ["present_current", "present_velocity", "present_position"]


def run(steps=200, dt=0.002, faults=None, protocol=2, model="XM430-W350"):
    vb = InProcessVirtualBus({i: model for i in range(1, 5)}, protocol=protocol, faults=faults)
    bus = Bus(vb.port, 1_000_000, protocol, [ServoSpec(i, model) for i in range(1, 5)],
              on_after_write=vb.pump, timeout_margin_s=0.05)
    trace = []
    failures = []
    try:
        with bus:
            bus.connect()
            reader = bus.sync_reader(NAMES if protocol == 2 else ["present_load", "present_velocity", "present_position"])
            goal_w = bus.sync_writer("goal_position")
            bus.sync_writer("torque_enable").write(np.ones(4))
            reader.read()
            goal = reader.values["present_position"] + np.array([0.4, -0.4, 0.2, -0.2])
            for _ in range(steps):
                try:
                    reader.read()
                except BusTimeoutError as exc:
                    failures.append(exc.failed_ids)
                trace.append(reader.values["present_position"].copy())
                goal_w.write(goal)
                vb.advance(dt)
            return np.array(trace), goal, failures, bus.health
    finally:
        vb.close()


def test_lockstep_is_bit_reproducible_and_tracks_the_goal():
    a, goal, fa, _ = run()
    b, _, fb, _ = run()
    assert np.array_equal(a, b) and fa == fb == []
    assert np.all(np.abs(a[-1] - goal) < 0.05)


def test_lockstep_protocol1():
    a, goal, failures, _ = run(protocol=1, model="AX-18A")
    assert failures == [] and np.all(np.abs(a[-1] - goal) < 0.05)


def test_lockstep_dropped_replies_are_nan_and_counted():
    a, _, failures, health = run(steps=50, faults="drop:id=2:p=0.2")
    assert failures and all(f == (2,) for f in failures)
    assert np.isnan(a[:, 1]).sum() == len(failures)
    assert np.isfinite(a[:, [0, 2, 3]]).all()
    assert health[2].timeouts == len(failures)
