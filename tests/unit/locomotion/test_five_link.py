"""A1-A2 (seed 004 digest): the five-link model's dynamics and impact map."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("casadi")

from servoloop import core_cy  # noqa: E402
from servoloop.locomotion.five_link import SWAP, five_link, urdf_text  # noqa: E402

ORDER = ["base_x", "base_z", "pitch", "hip_L", "hip_R", "knee_L", "knee_R"]


@pytest.fixture(scope="module")
def model():
    return five_link()


def test_mass_matrix_symmetric_positive_definite(model):
    rng = np.random.default_rng(0)
    for _ in range(100):
        q = rng.uniform(-np.pi, np.pi, 5)
        M = np.array(model.M(q))
        M7 = np.array(model.M7(np.r_[rng.normal(size=2), q]))
        for A in (M, M7):
            assert np.allclose(A, A.T, atol=1e-12)
            assert np.linalg.eigvalsh(A).min() > 1e-6


def test_floating_dynamics_match_core_cy_on_the_generated_urdf(model, tmp_path):
    path = tmp_path / "five_link.urdf"
    path.write_text(urdf_text())
    cmodel = core_cy.Model.from_urdf(str(path))
    data = core_cy.Data(cmodel)
    assert cmodel.total_mass == pytest.approx(20.0)
    idx = [cmodel.joint_names.index(n) for n in ORDER]
    rng = np.random.default_rng(1)
    for _ in range(20):
        q7, v7 = rng.normal(size=7), rng.normal(size=7)
        qc, vc = np.zeros(7), np.zeros(7)
        qc[idx], vc[idx] = q7, v7
        Mc = np.array(core_cy.crba(cmodel, data, qc))[np.ix_(idx, idx)]
        hc = np.array(core_cy.nonlinear_effects(cmodel, data, qc, vc))[idx]
        np.testing.assert_allclose(np.array(model.M7(q7)), Mc, atol=1e-10)
        np.testing.assert_allclose(np.array(model.h7(q7, v7)).ravel(), hc, atol=1e-9)


def test_passive_fall_conserves_energy(model):
    from scipy.integrate import solve_ivp

    def f(_, x):
        q, v = x[:7], x[7:]
        a = np.linalg.solve(np.array(model.M7(q)), -np.array(model.h7(q, v)).ravel())
        return np.r_[v, a]

    x0 = np.r_[0, 1.0, 0.1, 0.3, -0.2, 0.4, 0.5, np.array([0.2, 0.0, 1.0, -1.0, 0.5, 0.3, -0.7])]
    sol = solve_ivp(f, (0, 1.0), x0, rtol=1e-10, atol=1e-12, method="DOP853")
    e = [float(model.energy7(x[:7], x[7:])) for x in sol.y.T]
    assert np.ptp(e) / abs(e[0]) < 1e-6
    assert sol.y[1, -1] < x0[1] - 4.0            # it did fall (~4.9 m in 1 s)


def test_constrained_acceleration_keeps_the_stance_foot_still(model):
    rng = np.random.default_rng(2)
    for _ in range(20):
        q, v = rng.normal(size=7), rng.normal(size=7)
        M, h = np.array(model.M7(q)), np.array(model.h7(q, v)).ravel()
        J, Jdv = np.array(model.J7_stance(q)), np.array(model.Jdotv7_stance(q, v)).ravel()
        K = np.block([[M, -J.T], [J, np.zeros((2, 2))]])
        a = np.linalg.solve(K, np.r_[-h, -Jdv])[:7]
        assert np.abs(J @ a + Jdv).max() < 1e-9


def test_impact_stops_the_new_stance_foot_and_conserves_momentum_about_it(model):
    rng = np.random.default_rng(3)
    for _ in range(20):
        q = np.array([0.05, 0.3, -0.3, 0.2, 0.3]) + 0.05 * rng.normal(size=5)
        v = rng.normal(size=5)
        q7 = np.r_[np.array(model.hip(q)).ravel(), q]
        v7m = np.array(model.v7(q, v)).ravel()
        v7p, _ = (np.array(x).ravel() for x in model.impact7(q, v))
        assert np.abs(np.array(model.J7_swing(q7)) @ v7p).max() < 1e-10
        assert float(model.momentum7_swing(q7, v7p)) == pytest.approx(
            float(model.momentum7_swing(q7, v7m)), abs=1e-9)
        v_relabelled, _ = model.impact(q, v)
        np.testing.assert_allclose(np.array(v_relabelled).ravel(), v7p[2:][SWAP], atol=1e-12)


def test_urdf_is_the_digest_mass_layout():
    text = urdf_text()
    assert text.count('<mass value="2.5"/>') == 4 and '<mass value="10.0"/>' in text
