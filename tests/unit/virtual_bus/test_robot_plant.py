"""The simulator as the virtual servo bus's plant (virtual-bus contract: Plant)."""

import numpy as np
import pytest

from servoloop.experiments.gaits import stand_goals
from servoloop.robots import urdf_path
from servoloop.virtual_bus.robot_plant import RobotPlant

QUAD = str(urdf_path("quadruped"))


@pytest.fixture
def plant():
    return RobotPlant.for_robot("quadruped")


def _io(n):
    return np.zeros(n), np.zeros(n), np.zeros(n)


def test_plant_interface_and_standing(plant):
    from servoloop.virtual_bus.plant import Plant

    assert isinstance(plant, Plant) and plant.n == 12
    pos, vel, tq = _io(12)
    plant.step(0.0, np.zeros(12), np.zeros(12, bool), pos, vel, tq)
    stand = stand_goals(QUAD, joint_names=plant.joint_names)
    np.testing.assert_allclose(pos, [0, 0.6, -1.2] * 4, atol=1e-12)  # the config's pose
    for _ in range(1000):
        plant.step(1e-3, pos * 0 + stand, np.ones(12, bool), pos, vel, tq)
    assert plant.time_ns == 1_000_000_000
    f = plant.sim.contact_forces[:, 2]
    assert f.sum() == pytest.approx(plant.sim.model.total_mass * 9.81, rel=2e-3)
    np.testing.assert_allclose(pos, stand, atol=0.05)
    assert np.all(np.abs(tq) < 4.1) and np.any(np.abs(tq) > 0.05)  # servos hold the weight


def test_partial_steps_accumulate(plant):
    pos, vel, tq = _io(12)
    on = np.ones(12, bool)
    goal = np.array([0, 0.6, -1.2] * 4)
    for _ in range(10):
        plant.step(2e-4, goal, on, pos, vel, tq)  # 0.2 ms: five make one 1 ms step
    assert plant.time_ns == 2_000_000


def test_torque_off_collapses_onto_trunk(plant):
    pos, vel, tq = _io(12)
    for _ in range(1500):
        plant.step(1e-3, np.zeros(12), np.zeros(12, bool), pos, vel, tq)
    # torque off: no drive torque, only the gearbox friction (|tau| <= kc) and joint stops
    kc = np.array([s.coulomb_nm for s in plant.sim.config.servo])   # one servo model per joint
    lo, hi = plant.sim.model.lower_limits[7:], plant.sim.model.upper_limits[7:]
    inside = (pos > lo) & (pos < hi)
    assert np.all(np.abs(tq[inside]) <= kc[inside] + 1e-12)
    z = plant.sim.q[2]
    assert 0.02 < z < 0.06  # resting on the trunk box, not through the floor


def test_set_actuation_scales_gain(plant):
    pos, vel, tq = _io(12)
    goal = np.array([0, 0.6, -1.2] * 4)
    plant.set_actuation(np.full(12, 0.5), np.full(12, 4.1))
    for _ in range(500):
        plant.step(1e-3, goal, np.ones(12, bool), pos, vel, tq)
    sag_soft = np.abs(pos - goal).max()
    plant.set_actuation(np.full(12, 2.0), np.full(12, 4.1))
    for _ in range(500):
        plant.step(1e-3, goal, np.ones(12, bool), pos, vel, tq)
    assert np.abs(pos - goal).max() < 0.5 * sag_soft


def test_bus_engine_runs_the_quadruped(plant):
    from servoloop.virtual_bus.engine import BusEngine
    from servoloop.virtual_bus.spec import robot_servos

    servos, _ = robot_servos("quadruped")
    eng = BusEngine(servos, plant=plant)
    eng.goal_rad[:] = [0, 0.6, -1.2] * 4
    eng.torque_on[:] = True
    for _ in range(500):
        eng.advance(1e-3)
    np.testing.assert_allclose(eng.position, eng.goal_rad, atol=0.05)
    assert plant.sim.contact_forces[:, 2].sum() == pytest.approx(24.06, rel=0.01)


