"""Seed 003, ID(t-1) at mu = inf: the lagged force loop at a sticking rigid contact is
unstable by construction on our simulator (no frame, sign, point or unit bug): the
simulator's one-step answer to a change of the fed-back forces is G times that change,
and G has six eigenvalues at 1 (internal forces) and one above.  This is the ID with the base
taken as not accelerating (``force_loop_matrix``'s default, ``LAG_BASE = "zero"``); the
experiment now uses the paper's reduced form, whose G has no eigenvalue above 1
(test_seed003_lag_closed_loop.py)."""

import math

import numpy as np

from servoloop import core_cy
from servoloop.controller.wholebody.robot import WholeBodyRobot
from servoloop.experiments import seed003
from servoloop.experiments.closed_loop import TorquePlant, builtin_urdf
from servoloop.experiments.gaits import stand_goals
from servoloop.experiments.seed003_lag import force_loop_matrix


def _settled(urdf, q_stand):
    plant = TorquePlant(urdf, seed003._sim_config("rigid", math.inf), q_stand)
    for _ in range(200):
        plant.step(20.0 * (q_stand - plant.q[7:]) - 0.15 * plant.v[6:])
    return plant


def test_lagged_force_loop_gain_on_the_stand():
    urdf = builtin_urdf("quadruped")
    robot = WholeBodyRobot.from_urdf(urdf)
    q_stand = stand_goals(urdf, joint_names=list(robot.model.actuated_joint_names))
    pa, pb = _settled(urdf, q_stand), _settled(urdf, q_stand)
    robot.armature[:] = pa.armature
    q, v = pa.q.copy(), pa.v.copy()
    G = force_loop_matrix(robot, q)
    # the experiment's ID(t-1) torques from fed-back forces f (its id_lag branch, qdd = 0)
    h = np.array(core_cy.nonlinear_effects(robot.model, core_cy.Data(robot.model), q, v))
    pts = pa.sim.points

    def tau(f):
        gen = h.copy()
        for i in range(len(pts)):
            gen -= robot.point_jacobian(q, int(pts.body[i]), pts.position[i], pts.radius[i]).T @ f[i]
        return gen[6:]

    f0 = pa.contact_forces.copy()
    assert f0[:, 2].min() > 0.5                     # all four feet loaded and stuck
    d = np.random.default_rng(0).normal(size=f0.shape)
    pa.step(tau(f0))
    pb.step(tau(f0 + d))
    df = (pb.contact_forces - pa.contact_forces).reshape(-1)
    # the simulator's forces (N, world axes, at the feet's points) answer as G says
    assert np.allclose(df, G @ d.reshape(-1), atol=1e-9)
    ev = np.linalg.eigvals(G)
    assert np.sum(np.abs(ev - 1.0) < 1e-9) == 6     # internal forces: never corrected
    assert 1.0 < np.abs(ev).max() < 1.01            # and one mode grows (1.0022 per tick)
    # diagonal two-foot stance: a pair at |1.0069|
    ev2 = np.linalg.eigvals(force_loop_matrix(robot, q, feet=[1, 2]))
    assert 1.0 < np.abs(ev2).max() < 1.02
