"""Dry run on simulated data: ``python -m calibration.inertial.demo [--json]``.

Identifies the built-in ``arm`` from torques simulated with known parameters
(RNEA + friction/armature, random Fourier excitation, 2 % Gaussian torque
noise) and prints the figures the acceptance checks are about: base-parameter
errors, held-out torque RMS over the noise sigma, the IRLS noise estimate,
and the effect of 2 % of samples hit by +-20 sigma outliers.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

__all__ = ["run_demo", "main"]


def _true_theta(model):
    from servoloop.calibration.inertial.synthetic import with_friction

    return with_friction(model.theta_urdf, model.layout, Fc=[0.06, 0.05, 0.04, 0.03, 0.02, 0.02],
                         Fv=[0.03, 0.02, 0.02, 0.01, 0.01, 0.01],
                         Ia=[2e-3, 1.5e-3, 1e-3, 5e-4, 5e-4, 4e-4],
                         beta=[0.01, -0.02, 0.01, 0.0, 0.005, -0.005])


def run_demo(seed: int = 21, n_samples: int = 2000, noise: float = 0.02, robot: str = "arm") -> dict:
    """Run the simulated identification; returns a dict of figures (see module doc)."""
    from servoloop import robots
    from servoloop.calibration.inertial.base_params import regroup_model
    from servoloop.calibration.inertial.identify import identify
    from servoloop.calibration.inertial.irls import irls
    from servoloop.calibration.inertial.regressor import RegressorModel
    from servoloop.calibration.inertial.solvers import solve_ols
    from servoloop.calibration.inertial.synthetic import simulate

    model = RegressorModel(robots.urdf_path(robot))
    base = regroup_model(model)
    theta = _true_theta(model)
    pi_true = base.pi_from_theta(theta)
    vmax = np.full(model.nv, 3.0)
    d = simulate(model, theta, np.random.default_rng(seed), duration_s=n_samples / 100.0,
                 rate_hz=100.0, noise=noise, max_velocity=vmax)
    held = simulate(model, theta, np.random.default_rng(seed + 1), duration_s=10.0, rate_hz=100.0,
                    noise=0.0, max_velocity=vmax)
    held_tau = held.tau + np.random.default_rng(seed + 2).normal(size=held.tau.shape) * d.sigma
    Y = base.base_regressor(model.stacked(d.Q, d.V, d.A))
    Yw = (Y.reshape(-1, model.nv, Y.shape[1]) / d.sigma[None, :, None]).reshape(-1, Y.shape[1])
    std = np.sqrt(np.diag(np.linalg.inv(Yw.T @ Yw)))
    with np.errstate(divide="ignore"):
        good = std / np.abs(pi_true) < 0.01
    out = {"robot": robot, "backend": model.backend, "n_samples": int(d.Q.shape[0]),
           "noise_fraction": noise, "n_base": base.rank, "n_params": model.layout.n_params,
           "n_well_excited": int(good.sum())}
    for method in ("ols", "sdp"):
        t0 = time.perf_counter()
        res = identify(model, d.Q, d.V, d.A, d.tau, method=method, base=base)
        dt = time.perf_counter() - t0
        rel = np.abs(res.pi - pi_true)[good] / np.abs(pi_true[good])
        rms = np.sqrt(np.mean((model.torques(res.theta, held.Q, held.V, held.A) - held_tau) ** 2, axis=0))
        out[method] = {"seconds": dt, "max_rel_error_well_excited": float(rel.max()),
                       "median_rel_error_well_excited": float(np.median(rel)),
                       "held_out_rms_over_sigma_max": float(np.max(rms / d.sigma)),
                       "physically_consistent": res.consistency.ok,
                       "condition_number": res.condition_number}
    U = d.tau.reshape(-1)
    res = irls(Y, U, model.nv, lambda P, u: solve_ols(P, u).x, n_params=base.rank)
    out["irls_omega_over_true_variance"] = list(map(float, np.diag(res.omega) / d.sigma**2))
    rng = np.random.default_rng(seed + 3)
    hit = rng.choice(d.Q.shape[0], size=int(0.02 * d.Q.shape[0]), replace=False)
    bad = d.tau.copy()
    bad[hit] += rng.choice([-20.0, 20.0], size=(hit.size, model.nv)) * d.sigma

    def err(pi):
        return float(np.linalg.norm((pi - pi_true)[good] / pi_true[good]))

    r_out = irls(Y, bad.reshape(-1), model.nv, lambda P, u: solve_ols(P, u).x, n_params=base.rank)
    out["outliers"] = {"clean_ols_error": err(solve_ols(Y, U).x),
                       "ols_error": err(solve_ols(Y, bad.reshape(-1)).x),
                       "irls_error": err(r_out.x),
                       "samples_cut": int(np.sum(r_out.weights.reshape(-1, model.nv)[:, 0] == 0)),
                       "samples_hit": int(hit.size)}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--noise", type=float, default=0.02)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    out = run_demo(args.seed, args.samples, args.noise)
    print(json.dumps(out) if args.json else json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
