"""Every emulated model moves at its datasheet no-load speed, through the protocol.

Lockstep in-process virtual bus (simulated time, real packets through
``firmware_bridge.bus.Bus``), one unloaded servo at its datasheet supply
voltage: a large position step (and, where the firmware has it, a
multi-turn step in extended position mode).  The Present Velocity register
must reach the e-Manual no-load speed within 10 % and never exceed it (by
more than half a register step), and the position must advance at that
speed.
"""

from __future__ import annotations

import numpy as np
import pytest

from servoloop.firmware_bridge.control_table import MODELS, get_table

pytestmark = pytest.mark.hil

DT = 0.002   # s of simulated time between samples


def _run(model, moves, extended=False):
    """Drive servo 1 through ``moves`` [(goal_rad, seconds)]; return (t, position, velocity) of the last."""
    from servoloop.firmware_bridge.bus import Bus, ServoSpec
    from servoloop.virtual_bus import InProcessVirtualBus

    table = get_table(model)
    vb = InProcessVirtualBus({1: table.name}, protocol=table.protocol, noise_ticks=0.0)
    try:
        with Bus(vb.port, 1_000_000, table.protocol, [ServoSpec(id=1, model=table.name)],
                 on_after_write=vb.pump) as bus:
            bus.connect()
            if extended:
                bus.write_raw(1, "operating_mode", 4)
            bus.write(1, "torque_enable", 1)
            for goal, seconds in moves:
                bus.write(1, "goal_position", goal)
                t, pos, vel = [], [], []
                for k in range(int(round(seconds / DT))):
                    vb.advance(DT)
                    t.append((k + 1) * DT)
                    pos.append(bus.read(1, "present_position"))
                    vel.append(bus.read(1, "present_velocity"))
            assert bus.read(1, "present_input_voltage") == pytest.approx(table.datasheet.voltage_v)
    finally:
        vb.close()
    return np.array(t), np.array(pos), np.array(vel)


def _check(model, t, pos, vel, direction):
    table = get_table(model)
    w0 = table.datasheet.no_load_speed_rad_s
    lsb = table["present_velocity"].scale
    v = direction * vel
    assert v.max() <= w0 + 0.5 * lsb, f"{model}: {v.max():.4f} rad/s > datasheet {w0:.4f}"
    assert v.max() >= 0.9 * w0, f"{model}: peak {v.max():.4f} rad/s < 90 % of {w0:.4f}"
    # position over time: the cruise (|v| within 2 % of its peak) advances at the no-load speed
    cruise = v >= 0.98 * v.max()
    assert cruise.sum() >= 20, f"{model}: no cruise phase"
    slope = np.polyfit(t[cruise], direction * pos[cruise], 1)[0]
    assert 0.9 * w0 <= slope <= w0 * 1.005, f"{model}: position advances at {slope:.4f} rad/s, datasheet {w0:.4f}"
    return v.max()


@pytest.mark.parametrize("model", sorted(MODELS))
def test_position_step_reaches_the_datasheet_no_load_speed(model):
    table = get_table(model)
    lo, hi = (-2.5, 2.5) if table.name.startswith("AX") else (-3.0, 3.0)
    t, pos, vel = _run(model, [(lo, 2.0), (hi, (hi - lo) / table.datasheet.no_load_speed_rad_s + 0.3)])
    _check(model, t, pos, vel, +1.0)


EXTENDED = sorted(n for n, t in MODELS.items() if t.protocol == 2 and "operating_mode" in t)


@pytest.mark.parametrize("model", EXTENDED)
def test_extended_position_step_reaches_the_datasheet_no_load_speed(model):
    table = get_table(model)
    turns = 3 * 2 * np.pi
    t, pos, vel = _run(model, [(-turns, turns / table.datasheet.no_load_speed_rad_s + 0.5)],
                       extended=True)
    _check(model, t, pos, vel, -1.0)
    assert pos[-1] == pytest.approx(-turns, abs=0.05)     # and arrives: multi-turn, not wrapped
