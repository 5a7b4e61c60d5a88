"""Profile Velocity / Profile Acceleration (X series, position mode), with dynamixel_sdk.

The most common user script after "ping": set Profile Velocity (and Acceleration) so
the servo moves smoothly, then write Goal Position.  A real XM430 then moves at the
profile's speed (e-Manual XM430-W350, "Profile Velocity" 112, 0.229 rev/min a unit;
"Profile Acceleration" 108, 214.577 rev/min^2 a unit).  Before, the virtual bus ignored
both registers: the servo jumped to the goal at full speed.

Times are the servo's own Realtime Tick (120, ms), read in the same packet as the
position, so a slow host does not change what is measured.
"""

from __future__ import annotations

import time

import dynamixel_sdk as dxl
import numpy as np
import pytest

from servoloop.firmware_bridge.control_table import get_table
from tests.hil.sdk_helpers import ok

pytestmark = pytest.mark.hil

A = {n: r.address for n, r in get_table("XM430-W350").registers.items()}
TICKS_PER_REV = 4096
RPM_UNIT = 0.229                 # rev/min per Profile Velocity unit
RPM2_UNIT = 214.577              # rev/min^2 per Profile Acceleration unit


def _record(port, ph, seconds: float):
    """(t_s, position ticks) of servo 1 for ``seconds`` of its Realtime Tick."""
    t, q, start, last = [], [], None, None
    elapsed, lost = 0, 0
    while elapsed < seconds * 1000:
        time.sleep(0.005)                          # a script's polling, not a flood
        data, comm, err = ph.readTxRx(port, 1, A["realtime_tick"],
                                      A["present_position"] + 4 - A["realtime_tick"])
        if comm != dxl.COMM_SUCCESS or err:        # a busy host misses a reply now and then
            lost += 1
            assert lost < 20, f"comm={comm} err={err}"
            continue
        tick = data[0] | data[1] << 8
        pos = int.from_bytes(bytes(data[-4:]), "little", signed=True)
        if start is None:
            start = last = tick
        elapsed += (tick - last) % 32768          # the tick wraps at 32768 ms
        last = tick
        t.append(elapsed / 1000.0)
        q.append(pos)
    return np.array(t), np.array(q)


def _move(port, ph, velocity_units: int, accel_units: int, ticks: int, seconds: float):
    ok(ph.write1ByteTxRx(port, 1, A["torque_enable"], 0))
    ok(ph.write4ByteTxRx(port, 1, A["profile_velocity"], velocity_units))
    ok(ph.write4ByteTxRx(port, 1, A["profile_acceleration"], accel_units))
    ok(ph.write1ByteTxRx(port, 1, A["torque_enable"], 1))
    q0 = ok(ph.read4ByteTxRx(port, 1, A["present_position"]))
    ok(ph.write4ByteTxRx(port, 1, A["goal_position"], q0 + ticks))
    t, q = _record(port, ph, seconds)
    return t, q - q0


def test_goal_is_reached_at_the_profile_velocity_and_acceleration(virtual_bus, sdk_port):
    port = sdk_port(virtual_bus(servos="1:XM430-W350", baud=1_000_000))
    ph = dxl.PacketHandler(2.0)

    # velocity only: 40 units = 9.16 rev/min = 625 ticks/s, so 1000 ticks take 1.6 s
    v = 40 * RPM_UNIT / 60 * TICKS_PER_REV
    t, dq = _move(port, ph, 40, 0, 1000, 2.5)
    cruise = (t > 0.3) & (t < 1.3)
    speed = np.polyfit(t[cruise], dq[cruise], 1)[0]
    assert speed == pytest.approx(v, rel=0.1)
    assert abs(dq[t > 2.2] - 1000).max() < 15                 # there, and holding
    assert (dq[t < 1.2] < 900).all()                           # not there at once
    # on the way back the profile is in Velocity / Position Trajectory (136, 140)
    q0 = ok(ph.read4ByteTxRx(port, 1, A["present_position"]))
    ok(ph.write4ByteTxRx(port, 1, A["goal_position"], q0 - 1000))
    time.sleep(0.3)
    vt = ok(ph.read4ByteTxRx(port, 1, A["velocity_trajectory"]))
    pt = ok(ph.read4ByteTxRx(port, 1, A["position_trajectory"]))
    assert vt - (1 << 32) == -40                               # unsigned on the wire
    assert q0 - 1000 < pt < q0 - 50

    # with acceleration: 10 units = 0.596 rev/s^2 = 2442 ticks/s^2 up to 100 units
    # = 1563 ticks/s (0.64 s of speeding up): after 0.5 s a*t^2/2 = 305 ticks
    a = 10 * RPM2_UNIT / 3600 * TICKS_PER_REV
    t, dq = _move(port, ph, 100, 10, -2000, 2.5)
    early = dq[(t > 0.45) & (t < 0.55)]
    assert -early.mean() == pytest.approx(a * 0.5 ** 2 / 2, rel=0.25)
    assert abs(dq[t > 2.2] + 2000).max() < 15

    # back to the factory 0: no profile, the servo goes at once
    t, dq = _move(port, ph, 0, 0, 1000, 1.0)
    assert abs(dq[t > 0.5] - 1000).max() < 15
