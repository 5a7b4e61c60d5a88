"""core_cy dynamics against Pinocchio (the oracle) on the same URDF files.

Built-in robots and example-robot-data's ur5, panda (mimic finger kept
independent, as Pinocchio's default), solo12 and talos (floating).
Randomized states with fixed seeds; agreement to 1e-9 relative.
"""

import numpy as np
import pytest

from servoloop import core_cy
from tests.unit.core_cy.dynamics_cases import ALL, case_path, load, random_state
from tests.unit.core_cy.dynamics_cases import assert_close as _assert_close

pin = pytest.importorskip("pinocchio")

N_STATES = 3


def assert_close(ours, theirs, **kw):
    # eigenpy squeezes single-column matrices (the 1-dof bench robot)
    theirs = np.asarray(theirs)
    if theirs.shape != np.shape(ours) and theirs.size == np.size(ours):
        theirs = theirs.reshape(np.shape(ours))
    _assert_close(ours, theirs, **kw)


def _pin_model(name):
    path, fb, _ = case_path(name)
    if fb:
        return pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer())
    return pin.buildModelFromUrdf(str(path))


def to_pin_q(model, pm, q):
    """Our q -> Pinocchio's: a continuous joint is one angle here, (cos, sin) there."""
    out = np.zeros(pm.nq)
    qi = 0
    for j in range(1, pm.njoints):
        jm = pm.joints[j]
        if jm.nq == 2 and jm.nv == 1:
            out[jm.idx_q:jm.idx_q + 2] = np.cos(q[qi]), np.sin(q[qi])
            qi += 1
        else:
            out[jm.idx_q:jm.idx_q + jm.nq] = q[qi:qi + jm.nq]
            qi += jm.nq
    return out


@pytest.fixture(scope="module", params=ALL)
def pair(request):
    model = load(request.param)
    pm = _pin_model(request.param)
    return request.param, model, core_cy.Data(model), pm, pm.createData()


def _states(model, pm, seed):
    rng = np.random.default_rng(seed)
    for _ in range(N_STATES):
        q, v, a = random_state(model, rng)
        yield q, to_pin_q(model, pm, q), v, a, rng.normal(size=(model.nbodies, 6))


def test_structure_matches_pinocchio(pair):
    name, model, _, pm, _ = pair
    assert model.joint_names == tuple(pm.names)[1:], f"{name}: joint order differs"
    assert model.nv == pm.nv
    assert model.nbodies == pm.njoints - 1
    assert model.total_mass == pytest.approx(pin.computeTotalMass(pm), rel=1e-12)
    theta = np.concatenate([pm.inertias[i].toDynamicParameters() for i in range(1, pm.njoints)])
    assert_close(model.inertial_parameters(), theta, rtol=1e-12, what="dynamic parameters")


def test_inverse_dynamics_matches_pinocchio(pair):
    _, model, data, pm, pd = pair
    for q, qp, v, a, fext in _states(model, pm, 11):
        fe = [pin.Force.Zero()] + [pin.Force(f) for f in fext]
        assert_close(core_cy.rnea(model, data, q, v, a), pin.rnea(pm, pd, qp, v, a), what="rnea")
        assert_close(core_cy.rnea(model, data, q, v, a, fext=fext),
                     pin.rnea(pm, pd, qp, v, a, fe), what="rnea fext")
        assert_close(core_cy.nonlinear_effects(model, data, q, v),
                     pin.nonLinearEffects(pm, pd, qp, v), what="nle")
        assert_close(core_cy.gravity(model, data, q),
                     pin.computeGeneralizedGravity(pm, pd, qp), what="gravity")


def test_crba_aba_match_pinocchio(pair):
    _, model, data, pm, pd = pair
    for q, qp, v, tau, fext in _states(model, pm, 12):
        fe = [pin.Force.Zero()] + [pin.Force(f) for f in fext]
        M = pin.crba(pm, pd, qp)
        M = np.triu(M) + np.triu(M, 1).T  # Pinocchio guarantees the upper triangle
        assert_close(core_cy.crba(model, data, q), M, what="crba")
        assert_close(core_cy.aba(model, data, q, v, tau), pin.aba(pm, pd, qp, v, tau), what="aba")
        assert_close(core_cy.aba(model, data, q, v, tau, fext=fext),
                     pin.aba(pm, pd, qp, v, tau, fe), what="aba fext")


def test_kinematics_and_jacobians_match_pinocchio(pair):
    _, model, data, pm, pd = pair
    rng = np.random.default_rng(13)
    refs = {"world": pin.WORLD, "local": pin.LOCAL,
            "local_world_aligned": pin.LOCAL_WORLD_ALIGNED}
    links = [n for n in model.frame_names if pm.existFrame(n)]
    for q, qp, v, _, _ in _states(model, pm, 13):
        core_cy.forward_kinematics(model, data, q, v)
        pin.forwardKinematics(pm, pd, qp, v)
        for i in range(model.nbodies):
            assert_close(data.rotation_body_to_world[i], pd.oMi[i + 1].rotation, what="R")
            assert_close(data.position_body_in_world[i], pd.oMi[i + 1].translation, what="p")
            assert_close(data.velocity_body_local[i], pd.v[i + 1].vector, what="v local")
        pin.computeJointJacobians(pm, pd, qp)
        pin.updateFramePlacements(pm, pd)
        for link in rng.choice(links, size=min(6, len(links)), replace=False):
            fid = pm.getFrameId(str(link))
            for frame, ref in refs.items():
                assert_close(core_cy.frame_jacobian(model, data, q, str(link), frame),
                             pin.getFrameJacobian(pm, pd, fid, ref), what=f"J {link} {frame}")


