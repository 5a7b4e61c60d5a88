"""Regressor of calibration.inertial: W theta = RNEA + friction (digest section 8.1-8.2)."""

import numpy as np
import pytest

from servoloop import robots
from servoloop.calibration.inertial import (
    PAPER_FROM_PIN,
    PIN_FROM_PAPER,
    RegressorModel,
    available_backends,
    body_from_parameters,
    body_parameters,
    friction_columns,
    planar_2r_urdf,
    urdf_parameters,
    with_friction,
)

pin = pytest.importorskip("pinocchio")

def two_r_urdf(tmp_path, gravity_in_plane=True):
    """The planar 2R arm as a file; gravity in the plane of motion or along the axes."""
    path = tmp_path / f"two_r_{'plane' if gravity_in_plane else 'axis'}.urdf"
    path.write_text(planar_2r_urdf(gravity_in_plane))
    return path


def random_states(rng, nv, n):
    return rng.uniform(-2, 2, size=(n, nv)), rng.uniform(-3, 3, size=(n, nv)), rng.uniform(-5, 5, size=(n, nv))


def random_friction_theta(model, rng):
    n = len(model.layout.joint_names)
    return with_friction(model.theta_urdf, model.layout, Fc=rng.uniform(0.01, 0.1, n),
                         Fv=rng.uniform(0.01, 0.1, n), Ia=rng.uniform(1e-4, 1e-2, n),
                         beta=rng.uniform(-0.05, 0.05, n))


def pin_model(path):
    return pin.buildModelFromUrdf(str(path))


@pytest.mark.parametrize("backend", available_backends())
@pytest.mark.parametrize("robot", ["arm", "two_r"])
def test_regressor_equals_rnea_plus_friction(robot, backend, tmp_path):
    path = robots.urdf_path("arm") if robot == "arm" else two_r_urdf(tmp_path)
    model = RegressorModel(path, backend=backend)
    pm = pin_model(path)
    pd = pm.createData()
    rng = np.random.default_rng(1)
    theta = random_friction_theta(model, rng)
    _, friction = model.layout.split(theta)
    Q, V, A = random_states(rng, model.nv, 40)
    V[0, 0] = 0.0  # sign(0) = 0 must hold too
    tau = model.torques(theta, Q, V, A)
    for q, v, a, t in zip(Q, V, A, tau, strict=True):
        expected = pin.rnea(pm, pd, q, v, a) + friction[:, 0] * np.sign(v) + friction[:, 1] * v \
            + friction[:, 2] * a + friction[:, 3]
        assert np.max(np.abs(t - expected)) <= 1e-10 * max(1.0, np.max(np.abs(expected)))


def test_urdf_parameters_match_pinocchio():
    path = robots.urdf_path("arm")
    layout, theta, lower, upper = urdf_parameters(path)
    pm = pin_model(path)
    inertial, friction = layout.split(theta)
    assert layout.n_bodies == pm.njoints - 1
    for b in range(layout.n_bodies):
        assert np.allclose(inertial[b], pm.inertias[b + 1].toDynamicParameters(), rtol=1e-12, atol=1e-15)
    assert np.all(friction == 0)
    assert np.allclose(lower, pm.lowerPositionLimit) and np.allclose(upper, pm.upperPositionLimit)


@pytest.mark.skipif(len(available_backends()) < 2, reason="needs both core_cy and pinocchio")
def test_core_cy_and_pinocchio_backends_agree():
    rng = np.random.default_rng(2)
    a = RegressorModel(robots.urdf_path("arm"), backend="core_cy")
    b = RegressorModel(robots.urdf_path("arm"), backend="pinocchio")
    Q, V, A = random_states(rng, 6, 50)
    Wa, Wb = a.regressor_batch(Q, V, A), b.regressor_batch(Q, V, A)
    assert Wa.shape == Wb.shape == (50, 6, 84)
    assert np.max(np.abs(Wa - Wb)) <= 1e-10 * np.max(np.abs(Wb))
    assert np.allclose(a.rnea_batch(Q, V, A), b.rnea_batch(Q, V, A), rtol=1e-10, atol=1e-12)


def test_auto_backend_prefers_core_cy_when_it_has_the_regressor():
    model = RegressorModel(robots.urdf_path("arm"))
    assert model.backend == available_backends()[0]


def test_friction_columns_are_exactly_sign_v_a_one_in_their_row():
    rng = np.random.default_rng(3)
    V = rng.normal(size=(5, 3))
    A = rng.normal(size=(5, 3))
    V[2, 1] = 0.0
    F = friction_columns(V, A, dofs=(0, 1, 2), nv=3)
    assert F.shape == (5, 3, 12)
    for j in range(3):
        cols = F[:, :, 4 * j: 4 * j + 4]
        assert np.array_equal(cols[:, j], np.stack([np.sign(V[:, j]), V[:, j], A[:, j], np.ones(5)], axis=1))
        others = np.delete(cols, j, axis=1)
        assert np.all(others == 0)
    assert F[2, 1, 4] == 0.0  # sign(0) = 0 (MATLAB's)


def test_paper_order_permutation_round_trips():
    p = np.arange(10.0)  # [m, mcx, mcy, mcz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]
    paper = p[PAPER_FROM_PIN]
    # paper order: [XX, XY, XZ, YY, YZ, ZZ, mpx, mpy, mpz, m]
    assert list(paper) == [4, 5, 7, 6, 8, 9, 1, 2, 3, 0]
    assert np.array_equal(paper[PIN_FROM_PAPER], p)


def test_body_parameters_round_trip_and_match_pinocchio():
    rng = np.random.default_rng(4)
    m, c = 0.3, rng.normal(size=3) * 0.05
    L = rng.normal(size=(3, 3)) * 1e-3
    I_c = L @ L.T + 1e-5 * np.eye(3)
    p10 = body_parameters(m, c, I_c)
    assert np.allclose(p10, pin.Inertia(m, c, I_c).toDynamicParameters(), rtol=1e-12, atol=1e-18)
    m2, c2, I2 = body_from_parameters(p10)
    assert m2 == m and np.allclose(c2, c) and np.allclose(I2, I_c, atol=1e-15)


def test_shape_errors_name_the_model():
    model = RegressorModel(robots.urdf_path("arm"))
    with pytest.raises(ValueError, match="arm.urdf"):
        model.regressor_batch(np.zeros((2, 5)), np.zeros((2, 6)), np.zeros((2, 6)))
