"""The compiled simulator: agreement with the Pinocchio reference, and physics checks
(seed 002 §10 checks 8, 12, 13; seed 003 §9 checks 10-11)."""

from dataclasses import replace

import numpy as np
import pinocchio as pin
import pytest

from servoloop.core_cy.contact.laws import ContactLaw
from servoloop.core_cy.dynamics._dynamics import Model
from servoloop.core_cy.sim.model import (
    Ground,
    JointSettings,
    RigidSettings,
    contact_points_from_urdf,
    simulator_servo_model,
)
from servoloop.core_cy.sim.reference import ReferenceSimulator
from servoloop.core_cy.sim.simulator import BatchSimulator, SimConfig, SimulationError, Simulator
from servoloop.experiments.gaits import stand_goals, trot_goals
from servoloop.robots import urdf_path

QUAD = str(urdf_path("quadruped"))
G = 9.81

BOX_URDF = """<?xml version="1.0"?>
<robot name="box">
  <link name="box">
    <inertial><origin xyz="0 0 0"/><mass value="1.0"/>
      <inertia ixx="0.0025" ixy="0" ixz="0" iyy="0.0041667" iyz="0" izz="0.0058333"/></inertial>
    <collision><geometry><box size="0.2 0.1 0.05"/></geometry></collision>
  </link>
</robot>
"""


@pytest.fixture(scope="module")
def box_urdf(tmp_path_factory):
    p = tmp_path_factory.mktemp("box") / "box.urdf"
    p.write_text(BOX_URDF)
    return str(p)


@pytest.fixture(scope="module")
def goals():
    return trot_goals(QUAD, 1e-3, 1.2)


@pytest.mark.parametrize("mode,integrator,cone", [
    ("compliant", "euler", "elliptic"), ("compliant", "euler", "per_axis"),
    ("compliant", "rk4", "elliptic"), ("rigid", "euler", "per_axis"), ("rigid", "euler", "elliptic")])
def test_step_matches_pinocchio_reference(mode, integrator, cone, goals):
    cfg = SimConfig(mode=mode, integrator=integrator, law=replace(ContactLaw(), cone=cone),
                    rigid=replace(RigidSettings(), cone=cone))
    sim = Simulator.from_urdf(QUAD, cfg)
    ref = ReferenceSimulator(QUAD, sim.points, cfg.law, cfg.servo, cfg.ground, mode, integrator,
                             cfg.dt, cfg.rigid, cfg.joints)
    sim.reset(goals[0])
    rng = np.random.default_rng(5)
    for k in range(4):
        q = sim.q.copy()
        q[2] -= 0.002 * k  # pressed into the ground: every contact active
        v = rng.normal(0, 0.3, sim.model.nv)
        sim.set_state(q, v)
        ref.q, ref.v, ref._lam[:] = q.copy(), v.copy(), 0.0
        for _ in range(3):
            sim.step(goals[700])
            ref.step(goals[700])
        np.testing.assert_allclose(pin.difference(ref.model, ref.q, sim.q), 0, atol=1e-11)
        np.testing.assert_allclose(sim.v, ref.v, atol=1e-9)
        np.testing.assert_allclose(sim.contact_forces, ref.forces, atol=1e-8)


def test_free_flight_conserves_momentum():
    # far above the ground, servos off: horizontal momentum and angular momentum
    # about the COM stay constant, vertical momentum falls at m g
    sim = Simulator.from_urdf(QUAD, SimConfig(integrator="rk4", dt=1e-4))
    rng = np.random.default_rng(6)
    q = sim.model.neutral()
    q[7:] = rng.uniform(-0.5, 0.5, 12)
    q[2] = 5.0
    v = rng.normal(0, 0.5, sim.model.nv)
    sim.set_state(q, v)
    pm = pin.buildModelFromUrdf(QUAD, pin.JointModelFreeFlyer())
    pd = pm.createData()
    h0 = pin.computeCentroidalMomentum(pm, pd, sim.q, sim.v).copy()
    T = 0.3
    sim.step(np.zeros(12), torque_on=False, n_steps=int(round(T / 1e-4)))
    h1 = pin.computeCentroidalMomentum(pm, pd, sim.q, sim.v).copy()
    m = sim.model.total_mass
    np.testing.assert_allclose(h1.linear[:2], h0.linear[:2], atol=1e-9)
    assert h1.linear[2] == pytest.approx(h0.linear[2] - m * G * T, abs=1e-8)
    np.testing.assert_allclose(h1.angular, h0.angular, atol=1e-8)
    assert np.all(sim.contact_forces == 0)


