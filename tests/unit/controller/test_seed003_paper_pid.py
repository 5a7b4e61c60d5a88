"""Seed 003's pid is the paper's (joint PID with the IDs' gains, operational-space PD on the
swing feet, VIIP normal-force balance): it trots over seconds of simulated time, and with
the same joint gains the ID controllers track better than it (the paper's Table 3 shape)."""

import math

import numpy as np

from servoloop.experiments.seed003 import KD_ID, KP_ID, Case, run_case


def test_paper_pid_uses_the_ids_joint_gains_and_balances_on_normal_forces_only():
    from servoloop.controller.wholebody.robot import WholeBodyRobot
    from servoloop.experiments.closed_loop import builtin_urdf
    from servoloop.experiments.seed003_pid import PaperPID

    robot = WholeBodyRobot.from_urdf(builtin_urdf("quadruped"))
    from servoloop import core_cy
    from servoloop.experiments.gaits import stand_goals

    q = robot.model.neutral().copy()
    q[7:] = stand_goals(builtin_urdf("quadruped"), joint_names=list(robot.model.actuated_joint_names))
    robot.kinematics(q)
    q[2] -= min(robot.foot_position(f)[2] for f in robot.feet)      # feet on z = 0
    robot.kinematics(q)
    M = np.array(core_cy.crba(robot.model, core_cy.Data(robot.model), q), dtype=float)
    inertia = np.diag(M)[6:] + robot.armature
    pid = PaperPID(robot, inertia, KP_ID, KD_ID, 1e-3)
    feet = np.array([robot.foot_position(f) for f in robot.feet])
    stance = np.ones(len(robot.feet), dtype=bool)
    z = np.zeros(3)
    tau = pid.torques(q, np.zeros(robot.model.nv), q[7:].copy(), np.zeros(robot.n), stance, feet,
                      np.zeros_like(feet), q[:3].copy(), z, M)
    # no joint error: the torques are VIIP's, tau = -sum J_z^T f; recover f and check it
    # pushes (f >= 0) and carries the weight
    Jz = np.array([robot.point_jacobian(q, f.body, f.center, f.radius)[2, 6:] for f in robot.feet])
    f = np.linalg.lstsq(-Jz.T, tau, rcond=None)[0]
    assert np.allclose(-Jz.T @ f, tau, atol=1e-9)
    assert (f >= -1e-9).all()
    assert math.isclose(f.sum(), robot.mass * 9.81, rel_tol=1e-6)
    # a joint error gets the IDs' gain times the joint's inertia
    e = np.zeros(robot.n)
    e[1] = 0.01
    tau_e = PaperPID(robot, inertia, KP_ID, KD_ID, 1e-3).torques(
        q, np.zeros(robot.model.nv), q[7:] + e, np.zeros(robot.n), stance, feet, np.zeros_like(feet),
        q[:3].copy(), z, M)
    assert math.isclose(tau_e[1] - tau[1], inertia[1] * KP_ID * 0.01, rel_tol=0.02)


def test_paper_pid_trots_and_the_ids_track_better_at_true_infinite_friction():
    pid = run_case(Case("rigid", math.inf, "pid"), 2.0)
    lcp = run_case(Case("rigid", math.inf, "lcp_mu"), 2.0)
    assert pid["fell"] == 0.0 and lcp["fell"] == 0.0
    assert pid["distance_m"] > 0.25
    assert lcp["pos_err_rad"] < pid["pos_err_rad"]
    assert lcp["vel_err_rad_s"] < pid["vel_err_rad_s"]
