"""Closed chains by the fully-actuated representation, on a planar four-bar
(digest sections 8.3, 8.4, 8.5 last item, 8.6)."""

import numpy as np
import pytest

from servoloop.calibration.inertial import (
    FourierTrajectory,
    RegressorModel,
    identify_stacked,
    regroup,
    with_friction,
)
from servoloop.calibration.inertial.closed_chain import ClosedChain, LoopClosure

# Crank-rocker (Grashof: 0.1 + 0.3 <= 0.25 + 0.3): crank 0.1 m from the origin,
# coupler 0.3 m, rocker 0.25 m pivoting at x = 0.3 m; all axes along y, gravity -z
# in the plane.  The loop is cut at the coupler-rocker pin.
FOUR_BAR = """<?xml version="1.0"?>
<robot name="four_bar">
  <link name="ground"><inertial><mass value="1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial></link>
  <joint name="crank_joint" type="revolute"><parent link="ground"/><child link="crank"/>
    <origin xyz="0 0 0"/><axis xyz="0 1 0"/><limit lower="-100" upper="100" effort="5" velocity="10"/></joint>
  <link name="crank"><inertial><origin xyz="0.05 0.002 0.001"/><mass value="0.08"/>
    <inertia ixx="2e-5" ixy="0" ixz="0" iyy="8e-5" iyz="0" izz="8e-5"/></inertial></link>
  <joint name="coupler_joint" type="revolute"><parent link="crank"/><child link="coupler"/>
    <origin xyz="0.1 0 0"/><axis xyz="0 1 0"/><limit lower="-10" upper="10" effort="5" velocity="10"/></joint>
  <link name="coupler"><inertial><origin xyz="0.15 -0.003 0.004"/><mass value="0.12"/>
    <inertia ixx="3e-5" ixy="1e-6" ixz="-2e-6" iyy="9e-4" iyz="1e-6" izz="9.1e-4"/></inertial></link>
  <joint name="rocker_joint" type="revolute"><parent link="ground"/><child link="rocker"/>
    <origin xyz="0.3 0 0"/><axis xyz="0 1 0"/><limit lower="-10" upper="10" effort="5" velocity="10"/></joint>
  <link name="rocker"><inertial><origin xyz="0.12 0.002 -0.003"/><mass value="0.1"/>
    <inertia ixx="2.5e-5" ixy="0" ixz="1e-6" iyy="5.2e-4" iyz="0" izz="5.3e-4"/></inertial></link>
</robot>
"""
CLOSURE = LoopClosure("coupler", (0.3, 0.0, 0.0), "rocker", (0.25, 0.0, 0.0), axes=(0, 2))
QU0 = np.array([-1.0, -1.5])  # rough seed for the passive joints at crank angle 0 (one branch)


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    path = tmp_path_factory.mktemp("four_bar") / "four_bar.urdf"
    path.write_text(FOUR_BAR)
    return ClosedChain(RegressorModel(path), [CLOSURE], ["crank_joint"])


@pytest.fixture(scope="module")
def motion(chain):
    """Crank turning at ~3 rad/s with a Fourier ripple: 10 s at 50 Hz."""
    rng = np.random.default_rng(40)
    traj = FourierTrajectory(rng.normal(size=(1, 4)) * 0.8, rng.normal(size=(1, 4)) * 0.8,
                             2 * np.pi / 5, np.zeros(1))
    t = np.arange(0, 10, 0.02)
    qa, va, aa = traj(t)
    qa, va = qa + 3.0 * t[:, None], va + 3.0
    Q, V, A = chain.complete(qa, va, aa, QU0)
    return t, Q, V, A


def theta_true(chain):
    m = chain.model
    # friction on every joint, armature on the motor only (0 on passive joints: on the bound)
    return with_friction(m.theta_urdf, m.layout, Fc=[0.03, 0.01, 0.01], Fv=[0.02, 0.005, 0.005],
                         Ia=[5e-4, 0.0, 0.0], beta=[0.01, 0.0, 0.0])


def test_g_rows_are_scattered_by_joint_index(tmp_path):
    # actuate the rocker instead: its row of G must be the identity row, wherever it sits
    path = tmp_path / "four_bar.urdf"
    path.write_text(FOUR_BAR)
    ch = ClosedChain(RegressorModel(path), [CLOSURE], ["rocker_joint"])
    i_rocker = list(ch.model.layout.joint_names).index("rocker_joint")
    assert list(ch.ia) == [i_rocker] and i_rocker != 0
    q = ch.solve_passive(np.array([0.0, -1.0, -1.6]))  # the rocker (index 2) stays at -1.6
    G = ch.G(q)
    assert G[i_rocker, 0] == 1.0
    _, J = ch.constraint(q)
    assert np.max(np.abs(J @ G)) <= 1e-12