@pytest.mark.parametrize("mode", ["compliant", "rigid"])
def test_quadruped_standing_carries_its_weight(mode):
    sim = Simulator.from_urdf(QUAD, SimConfig(mode=mode))
    stand = stand_goals(QUAD)
    sim.reset(stand)
    sim.step(stand, n_steps=1500)
    f = sim.contact_forces
    mg = sim.model.total_mass * G
    assert f[:, 2].sum() == pytest.approx(mg, rel=2e-3)
    assert np.abs(f[:, :2].sum(axis=0)).max() < 1e-3 * mg  # no net push: at rest
    # static share: symmetric left/right, front/hind by the COM's lever arms
    from servoloop.core_cy.dynamics._dynamics import Data, center_of_mass, forward_kinematics

    data = Data(sim.model)
    com = np.array(center_of_mass(sim.model, data, sim.q))
    forward_kinematics(sim.model, data, sim.q)
    R, p = data.rotation_body_to_world, data.position_body_in_world
    feet = np.array([R[b] @ c + p[b] for b, c in zip(sim.points.body, sim.points.position, strict=True)])
    x_front, x_hind = feet[[0, 1], 0].mean(), feet[[2, 3], 0].mean()
    front = mg * (com[0] - x_hind) / (x_front - x_hind) / 2
    np.testing.assert_allclose(f[:, 2], [front, front, mg / 2 - front, mg / 2 - front], rtol=0.03)
    assert np.linalg.norm(sim.v) < 1e-2
    if mode == "compliant":
        law = sim.config.law
        depth = -(feet[:, 2] - sim.points.radius)
        np.testing.assert_allclose(depth, (f[:, 2] / law.stiffness) ** (1 / law.exponent), rtol=0.05)
    else:
        it, res, comp = sim.lcp_stats
        assert 0 < it <= sim.config.rigid.max_iter and res < 1e-4 and comp < 1e-4


def _box_sim(box_urdf, cfg, ground=None):
    model = Model.from_urdf(box_urdf, floating_base=True)
    pts = contact_points_from_urdf(box_urdf)
    sim = Simulator(model, pts, replace(cfg, ground=ground or Ground()))
    return sim


@pytest.mark.parametrize("mode", ["compliant", "rigid"])
def test_sliding_box_decelerates_at_mu_g(mode, box_urdf):
    cfg = SimConfig(mode=mode, dt=2.5e-4, rigid=RigidSettings(mu=0.6, max_iter=200, tol=1e-9),
                    law=replace(ContactLaw(), mu_dynamic=0.6, mu_static=0.7))
    sim = _box_sim(box_urdf, cfg)
    q = sim.model.neutral()
    q[2] = 0.025
    sim.set_state(q)
    sim.step(np.zeros(0), n_steps=400)  # settle
    v = sim.v.copy()
    v[0] = 1.0
    sim.set_state(sim.q.copy(), v)
    speeds = []
    for _ in range(8):
        sim.step(np.zeros(0), n_steps=40)  # 10 ms
        speeds.append(sim.v[0])
    decel = -np.polyfit(np.arange(8) * 0.01, speeds, 1)[0]
    assert decel == pytest.approx(0.6 * G, rel=0.03)
    assert abs(sim.v[1]) < 1e-6


@pytest.mark.parametrize("mode", ["compliant", "rigid"])
def test_box_on_slope_below_static_angle_stays(mode, box_urdf):
    alpha = 0.3  # tan = 0.31 < mu_s
    cfg = SimConfig(mode=mode, dt=5e-4, rigid=RigidSettings(mu=0.8, max_iter=200, tol=1e-9))
    ground = Ground.slope(alpha)
    sim = _box_sim(box_urdf, cfg, ground)
    n = ground.unit_normal()
    q = sim.model.neutral()
    q[:3] = n * 0.0249
    q[3:7] = pin.Quaternion(pin.utils.rotate("y", alpha)).coeffs()
    sim.set_state(q)
    sim.step(np.zeros(0), n_steps=2000)  # 1 s
    x0 = sim.q[:3].copy()
    sim.step(np.zeros(0), n_steps=1000)  # 0.5 s more
    speed = np.linalg.norm(sim.q[:3] - x0) / 0.5
    if mode == "compliant":
        # regularised stick: the box creeps at the speed where mu(v) = tan(alpha),
        # below the transition velocity v_s
        from scipy.optimize import brentq

        from servoloop.core_cy.contact.laws import friction_coefficient

        law = cfg.law
        creep = brentq(lambda x: friction_coefficient(law, x)[0] - np.tan(alpha), 0, law.v_static)
        assert speed < law.v_static
        assert speed == pytest.approx(creep, rel=0.05)
    else:
        assert speed < 1e-4
    # and it does slide when the slope is steeper than the friction angle
    steep = Ground.slope(1.0)
    sim2 = _box_sim(box_urdf, cfg, steep)
    q[:3] = steep.unit_normal() * 0.0249
    q[3:7] = pin.Quaternion(pin.utils.rotate("y", 1.0)).coeffs()
    sim2.set_state(q)
    sim2.step(np.zeros(0), n_steps=400)
    assert np.linalg.norm(sim2.v[:3]) > 0.5


