"""Seed 003's manipulator case: contact ID for a fixed arm holding a free box.

Oracles: Pinocchio (the arm's torques from its own RNEA and frame Jacobians,
given the ID's contact forces), Newton-Euler of the box by hand, and MuJoCo
as the closed-loop truth (soft contacts: a different contact model).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pin = pytest.importorskip("pinocchio")
pytest.importorskip("mujoco")

from servoloop.core_cy.inverse_dynamics import solve_problem  # noqa: E402
from servoloop.experiments import manipulator as M  # noqa: E402
from servoloop.experiments.grasp import (  # noqa: E402
    BoxState,
    GraspInverseDynamics,
    grasp_problem,
    world_forces,
)


@pytest.fixture(scope="module")
def grasp():
    return M.panda_grasp()


def _moving_state(g, q0, box0, seed):
    rng = np.random.default_rng(seed)
    v = rng.normal(0.0, 0.2, 9)
    v[7:] = 0.0
    w = rng.normal(0.0, 0.3, 3)
    # the box moves with the hand at the pads (so the grasp can hold it), plus a little slip
    box = BoxState(box0.position.copy(), box0.rotation.copy(), rng.normal(0.0, 0.01, 3), w)
    q = q0.copy()
    q[7:] -= 2e-5            # the pads squeeze 20 um into the box
    return q, v, box


@pytest.mark.parametrize("path", ["paper", "compiled"])
@pytest.mark.parametrize("variant,mu", [("qp", 1.0), ("qp", math.inf), ("lcp_coulomb", 1.0)])
@pytest.mark.parametrize("seed", [0, 1])
def test_arm_torques_and_box_motion_against_pinocchio(grasp, variant, mu, seed, path):
    """Whatever forces a variant picks, tau and the box's acceleration must be the dynamics'.

    Checked with Pinocchio's RNEA and frame Jacobians for the arm and
    Newton-Euler by hand for the box; for both the paper's formulation
    (NumPy reference) and the compiled kernels over caller-assembled rows.
    """
    g, q0, box0 = grasp
    q, v, box = _moving_state(g, q0, box0, seed)
    a_des = np.random.default_rng(10 + seed).normal(0.0, 2.0, 9)
    a_des[7:] = -v[7:] / 1e-3
    if path == "paper":
        p, axes = grasp_problem(g, q, v, box, a_des, mu, baumgarte=0.0)
        assert p.k == 4
        r = solve_problem(p, variant, solver=M.QP_SOLVER)
    else:
        gid = GraspInverseDynamics(g, mu, variant, baumgarte=0.0)
        r = gid.solve(q, v, box, a_des)
        axes = gid.axes
        p, _ = grasp_problem(g, q, v, box, a_des, mu, baumgarte=0.0)
    np.testing.assert_allclose(r.qdd[6:], a_des, atol=1e-12)      # the arm's accelerations are imposed
    F = world_forces(r, axes)                     # on the fingers; the box gets -F
    # the touching points, recomputed here from the pads' spheres
    from servoloop import core_cy

    core_cy.forward_kinematics(g.model, g.data, q)
    R_all, p_all = np.asarray(g.data.rotation_body_to_world), np.asarray(g.data.position_body_in_world)
    pts = np.array([R_all[b] @ np.asarray(pad.position) + p_all[b] - pad.radius * ax[2]
                    for pad, b, ax in zip(g.pads, g.bodies, axes, strict=True)])
    # the arm: Pinocchio's RNEA with its own frame Jacobians
    pm = pin.buildModelFromUrdf(str(M.panda_urdf()))
    pd = pm.createData()
    a = r.qdd[6:]
    tau_pin = pin.rnea(pm, pd, q, v, a) + M.ARMATURE * a
    pin.computeJointJacobians(pm, pd, q)
    pin.updateFramePlacements(pm, pd)
    for pad, x, f in zip(g.pads, pts, F, strict=True):
        fid = pm.getFrameId(pad.link)
        J = pin.getFrameJacobian(pm, pd, fid, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
        arm = x - pd.oMf[fid].translation
        Jp = J[:3] - np.cross(arm, J[3:].T).T
        tau_pin -= Jp.T @ f
    np.testing.assert_allclose(r.tau, tau_pin, atol=1e-8 * max(1.0, np.abs(tau_pin).max()))
    # the box: Newton-Euler with the opposite forces and gravity
    m, Iw = g.box.mass, box.rotation @ g.box.inertia @ box.rotation.T
    lin = -F.sum(0) + m * np.array([0.0, 0.0, -9.81])
    ang = sum(np.cross(x - box.position, -f) for x, f in zip(pts, F, strict=True)) \
        - np.cross(box.angular_velocity, Iw @ box.angular_velocity)
    np.testing.assert_allclose(m * r.qdd[:3], lin, atol=1e-9)
    np.testing.assert_allclose(Iw @ r.qdd[3:6], ang, atol=1e-9)
    # forces push (never pull), inside the pyramid for a finite mu
    comp = np.asarray(r.contact_forces)
    assert np.all(comp[:, 2] >= -1e-9)
    if math.isfinite(mu):
        assert np.all(np.abs(comp[:, 0]) + np.abs(comp[:, 1]) <= mu * comp[:, 2] + 1e-7)
    # and no pad approaches further into the box after the step (N v+ >= 0, Baumgarte 0; the
    # compiled path allows its 2 um slack per step)
    vplus = p.v + p.dt * r.qdd
    assert np.all(p.N @ vplus >= (-1e-9 if path == "paper" else -2.1e-3))


def test_a_pad_on_a_fixed_link_or_a_floating_arm_is_refused(grasp):
    g, _, _ = grasp
    from servoloop.experiments.grasp import Grasp, Pad

    with pytest.raises(KeyError, match="no_such_link"):
        Grasp(g.model, g.box, (Pad("no_such_link", (0, 0, 0), 0.01, (0, 1, 0)),))


def test_qp_mu_holds_the_box_and_tracks_better_than_pid_on_mujoco():
    """One second of the 3-cycles/s trajectory at box mu = 1 (MuJoCo truth, soft contacts).

    The paper's QP,mu (its Table 6: the best controller on a low-friction
    object) keeps the box and tracks the joints about twice as well as the
    joint PID; the normal forces it predicts are within tens of percent of
    MuJoCo's (3 s: both drop the box, as the paper's did at ~1.5 s).
    """
    qp = M.run_case("qp_mu", 1.0, seconds=1.0)
    pid = M.run_case("pid", 1.0, seconds=1.0)
    assert qp["dropped"] == 0 and qp["id_failures"] <= 2
    assert pid["dropped"] == 0
    assert qp["pos_err_rad"] < 0.7 * pid["pos_err_rad"]
    assert qp["force_err_pct"] < 35.0


def test_system_inverse_dynamics_refuses_bad_input():
    from servoloop.core_cy.inverse_dynamics import SystemInverseDynamics

    with pytest.raises(ValueError, match="nv"):
        SystemInverseDynamics(4, 2)
    with pytest.raises(ValueError, match="variant"):
        SystemInverseDynamics(9, 2, variant="magic")
    sid = SystemInverseDynamics(9, 2, mu=0.5)
    z = np.zeros
    with pytest.raises(ValueError, match=r"N: expected shape \(2, 9\)"):
        sid.solve(np.eye(9), z(9), z((3, 9)), z((2, 9)), z((2, 9)), z(2), z(9), z(9))
    with pytest.raises(ValueError, match="M: contains NaN"):
        sid.solve(np.full((9, 9), np.nan), z(9), z((2, 9)), z((2, 9)), z((2, 9)), z(2), z(9), z(9))
    with pytest.raises(TypeError, match="no model"):      # its core cannot assemble
        sid._core.run(z(9), z(9), z(9))
