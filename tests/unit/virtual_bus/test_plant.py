"""Physics of the virtual servos: the one servo model, integrated with fixed substeps."""

import math

import numpy as np
import pytest

from servoloop.core_cy.actuator import ServoModel
from servoloop.firmware_bridge.control_table import get_table
from servoloop.virtual_bus import (
    AX18A_REFERENCE,
    Actuator,
    IndependentServosPlant,
    JointLoad,
    Plant,
)
from servoloop.virtual_bus.actuator import default_actuator, with_overrides

AX18A = AX18A_REFERENCE.servo


def actuator(kp, kd, kc, stall, inertia, **load):
    """Seed 000's law without a motor line (no_load_speed inf), on a load of ``inertia``."""
    return Actuator(ServoModel(kp_nm_per_rad=kp, kd_nm_s_per_rad=kd, coulomb_nm=kc, stall_torque_nm=stall),
                    JointLoad(inertia, **load))


def run(plant, goal, seconds, dt=0.001, on=True):
    n = plant.n
    pos, vel, tau = np.zeros(n), np.zeros(n), np.zeros(n)
    goal = np.full(n, goal, dtype=float)
    torque_on = np.full(n, on)
    out = []
    for _ in range(int(round(seconds / dt))):
        plant.step(dt, goal, torque_on, pos, vel, tau)
        out.append((pos.copy(), vel.copy(), tau.copy()))
    return out


def test_seed_000_gains_are_the_ax18a_defaults():
    assert (AX18A.kp_nm_per_rad, AX18A.kd_nm_s_per_rad, AX18A.coulomb_nm) == (9.272, 0.3069, 0.03)
    assert default_actuator(get_table("AX-18A")) == AX18A_REFERENCE
    xm = default_actuator(get_table("XM430-W350"))
    assert xm.servo.stall_torque_nm == 4.1 and xm.servo.kp_nm_per_rad == pytest.approx(9.272 * 4.1 / 1.8)
    assert xm.damping_ratio == pytest.approx(AX18A_REFERENCE.damping_ratio)
    # the motor line is each model's own datasheet
    assert xm.servo.no_load_speed_rad_s == pytest.approx(46 * 2 * math.pi / 60)
    assert AX18A.no_load_speed_rad_s == pytest.approx(97 * 2 * math.pi / 60)


def test_plant_satisfies_the_protocol():
    assert isinstance(IndependentServosPlant([AX18A_REFERENCE]), Plant)


def test_linear_step_matches_the_second_order_solution():
    p = actuator(9.272, 0.3069, 0.0, 1.8, 4e-3)
    plant = IndependentServosPlant([p], substep_s=5e-4)
    step = 0.1                                  # kp * 0.1 = 0.93 N*m < stall: linear regime
    traj = run(plant, step, 0.4)
    wn, z = p.natural_frequency, p.damping_ratio
    wd = wn * math.sqrt(1 - z * z)
    err = 0.0
    for k, (q, _, _) in enumerate(traj, start=1):
        t = k * 1e-3
        exact = step * (1 - math.exp(-z * wn * t) * (math.cos(wd * t) + z / math.sqrt(1 - z * z) * math.sin(wd * t)))
        err = max(err, abs(q[0] - exact))
    assert err < 0.02 * step
    peak = max(q[0] for q, _, _ in traj)
    assert peak > step * 1.005                  # underdamped: it overshoots (zeta = 0.80)


def test_ax18a_step_settles_at_the_goal_within_the_friction_band():
    plant = IndependentServosPlant([AX18A_REFERENCE])
    traj = run(plant, 0.3, 1.0)
    q_end, v_end, _ = traj[-1]
    band = AX18A.coulomb_nm / AX18A.kp_nm_per_rad   # static friction holds this close
    assert abs(q_end[0] - 0.3) <= band + 1e-12
    assert v_end[0] == 0.0                       # stuck, not chattering
    assert max(q[0] for q, _, _ in traj) > 0.3      # second order: it overshoots (a first order never does)


def test_torque_saturates_at_stall():
    plant = IndependentServosPlant([AX18A_REFERENCE], substep_s=5e-4)
    traj = run(plant, 2.0, 0.002)
    # stall torque less the back-EMF of the speed already reached
    emf = AX18A.back_emf_nm_s_per_rad
    assert 1.8 - emf * traj[0][1][0] <= traj[0][2][0] < 1.8
    # first substep: a = (stall - friction at rest) / I
    v1 = traj[0][1][0]
    assert v1 > 0 and v1 <= (1.8 - 0.0) / 4e-3 * 1e-3 + 1e-9


