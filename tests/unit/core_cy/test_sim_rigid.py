"""Rigid contact at true mu = inf and the Lemke mode (seed 003's simulator: the
Anitescu-Potra LCP with a friction pyramid solved by pivoting), checked against
physics that does not come from either solver: a box at rest carries its weight, a
sliding box decelerates at mu g, mu = inf sticks, an unloaded contact carries no
friction, and the two solvers agree on a standing quadruped."""

import math
from dataclasses import replace

import numpy as np
import pinocchio as pin
import pytest

from servoloop.core_cy.dynamics._dynamics import Model
from servoloop.core_cy.sim.model import Ground, RigidSettings, contact_points_from_urdf
from servoloop.core_cy.sim.simulator import SimConfig, Simulator
from servoloop.experiments.gaits import stand_goals
from servoloop.robots import urdf_path

QUAD = str(urdf_path("quadruped"))
G = 9.81
MASS = 1.0

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


def _box(box_urdf, solver, mu, dt=5e-4, ground=None, height=0.025):
    cfg = SimConfig(mode="rigid", dt=dt, ground=ground or Ground(),
                    rigid=RigidSettings(mu=mu, solver=solver, max_iter=300, tol=1e-10))
    sim = Simulator(Model.from_urdf(box_urdf, floating_base=True), contact_points_from_urdf(box_urdf),
                    cfg)
    q = sim.model.neutral()
    q[2] = height
    sim.set_state(q)
    return sim


def test_solver_name_is_checked():
    with pytest.raises(ValueError, match="RigidSettings.solver"):
        RigidSettings(solver="dantzig")
    with pytest.raises(ValueError, match="RigidSettings.mu"):
        RigidSettings(mu=-1.0)


@pytest.mark.parametrize("solver", ["pgs", "lemke"])
@pytest.mark.parametrize("mu", [0.5, math.inf])
def test_box_at_rest_carries_its_weight(box_urdf, solver, mu):
    sim = _box(box_urdf, solver, mu)
    sim.step(np.zeros(0), n_steps=1000)                  # 0.5 s
    f = sim.contact_forces
    assert f[:, 2].sum() == pytest.approx(MASS * G, rel=1e-3)
    # nothing pushes sideways in sum (at mu = inf the corners' tangential split is
    # indeterminate: internal pairs that cancel are as valid as none)
    assert np.abs(f[:, :2].sum(axis=0)).max() < 1e-6
    assert np.abs(sim.v).max() < 1e-6
    assert sim.lcp_fallbacks == 0


@pytest.mark.parametrize("solver", ["pgs", "lemke"])
def test_sliding_box_decelerates_at_mu_g(box_urdf, solver):
    sim = _box(box_urdf, solver, 0.6, dt=2.5e-4)
    sim.step(np.zeros(0), n_steps=400)                   # settle
    v = sim.v.copy()
    v[0] = 1.0
    sim.set_state(sim.q.copy(), v)
    speeds = []
    for _ in range(8):
        sim.step(np.zeros(0), n_steps=40)                # 10 ms
        speeds.append(sim.v[0])
    decel = -np.polyfit(np.arange(8) * 0.01, speeds, 1)[0]
    assert decel == pytest.approx(0.6 * G, rel=0.01)
    assert abs(sim.v[1]) < 1e-6
    assert sim.lcp_fallbacks == 0


def _front_edge_x(q) -> float:
    """World x of the box's bottom front edge (+x, -z corner line)."""
    R = pin.Quaternion(np.array(q[3:7])).toRotationMatrix()
    return float((q[:3] + R @ np.array([0.1, 0.0, -0.025]))[0])


@pytest.mark.parametrize("solver", ["pgs", "lemke"])
def test_infinite_friction_sticks_a_loaded_box(box_urdf, solver):
    # thrown sideways at 1 m/s on the ground: its bottom corners stop at once (it rocks up
    # on its front edge, which does not slide)
    sim = _box(box_urdf, solver, math.inf)
    sim.step(np.zeros(0), n_steps=200)
    v = sim.v.copy()
    v[0] = 1.0
    sim.set_state(sim.q.copy(), v)
    front0 = _front_edge_x(sim.q)
    sim.step(np.zeros(0), n_steps=20)                    # 10 ms
    assert abs(_front_edge_x(sim.q) - front0) < 1e-5
    assert sim.q[3:7] @ np.array([0, 1, 0, 0]) != 0.0    # it did tip
    # ... and it stays on a 57 deg slope, where mu = 0.8 lets it slide
    for mu, stays in ((math.inf, True), (0.8, False)):
        ground = Ground.slope(1.0)
        s = _box(box_urdf, solver, mu, ground=ground)
        q = s.model.neutral()
        q[:3] = ground.unit_normal() * 0.0249
        q[3:7] = pin.Quaternion(pin.utils.rotate("y", 1.0)).coeffs()
        s.set_state(q)
        s.step(np.zeros(0), n_steps=1000)                # 0.5 s
        assert bool(np.linalg.norm(s.v[:3]) < 1e-4) is stays, mu


