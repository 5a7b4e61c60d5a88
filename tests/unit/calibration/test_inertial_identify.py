"""Identification on simulated data from the built-in arm (digest sections 8.6-8.8, 8.10).

Torques are W(q, v, a) theta_true: RNEA with the URDF's inertias plus the
friction/armature model, sampled on random Fourier trajectories.
"""

import json
from math import erf, sqrt

import numpy as np
import pytest

from servoloop import robots
from servoloop.calibration.errors import FitError, RecordingFormatError
from servoloop.calibration.inertial import (
    DEFAULT_EPS,
    FilterSettings,
    RegressorModel,
    body_parameters,
    check_consistency,
    command,
    identify,
    identify_from_log,
    irls,
    regroup_model,
    simulate,
    solve_friction,
    solve_ols,
    solve_sdp,
    with_friction,
    write_report,
)

pytest.importorskip("cvxpy")

VMAX = np.full(6, 3.0)  # rad/s, below the XM430's 4.8 rad/s


@pytest.fixture(scope="module")
def arm():
    model = RegressorModel(robots.urdf_path("arm"))
    base = regroup_model(model)
    theta = with_friction(model.theta_urdf, model.layout, Fc=[0.06, 0.05, 0.04, 0.03, 0.02, 0.02],
                          Fv=[0.03, 0.02, 0.02, 0.01, 0.01, 0.01], Ia=[2e-3, 1.5e-3, 1e-3, 5e-4, 5e-4, 4e-4],
                          beta=[0.01, -0.02, 0.01, 0.0, 0.005, -0.005])
    return model, base, theta


def pi_error(model, base, data, pi_hat, pi_true):
    """Per base parameter: |error| x column norm / torque norm (a relative error that
    stays meaningful for base parameters whose true value is 0)."""
    Y = base.base_regressor(model.stacked(data.Q, data.V, data.A))
    return np.abs(pi_hat - pi_true) * np.linalg.norm(Y, axis=0) / np.linalg.norm(data.tau_clean)


def pure_friction_columns(model, base):
    """Friction parameters that are base parameters on their own (no regrouping)."""
    out = []
    for i, b in enumerate(base.idx_b):
        if b >= model.layout.n_inertial and not np.any(base.K_d[i]):
            out.append(b)
    return np.array(out)


@pytest.fixture(scope="module")
def clean(arm):
    model, base, theta = arm
    return simulate(model, theta, np.random.default_rng(20), duration_s=20.0, rate_hz=50.0,
                    max_velocity=VMAX)


@pytest.mark.parametrize("method", ["ols", "sdp"])
def test_noise_free_recovery(arm, clean, method):
    model, base, theta = arm
    d = clean
    res = identify(model, d.Q, d.V, d.A, d.tau, method=method, base=base)
    pi_true = base.pi_from_theta(theta)
    assert np.max(pi_error(model, base, d, res.pi, pi_true)) <= 1e-6
    fr = pure_friction_columns(model, base)
    assert fr.size >= 18  # Fc, Fv, beta of every joint, and most Ia
    assert np.allclose(res.theta[fr], theta[fr], rtol=1e-6, atol=1e-9)
    assert res.rms_per_joint.max() <= 1e-6 * np.sqrt(np.mean(d.tau**2))
    if method == "sdp":
        assert res.consistency.ok, res.consistency.problems


def test_sdp_matches_ols_when_truth_is_strictly_feasible(arm, clean):
    model, base, theta = arm
    d = clean
    W = model.stacked(d.Q, d.V, d.A)
    sdp = solve_sdp(W, d.tau.reshape(-1), model.layout)
    ols = solve_ols(base.base_regressor(W), d.tau.reshape(-1))
    assert sdp.cost >= ols.cost - 1e-12
    assert np.allclose(base.pi_from_theta(sdp.x), ols.x, rtol=1e-5, atol=1e-9)


@pytest.fixture(scope="module")
def noisy(arm):
    model, base, theta = arm
    return simulate(model, theta, np.random.default_rng(21), duration_s=20.0, rate_hz=100.0,
                    noise=0.02, max_velocity=VMAX)


def well_excited(model, base, d, pi_true, rel_std=0.01):
    """Base parameters whose predicted standard error is below rel_std of their value."""
    Y = base.base_regressor(model.stacked(d.Q, d.V, d.A))
    Yw = (Y.reshape(-1, model.nv, Y.shape[1]) / d.sigma[None, :, None]).reshape(-1, Y.shape[1])
    std = np.sqrt(np.diag(np.linalg.inv(Yw.T @ Yw)))
    with np.errstate(divide="ignore"):
        return std / np.abs(pi_true) < rel_std


