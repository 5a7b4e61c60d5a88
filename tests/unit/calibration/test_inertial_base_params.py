"""Regrouping to base parameters by pivoted QR (digest section 8.5)."""

import numpy as np
import pytest

from servoloop import robots
from servoloop.calibration.errors import FitError
from servoloop.calibration.inertial import RegressorModel, planar_2r_urdf, regroup, regroup_model


def two_r_urdf(tmp_path, gravity_in_plane=True):
    path = tmp_path / "two_r.urdf"
    path.write_text(planar_2r_urdf(gravity_in_plane))
    return path


@pytest.fixture(scope="module")
def arm():
    model = RegressorModel(robots.urdf_path("arm"))
    return model, regroup_model(model)


def test_selection_is_a_permutation(arm):
    model, base = arm
    P = np.hstack([base.P_b, base.P_d])
    assert P.shape == (84, 84)
    assert np.array_equal(P.T @ P, np.eye(84))
    assert np.array_equal(np.sort(np.concatenate([base.idx_b, base.idx_d])), np.arange(84))


def test_dependent_columns_are_combinations_of_base_columns(arm):
    model, base = arm
    rng = np.random.default_rng(10)
    # fresh states, not the ones used for the regrouping
    W = model.stacked(rng.normal(size=(200, 6)), rng.normal(size=(200, 6)) * 2, rng.normal(size=(200, 6)) * 3)
    Y = base.base_regressor(W)
    assert np.linalg.norm(W @ base.P_d - Y @ base.K_d) / np.linalg.norm(W) <= 1e-10
    assert np.linalg.matrix_rank(W) == base.rank == Y.shape[1]
    theta = rng.normal(size=84)
    pi = base.pi_from_theta(theta)
    assert np.allclose(pi, base.matrix @ theta)
    assert np.max(np.abs(Y @ pi - W @ theta)) <= 1e-10 * np.max(np.abs(W @ theta))
    # eq. (17) reproduces Y pi for any theta_d
    for _ in range(3):
        th = base.theta_from_pi(pi, rng.normal(size=84 - base.rank))
        assert np.max(np.abs(W @ th - Y @ pi)) <= 1e-10 * np.max(np.abs(Y @ pi))
        assert np.allclose(base.pi_from_theta(th), pi, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("in_plane, inertial_rank, full_rank", [(True, 6, 13), (False, 4, 11)])
def test_planar_2r_ranks_match_the_digest(tmp_path, in_plane, inertial_rank, full_rank):
    model = RegressorModel(two_r_urdf(tmp_path, gravity_in_plane=in_plane))
    rng = np.random.default_rng(11)
    Q, V, A = rng.uniform(-3, 3, size=(3, 300, 2))
    W = model.stacked(Q, V, A)
    assert regroup(W[:, :20]).rank == inertial_rank
    base = regroup(W)
    assert base.rank == full_rank
    # Ia of joint 1 duplicates the axis inertia of body 1: exactly one of them is a base column
    names = model.layout.names()
    izz1, ia1 = names.index("l1.Iyy" if in_plane else "l1.Izz"), names.index("j1.Ia")
    assert (izz1 in base.idx_b) != (ia1 in base.idx_b)


def test_regroup_rejects_short_or_empty_regressors():
    with pytest.raises(FitError, match="rows >= columns"):
        regroup(np.ones((3, 5)))
    with pytest.raises(FitError, match="all zeros"):
        regroup(np.zeros((10, 5)))


def test_base_names_read_as_combinations(arm):
    model, base = arm
    names = base.names(model.layout.names())
    assert len(names) == base.rank
    assert any("+" in n or " -" in n for n in names)  # some parameters are regrouped
