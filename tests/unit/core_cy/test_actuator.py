"""The compiled servo actuator simulation against its NumPy reference, and physics checks."""

import math

import numpy as np
import pytest

from servoloop.core_cy.actuator import layout as L
from servoloop.core_cy.actuator.reference import simulate_reference
from servoloop.core_cy.actuator.simulate import simulate, simulate_into


def _random_params(rng, mode):
    p = np.zeros(L.NP)
    p[L.P_MODE] = mode
    p[L.P_KP_FW] = rng.choice([100.0, 400.0, 1.0])
    p[L.P_GAIN] = rng.uniform(0.001, 0.004) if mode == L.MODE_VOLTAGE else rng.uniform(0.5, 20.0) / p[L.P_KP_FW]
    p[L.P_LIMIT] = rng.uniform(0.5, 1.0) if mode == L.MODE_VOLTAGE else rng.uniform(0.2, 3.0)
    p[L.P_KT] = rng.uniform(0.2, 0.5)
    p[L.P_R] = rng.uniform(1.5, 5.0)
    p[L.P_KD] = rng.uniform(0.0, 0.3)
    p[L.P_ARMATURE] = rng.uniform(0.0, 0.004)
    p[L.P_Q_OFFSET] = rng.uniform(-0.05, 0.05)
    p[L.P_MAX_CURRENT] = rng.choice([math.inf, rng.uniform(0.5, 2.0)])
    p[L.P_FB:L.P_LFEQ + 1] = rng.uniform(0.0, 0.3, L.P_LFEQ + 1 - L.P_FB) * [0.1, 0.1, 1, 1, 1, 1, 0.03, 0.03]
    p[L.P_VS] = rng.uniform(0.05, 1.0)
    p[L.P_ALPHA] = rng.uniform(1.0, 5.0)
    p[L.P_VISC] = rng.uniform(0.0, 0.03)
    p[L.P_INTEGRATOR] = rng.integers(0, 2)
    p[L.P_SUBSTEPS] = rng.integers(1, 4)
    p[L.P_ASYM] = rng.uniform(-0.1, 0.1)
    p[L.P_DUTY0] = rng.choice([0.0, rng.uniform(0.0, 0.05)]) if mode == L.MODE_VOLTAGE else 0.0
    p[L.P_DUTY0_ERR] = 0.003
    p[L.P_KE] = p[L.P_KT] * rng.uniform(1.0, 1.4)
    return p


def _inputs(rng, n=400, dt=0.005):
    t = np.arange(n) * dt
    goal = 1.2 * np.sin(2 * np.pi * rng.uniform(0.2, 1.5) * t) * np.sin(2 * np.pi * 0.3 * t)
    goal[n // 3: n // 3 + 40] += rng.uniform(-1, 1)   # a step: saturation and stick-slip
    on = np.ones(n, bool)
    on[2 * n // 3:] = rng.random() < 0.5                # sometimes a torque-off fall
    vin = 7.4 + 0.3 * rng.standard_normal(n)
    return goal, on, vin


@pytest.mark.parametrize("seed", range(12))
def test_kernel_equals_reference(seed):
    rng = np.random.default_rng(seed)
    mode = L.MODE_VOLTAGE if seed % 3 else L.MODE_PD
    p = _random_params(rng, mode)
    goal, on, vin = _inputs(rng)
    args = (p, goal, on, vin, 0.005, rng.uniform(-0.3, 0.3), rng.uniform(-1, 1), 0.0049, 0.48)
    q, qd, tau = simulate(*args)
    q_ref, qd_ref, tau_ref = simulate_reference(*args)
    np.testing.assert_allclose(q, q_ref, rtol=0, atol=1e-11)
    np.testing.assert_allclose(qd, qd_ref, rtol=0, atol=1e-9)
    np.testing.assert_allclose(tau, tau_ref, rtol=0, atol=1e-9)
    assert np.ptp(q) > 1e-3  # the case moved


def test_checks_shapes_and_inputs():
    p = np.zeros(L.NP)
    p[L.P_VS], p[L.P_ALPHA], p[L.P_LIMIT] = 1.0, 1.0, 1.0
    goal = np.zeros(10)
    with pytest.raises(ValueError, match="p: expected shape"):
        simulate(np.zeros(3), goal, np.ones(10, bool), 7.4, 0.005, 0, 0, 0.01, 0)
    with pytest.raises(ValueError, match="torque_on"):
        simulate(p, goal, np.ones(9, bool), 7.4, 0.005, 0, 0, 0.01, 0)
    with pytest.raises(ValueError, match="dt must be > 0"):
        simulate(p, goal, np.ones(10, bool), 7.4, 0.0, 0, 0, 0.01, 0)
    with pytest.raises(ValueError, match="load_inertia"):
        simulate(p, goal, np.ones(10, bool), 7.4, 0.005, 0, 0, 0.0, 0)
    with pytest.raises(ValueError, match="q_out"):
        simulate_into(p, goal, np.ones(10, bool), 7.4, 0.005, 0, 0, 0.01, 0,
                      np.empty(10, np.float32), np.empty(10), np.empty(10))


def test_pd_step_settles_within_coulomb_band():
    """Seed 000's law: a step settles where |kp e| <= kc, never beyond the goal band."""
    p = np.zeros(L.NP)
    p[L.P_MODE], p[L.P_KP_FW], p[L.P_GAIN], p[L.P_KD], p[L.P_FB] = L.MODE_PD, 1.0, 9.272, 0.3069, 0.03
    p[L.P_LIMIT], p[L.P_VS], p[L.P_ALPHA], p[L.P_SUBSTEPS] = math.inf, 1.0, 1.0, 10
    n = 1000
    q, qd, tau = simulate(p, np.full(n, 0.2), np.ones(n, bool), 0.0, 0.001, 0.0, 0.0, 0.004, 0.0)
    assert abs(q[-1] - 0.2) <= 0.03 / 9.272 + 1e-9
    assert qd[-1] == 0.0                      # static friction holds it exactly
    assert q.max() < 0.2 + 0.01               # damping ratio 0.8: small overshoot only


def test_torque_off_pendulum_swings_about_hanging_position():
    p = np.zeros(L.NP)
    p[L.P_MODE], p[L.P_VS], p[L.P_ALPHA], p[L.P_LIMIT], p[L.P_SUBSTEPS] = L.MODE_VOLTAGE, 1.0, 1.0, 1.0, 20
    p[L.P_KT], p[L.P_R], p[L.P_KE] = 0.3, 2.0, 0.3
    n = 2000
    q, _, tau = simulate(p, np.zeros(n), np.zeros(n, bool), 7.4, 0.001, 0.3, 0.0, 0.0049, 0.48)
    assert np.all(tau == 0.0)
    # frictionless: amplitude kept (symplectic Euler), period 2 pi sqrt(I / mgl) for small swings
    assert q.min() == pytest.approx(-0.3, abs=5e-3)
    crossings = np.flatnonzero(np.diff(np.sign(q)) != 0)
    period = 2 * np.mean(np.diff(crossings)) * 0.001
    assert period == pytest.approx(2 * np.pi * math.sqrt(0.0049 / 0.48), rel=0.03)