def test_center_of_mass_matches_pinocchio(pair):
    _, model, data, pm, pd = pair
    for q, qp, _, _, _ in _states(model, pm, 14):
        com, Jcom = core_cy.center_of_mass(model, data, q, jacobian=True)
        assert_close(com, pin.centerOfMass(pm, pd, qp), what="com")
        assert_close(Jcom, pin.jacobianCenterOfMass(pm, pd, qp), what="Jcom")


def test_regressor_matches_pinocchio(pair):
    _, model, data, pm, pd = pair
    nb = model.nbodies
    for q, qp, v, a, _ in _states(model, pm, 15):
        Y = core_cy.regressor(model, data, q, v, a)
        assert_close(Y[:, :10 * nb], pin.computeJointTorqueRegressor(pm, pd, qp, v, a),
                     what="regressor")


def test_integrate_matches_pinocchio(pair):
    _, model, _, pm, _ = pair
    for q, qp, v, _, _ in _states(model, pm, 16):
        for dt in (1e-3, 0.5):
            ours = core_cy.integrate(model, q, v, dt)
            theirs = pin.integrate(pm, qp, v * dt)
            assert_close(to_pin_q(model, pm, ours), theirs, what=f"integrate dt={dt}")


CHILD_ORDER_URDF = """<robot name="order">
  <link name="base"><inertial><mass value="1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial></link>
  {links}
  <joint name="zeta" type="revolute"><parent link="base"/><child link="l_z"/>
    <origin xyz="0.1 0 0" rpy="0.1 0.2 0.3"/><axis xyz="0 0 1"/>{lim}</joint>
  <joint name="alpha" type="continuous"><parent link="base"/><child link="l_a"/>
    <origin xyz="0 0.2 0"/><axis xyz="0 1 1"/></joint>
  <joint name="mid_fixed" type="fixed"><parent link="base"/><child link="l_f"/>
    <origin xyz="0 0 0.3" rpy="0.5 0 0"/></joint>
  <joint name="beta" type="prismatic"><parent link="l_f"/><child link="l_b"/>
    <origin xyz="0 0.1 0"/><axis xyz="1 0 0"/>{lim}</joint>
  <joint name="gamma" type="revolute"><parent link="l_z"/><child link="l_g"/>
    <origin xyz="0 0 0.2"/><axis xyz="-1 0 0"/>{lim}</joint>
</robot>"""


def _link(name, m):
    return (f'<link name="{name}"><inertial><origin xyz="0.01 0.02 0.03" rpy="0.3 0.2 0.1"/>'
            f'<mass value="{m}"/><inertia ixx="0.3" ixy="0.01" ixz="0.02" iyy="0.4" iyz="0.03" '
            f'izz="0.5"/></inertial></link>')


@pytest.mark.parametrize("floating", [False, True])
def test_child_order_fixed_merge_and_continuous_match_pinocchio(tmp_path, floating):
    # Children declared in the file as zeta, alpha, fixed -> Pinocchio (urdfdom's
    # std::map) walks them by joint name: alpha, beta (through the fixed link), zeta.
    # Also covers a continuous joint (nq 1 here, 2 in Pinocchio), an unaligned
    # axis, a negative axis, a prismatic joint and a rotated joint origin.
    links = "".join(_link(n, m) for n, m in
                    [("l_z", 1.5), ("l_a", 0.7), ("l_f", 0.4), ("l_b", 0.9), ("l_g", 0.3)])
    path = tmp_path / "order.urdf"
    lim = '<limit lower="-2" upper="2" effort="1" velocity="1"/>'
    path.write_text(CHILD_ORDER_URDF.format(links=links, lim=lim))
    model = core_cy.Model.from_urdf(path, floating_base=floating)
    pm = (pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer()) if floating
          else pin.buildModelFromUrdf(str(path)))
    pd = pm.createData()
    assert model.joint_names == tuple(pm.names)[1:]
    data = core_cy.Data(model)
    rng = np.random.default_rng(17)
    for _ in range(N_STATES):
        q, v, a = random_state(model, rng)
        qp = to_pin_q(model, pm, q)
        assert_close(core_cy.rnea(model, data, q, v, a), pin.rnea(pm, pd, qp, v, a), what="rnea")
        assert_close(core_cy.aba(model, data, q, v, a), pin.aba(pm, pd, qp, v, a), what="aba")
        assert_close(core_cy.crba(model, data, q), pin.crba(pm, pd, qp), what="crba")
        assert_close(core_cy.regressor(model, data, q, v, a)[:, :10 * model.nbodies],
                     pin.computeJointTorqueRegressor(pm, pd, qp, v, a), what="regressor")
        pin.computeJointJacobians(pm, pd, qp)
        for link in ("l_g", "l_b", "l_a"):
            assert_close(core_cy.frame_jacobian(model, data, q, link, "local"),
                         pin.getFrameJacobian(pm, pd, pm.getFrameId(link), pin.LOCAL),
                         what=f"J {link}")
