"""The trot's swing joint-speed demand (issue 11: the swing feet reach a third of the step
height in the daemon; seed 003's 1.5 cm in 75 ms asks the quadruped's legs for about twice
the XM430-W350's no-load speed).  :func:`trot_planner.swing_joint_speed` and the ``trot``
status fields that report it next to the servos' no-load speed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from servoloop.controller.config import builtin_config
from servoloop.controller.controllers import ControllerContext, make_controller
from servoloop.controller.controllers.trot import MIN_STEP_HEIGHT, SPEED_MARGIN, default_step_height
from servoloop.controller.wholebody.gait import TrotGait, swing_height, touchdown_phase
from servoloop.controller.wholebody.trot_planner import swing_joint_speed

#: the built-in quadruped's legs (robots/quadruped/quadruped.yaml): thigh = shank [m], and
#: the standing hip flexion [rad] that puts the foot straight below the hip (knee = -2 hip)
LEG_M, HIP_RAD = 0.14, 0.6


def _trot(**params):
    ctx = ControllerContext.from_config(builtin_config("quadruped"))
    return make_controller("trot", ctx, params)


def _standing(ctrl):
    r = ctrl.robot
    q0 = r.model.neutral().copy()
    q0[r.q_joints] = ctrl._default_posture()
    return r, q0


def _gait(robot, **kw) -> TrotGait:
    g = TrotGait(**kw)
    g.touchdown = np.array([touchdown_phase(f.link, i) for i, f in enumerate(robot.feet)])
    return g


def test_in_place_the_demand_is_the_knee_rate_of_the_peak_lift_speed():
    # trotting in place a foot below its hip rises straight up: the leg shortens as
    # l = 2 L cos(hip), knee = -2 hip, so the foot's vertical speed is L sin(hip) times the
    # knee's rate; the knee is the faster joint (twice the hip)
    robot, q0 = _standing(_trot())
    gait = _gait(robot)
    T = gait.swing_time
    vz = max(abs(swing_height(u, gait.step_height, T)[1]) for u in np.linspace(0, 1, 2001)[:-1])
    expected = vz / (LEG_M * math.sin(HIP_RAD))
    got = swing_joint_speed(robot, q0, gait, 0.0, samples=200)
    # the pose moves over the swing (hip 0.6 rad at the ground, a little more at the apex)
    assert got == pytest.approx(np.full(4, expected), rel=0.1)
    assert got.min() > 9.0            # ~10 rad/s at seed 003's 1.5 cm in 75 ms


def test_in_place_the_demand_scales_with_the_inverse_of_the_swing_time():
    robot, q0 = _standing(_trot())
    fast = swing_joint_speed(robot, q0, _gait(robot, period=0.3), 0.0)
    slow = swing_joint_speed(robot, q0, _gait(robot, period=0.6), 0.0)
    # the same positions at the same progress, each rate over twice the time
    np.testing.assert_allclose(slow, fast / 2.0, rtol=1e-6)


def test_walking_forward_adds_the_stride_to_the_demand():
    robot, q0 = _standing(_trot())
    gait = _gait(robot)
    still = swing_joint_speed(robot, q0, gait, 0.0)
    walking = swing_joint_speed(robot, q0, gait, 0.3)
    assert np.all(walking > still)


def test_trot_status_reports_the_demand_against_the_servos_no_load_speed():
    s = _trot(speed_mps=0.1, step_height=0.015).status()
    # seed 003's gait asks more than twice what the XM430-W350 does at 12 V (4.82 rad/s)
    assert s["servo_no_load_speed_rad_s"] == pytest.approx(46.0 * 2 * math.pi / 60, rel=1e-6)
    assert s["swing_joint_speed_rad_s"] > 2.0 * s["servo_no_load_speed_rad_s"]
    assert s["step_height_m"] == 0.015 and not s["step_height_default"]     # the user's step kept
    # a lower, slower step is within it (its 6 cm stride in 0.15 s now asks the most)
    trot = _trot(speed_mps=0.1, step_height=0.015)
    assert len(trot.warnings) == 1 and "step_height" in trot.warnings[0]     # said in the summary
    gentle_trot = _trot(speed_mps=0.1, step_height=0.004, period=0.6)
    gentle = gentle_trot.status()
    assert gentle["swing_joint_speed_rad_s"] < gentle["servo_no_load_speed_rad_s"]
    assert gentle_trot.warnings == []


@pytest.mark.parametrize("speed", [0.0, 0.05, 0.1])
def test_the_default_step_is_the_highest_the_servos_can_swing_with_margin(speed):
    # issue 11: without a step_height the trot asks at most SPEED_MARGIN of the no-load speed
    trot = _trot(speed_mps=speed)
    s = trot.status()
    assert s["step_height_default"] and trot.warnings == []
    limit = SPEED_MARGIN * s["servo_no_load_speed_rad_s"]
    assert MIN_STEP_HEIGHT <= s["step_height_m"] < 0.015
    assert s["swing_joint_speed_rad_s"] <= limit
    # and it is the highest such step: 5 % higher asks more than the margin
    assert trot._demand_at(1.05 * s["step_height_m"]) > limit
    assert trot.planner is None and trot._gait().step_height == s["step_height_m"]


def test_a_stride_the_servos_cannot_swing_gets_the_lowest_step_and_the_warning():
    trot = _trot(speed_mps=0.4)         # the stride alone asks ~12 rad/s
    assert trot.status()["step_height_m"] == MIN_STEP_HEIGHT
    assert len(trot.warnings) == 1 and "speed_mps" in trot.warnings[0]


def test_default_step_height_solves_the_demand_for_the_target():
    calls = []

    def demand(h):                     # a stride part and a lift part, as the swing's
        calls.append(h)
        return 2.0 + 500.0 * h + 4000.0 * h * h

    h = default_step_height(demand, 5.0)
    assert demand(h) <= 5.0 and demand(h) > 5.0 * 0.97 and len(calls) <= 10
    assert default_step_height(demand, 100.0) == 0.015          # seed 003's step fits
    assert default_step_height(demand, 1.0) == MIN_STEP_HEIGHT  # nothing fits
    assert default_step_height(lambda h: math.nan, 1.0) == 0.015  # no figures: no opinion


def test_trot_marks_its_goals_torque_carrying_and_wbc_keeps_the_ramp():
    ctx = ControllerContext.from_config(builtin_config("quadruped"))
    assert _trot().torque_goals.all() and _trot().torque_goals.shape == (ctx.n,)
    assert make_controller("wbc", ctx, {}).torque_goals is None
    # impedance goals ride on the posture, which may jump: the ramp
    assert not _trot(position_servo="impedance").torque_goals.any()