@pytest.mark.parametrize("solver", ["pgs", "lemke"])
def test_infinite_friction_gives_no_friction_without_a_normal_force(box_urdf, solver):
    # 2 mm above the ground (inside the candidate margin), flying sideways: the contacts
    # enter the LCP but carry no load, so no friction either (before, PGS's bound
    # inf * 0 = NaN let through any tangential impulse and glued such contacts in the air)
    sim = _box(box_urdf, solver, math.inf, dt=1e-3, height=0.027)
    v = np.zeros(sim.model.nv)
    v[0] = 1.0
    sim.set_state(sim.q.copy(), v)
    sim.step(np.zeros(0), n_steps=5)
    assert sim.v[0] == pytest.approx(1.0, abs=1e-12)
    assert sim.v[2] == pytest.approx(-5 * 1e-3 * G, rel=1e-9)   # free fall
    assert np.abs(sim.contact_forces).max() < 1e-9


@pytest.mark.parametrize("mu", [0.3, math.inf])
def test_lemke_and_pgs_agree_on_a_standing_quadruped(mu):
    goals = stand_goals(QUAD)
    out = {}
    for solver in ("pgs", "lemke"):
        cfg = SimConfig(mode="rigid", dt=1e-3,
                        rigid=replace(RigidSettings(), mu=mu, solver=solver, max_iter=500, tol=1e-12))
        sim = Simulator.from_urdf(QUAD, cfg)
        sim.reset(goals)
        sim.step(goals, n_steps=500)
        out[solver] = (sim.q.copy(), sim.contact_forces.copy(), sim)
    (q_p, f_p, _), (q_l, f_l, s_l) = out["pgs"], out["lemke"]
    assert f_l[:, 2].sum() == pytest.approx(f_p[:, 2].sum(), rel=1e-4)
    # the normal forces agree; the feet's tangential split is internal (left/right pairs that
    # cancel) and depends on the landing's history, which the pyramids (box vs 4 directions)
    # shape differently: only its sum is checked
    np.testing.assert_allclose(f_l[:, 2], f_p[:, 2], atol=1e-3 * f_p[:, 2].sum())
    for f in (f_l, f_p):
        assert np.abs(f[:, :2].sum(axis=0)).max() < 1e-3 * f[:, 2].sum()
    np.testing.assert_allclose(q_l[:3], q_p[:3], atol=5e-4)
    assert s_l.lcp_fallbacks == 0
    it, res, _ = s_l.lcp_stats
    assert it > 0 and res < 1e-9


def test_quadruped_squats_for_seconds_at_infinite_friction_without_slipping():
    # closed loop over 3 s: a joint PD squats the torque-driven quadruped on rigid ground at
    # true mu = inf (Lemke, the seed 003 experiment's setting); the feet never move
    from servoloop.controller.wholebody.robot import WholeBodyRobot
    from servoloop.experiments.closed_loop import TorquePlant

    robot = WholeBodyRobot.from_urdf(QUAD)
    q_stand = stand_goals(QUAD, joint_names=list(robot.model.actuated_joint_names))
    cfg = SimConfig(mode="rigid", dt=1e-3, rigid=RigidSettings(mu=math.inf, solver="lemke"))
    plant = TorquePlant(QUAD, cfg, q_stand)
    heights, slip = [], 0.0
    for k in range(3000):
        goal = q_stand * (1.0 + 0.15 * math.sin(2 * math.pi * k * 1e-3))
        plant.step(20.0 * (goal - plant.q[7:]) - 0.15 * plant.v[6:])
        heights.append(plant.q[2])
        if k % 10 == 0 and k > 100:
            # the loaded feet's contact points (the balls' lowest material points) stand still
            # (the balls roll: their lowest point moves, the material point does not slide)
            f = plant.contact_forces
            for i, foot in enumerate(robot.feet):
                if f[i, 2] > 0.1:
                    J = robot.point_jacobian(plant.q, foot.body, foot.center, foot.radius)
                    slip = max(slip, float(np.abs((J @ plant.v)[:2]).max()))
    assert slip < 5e-4                                         # m/s, over 3 s
    assert max(heights) - min(heights) > 0.005                 # it did squat
    assert min(heights) > 0.15 and np.isfinite(plant.q).all()
    assert plant.sim.lcp_fallbacks == 0


def test_lemke_batch_equals_independent_runs():
    # every environment has its own Lemke tableau: two threads stepping two environments give
    # the single simulator's answer bit for bit
    from servoloop.core_cy.sim.simulator import BatchSimulator

    cfg = SimConfig(mode="rigid", dt=1e-3, rigid=RigidSettings(mu=math.inf, solver="lemke"))
    goals = stand_goals(QUAD)
    one = Simulator.from_urdf(QUAD, cfg)
    one.reset(goals)
    one.step(goals, n_steps=300)
    batch = BatchSimulator.from_urdf(QUAD, 2, cfg)
    batch.reset(goals)
    batch.step(n_steps=300, threads=2)
    for e in range(2):
        np.testing.assert_array_equal(batch.q[e], one.q)
        np.testing.assert_array_equal(batch.contact_forces[e], one.contact_forces)
