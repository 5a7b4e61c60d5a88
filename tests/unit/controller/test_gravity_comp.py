"""gravity_comp: core_cy gravity torques (checked against Pinocchio), and how the
daemon turns torque into current (current mode) or a goal offset (position servos)."""

from dataclasses import replace

import numpy as np
import pytest

from servoloop.controller.config import builtin_config
from servoloop.controller.controllers import Command, ControllerContext, JointState, make_controller
from servoloop.controller.errors import ControllerParamError

core_cy = pytest.importorskip("core_cy")
if not hasattr(core_cy, "Model"):
    pytest.skip("core_cy dynamics not built", allow_module_level=True)


def arm_cfg(**servo_changes):
    cfg = builtin_config("arm")
    servos = tuple(replace(s, **servo_changes) for s in cfg.servos)
    return replace(cfg, servos=servos, controller=replace(cfg.controller, name="gravity_comp"))


def test_gravity_torque_matches_pinocchio():
    pin = pytest.importorskip("pinocchio")
    cfg = arm_cfg(position_stiffness=2.0)
    c = make_controller("gravity_comp", ControllerContext.from_config(cfg))
    pm = pin.buildModelFromUrdf(str(cfg.urdf_path()))
    pd = pm.createData()
    rng = np.random.default_rng(0)
    tau = np.zeros(cfg.n)
    for _ in range(5):
        q = rng.uniform(-1.0, 1.0, cfg.n)
        c.gravity_torque(q, tau)
        # config joints are in Pinocchio's order for the built-in arm
        np.testing.assert_allclose(tau, pin.computeGeneralizedGravity(pm, pd, q), atol=1e-9)


def test_update_fills_effort_setpoint_and_gains():
    cfg = arm_cfg(position_stiffness=2.0)
    c = make_controller("gravity_comp", ControllerContext.from_config(cfg), {"scale": 0.5, "kp": 3.0})
    st = JointState.zeros(cfg.n)
    st.position[:] = [0.0, 0.5, -0.3, 0.0, 0.2, 0.0]
    c.start(st)
    cmd = Command.zeros(cfg.n)
    c.update(0.1, st, cmd)
    full = np.zeros(cfg.n)
    c.gravity_torque(st.position, full)
    np.testing.assert_allclose(cmd.effort, 0.5 * full)
    np.testing.assert_allclose(cmd.position, st.position)
    np.testing.assert_allclose(cmd.kp, 3.0)
    assert abs(full[1]) > 0.1  # the shoulder does carry the arm


def test_position_servos_need_calibrated_stiffness():
    with pytest.raises(ControllerParamError, match="position_stiffness.*base_yaw"):
        make_controller("gravity_comp", ControllerContext.from_config(arm_cfg()))


def test_param_checks():
    ctx = ControllerContext.from_config(arm_cfg(position_stiffness=2.0))
    with pytest.raises(ControllerParamError, match="scale"):
        make_controller("gravity_comp", ctx, {"scale": 3.0})
    with pytest.raises(ControllerParamError, match="kp"):
        make_controller("gravity_comp", ctx, {"kp": -1.0})


def _daemon(cfg):
    from servoloop.controller.daemon import Daemon

    return Daemon(cfg, bus=None, telemetry_path=None, socket_path=None)


def test_daemon_offsets_position_servo_goals_by_tau_over_stiffness():
    cfg = arm_cfg(position_stiffness=4.0)
    d = _daemon(cfg)
    d.cmd.position[:] = 0.1
    d.cmd.effort[:] = [0.0, 0.8, -0.4, 0.0, 0.0, 0.0]
    d.loop.actuate()
    np.testing.assert_allclose(d.goal, [0.1, 0.3, 0.0, 0.1, 0.1, 0.1])
    # clamped to the joint limits after the offset (the slew limit, tested in
    # test_safety_checks, is started afresh so that it does not hide the clamp)
    d.cmd.effort[:] = [0.0, 100.0, 0.0, 0.0, 0.0, 0.0]
    d.loop.safety.slew.primed = False
    d.loop.actuate()
    assert d.goal[1] == cfg.servos[1].max


def test_daemon_current_mode_torque_to_current_with_direction():
    cfg = arm_cfg(mode="current", torque_constant=2.0, direction=-1)
    d = _daemon(cfg)
    d.state.position[:] = 0.0
    d.state.velocity[:] = 1.0
    d.cmd.position[:] = 0.2
    d.cmd.effort[:] = 1.0
    d.cmd.kp[:] = 5.0
    d.cmd.kd[:] = 0.5
    d.loop.actuate()
    # i_joint = (1 + 5 * 0.2 - 0.5 * 1) / 2 = 0.75 A; servo sign flipped by direction -1
    np.testing.assert_allclose(d.current_servo, -0.75)


def test_daemon_maps_joint_goal_to_servo_with_offset_and_direction():
    cfg = builtin_config("arm")
    servos = list(cfg.servos)
    servos[0] = replace(servos[0], offset=0.5, direction=-1)
    d = _daemon(replace(cfg, servos=tuple(servos)))
    d.cmd.position[:] = 0.2
    d.loop.actuate()
    assert d.goal_servo[0] == pytest.approx(-0.2 + 0.5)
    assert d.goal_servo[1] == pytest.approx(0.2)