@pytest.mark.parametrize("method", ["ols", "sdp"])
def test_noisy_recovery_and_held_out_torque(arm, noisy, method):
    model, base, theta = arm
    d = noisy
    assert d.Q.shape[0] >= 2000
    res = identify(model, d.Q, d.V, d.A, d.tau, method=method, base=base)
    pi_true = base.pi_from_theta(theta)
    good = well_excited(model, base, d, pi_true)
    assert good.sum() >= 10
    rel = np.abs(res.pi - pi_true)[good] / np.abs(pi_true[good])
    assert rel.max() <= 0.05
    # Coulomb and viscous friction of every joint (beta is 20 % off on the
    # shoulder, where a constant torque looks like gravity over a short swing)
    for j in range(model.nv):
        for name, tol in (("Fc", 0.05), ("Fv", 0.10)):
            k = model.layout.friction_index(j, name)
            assert abs(res.theta[k] - theta[k]) <= tol * abs(theta[k]), (j, name)
    held = simulate(model, theta, np.random.default_rng(22), duration_s=10.0, rate_hz=100.0,
                    max_velocity=VMAX)
    noise = np.random.default_rng(23).normal(size=held.tau.shape) * d.sigma
    rms = np.sqrt(np.mean((model.torques(res.theta, held.Q, held.V, held.A) - (held.tau + noise)) ** 2, axis=0))
    assert np.all(rms <= 1.1 * d.sigma), rms / d.sigma


def test_constrained_solution_is_feasible_where_ols_is_not(arm):
    model, base, theta = arm
    layout = model.layout
    # The flange as a thin rod along its roll axis: Izz about the axis ~ 0, so
    # noisy OLS puts it below zero, which no mass distribution allows.
    th = theta.copy()
    m = th[layout.body_slice(5)][0]
    c_z = th[layout.body_slice(5)][3] / m
    th[layout.body_slice(5)] = body_parameters(m, [0.0, 0.0, c_z], np.diag([3e-5, 3e-5, 4e-9]))
    assert check_consistency(th, layout, eps=DEFAULT_EPS).ok
    d = simulate(model, th, np.random.default_rng(4), duration_s=10.0, rate_hz=50.0, noise=0.05,
                 max_velocity=VMAX)
    ols = identify(model, d.Q, d.V, d.A, d.tau, method="ols", base=base)
    sdp = identify(model, d.Q, d.V, d.A, d.tau, method="sdp", base=base)
    izz = base.names(layout.names()).index("flange_link.Izz")
    assert ols.pi[izz] < 0  # infeasible for any theta_d
    assert not ols.consistency.ok
    assert any("flange_link" in p for p in ols.consistency.problems)
    assert sdp.consistency.ok, sdp.consistency.problems
    assert min(b.lmi_min_eig for b in sdp.consistency.bodies) >= DEFAULT_EPS * (1 - 1e-6)
    assert np.all(sdp.theta[layout.nonnegative_indices()] >= -1e-12)
    assert sdp.cost >= ols.cost
    assert sdp.cost > ols.cost * (1 + 1e-6)  # the constraints were active


def test_sdp_does_not_depend_on_where_it_starts(arm, clean):
    # convex: two solvers (interior point vs first-order) meet at the same optimum
    model, base, theta = arm
    d = clean
    W = model.stacked(d.Q[::2], d.V[::2], d.A[::2])
    tau = model.torques(theta, d.Q[::2], d.V[::2], d.A[::2]).reshape(-1)
    tau = tau + np.random.default_rng(5).normal(size=tau.size) * 0.05 * np.std(tau)
    a = solve_sdp(W, tau, model.layout)
    b = solve_sdp(W, tau, model.layout, solver="SCS")
    assert abs(a.cost - b.cost) <= 1e-3 * a.cost


def test_friction_only_variant_recovers_friction_and_respects_bounds(arm, clean):
    model, base, theta = arm
    d = clean
    W = model.stacked(d.Q, d.V, d.A)
    res = solve_friction(W, d.tau.reshape(-1), model.layout, theta)
    assert np.allclose(res.x, theta, rtol=1e-8, atol=1e-10)
    # a true Fv = 0 with noise: unconstrained LS would go negative half the time; bounded stays >= 0
    th0 = theta.copy()
    fv = [model.layout.friction_index(j, "Fv") for j in range(6)]
    th0[fv] = 0.0
    tau = model.torques(th0, d.Q, d.V, d.A)
    tau = tau + np.random.default_rng(6).normal(size=tau.shape) * 0.05 * tau.std(axis=0)
    res = solve_friction(W, tau.reshape(-1), model.layout, th0)
    assert np.all(res.x[model.layout.nonnegative_indices()] >= 0)
    assert np.isclose(min(res.x[fv]), 0.0)  # at least one bound is active
    r = identify(model, d.Q, d.V, d.A, tau, method="friction", base=base, theta_inertial=th0)
    assert np.allclose(r.theta, res.x)