def test_unknown_joint_is_named():
    from servoloop.core_cy.sim.simulator import Simulator

    with pytest.raises(ValueError, match="lf_ankle"):
        RobotPlant(Simulator.from_urdf(QUAD), ["lf_ankle"])


def test_virtual_bus_plant_factory():
    from servoloop.virtual_bus.spec import load_plant, robot_servos

    servos, _ = robot_servos("quadruped")
    plant = load_plant("servoloop.virtual_bus.robot_plant:make_plant", servos, "quadruped")
    assert isinstance(plant, RobotPlant) and plant.n == 12
    with pytest.raises(ValueError, match="--robot"):
        load_plant("servoloop.virtual_bus.robot_plant:make_plant", servos, None)


def test_virtual_bus_robot_powers_up_lying_at_rest():
    # servos power up with torque off: the bus serves a robot already at rest where
    # its joints let it fall, not one mid-fall (which would read a transient past its stops)
    from servoloop.virtual_bus.spec import load_plant, robot_servos

    servos, _ = robot_servos("quadruped")
    plant = load_plant("servoloop.virtual_bus.robot_plant:make_plant", servos, "quadruped")
    sim = plant.sim
    # at rest: what is left is creep inside the friction's regularisation band
    assert np.abs(sim.v).max() < 2 * sim.config.joints.sign_band
    assert 0.0 < sim.q[2] < 0.1  # trunk down on the ground (standing height is ~0.23 m)
    lo, hi = sim.model.lower_limits[7:], sim.model.upper_limits[7:]
    assert np.all(sim.q[7:] > lo - 0.02) and np.all(sim.q[7:] < hi + 0.02)


def test_the_powered_off_humanoid_lies_on_the_floor_not_through_it():
    # every link the ground can touch has collision geometry (was: the soles only, and the
    # powered-off humanoid sank to pelvis z = -0.21 m, upside down)
    from dataclasses import replace

    from servoloop.virtual_bus.robot_plant import make_plant
    from servoloop.virtual_bus.spec import robot_config, robot_servos

    cfg = robot_config("humanoid")                # not held at power-up (the shipped one is)
    cfg = replace(cfg, simulation=replace(cfg.simulation, held_s=0.0))
    servos, _ = robot_servos("humanoid")
    plant = make_plant(servos, None, cfg)         # settled 2 s with torque off
    sim = plant.sim
    assert sim.q[2] > 0.02                                    # the pelvis rests above the floor
    assert -sim._lowest_height(sim.q) > -0.005                # nothing sinks more than 5 mm
    assert np.abs(sim.v).max() < 0.05                         # at rest
    assert sim.contact_forces[:, 2].sum() == pytest.approx(sim.model.total_mass * 9.81, rel=0.02)


def test_a_held_humanoid_starts_upright_and_is_let_go():
    """``simulation.held_s``: upright in its pose, the base held still that long, then free."""
    from dataclasses import replace

    from servoloop.virtual_bus.robot_plant import make_plant
    from servoloop.virtual_bus.spec import robot_config, robot_servos

    cfg = robot_config("humanoid")
    cfg = replace(cfg, simulation=replace(cfg.simulation, held_s=0.5))
    servos, _ = robot_servos("humanoid")
    plant = make_plant(servos, None, cfg)
    q0 = plant.sim.q[:7].copy()
    assert q0[2] > 0.18 and abs(q0[6]) == pytest.approx(1.0)     # upright at standing height
    n = plant.n
    pos, vel, tau = np.zeros(n), np.zeros(n), np.zeros(n)
    plant.step(0.4, np.zeros(n), np.zeros(n, dtype=bool), pos, vel, tau)     # torque off, held
    assert plant.sim.q[:7] == pytest.approx(q0) and np.all(plant.sim.v[:6] == 0.0)
    plant.step(0.6, np.zeros(n), np.zeros(n, dtype=bool), pos, vel, tau)     # let go, torque off
    assert plant.sim.q[2] < q0[2] - 0.02                                     # it drops


