"""Physics of the virtual servos: seed 000's actuator model, integrated with fixed substeps."""

import math

import numpy as np
import pytest

from servoloop.firmware_bridge.control_table import get_table
from servoloop.virtual_bus import (
    AX18A_REFERENCE,
    ActuatorParams,
    IndependentServosPlant,
    Plant,
)
from servoloop.virtual_bus.actuator import default_actuator


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
    assert (AX18A_REFERENCE.kp, AX18A_REFERENCE.kd, AX18A_REFERENCE.kc) == (9.272, 0.3069, 0.03)
    assert default_actuator(get_table("AX-18A")) == AX18A_REFERENCE
    xm = default_actuator(get_table("XM430-W350"))
    assert xm.stall_torque == 4.1 and xm.kp == pytest.approx(9.272 * 4.1 / 1.8)
    assert xm.damping_ratio == pytest.approx(AX18A_REFERENCE.damping_ratio)


def test_plant_satisfies_the_protocol():
    assert isinstance(IndependentServosPlant([AX18A_REFERENCE]), Plant)


def test_linear_step_matches_the_second_order_solution():
    p = ActuatorParams(kp=9.272, kd=0.3069, kc=0.0, stall_torque=1.8, inertia=4e-3)
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
    band = AX18A_REFERENCE.kc / AX18A_REFERENCE.kp   # static friction holds this close
    assert abs(q_end[0] - 0.3) <= band + 1e-12
    assert v_end[0] == 0.0                       # stuck, not chattering
    assert max(q[0] for q, _, _ in traj) > 0.3      # second order: it overshoots (a first order never does)


def test_torque_saturates_at_stall():
    plant = IndependentServosPlant([AX18A_REFERENCE], substep_s=5e-4)
    traj = run(plant, 2.0, 0.002)
    assert traj[0][2][0] == pytest.approx(AX18A_REFERENCE.stall_torque)
    # first substep: a = (stall - friction at rest) / I
    v1 = traj[0][1][0]
    assert v1 > 0 and v1 <= (1.8 - 0.0) / 4e-3 * 1e-3 + 1e-9


def test_torque_off_holds_still_without_gravity_and_falls_with_it():
    free = IndependentServosPlant([AX18A_REFERENCE])
    assert run(free, 1.0, 0.2, on=False)[-1][0][0] == 0.0
    pend = ActuatorParams(kp=9.272, kd=0.3069, kc=0.03, stall_torque=1.8, inertia=4e-3,
                          gravity_torque=0.2, gravity_down_rad=0.0, damping_off=0.05)
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
    assert traj[0][2][0] == pytest.approx(1.8) and traj[0][2][1] == pytest.approx(0.5)


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="inertia"):
        ActuatorParams(kp=1, kd=1, kc=0, stall_torque=1, inertia=0)
