"""``wbc`` and ``trot`` on the contact simulator, in process, over seconds of simulated time.

The controllers run through their daemon interface (``start`` / ``update`` on
a JointState, ``command.effort`` out) with the simulator's true base state in
``state.base`` (what the estimate stage gives a real robot); their torques
drive the simulated joints directly (current-mode servos) or as goal offsets
of position servos (``drive="offset"``, the AX-18A humanoid).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from servoloop.controller.config import builtin_config
from servoloop.controller.controllers import Command, ControllerContext, JointState, make_controller
from servoloop.controller.errors import ControllerParamError
from servoloop.core_cy.contact.laws import ContactLaw
from servoloop.core_cy.sim.model import RigidSettings
from servoloop.core_cy.sim.simulator import SimConfig
from servoloop.experiments.closed_loop import TorquePlant, builtin_urdf
from servoloop.experiments.seed003 import MU_INF


def tilt_deg(quat) -> float:
    return math.degrees(2.0 * math.asin(min(1.0, math.hypot(quat[0], quat[1]))))


class Rig:
    """A controller of a built-in robot driving the simulator, true base state."""

    def __init__(self, robot, name, params=None, sim=None, drive="torque", servo=None):
        cfg = builtin_config(robot)
        self.ctx = ControllerContext.from_config(cfg)
        self.ctrl = make_controller(name, self.ctx, params or {})
        model = self.ctrl.robot.model
        self.names = list(model.actuated_joint_names)
        self.idx = self.ctrl.robot.idx
        posture = self.ctrl._default_posture()
        q0 = np.zeros(len(self.names))
        q0[self.idx] = posture
        steps = max(1, round(self.ctx.dt / 1e-3))
        self.plant = TorquePlant(builtin_urdf(robot), sim or SimConfig(mode="rigid", dt=1e-3), q0,
                                 substeps=steps, servo=servo, drive=drive)
        self.state = JointState.zeros(self.ctx.n)
        self.cmd = Command.zeros(self.ctx.n)
        self.ctrl.start(self.state)
        self.k = 0
        self.z0 = float(self.plant.q[2])
        self.max_tilt = 0.0
        self.min_z = self.z0

    def run(self, seconds, every=None):
        for _ in range(round(seconds / self.ctx.dt)):
            self.k += 1
            p = self.plant
            self.state.position[:] = p.q[7:][self.idx]
            self.state.velocity[:] = p.v[6:][self.idx]
            self.state.base = p.base_state()
            self.ctrl.update(self.k * self.ctx.dt, self.state, self.cmd)
            tau = np.zeros(len(self.names))
            tau[self.idx] = self.cmd.effort
            p.step(tau)
            self.max_tilt = max(self.max_tilt, tilt_deg(p.q[3:7]))
            self.min_z = min(self.min_z, float(p.q[2]))
            if every is not None:
                every(self)


def test_wbc_stands_the_quadruped_on_its_feet_carrying_its_weight():
    rig = Rig("quadruped", "wbc")
    rig.run(2.0)
    p = rig.plant
    assert abs(p.q[2] - rig.z0) < 0.005                  # holds the standing height
    assert rig.max_tilt < 1.0
    assert np.linalg.norm(p.q[:2]) < 0.01                 # does not wander
    weight = p.sim.model.total_mass * 9.81
    assert p.contact_forces[:, 2].sum() == pytest.approx(weight, rel=0.03)
    assert rig.ctrl.core.failures == 0
    # the ID's predicted normal forces are the simulator's (rigid ground, Coulomb LCP)
    assert np.abs(rig.ctrl.core.forces[:, 2].sum() - weight) < 0.03 * weight


def test_wbc_moves_the_base_to_a_goal_pose_from_the_socket():
    rig = Rig("quadruped", "wbc")
    rig.run(0.5)
    goal = rig.ctrl.check_goal({"z": rig.z0 - 0.03, "pitch": 0.1})
    rig.ctrl.apply_goal(goal)
    rig.run(1.5)
    q = rig.plant.q
    pitch = math.asin(2 * (q[6] * q[4] - q[5] * q[3]))
    # most of the way there: the posture task (weight 0.05) leaves a steady offset
    assert rig.z0 - 0.03 - 0.002 < q[2] < rig.z0 - 0.015
    assert 0.05 < pitch < 0.11
    assert rig.max_tilt < 8.0


def test_trot_walks_forward_at_the_speed_set_over_the_socket():
    rig = Rig("quadruped", "trot")
    rig.run(0.5)
    assert abs(rig.plant.q[0]) < 0.01                     # trotting in place (speed 0)
    rig.ctrl.apply_params(rig.ctrl.check_params({"speed_mps": 0.2}))
    x0 = float(rig.plant.q[0])
    rig.run(3.0)
    q = rig.plant.q
    # 0.4 s of slew to 0.2 m/s then 2.6 s at it: ~0.56 m ahead
    assert q[0] - x0 > 0.4
    assert abs(q[1]) < 0.1
    assert rig.min_z > 0.8 * rig.z0 and rig.max_tilt < 15.0   # no fall
    assert rig.ctrl.status()["speed_mps"] == pytest.approx(0.2)


@pytest.mark.parametrize("mode", ["rigid", "compliant"])
def test_trot_does_not_fall_at_infinite_friction(mode):
    # "infinite" = MU_INF (2): the compliant law needs a finite coefficient, and no foot
    # here asks for |f_t| / f_n > 1 (true mu = inf on rigid ground: the test below)
    sim = SimConfig(mode=mode, dt=1e-3, rigid=RigidSettings(mu=MU_INF),
                    law=ContactLaw(mu_static=MU_INF, mu_dynamic=MU_INF))
    rig = Rig("quadruped", "trot", {"speed_mps": 0.2, "mu": MU_INF}, sim=sim)
    rig.run(2.0)
    assert rig.min_z > 0.8 * rig.z0 and rig.max_tilt < 15.0
    assert rig.plant.q[0] > 0.15


@pytest.mark.parametrize("solver", ["pgs", "lemke"])
def test_trot_does_not_fall_at_true_infinite_friction_on_rigid_ground(solver):
    # the rigid simulator takes mu = inf as it is (no tangential bound); the controller's
    # Coulomb ID needs a finite coefficient and gets MU_INF
    sim = SimConfig(mode="rigid", dt=1e-3, rigid=RigidSettings(mu=math.inf, solver=solver))
    rig = Rig("quadruped", "trot", {"speed_mps": 0.2, "mu": MU_INF}, sim=sim)
    rig.run(2.0)
    assert rig.min_z > 0.8 * rig.z0 and rig.max_tilt < 15.0
    assert rig.plant.q[0] > 0.15


def test_humanoid_wbc_stands_and_rejects_a_push_through_position_servo_offsets():
    # AX-18A position servos: the torque reaches the joint as a goal offset (seed 000's
    # law inverted), at the humanoid's 200 Hz loop
    pose = builtin_config("humanoid").controller.params["pose"]      # knees bent
    rig = Rig("humanoid", "wbc", {"posture": pose}, sim=SimConfig(mode="rigid", dt=1e-3),
              drive="offset", servo="AX-18A")
    rig.run(1.0)
    assert rig.max_tilt < 1.0
    rig.plant.push((0.3, 0.0, 0.0))                       # 0.3 N s forward on 1.7 kg
    tilts = []
    rig.run(2.0, every=lambda r: tilts.append(tilt_deg(r.plant.q[3:7])))
    assert max(tilts) > 3.0                               # the push did tip it
    assert rig.min_z > 0.9 * rig.z0 and max(tilts) < 20.0  # and it did not fall
    assert tilts[-1] < max(tilts)                         # it is coming back


def test_default_feet_are_the_lowest_links_with_contact_geometry():
    ctx = ControllerContext.from_config(builtin_config("humanoid"))
    ctrl = make_controller("wbc", ctx, {"posture": builtin_config("humanoid").controller.params["pose"]})
    assert [f.link for f in ctrl.robot.feet] == ["l_foot", "r_foot"]
    ctx = ControllerContext.from_config(builtin_config("quadruped"))
    ctrl = make_controller("trot", ctx)
    assert sorted(f.link for f in ctrl.robot.feet) == sorted(
        f"{leg}_foot_link" for leg in ("lf", "rf", "lh", "rh"))


@pytest.mark.parametrize("params, match", [
    ({"variant": "magic"}, "wbc.variant"),
    ({"mu": -1}, "wbc.mu"),
    ({"feet": ["base_link"]}, "wbc.feet"),
    ({"base_kp": -3}, "wbc.base_kp"),
    ({"speed": 1}, "unknown parameter 'speed'"),
])
def test_bad_wbc_params_name_the_key(params, match):
    ctx = ControllerContext.from_config(builtin_config("quadruped"))
    with pytest.raises(ControllerParamError, match=match):
        make_controller("wbc", ctx, params)


def test_bad_goals_and_trot_params_are_refused_with_the_reason():
    ctx = ControllerContext.from_config(builtin_config("quadruped"))
    ctrl = make_controller("trot", ctx)
    with pytest.raises(ControllerParamError, match="unknown key 'height'"):
        ctrl.check_goal({"height": 0.2})
    with pytest.raises(ControllerParamError, match="base pose"):
        ctrl.check_goal([0.1, 0.2])
    with pytest.raises(ControllerParamError, match=r"trot.speed_mps = 3.0 is outside"):
        ctrl.check_params({"speed_mps": 3.0})
    with pytest.raises(ControllerParamError, match="only be set in the config"):
        ctrl.check_params({"period": 0.4})
    ctrl.begin_run(ctrl.robot.model.neutral(), None)       # goals are checked against the stand
    with pytest.raises(ControllerParamError, match="goal z"):
        ctrl.apply_goal({"z": 5.0})


def test_fixed_base_robot_is_refused():
    ctx = ControllerContext.from_config(builtin_config("arm"))
    with pytest.raises(ControllerParamError, match="fixed base"):
        make_controller("wbc", ctx)