def _held_humanoid(held_s=5.0, pushes=()):
    from dataclasses import replace

    from servoloop.controller.config import PushConfig
    from servoloop.virtual_bus.robot_plant import make_plant
    from servoloop.virtual_bus.spec import robot_config, robot_servos

    cfg = robot_config("humanoid")
    pushes = tuple(PushConfig(*p) for p in pushes)
    cfg = replace(cfg, simulation=replace(cfg.simulation, held_s=held_s, pushes=pushes))
    servos, _ = robot_servos("humanoid")
    return make_plant(servos, None, cfg)


@pytest.mark.parametrize("link", [None, "l_foot", "r_forearm"])
def test_an_impulse_changes_the_robots_momentum_by_itself_joints_locked(link):
    """``apply_impulse``: m dv_com = p (the world-frame impulse), at any link; joints do not jump."""
    from servoloop import core_cy

    plant = _held_humanoid(held_s=0.0)
    sim = plant.sim
    sim.v[:] = 0.0
    model, data = sim.model, core_cy.Data(sim.model)
    q = np.array(sim.q)
    _, Jc = core_cy.center_of_mass(model, data, q, jacobian=True)
    Jc = np.array(Jc)
    p = np.array([0.3, -0.1, 0.05])
    dv = plant.apply_impulse(p, link)
    assert np.all(dv[6:] == 0.0) and np.all(np.asarray(sim.v[6:]) == 0.0)
    assert model.total_mass * (Jc @ dv) == pytest.approx(p, abs=1e-9)
    if link is not None:        # off the base origin, the same shove also turns the robot
        assert np.linalg.norm(dv[3:6]) > 1e-3


def test_scheduled_pushes_are_given_at_their_time_of_the_plant_clock():
    plant = _held_humanoid(held_s=0.0, pushes=[(0.0125, (0.3, 0.0, 0.0)), (0.02, (0.0, 0.2, 0.0), "l_foot")])
    n = plant.n
    pos, vel, tau = np.zeros(n), np.zeros(n), np.zeros(n)
    goal = np.array(plant.sim.q[7:])[plant._idx]
    t0 = plant.time_ns * 1e-9                          # powered up after settling lying down
    plant.step(0.01, goal, np.ones(n, dtype=bool), pos, vel, tau)
    assert plant.pushes_done == []                     # not yet
    plant.step(0.005, goal, np.ones(n, dtype=bool), pos, vel, tau)   # 10-15 ms: the first
    assert len(plant.pushes_done) == 1
    t, dv = plant.pushes_done[0]
    assert t - t0 == pytest.approx(0.012, abs=1e-9)    # mid-step, on the simulator's 1 ms grid
    assert np.linalg.norm(dv[:3]) > 0.1               # 0.3 N s on 1.7 kg: ~0.18 m/s
    assert plant.time_ns * 1e-9 - t0 == pytest.approx(0.015, abs=1e-12)   # the step ends where it should
    plant.step(0.01, goal, np.ones(n, dtype=bool), pos, vel, tau)
    assert [round(t - t0, 4) for t, _ in plant.pushes_done] == [0.012, 0.02]
    assert np.all(np.isfinite(plant.base_acc_world))   # a push at a step's edge divides by the step


def test_a_push_is_a_force_over_push_s_that_the_imu_feels():
    """The impulse is given in equal parts over :data:`PUSH_S` (a shove's tens of ms), so the
    base's acceleration (what the emulated accelerometer reads) stays within what a +-2 g
    board measures; given in one 1 ms step it was ~180 m/s^2 (0.3 N s on 1.7 kg)."""
    from servoloop.virtual_bus.robot_plant import PUSH_S

    plant = _held_humanoid(held_s=0.0, pushes=[(0.01, (0.3, 0.0, 0.0))])
    n = plant.n
    pos, vel, tau = np.zeros(n), np.zeros(n), np.zeros(n)
    goal = np.array(plant.sim.q[7:])[plant._idx]
    plant.step(0.009, goal, np.ones(n, dtype=bool), pos, vel, tau)
    acc = []
    for _ in range(int(round(PUSH_S / 1e-3)) + 10):
        plant.step(0.001, goal, np.ones(n, dtype=bool), pos, vel, tau)
        acc.append(plant.base_acc_world.copy())
    acc = np.array(acc)
    assert len(plant.pushes_done) == 1
    (t, dv), = plant.pushes_done
    assert np.linalg.norm(dv[:3]) > 0.1               # the whole push's dv, as before
    # felt from its first step on, forward (the standing robot's feet and servos then resist:
    # the base's acceleration falls off), and never a spike past the board's range
    assert acc[1, 0] > 1.0, acc[:5]
    assert np.all(np.abs(acc) < 2 * 9.81), np.abs(acc).max()


