"""The tick's stages on their own: joint map, startup ramp, safety as typed faults, fault -> error."""

from dataclasses import replace

import numpy as np
import pytest

from servoloop.controller.config import builtin_config
from servoloop.controller.controllers import Command, ControllerContext, JointState, make_controller
from servoloop.controller.controllers.minimum_jerk import min_jerk_s
from servoloop.controller.errors import ConfigError, ConnectError, ControllerParamError, FaultError
from servoloop.controller.faults import Fault, FaultKind, fault_error
from servoloop.controller.joint_map import JointMap
from servoloop.controller.safety import SafetyStage
from servoloop.controller.startup_ramp import StartupRamp


def arm(**servo0):
    cfg = builtin_config("arm")
    servos = list(cfg.servos)
    servos[0] = replace(servos[0], **servo0)
    return replace(cfg, servos=tuple(servos))


def test_joint_map_round_trip_with_direction_and_offset():
    cfg = arm(offset=0.5, direction=-1)
    jm = JointMap(cfg.servos)
    n = cfg.n
    st, cur = JointState.zeros(n), np.zeros(n)
    q_servo = np.linspace(-0.4, 0.6, n)
    jm.to_joint(q_servo, np.full(n, 2.0), None, st, cur)
    assert st.position[0] == pytest.approx(-(q_servo[0] - 0.5)) and st.velocity[0] == -2.0
    np.testing.assert_allclose(st.position[1:], q_servo[1:])
    goal_servo, current_servo = np.zeros(n), np.zeros(n)
    jm.to_servo(st.position, Command.zeros(n), st, goal_servo, current_servo)
    np.testing.assert_allclose(goal_servo, q_servo)  # joint -> servo undoes servo -> joint


def test_joint_map_current_clipped_to_goal_current_range_with_servo_sign():
    cfg = arm(mode="current", torque_constant=2.0, direction=-1)
    jm = JointMap(cfg.servos)
    jm.set_current_limits(np.full(cfg.n, 1.5))
    n = cfg.n
    st, cmd = JointState.zeros(n), Command.zeros(n)
    cmd.effort[:] = 10.0  # 5 A asked, 1.5 A allowed
    cur = np.zeros(n)
    jm.to_servo(np.zeros(n), cmd, st, np.zeros(n), cur)
    assert cur[0] == -1.5


def test_joint_map_effort_from_load_servos_is_not_a_torque():
    cfg = arm(mode="current", torque_constant=2.0)
    jm = JointMap(cfg.servos)
    jm.set_effort_units(["ratio"] + ["A"] * (cfg.n - 1))
    st, cur = JointState.zeros(cfg.n), np.zeros(cfg.n)
    jm.to_joint(np.zeros(cfg.n), np.zeros(cfg.n), np.ones(cfg.n), st, cur)
    assert np.isnan(st.effort[0]) and cur[0] == 1.0


def _ramp(via, n_ticks=100):
    cfg = builtin_config("arm")
    ctx = ControllerContext.from_config(cfg)
    return cfg, ctx, StartupRamp(ctx, via, n_ticks)


def test_ramp_passes_each_via_pose_at_its_segment_end_with_minimum_jerk():
    j0, j1 = builtin_config("arm").joint_names[:2]
    cfg, ctx, ramp = _ramp([{j0: 0.4}, {j1: -0.3}], 90)
    hold = make_controller("hold", ctx, {})
    start = np.zeros(cfg.n)
    st = JointState.zeros(cfg.n)
    hold.start(st)
    ramp.begin(start)
    cmd = Command.zeros(cfg.n)
    poses = []
    for _ in range(90):
        ramp.step(hold, st, cmd)
        poses.append(cmd.position.copy())
    # three segments of 30 ticks: start -> via0 -> via1 (keeps via0's j0) -> hold's command (start)
    assert poses[29][0] == pytest.approx(0.4) and poses[29][1] == pytest.approx(0.0)
    assert poses[59][0] == pytest.approx(0.4) and poses[59][1] == pytest.approx(-0.3)
    np.testing.assert_allclose(poses[-1], start, atol=1e-12)
    assert poses[14][0] == pytest.approx(0.4 * min_jerk_s(0.5))  # halfway: min-jerk, not linear


def test_ramp_checks_via_poses_before_any_io():
    cfg = builtin_config("arm")
    ctx = ControllerContext.from_config(cfg)
    with pytest.raises(ControllerParamError, match=r"startup.via\[0\]"):
        StartupRamp(ctx, [{"nope": 0.1}], 10)


def test_safety_stage_faults_are_typed_and_name_servo_and_joint():
    cfg = builtin_config("arm")
    sf = replace(cfg.safety, max_consecutive_missed=2, max_temperature_c=70.0)
    lower = np.array([s.min for s in cfg.servos])
    upper = np.array([s.max for s in cfg.servos])
    stage = SafetyStage(sf, cfg.joint_names, [s.id for s in cfg.servos], lower, upper)
    q = (lower + upper) / 2
    assert stage.check_measured(q) is None
    q[2] = upper[2] + sf.position_margin + 0.05
    f = stage.check_measured(q)
    assert f.kind is FaultKind.LIMIT and f.servo == cfg.servos[2].id and f.joint == cfg.joint_names[2]
    assert stage.late(1) is None and stage.late(0) is None and stage.late(1) is None
    assert stage.late(3).kind is FaultKind.LATE
    temps = np.full(cfg.n, 40.0)
    temps[1] = 75.0
    f = stage.check_monitor(temps, None)
    assert f.kind is FaultKind.TEMPERATURE and f.servo == cfg.servos[1].id and "75.0" in f.message


def test_fault_error_class_follows_the_first_fault():
    connect = Fault(FaultKind.CONNECT, "connect: no reply from servo 3", 3, "elbow")
    limit = Fault(FaultKind.LIMIT, "joint 'elbow' past its limits", 3, "elbow")
    assert isinstance(fault_error([connect, limit]), ConnectError)
    assert isinstance(fault_error([Fault(FaultKind.CONFIG, "mode")]), ConfigError)
    err = fault_error([limit, connect])
    assert isinstance(err, FaultError) and err.faults == [limit, connect]
    assert limit.as_dict() == {"kind": "limit", "servo": 3, "joint": "elbow",
                               "message": "joint 'elbow' past its limits"}