def test_loop_kinematics(chain, motion):
    t, Q, V, A = motion
    for i in range(0, len(t), 10):
        c, J = chain.constraint(Q[i])
        G = chain.G(Q[i])
        assert np.max(np.abs(c)) <= 1e-12
        assert np.max(np.abs(J @ G)) <= 1e-12
        assert np.array_equal(G[chain.ia], np.eye(1))
        assert np.max(np.abs(J @ A[i] + chain.jdot_v(Q[i], V[i]))) <= 1e-10


def test_velocity_and_acceleration_match_finite_differences_of_gamma(chain, motion):
    _, Q, V, A = motion
    i, h = 137, 1e-5
    qa, va, aa = Q[i, chain.ia], V[i, chain.ia], A[i, chain.ia]

    def gamma(s):
        # Gamma along the actuated motion qa(s) = qa + va s + aa s^2 / 2
        guess = Q[i].copy()
        guess[chain.ia] = qa + va * s + 0.5 * aa * s * s
        return chain.solve_passive(guess)

    qp, q0, qm = gamma(h), gamma(0.0), gamma(-h)
    assert np.allclose((qp - qm) / (2 * h), V[i], atol=1e-6)  # eq. (21)
    assert np.allclose((qp - 2 * q0 + qm) / h**2, A[i], atol=1e-3 * max(1.0, np.abs(A[i]).max()))  # eq. (22)


def test_projection_removes_the_constraint_force(chain, motion):
    # KKT forward dynamics under a known motor torque u, then G^T W theta = u (eq. 23)
    from servoloop import core_cy

    if chain.model.backend != "core_cy":
        pytest.skip("needs core_cy's crba and nonlinear_effects")
    model = chain.model
    cm = core_cy.Model.from_urdf(str(model.urdf_path))
    cd = core_cy.Data(cm)
    theta = theta_true(chain)
    _, fr = model.layout.split(theta)
    rng = np.random.default_rng(41)
    _, Q, V, _ = motion
    for i in range(0, len(Q), 50):
        q, v = Q[i], V[i]
        u = rng.normal(size=1)
        H = np.array(core_cy.crba(cm, cd, q)) + np.diag(fr[:, 2])  # armature adds to H
        h = np.array(core_cy.nonlinear_effects(cm, cd, q, v)) + fr[:, 0] * np.sign(v) + fr[:, 1] * v + fr[:, 3]
        _, J = chain.constraint(q)
        B = np.zeros((3, 1))
        B[chain.ia, 0] = 1.0
        K = np.block([[H, J.T], [J, np.zeros((2, 2))]])
        sol = np.linalg.solve(K, np.concatenate([B @ u - h, -chain.jdot_v(q, v)]))
        a = sol[:3]
        W = model.regressor(q, v, a)
        assert np.allclose(chain.G(q).T @ W @ theta, u, atol=1e-8)
        assert np.linalg.norm(W @ theta - B @ u) > 1e-3  # without projection lambda is there


def test_constrained_regrouping_has_fewer_base_parameters(chain, motion):
    _, Q, V, A = motion
    W = chain.model.stacked(Q, V, A)
    GW = chain.projected_regressor(Q, V, A)
    assert GW.shape == (len(Q), chain.model.layout.n_params)
    n_free, n_closed = regroup(W).rank, regroup(GW).rank
    assert n_closed <= n_free
    assert n_closed < n_free  # the loop adds a dependency (digest: 20 vs 19 on its four-bar)


@pytest.mark.parametrize("method", ["ols", "sdp"])
def test_noise_free_recovery_through_the_projection(chain, motion, method):
    _, Q, V, A = motion
    theta = theta_true(chain)
    GW = chain.projected_regressor(Q, V, A)
    u = (GW @ theta).reshape(-1, 1)
    base = regroup(GW)
    res = identify_stacked(chain.model, GW, u, base, method=method, row_names=["crank_joint"])
    Y = base.base_regressor(GW)
    pi_true = base.pi_from_theta(theta)
    err = np.abs(res.pi - pi_true) * np.linalg.norm(Y, axis=0) / np.linalg.norm(u)
    assert err.max() <= 1e-6
    if method == "sdp":
        assert res.consistency.ok, res.consistency.problems