def test_a_push_on_an_unknown_link_is_refused_naming_it():
    plant = _held_humanoid(held_s=0.0)
    with pytest.raises(ValueError, match="'l_hand'.*links: "):
        plant.schedule_pushes([(1.0, (0.1, 0.0, 0.0), "l_hand")])


def _swing(plant, steps=20):
    """How far the lf knee moves [rad] in ``steps`` ms after its goal steps 0.1 rad, standing."""
    pos, vel, tq = _io(12)
    plant.step(0.0, np.zeros(12), np.zeros(12, bool), pos, vel, tq)
    goal = stand_goals(QUAD, joint_names=plant.joint_names)
    for _ in range(300):
        plant.step(1e-3, goal, np.ones(12, bool), pos, vel, tq)
    j = plant.joint_names.index("lf_knee")
    start = pos[j]
    goal = goal.copy()
    goal[j] += 0.1
    for _ in range(steps):
        plant.step(1e-3, goal, np.ones(12, bool), pos, vel, tq)
    return pos[j] - start


def test_set_servo_law_gives_the_simulated_servos_other_figures():
    """A servo damped 4x its model's k_d moves slower toward a stepped goal (measured: 23 mrad
    in 20 ms, 37 with the default); the figures are per joint, and the gain register still
    scales a kp set so."""
    default = _swing(RobotPlant.for_robot("quadruped"))
    damped = RobotPlant.for_robot("quadruped")
    damped.set_servo_law(kd=0.6)
    moved = _swing(damped)
    assert 0.01 < moved < 0.75 * default, (moved, default)
    plant = RobotPlant.for_robot("quadruped")
    plant.set_servo_law(["lf_knee", "rh_knee"], kc=[0.2, 0.3], kp=10.0, armature=0.002, viscous=0.01)
    core, idx = plant.sim._core, plant._idx
    lf, rh = plant.joint_names.index("lf_knee"), plant.joint_names.index("rh_knee")
    assert core.servo_array("kc")[0][idx[[lf, rh]]].tolist() == [0.2, 0.3]
    assert core.servo_array("kc")[0][idx[0]] == pytest.approx(0.134)          # the others keep theirs
    plant.set_actuation(np.full(12, 2.0), np.full(12, 10.0))
    assert core.servo_array("kp")[0][idx[lf]] == 20.0 and core.servo_array("kp")[0][idx[0]] == 40.0


@pytest.mark.parametrize("args, figures, match", [
    ((), {"kq": 1.0}, r"unknown figure 'kq'; known: kp, kd, kc, viscous, armature"),
    ((), {"kd": -0.1}, r"kd must be finite and >= 0 N\*m\*s/rad, got -0.1"),
    ((), {"kp": 0.0}, r"kp must be finite and > 0 N\*m/rad"),
    ((), {"armature": float("nan")}, r"armature must be finite"),
    ((), {"kd": [0.1, 0.2]}, r"kd must be one number or 12 \(one per joint\)"),
    ((), {"kc": 5.0}, r"kc 5.0 N\*m is not below the stall torque of \['lf_hip_abad'"),
    ((["lf_ankle"],), {"kd": 0.1}, r"no servo drives \['lf_ankle'\]"),
])
def test_set_servo_law_refuses_bad_figures_naming_them(plant, args, figures, match):
    before = plant.sim._core.servo_array("kd")[0].copy()
    with pytest.raises(ValueError, match=match):
        plant.set_servo_law(*args, kd=0.5, **figures) if "kd" not in figures else \
            plant.set_servo_law(*args, **figures)
    assert np.array_equal(plant.sim._core.servo_array("kd")[0], before)        # all or nothing