def test_unknown_method_and_shape_errors(arm, clean):
    model, base, _ = arm
    d = clean
    with pytest.raises(FitError, match="method"):
        identify(model, d.Q, d.V, d.A, d.tau, method="nope", base=base)
    with pytest.raises(FitError, match="tau"):
        identify(model, d.Q, d.V, d.A, d.tau[:, :3], base=base)


# ---- IRLS ------------------------------------------------------------------------------


def _ols(Phi, U):
    return solve_ols(Phi, U).x


def test_irls_estimates_the_per_joint_noise_variance(arm, noisy):
    model, base, _ = arm
    d = noisy
    Y = base.base_regressor(model.stacked(d.Q, d.V, d.A))
    res = irls(Y, d.tau.reshape(-1), model.nv, _ols, n_params=base.rank)
    assert np.allclose(np.diag(res.omega), d.sigma**2, rtol=0.10), np.diag(res.omega) / d.sigma**2
    assert res.converged and res.weight_iterations < 20
    for before, after in zip(res.weight_history, res.weight_history[1:] + [res.weights], strict=True):
        assert np.all(after <= before)  # a row never regains its weight
    # clean Gaussian data: only the 3-sigma tails are cut, whole samples at a time
    expected = 1 - erf(3 / sqrt(2)) ** model.nv
    assert np.mean(res.weights == 0) < 2 * expected


def test_irls_resists_outliers_where_ols_does_not(arm, noisy):
    model, base, theta = arm
    d = noisy
    Y = base.base_regressor(model.stacked(d.Q, d.V, d.A))
    pi_true = base.pi_from_theta(theta)
    good = well_excited(model, base, d, pi_true)
    rng = np.random.default_rng(24)
    hit = rng.choice(d.tau.shape[0], size=int(0.02 * d.tau.shape[0]), replace=False)
    bad = d.tau.copy()
    bad[hit] += rng.choice([-20.0, 20.0], size=(hit.size, model.nv)) * d.sigma

    def err(pi):
        return np.linalg.norm((pi - pi_true)[good] / pi_true[good])

    clean_err = err(_ols(Y, d.tau.reshape(-1)))
    ols_err = err(_ols(Y, bad.reshape(-1)))
    res = irls(Y, bad.reshape(-1), model.nv, _ols, n_params=base.rank)
    assert err(res.x) <= 1.5 * clean_err
    assert ols_err >= 2.0 * clean_err
    rows_hit = np.zeros(d.tau.shape, bool)
    rows_hit[hit] = True
    assert np.all(res.weights[rows_hit.reshape(-1)] == 0)  # every outlier row cut
    assert np.allclose(np.diag(res.omega), d.sigma**2, rtol=0.10)


def _three_joint_problem(seed=30, N=2000):
    # the digest's numbers: true per-joint variances (0.25, 0.04, 2.25)
    rng = np.random.default_rng(seed)
    Phi = rng.normal(size=(N * 3, 5))
    x = rng.normal(size=5)
    sig = np.sqrt([0.25, 0.04, 2.25])
    U = Phi @ x + (rng.normal(size=(N, 3)) * sig).reshape(-1)
    return Phi, U, sig**2


def test_consistent_covariance_update_converges_to_the_true_variances():
    Phi, U, var = _three_joint_problem()
    res = irls(Phi, U, 3, _ols, max_weight_iterations=1)
    assert np.allclose(np.diag(res.omega), var, rtol=0.1)
    assert res.covariance_iterations[0] <= 5


def test_reference_code_update_collapses_and_diverges():
    Phi, U, var = _three_joint_problem()
    res = irls(Phi, U, 3, _ols, consistent=False, max_weight_iterations=1, max_covariance_iterations=4)
    diag = np.array([np.diag(o) for o in res.omega_history])
    # Omega_k = Sigma^k: variances below 1 shrink toward 0, above 1 grow
    assert diag[-1, 0] < 0.1 * var[0] and diag[-1, 1] < 0.1 * var[1]
    assert diag[-1, 2] > 5 * var[2]


def test_identify_with_irls_and_sdp(arm, noisy):
    model, base, theta = arm
    d = noisy
    sl = slice(0, 1000)
    res = identify(model, d.Q[sl], d.V[sl], d.A[sl], d.tau[sl], method="sdp", base=base, use_irls=True)
    assert res.consistency.ok
    assert res.irls is not None and res.irls.converged
    var = np.diag(res.irls.omega)
    assert np.all(var > 0.5 * d.sigma**2) and np.all(var < 2.0 * d.sigma**2)