def test_batch_equals_independent_runs(goals):
    cfg = SimConfig()
    sims = [Simulator.from_urdf(QUAD, cfg) for _ in range(3)]
    batch = BatchSimulator.from_urdf(QUAD, 3, cfg)
    rng = np.random.default_rng(7)
    for e, s in enumerate(sims):
        s.reset(goals[0])
        s.set_state(s.q.copy(), rng.normal(0, 0.1, 18))
        batch.q[e], batch.v[e] = s.q, s.v
        batch.goal[e] = goals[600 + 100 * e]
    twin = BatchSimulator.from_urdf(QUAD, 3, cfg)
    twin.q[:], twin.v[:], twin.goal[:] = batch.q, batch.v, batch.goal
    batch.step(n_steps=200)
    twin.step(n_steps=200, threads=2)
    np.testing.assert_array_equal(twin.q, batch.q)
    for e, s in enumerate(sims):
        s.step(goals[600 + 100 * e], n_steps=200)
        np.testing.assert_array_equal(batch.q[e], s.q)
        np.testing.assert_array_equal(batch.contact_forces[e], s.contact_forces)


def test_torque_off_leaves_only_gearbox_friction_and_falls():
    from servoloop.core_cy.sim.reference import servo_torque, stop_torque

    sim = Simulator.from_urdf(QUAD)
    stand = stand_goals(QUAD)
    sim.reset(stand)
    z0 = sim.q[2]
    off = np.zeros(12, bool)
    sim.step(stand, torque_on=off, n_steps=299)
    q0, v0 = sim.q.copy(), sim.v.copy()
    sim.step(stand, torque_on=off)
    # the drive is open: the gearbox's -kc sgn(qd) and the torque-off damping only, whatever
    # the goal (plus a joint stop where one is hit)
    lo, hi = sim.model.lower_limits[7:], sim.model.upper_limits[7:]
    expect = (servo_torque(sim.config.servo, sim.config.joints, q0[7:], v0[6:], stand + 1.0, off)
              + stop_torque(sim.config.joints, lo, hi, q0[7:], v0[6:]))
    np.testing.assert_allclose(sim.joint_torques, expect, atol=1e-12)
    inside = (q0[7:] > lo) & (q0[7:] < hi)
    assert inside.sum() >= 8
    s = sim.config.servo
    passive = s.coulomb_nm + (s.viscous_nm_s_per_rad + s.torque_off_damping_nm_s_per_rad) * np.abs(v0[6:])
    assert np.all(np.abs(sim.joint_torques[inside]) <= passive[inside] + 1e-12)
    assert np.abs(sim.joint_torques[inside]).max() > 0.0  # the legs move, so friction acts
    assert sim.q[2] < z0 - 0.02


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match="mode"):
        SimConfig(mode="soft")
    with pytest.raises(ValueError, match="integrator"):
        SimConfig(integrator="rk45")
    with pytest.raises(ValueError, match="rigid"):
        SimConfig(mode="rigid", integrator="rk4")
    with pytest.raises(ValueError, match="no collision"):
        contact_points_from_urdf(QUAD, links=["base_link"])


def test_blown_up_state_raises():
    sim = Simulator.from_urdf(QUAD, SimConfig(servo=replace(simulator_servo_model(), armature_kg_m2=0.0)))
    q = sim.model.neutral()
    q[3:7] = np.nan
    sim.set_state(q)
    with pytest.raises(SimulationError):
        sim.step(np.zeros(12))


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
def test_joint_torques_are_the_servo_model_at_step_start(integrator, goals):
    from servoloop.core_cy.sim.reference import servo_torque

    sim = Simulator.from_urdf(QUAD, SimConfig(integrator=integrator))
    sim.reset(goals[0])
    v = np.random.default_rng(9).normal(0, 0.5, 18)
    sim.set_state(sim.q.copy(), v)
    q0, v0 = sim.q.copy(), sim.v.copy()
    sim.step(goals[800])
    expect = servo_torque(sim.config.servo, sim.config.joints, q0[7:], v0[6:], goals[800], np.ones(12, bool))
    np.testing.assert_allclose(sim.joint_torques, expect, atol=1e-12)


