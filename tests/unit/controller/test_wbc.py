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
    pose = builtin_config("humanoid").startup.via[-1]      # knees bent
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
    ctrl = make_controller("wbc", ctx, {"posture": builtin_config("humanoid").startup.via[-1]})
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
    ({"position_servo": "stiff"}, "wbc.position_servo: 'stiff'; choose one of torque, impedance"),
    ({"coulomb_compensation": "yes"}, "wbc.coulomb_compensation: expected true or false"),
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


def test_the_goal_offset_carries_the_servos_coulomb_friction():
    """The servo law the goal offset inverts is ``k_p (goal - q) - k_d dq - k_c sgn(dq)``:
    ``trot`` adds ``k_c`` (the XM430's 0.134 N m) in the direction the joint moves, ramped over
    ``COULOMB_BAND``, to the torque it sends and so to the goal; ``wbc`` does not unless asked
    (issue 11: the front feet's stall at the end of the swing)."""
    from servoloop.controller.controllers.wbc import COULOMB_BAND

    ctx = ControllerContext.from_config(builtin_config("quadruped"))
    runs = {}
    for name, params in (("trot", {}), ("wbc", {}), ("wbc", {"coulomb_compensation": True})):
        ctrl = make_controller(name, ctx, params)
        kc = ctrl._coulomb.copy()
        state, cmd = JointState.zeros(ctx.n), Command.zeros(ctx.n)
        state.position[:] = ctrl._default_posture()
        # one joint fast each way, one inside the band, one at rest
        state.velocity[:4] = [2.0, -2.0, 0.25 * COULOMB_BAND, 0.0]
        tau = np.full(ctx.n, 0.3)
        ctrl._servo_command(tau, ctrl._tau, 1.0, state.position, state.velocity, ctrl._advance,
                            ctrl.posture, ctrl._impedance_u8, ctrl._own_offset, ctrl._coulomb,
                            COULOMB_BAND, cmd.effort, cmd.position, cmd.kp, cmd.kd)
        runs[(name, bool(params))] = kc, cmd.effort.copy(), cmd.position - state.position
    kc, effort, offset = runs[("trot", False)]
    assert np.allclose(kc, 0.134)
    assert np.allclose(effort[:4], [0.3 + 0.134, 0.3 - 0.134, 0.3 + 0.25 * 0.134, 0.3])
    # the goal: the measured position, the damping advance, and the effort over k_p (20 N m/rad)
    adv = runs[("trot", False)][2] - effort / 20.0
    assert np.allclose(adv[:4], 0.0075 * np.array([2.0, -2.0, 0.25 * COULOMB_BAND, 0.0]))
    assert np.allclose(runs[("wbc", False)][0], 0.0) and np.allclose(runs[("wbc", False)][1], 0.3)
    assert np.allclose(runs[("wbc", True)][1], effort)


def test_fixed_base_robot_is_refused():
    ctx = ControllerContext.from_config(builtin_config("arm"))
    with pytest.raises(ControllerParamError, match="fixed base"):
        make_controller("wbc", ctx)


def _humanoid_ctx(via=True):
    from dataclasses import replace

    cfg = builtin_config("humanoid")
    pose = dict(cfg.startup.via[-1])
    if not via:
        cfg = replace(cfg, startup=replace(cfg.startup, via=()))
    return ControllerContext.from_config(cfg), pose


def test_default_posture_is_the_startup_pose_else_the_measured_one_never_straight_legs():
    # the limit fault of issue 11: with no posture and no startup.via the default was all
    # zeros, straight legs (knee at its stop), and a held crouched humanoid buckled its knees
    ctx, pose = _humanoid_ctx(via=True)
    standing = np.array([pose[j] for j in ctx.joint_names])
    ctrl = make_controller("wbc", ctx, {})
    state = JointState.zeros(ctx.n)                     # whatever it reads: the via pose wins
    ctrl.start(state)
    np.testing.assert_allclose(ctrl.posture, standing)
    ctx, _ = _humanoid_ctx(via=False)
    ctrl = make_controller("wbc", ctx, {})
    state = JointState.zeros(ctx.n)
    state.position[:] = standing
    state.position[0] = np.nan                          # a failed read: not into the posture
    ctrl.start(state)
    assert ctrl.posture[ctx.joint_names.index("l_knee")] == pytest.approx(0.8)
    assert ctrl.posture[0] == 0.0
    assert np.all(ctrl.posture >= ctx.lower) and np.all(ctrl.posture <= ctx.upper)


@pytest.mark.parametrize("mode", ["torque", "impedance"])
def test_position_servo_goal_is_based_on_the_measured_position_or_the_posture(mode):
    ctx, pose = _humanoid_ctx()
    ctrl = make_controller("wbc", ctx, {"position_servo": mode})
    state = JointState.zeros(ctx.n)
    state.position[:] = [pose[j] + 0.01 for j in ctx.joint_names]   # 10 mrad off the posture
    state.velocity[:] = 0.2
    cmd = Command.zeros(ctx.n)
    ctrl.start(state)
    ctrl.update(0.0, state, cmd)                        # startup: the posture, no torque
    np.testing.assert_allclose(cmd.position, ctrl.posture)
    model = ctrl.robot.model
    q = model.neutral().copy()
    q[2] = 0.205
    q[7 + ctrl.robot.idx] = state.position
    ctrl.begin_run(q, None)
    ctrl.update(0.005, state, cmd)
    kp = ctrl._servo_models("kp_nm_per_rad")
    kd = ctrl._servo_models("kd_nm_s_per_rad")
    assert np.abs(cmd.effort).max() > 0.01
    if mode == "torque":       # the servo delivers tau: its own stiffness and damping cancelled
        want = state.position + (kd / kp) * state.velocity + cmd.effort / kp
    else:                      # the servo keeps its stiffness about the posture; tau on top
        want = ctrl.posture + cmd.effort / kp
    np.testing.assert_allclose(cmd.position, want, atol=1e-12)