# ---- from a log file, and the CLI body -------------------------------------------------


@pytest.fixture(scope="module")
def log_file(arm, tmp_path_factory):
    model, _, theta = arm
    d = simulate(model, theta, np.random.default_rng(25), duration_s=12.0, rate_hz=1000.0,
                 noise=0.01, max_velocity=VMAX)
    path = tmp_path_factory.mktemp("inertial") / "arm_log.npz"
    # joints stored in reverse order: the loader must reorder them by name
    order = np.arange(6)[::-1]
    np.savez(path, t=d.t, q=d.Q[:, order], v=d.V[:, order], tau=d.tau[:, order],
             joint_names=np.array(model.layout.joint_names)[order])
    return path


def test_identify_from_log(arm, log_file):
    model, base, theta = arm
    res = identify_from_log(log_file, robots.urdf_path("arm"), method="friction",
                            settings=FilterSettings(decimation=5))
    fr = pure_friction_columns(model, base)
    fv = [model.layout.friction_index(j, "Fv") for j in range(6)]
    assert np.allclose(res.theta[fv], theta[fv], rtol=0.15, atol=2e-3)
    assert res.n_samples > 2000
    assert fr.size


def test_log_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.npz"
    np.savez(bad, t=np.arange(10.0), q=np.zeros((10, 6)))
    with pytest.raises(RecordingFormatError, match="bad.npz.*tau"):
        identify_from_log(bad, robots.urdf_path("arm"))
    nan = tmp_path / "nan.npz"
    q = np.zeros((10, 6))
    q[4, 2] = np.nan
    np.savez(nan, t=np.arange(10.0), q=q, tau=np.zeros((10, 6)))
    with pytest.raises(RecordingFormatError, match="sample 4"):
        identify_from_log(nan, robots.urdf_path("arm"))


def test_command_runs_and_writes_the_report(log_file, tmp_path, capsys):
    import argparse

    from servoloop.cli import main

    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    out = tmp_path / "inertial.yaml"
    argv = ["--log", str(log_file), "--urdf", str(robots.urdf_path("arm")),
            "--method", "friction", "--decimation", "5", "--out", str(out), "--json"]
    # through the one command line, as a user types it
    assert main(["calibrate", "inertial", *argv]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["consistency"]["ok"] is True
    assert report["solver_status"] in ("optimal", "optimal_inaccurate")
    assert set(report["rms_torque_per_joint"]) == set(robots_arm_joints())
    import yaml

    assert yaml.safe_load(out.read_text())["method"] == "friction"
    args = parser.parse_args(["--log", str(tmp_path / "missing.npz"), "--urdf", str(robots.urdf_path("arm"))])
    assert command.run(args) == 2


def robots_arm_joints():
    return RegressorModel(robots.urdf_path("arm")).layout.joint_names


def test_write_report_is_atomic_and_complete(arm, clean, tmp_path):
    import yaml

    model, base, _ = arm
    d = clean
    res = identify(model, d.Q, d.V, d.A, d.tau, method="ols", base=base)
    path = write_report(res, tmp_path / "r.yaml")
    data = yaml.safe_load(path.read_text())
    assert len(data["theta"]) == model.layout.n_params
    assert len(data["base_parameters"]) == base.rank
    assert [p.name for p in tmp_path.iterdir()] == ["r.yaml"]


def test_an_inaccurate_solve_is_reported_not_hidden(arm, noisy, monkeypatch):
    # interior-point solvers may stop at relaxed tolerances ("optimal_inaccurate");
    # the result and its report say so instead of passing it off as optimal
    import sys

    from servoloop.calibration.inertial.solvers import SolverResult

    ident = sys.modules["servoloop.calibration.inertial.identify"]  # the package's `identify` is the function

    model, base, _ = arm
    real = ident.solve_ols

    def inaccurate(Y, tau):
        sol = real(Y, tau)
        return SolverResult(sol.x, sol.cost, "optimal_inaccurate")

    sl = slice(0, 300)
    d = noisy
    assert identify(model, d.Q[sl], d.V[sl], d.A[sl], d.tau[sl], method="ols", base=base).solver_status == "optimal"
    monkeypatch.setattr(ident, "solve_ols", inaccurate)
    res = identify(model, d.Q[sl], d.V[sl], d.A[sl], d.tau[sl], method="ols", base=base)
    assert res.solver_status == "optimal_inaccurate"
    assert res.to_dict()["solver_status"] == "optimal_inaccurate"
