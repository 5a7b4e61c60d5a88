"""A current-mode servo on the contact simulator is a torque source, not a frozen joint.

The BAM pendulum bench (one XL330-M288) on the contact simulator behind an
in-process virtual bus, driven through the protocol: in current mode
(Operating Mode 0) a Goal Current turns the pendulum towards where gravity
balances the torque, the opposite current the other way, and zero current
lets it hang.
"""

from dataclasses import replace

import pytest

from servoloop.controller.config import builtin_config
from servoloop.firmware_bridge.bus import Bus, ServoSpec
from servoloop.virtual_bus import InProcessVirtualBus
from servoloop.virtual_bus.robot_plant import RobotPlant

pytestmark = pytest.mark.hil


def _settle(vb, bus, seconds):
    """Mean position over the last second of ``seconds`` (the pendulum swings about its rest)."""
    n = int(seconds / 0.002)
    tail = []
    for k in range(n):
        vb.advance(0.002)
        if k >= n - 500:
            tail.append(bus.read(1, "present_position"))
    return sum(tail) / len(tail)


def test_goal_current_turns_the_pendulum_both_ways():
    cfg = builtin_config("bench")
    cfg = replace(cfg, simulation=replace(cfg.simulation, plant="contact"))
    plant = RobotPlant.for_config(cfg)
    vb = InProcessVirtualBus({1: "XL330-M288"}, plant=plant, protocol=2, noise_ticks=0.0)
    try:
        with Bus(vb.port, 1_000_000, 2, [ServoSpec(1, "XL330-M288")], on_after_write=vb.pump) as bus:
            bus.connect()
            hanging = _settle(vb, bus, 0.5)
            bus.write_raw(1, "operating_mode", 0)         # current control
            bus.write(1, "torque_enable", 1)
            bus.write(1, "goal_current", 0.3)             # A
            plus = _settle(vb, bus, 4.0)
            bus.write(1, "goal_current", -0.3)
            minus = _settle(vb, bus, 4.0)
            bus.write(1, "goal_current", 0.0)
            back = _settle(vb, bus, 4.0)
    finally:
        vb.close()
    assert plus - hanging > 0.1                     # it turned with the torque...
    assert minus - hanging < -0.1                   # ...and against it
    assert abs(back - hanging) < 0.05               # no torque: it hangs again
