"""Velocity (wheel) mode pieces on their own: the velocity slew, the joint map, limits that
skip free-turning joints, the hold controller's ``velocity`` param, wheel mode on AX / MX 1.0."""

from dataclasses import replace

import numpy as np
import pytest

from servoloop.controller.config import builtin_config
from servoloop.controller.controllers import Command, ControllerContext, JointState, make_controller
from servoloop.controller.errors import ControllerParamError
from servoloop.controller.joint_map import JointMap
from servoloop.controller.safety import LimitChecker
from servoloop.controller.slew import DEFAULT_VELOCITY_RAMP_S, VelocitySlew
from servoloop.controller.velocity_mode import leave_wheel_mode, set_wheel_mode, velocity_register
from servoloop.firmware_bridge.control_table import get_table


def test_velocity_slew_starts_at_rest_ramps_clamps_and_holds_on_nan():
    dt = 1e-3
    vs = VelocitySlew([2.0, 4.0], None, dt)
    out = np.zeros(2)
    seen = []
    for _ in range(400):
        vs.limit(np.array([10.0, -1.0]), out)
        seen.append(out.copy())
    seen = np.array(seen)
    dv = np.array([2.0, 4.0]) / DEFAULT_VELOCITY_RAMP_S * dt       # per tick
    assert np.all(np.abs(seen[0]) <= dv + 1e-12)                      # from rest: no jump
    assert np.all(np.abs(np.diff(seen, axis=0)) <= dv + 1e-12)
    assert seen[-1] == pytest.approx([2.0, -1.0])                     # clamped to +-max, then reached
    vs.limit(np.array([np.nan, -1.0]), out)                           # a controller bug: hold
    assert out == pytest.approx([2.0, -1.0])
    vs.set_max_velocity(np.array([1.5, np.inf]))                      # e.g. Velocity Limit register
    vs.limit(np.array([10.0, -1.0]), out)
    assert out[0] == pytest.approx(2.0 - dv[0])                       # brakes down, not a step
    vs.reset()
    assert not vs.last.any()


def test_velocity_slew_with_max_acceleration_and_unlimited_speed():
    vs = VelocitySlew([np.inf], 10.0, 0.01)
    out = np.zeros(1)
    vs.limit(np.array([5.0]), out)
    assert out[0] == pytest.approx(0.1)
    vs2 = VelocitySlew([np.inf], None, 0.01)                          # nothing known: no limit
    vs2.limit(np.array([5.0]), out)
    assert out[0] == 5.0


def test_joint_map_velocity_goal_takes_the_direction_not_the_offset():
    cfg = builtin_config("arm")
    servos = [replace(s, mode="velocity" if i == 0 else s.mode, direction=-1 if i == 0 else 1, offset=0.7)
              for i, s in enumerate(cfg.servos)]
    jm = JointMap(servos)
    assert jm.any_velocity and jm.is_velocity.tolist() == [True] + [False] * (cfg.n - 1)
    out = np.zeros(cfg.n)
    jm.velocity_to_servo(np.full(cfg.n, 1.25), out)
    assert out[0] == -1.25 and np.all(out[1:] == 1.25)


def test_free_turning_joints_are_not_limit_checked():
    lim = LimitChecker(["a", "b"], [1, 2], [-1, -1], [1, 1], 0.1)
    q = np.array([7.0, 0.0])
    assert "joint 'a'" in lim.check_position(q)
    lim.skip_measured(np.array([True, False]))
    assert lim.check_position(q) is None
    assert "joint 'b'" in lim.check_position(np.array([7.0, -3.0]))


def test_command_velocity_defaults_to_zero_and_copies():
    c = Command(np.zeros(3), np.zeros(3), np.zeros(3), np.zeros(3))
    assert c.velocity.shape == (3,) and not c.velocity.any()
    d = Command.zeros(3)
    d.velocity[:] = 2.0
    c.copy_from(d)
    assert np.all(c.velocity == 2.0)


def test_hold_velocity_param_checked_applied_and_output():
    cfg = builtin_config("arm")
    ctx = ControllerContext.from_config(cfg)
    j0 = cfg.joint_names[0]
    hold = make_controller("hold", ctx, {"velocity": {j0: 3.0}})   # no position limits on a speed
    st, cmd = JointState.zeros(cfg.n), Command.zeros(cfg.n)
    hold.start(st)
    hold.update(0.0, st, cmd)
    assert cmd.velocity[0] == 3.0 and not cmd.velocity[1:].any()
    hold.apply_params(hold.check_params({"velocity": [0.5] * cfg.n}))
    hold.update(0.1, st, cmd)
    assert np.all(cmd.velocity == 0.5)
    with pytest.raises(ControllerParamError, match="hold.velocity: unknown joint 'nope'"):
        hold.check_params({"velocity": {"nope": 1.0}})
    with pytest.raises(ControllerParamError, match=r"hold.velocity\[.*\]: must be finite"):
        hold.check_params({"velocity": {j0: float("inf")}})


class _Regs:
    """A bus double: register values by name, every write recorded."""

    def __init__(self, **raw):
        self.raw = dict(raw)
        self.writes = []

    def read_raw(self, sid, name):
        return self.raw[name]

    def write_raw(self, sid, name, value):
        self.writes.append((name, value))
        self.raw[name] = value

    def write(self, sid, name, value):
        self.writes.append((name, value))


def test_wheel_mode_set_and_left_on_ax():
    bus = _Regs(cw_angle_limit=0, ccw_angle_limit=1023)
    set_wheel_mode(bus, 1, "w")
    # speed 0 first (no jump when torque comes on), torque off before the EEPROM limits
    assert bus.writes == [("moving_speed", 0.0), ("torque_enable", 0), ("cw_angle_limit", 0),
                          ("ccw_angle_limit", 0)]
    bus.writes.clear()
    set_wheel_mode(bus, 1, "w")                         # already a wheel: only the speed
    assert bus.writes == [("moving_speed", 0.0)]
    bus.writes.clear()
    leave_wheel_mode(bus, 1, "w", get_table("AX-18A"))  # a position run after a velocity run
    assert bus.writes == [("torque_enable", 0), ("cw_angle_limit", 0), ("ccw_angle_limit", 1023)]
    bus.writes.clear()
    leave_wheel_mode(bus, 1, "w", get_table("AX-18A"))  # joint mode already: nothing
    assert bus.writes == []
    assert velocity_register(get_table("AX-18A")) == "moving_speed"
    assert velocity_register(get_table("XM430-W350")) == "goal_velocity"


def test_current_mode_torque_is_not_also_a_goal_offset():
    """A current-mode servo with a calibrated stiffness gets its torque as current only; a position
    servo with the same stiffness gets it as a goal offset tau / k_p."""
    cfg = builtin_config("arm")
    servos = [replace(s, mode="current" if i == 0 else "position", position_stiffness=4.0, offset=0.0)
              for i, s in enumerate(cfg.servos)]
    jm = JointMap(servos)
    cmd = Command.zeros(cfg.n)
    cmd.position[:] = 0.1
    cmd.effort[:] = 2.0
    out = jm.offset_goal(cmd, np.zeros(cfg.n))
    assert out[0] == pytest.approx(0.1)
    assert out[1:] == pytest.approx(np.full(cfg.n - 1, 0.1 + 2.0 / 4.0))