def test_batch_sweeps_parameters_per_environment():
    # one call, three servo gains and two contact laws: each row behaves as its own simulator
    cfg = SimConfig()
    batch = BatchSimulator.from_urdf(QUAD, 3, cfg)
    stand = stand_goals(QUAD)
    batch.reset(stand)
    batch.servo_param("kp")[:] = np.array([10.0, 20.0, 40.0])[:, None]
    soft = replace(ContactLaw(), stiffness=5e4)
    batch.set_contact_law(2, soft)
    batch.step(n_steps=1000)
    sag = np.abs(batch.q[:, 7:] - stand).max(axis=1)
    assert sag[0] > sag[1] > sag[2]
    one = Simulator.from_urdf(QUAD, replace(cfg, law=soft, servo=replace(cfg.servo, kp_nm_per_rad=40.0)))
    one.reset(stand)
    one.step(stand, n_steps=1000)
    np.testing.assert_allclose(batch.q[2], one.q, atol=1e-12)
    with pytest.raises(IndexError):
        batch.set_contact_law(3, soft)


@pytest.mark.parametrize("mode,integrator", [("compliant", "euler"), ("compliant", "rk4"),
                                             ("rigid", "euler")])
@pytest.mark.parametrize("torque_on", [True, False])
def test_joint_stops_match_the_reference(mode, integrator, torque_on, goals):
    cfg = SimConfig(mode=mode, integrator=integrator)
    sim = Simulator.from_urdf(QUAD, cfg)
    ref = ReferenceSimulator(QUAD, sim.points, cfg.law, cfg.servo, cfg.ground, mode, integrator,
                             cfg.dt, cfg.rigid, cfg.joints)
    sim.reset(goals[0])
    q = sim.q.copy()
    lo, hi = sim.model.lower_limits[7:], sim.model.upper_limits[7:]
    q[7 + 2] = hi[2] + 0.05   # lf knee past its upper stop
    q[7 + 4] = lo[4] - 0.03   # lh hip_flex past its lower stop
    v = np.zeros(sim.model.nv)
    v[6 + 2], v[6 + 4] = 0.4, -0.2  # moving deeper in: the damping acts too
    sim.set_state(q, v)
    ref.q, ref.v, ref._lam[:] = q.copy(), v.copy(), 0.0
    on = np.full(12, torque_on)
    for _ in range(3):
        sim.step(goals[700], torque_on=on)
        ref.step(goals[700], on)
    np.testing.assert_allclose(pin.difference(ref.model, ref.q, sim.q), 0, atol=1e-11)
    np.testing.assert_allclose(sim.v, ref.v, atol=1e-9)


def test_stop_pushes_out_and_never_pulls_in():
    from servoloop.core_cy.sim.reference import stop_torque

    s = JointSettings()
    lo, hi = np.array([-1.0]), np.array([1.0])
    assert stop_torque(s, lo, hi, np.array([1.1]), np.array([0.0]))[0] == pytest.approx(-5.0)
    assert stop_torque(s, lo, hi, np.array([-1.1]), np.array([0.0]))[0] == pytest.approx(5.0)
    assert stop_torque(s, lo, hi, np.array([0.5]), np.array([3.0]))[0] == 0.0  # inside: none
    # leaving the stop fast: the damper would pull back in; a stop cannot pull
    assert stop_torque(s, lo, hi, np.array([1.01]), np.array([-10.0]))[0] == 0.0


@pytest.mark.parametrize("stiffness,inside", [(JointSettings().stop_stiffness, True), (0.0, False)])
def test_torque_off_collapse_stays_at_the_joint_stops(stiffness, inside):
    # a robot whose servos are off lies down on its trunk (the plant gives the trunk a
    # collision box); the brackets stop the joints. The negative control without stops
    # folds a joint well past its limit.
    from servoloop.virtual_bus.robot_plant import RobotPlant

    cfg = SimConfig(joints=JointSettings(stop_stiffness=stiffness))
    plant = RobotPlant.for_robot("quadruped", cfg)
    sim = plant.sim
    lo, hi = sim.model.lower_limits[7:], sim.model.upper_limits[7:]
    pos, vel, tau = np.zeros(plant.n), np.zeros(plant.n), np.zeros(plant.n)
    goal, off = pos.copy(), np.zeros(plant.n, dtype=bool)
    worst = 0.0
    for _ in range(30):
        plant.step(0.1, goal, off, pos, vel, tau)
        worst = max(worst, float(np.max(np.maximum(pos - hi, lo - pos))))
    assert sim.q[2] > 0.0  # resting on the ground, not through it
    assert (worst < 0.05) is inside, worst