def test_torque_off_holds_still_without_gravity_and_falls_with_it():
    free = IndependentServosPlant([AX18A_REFERENCE])
    assert run(free, 1.0, 0.2, on=False)[-1][0][0] == 0.0
    pend = with_overrides(AX18A_REFERENCE, {"gravity_torque": 0.2, "gravity_down_rad": 0.0,
                                            "damping_off": 0.05})
    plant = IndependentServosPlant([pend], position0=[1.0])
    traj = run(plant, 1.0, 3.0, on=False)
    assert abs(traj[-1][0][0]) < 0.2             # swung down towards the hanging angle


def test_time_is_counted_exactly_whatever_the_dt_pattern():
    a, b = IndependentServosPlant([AX18A_REFERENCE]), IndependentServosPlant([AX18A_REFERENCE])
    pa, pb = np.zeros(1), np.zeros(1)
    dummy = np.zeros(1)
    for _ in range(300):
        a.step(0.001, np.array([0.5]), np.array([True]), pa, dummy, dummy)
    for _ in range(1000):
        b.step(0.0003, np.array([0.5]), np.array([True]), pb, dummy, dummy)
    assert a.time_ns == b.time_ns == 300_000_000
    assert pa[0] == pb[0]


def test_set_actuation_scales_stiffness_and_limits_torque():
    plant = IndependentServosPlant([AX18A_REFERENCE, AX18A_REFERENCE])
    plant.set_actuation(np.array([1.0, 1.0]), np.array([1.8, 0.5]))
    traj = run(plant, 1.0, 0.001)
    emf = AX18A.back_emf_nm_s_per_rad
    assert 1.8 - emf * traj[0][1][0] <= traj[0][2][0] < 1.8 and traj[0][2][1] == pytest.approx(0.5)


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="inertia"):
        actuator(1, 1, 0, 1, 0)
    with pytest.raises(ValueError, match="coulomb_nm"):
        ServoModel(kp_nm_per_rad=1, kd_nm_s_per_rad=1, coulomb_nm=2, stall_torque_nm=1)
    with pytest.raises(ValueError, match="unknown actuator parameter.*'kq'"):
        with_overrides(AX18A_REFERENCE, {"kq": 1})
    with pytest.raises(TypeError, match="params\\[0\\] must be an Actuator"):
        IndependentServosPlant([AX18A])


def _unloaded_run(act, seconds, mode=0, command=0.0, goal=100.0, limit=None):
    plant = IndependentServosPlant([act], substep_s=5e-4)
    plant.set_actuation(np.ones(1), np.array([limit if limit is not None else 1e9]),
                        np.array([mode], np.int8), np.array([command]))
    return np.array([v[0] for _, v, _ in run(plant, goal, seconds)])


@pytest.mark.parametrize("model", ["AX-12A", "AX-18A", "XM430-W350", "XM540-W270", "XL330-M288", "MX-106"])
def test_unloaded_position_step_cruises_at_the_datasheet_no_load_speed(model):
    act = default_actuator(get_table(model))
    w0 = get_table(model).datasheet.no_load_speed_rad_s
    v = _unloaded_run(act, 3.0)
    assert v.max() <= w0 * (1 + 1e-9)                   # never faster than the datasheet
    assert v[-1000:].min() >= 0.99 * w0                  # and cruising at it after 2 s


def test_velocity_and_torque_commands_stay_inside_the_motor_line():
    act = default_actuator(get_table("XM430-W350"))
    w0 = act.servo.no_load_speed_rad_s
    assert _unloaded_run(act, 2.0, mode=1, command=10 * w0).max() <= w0 * (1 + 1e-9)
    torque = _unloaded_run(act, 2.0, mode=2, command=100.0)
    assert torque.max() <= w0 * (1 + 1e-9) and torque[-1] >= 0.99 * w0


def test_supply_voltage_scales_the_no_load_speed():
    act = default_actuator(get_table("XM430-W350"))
    low = with_overrides(act, {"supply_voltage_v": 9.0})
    v12, v9 = _unloaded_run(act, 2.0)[-1], _unloaded_run(low, 2.0)[-1]
    s = act.servo
    expect = (s.stall_torque_nm * 0.75 - s.coulomb_nm) / s.back_emf_nm_s_per_rad
    assert v9 == pytest.approx(expect, rel=1e-6) and v9 < 0.76 * v12


def test_torque_off_is_gearbox_friction_and_damping_only():
    act = with_overrides(default_actuator(get_table("XM430-W350")),
                         {"kc": 0.0, "damping_off": 0.05, "viscous_nm_s_per_rad": 0.01})
    plant = IndependentServosPlant([act], position0=[0.0], velocity0=[2.0])
    traj = run(plant, 1.0, 0.1, on=False)
    assert all(t[2][0] == 0.0 for t in traj)             # the drive is open: no motor torque
    # v' = -(viscous + off damping)/I v: an exponential decay
    t_c = act.inertia_kg_m2 / 0.06
    assert traj[-1][1][0] == pytest.approx(2.0 * math.exp(-0.1 / t_c), rel=2e-3)
