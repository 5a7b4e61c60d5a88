"""Protocol 1.0 and 2.0 servos on one port (``bus.protocol: mixed``), in lockstep.

The daemon reads the 2.0 servos with one sync read and the 1.0 servos with
their own reads in the same tick, and writes each group with its protocol's
sync write; the emulator's mixed bus is behind the pty.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.hil.velocity_rigs import (
    lockstep_daemon,
    sample,
    speed,
    wheel_config,
)

pytestmark = pytest.mark.hil

RATE = 500


def test_ax18a_and_xm430_on_one_port_both_hold_their_pose():
    servos = [(1, "AX-18A", "position", 0.3), (2, "XM430-W350", "position", -0.5)]
    cfg = wheel_config(servos, "mixed", {}, RATE)
    daemon, lock, position = lockstep_daemon(cfg, servos)
    log = sample(lock, position, [1, 2])
    try:
        s = daemon.run(3.0)
    finally:
        lock.close()
    assert s["state"] == "done", s
    assert s["bus_errors"] == {} and s["comm"]["errors_per_servo"] == {}, s
    assert s["ticks"] == 3 * RATE
    q = np.array(log)[:, 1:]
    assert np.abs(q - [0.3, -0.5]).max() < 0.02, np.abs(q - [0.3, -0.5]).max(axis=0)


def test_mixed_bus_ax_goes_to_its_pose_while_xm_wheel_turns():
    servos = [(1, "AX-18A", "position", 0.3), (2, "XM430-W350", "velocity", 0.0)]
    cfg = wheel_config(servos, "mixed", {"pose": {"j1": -0.2}, "velocity": {"j2": 2.0}}, RATE)
    daemon, lock, position = lockstep_daemon(cfg, servos)
    log = sample(lock, position, [1, 2])
    try:
        s = daemon.run(2.0)
    finally:
        lock.close()
    assert s["state"] == "done" and s["bus_errors"] == {}, s
    q = np.array(log)
    assert abs(q[0, 1] - 0.3) < 0.02                      # from its start pose (no jump) ...
    assert np.abs(q[q[:, 0] > 1.0, 1] + 0.2).max() < 0.02  # ... to the commanded one (Protocol 1.0 write)
    assert speed(log, 2, 0.8, 1.9) == pytest.approx(2.0, rel=0.05)


def test_config_protocol_checks():
    from servoloop.controller.errors import ConfigError

    servos = [(1, "AX-18A", "position", None), (2, "XM430-W350", "position", None)]
    with pytest.raises(ConfigError, match=r"AX-18A speaks Protocol 1.0 only.*bus.protocol: mixed"):
        wheel_config(servos, 2, {}, RATE)
    with pytest.raises(ConfigError, match="bus.protocol must be 1, 2 or mixed"):
        wheel_config(servos, "both", {}, RATE)
    assert wheel_config(servos, "mixed", {}, RATE).bus.protocol == "mixed"


def test_mixed_velocity_tick_keeps_no_python_objects():
    import tracemalloc

    servos = [(1, "AX-18A", "position", 0.3), (2, "XM430-W350", "velocity", 0.0),
              (3, "XL430-W250", "position", 0.1)]
    cfg = wheel_config(servos, "mixed", {"velocity": {"j2": 1.0}}, 1000,
                       safety={"comm_timeout_s": 1e6})
    daemon, lock, _ = lockstep_daemon(cfg, servos)
    try:
        daemon.connect()
        daemon.startup()
        daemon.run_loop(0.5)        # warm every cache
        tracemalloc.start(1)
        before = tracemalloc.take_snapshot()
        daemon.run_loop(2.0)        # 2 000 ticks
        after = tracemalloc.take_snapshot()
        tracemalloc.stop()
        daemon.shutdown()
    finally:
        daemon.close_bus()
        lock.close()
    assert daemon.run_ticks == 2_500 and daemon.lifecycle.state.label == "done"
    grown = sum(st.size_diff for st in after.compare_to(before, "filename") if st.size_diff > 0)
    assert grown < 20_000, grown      # an object kept per tick would be >= 2 000 * 16 bytes
