"""Output-error identification: fit a model's parameters by simulating whole runs.

Two optimisers, used in turn by default (``method="cmaes+lsq"``):

* CMA-ES (the ``cma`` package) on the mean per-log simulation MAE, the very
  score that is reported, as BAM does (BAM runs 100k trials; on the eight
  XL330 logs 4000 evaluations, ~3 s with the compiled simulator, get within
  a few percent of its fit).  The MAE is piecewise smooth at best
  (stick-slip switches), so a global, derivative-free search suits it.
* scipy's trust-region reflective least squares on the residual
  ``q_sim - q_log`` over every sample (each log weighted by 1/sqrt(n)),
  soft-L1 loss at a few encoder ticks: it polishes the CMA-ES optimum and
  alone recovers known parameters from simulated data to 1e-6.  Parameters are
searched in box-normalised coordinates so one finite-difference step suits
them all.  Standard errors come from the Gauss-Newton covariance at the
optimum (residual variance x (J^T J)^-1), reported as indicative: the
residuals are correlated in time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from servoloop.calibration.errors import FitError
from servoloop.calibration.models import ModelSpec
from servoloop.calibration.recording import Recording
from servoloop.calibration.simulation import expected_reading, simulate_recording, simulation_mae

__all__ = ["FitResult", "fit_output_error", "output_error_residuals", "output_error_cost"]

# soft-L1 scale: ~3 encoder ticks of an X-series servo
_LOSS_SCALE_RAD = 0.005


@dataclass
class FitResult:
    """Outcome of one output-error fit.

    Attributes
    ----------
    model : str
    params : dict
        Fitted values of the free parameters (SI units).
    stderr : dict
        Indicative standard errors, same keys (NaN where undetermined).
    mae : list of float
        Simulation MAE per training log [rad].
    cost : float
        Final least-squares cost.
    nfev : int
        Simulations of the whole training set.
    """

    model: str
    params: dict
    stderr: dict
    mae: list
    cost: float
    nfev: int


def _to_x(model, params):
    lo, hi = model.bounds()
    v = np.array([params[k] for k in model.free])
    return (v - lo) / (hi - lo)


def _from_x(model, x):
    lo, hi = model.bounds()
    v = lo + np.clip(x, 0.0, 1.0) * (hi - lo)
    return dict(zip(model.free, v.tolist(), strict=True))


def output_error_residuals(model: ModelSpec, recs: list[Recording], params: dict,
                           sample_weights: list | None = None) -> np.ndarray:
    """Simulated minus logged position over every sample of ``recs``, each log weighted by 1/sqrt(n).

    Where the log has whole-tick readings and the model a reading noise
    (fitted, or held in ``model.fixed``), the simulation is compared through
    the expected reading.

    Parameters
    ----------
    model : ModelSpec
    recs : list of Recording
        Resampled.
    params : dict
        Values of ``model.free``.
    sample_weights : list of ndarray (n_i,), optional
        Extra weight per sample and log (e.g. 1/std of each reading).

    Returns
    -------
    ndarray (sum n_i,)
        [rad x weight]; non-finite entries (a diverged simulation) replaced by 1.
    """
    out = []
    sigma = model.values(params).get("reading_noise_ticks")
    for i, r in enumerate(recs):
        q, _, _ = simulate_recording(model, params, r)
        if sigma is not None and r.position_quantum > 0.0:
            q = expected_reading(q, r.position_quantum, sigma)
        res = (1.0 / np.sqrt(r.n)) * (q - r.position)
        if sample_weights is not None:
            res = res * sample_weights[i]
        out.append(res)
    res = np.concatenate(out)
    return np.where(np.isfinite(res), res, 1.0)


def output_error_cost(model: ModelSpec, recs: list[Recording], params: dict) -> float:
    """The least-squares fit's objective at ``params`` (soft-L1 of the residuals, as scipy reports it)."""
    f = _loss_scale(recs)
    z = (output_error_residuals(model, recs, params) / f) ** 2
    return float(f**2 * np.sum(np.sqrt(1.0 + z) - 1.0))


def _loss_scale(recs) -> float:
    return _LOSS_SCALE_RAD / float(np.sqrt(np.mean([r.n for r in recs])))


def fit_output_error(model: ModelSpec, recs: list[Recording], start: dict | None = None,
                     max_nfev: int = 300, progress: bool = False, method: str = "cmaes+lsq",
                     cma_evals: int = 4000, seed: int = 1, sample_weights: list | None = None,
                     loss: str = "soft_l1") -> FitResult:
    """Fit ``model`` on resampled recordings by simulation error.

    Parameters
    ----------
    model : ModelSpec
    recs : list of Recording
        Resampled (fixed ``dt``) training logs, any firmware gains.
    start : dict, optional
        Initial values (e.g. a previous fit, BAM's published parameters).
    max_nfev : int
        Budget of least-squares function evaluations.
    progress : bool
        Print a progress line on stderr.
    method : {"cmaes+lsq", "cmaes", "lsq"}
        Optimisers to run in turn.
    cma_evals : int
        CMA-ES budget (simulations of the whole training set).
    seed : int
        CMA-ES seed (fits are reproducible).
    sample_weights : list of ndarray (n_i,), optional
        Weight of each sample of each log in the least squares (default 1).
    loss : {"soft_l1", "linear"}
        Least-squares loss: soft-L1 at ~3 encoder ticks (robust to outliers),
        or plain least squares (for weighted fits whose weights already
        model the spread of each reading).

    Returns
    -------
    FitResult
    """
    if not recs:
        raise FitError("no recordings to fit")
    for r in recs:
        if r.dt is None:
            raise FitError(f"{r.path}: not resampled")
    if loss not in ("soft_l1", "linear"):
        raise FitError(f"unknown loss {loss!r}")
    count = [0]
    from servoloop.progress import Progress

    bar = Progress(None, f"fit {model.name} ({len(recs)} logs)", "simulations") if progress else None

    def residuals(x):
        count[0] += 1
        if bar is not None and count[0] % 50 == 0:
            bar.set(count[0])
        return output_error_residuals(model, recs, _from_x(model, x), sample_weights)

    if method not in ("cmaes+lsq", "cmaes", "lsq"):
        raise FitError(f"unknown fit method {method!r}")
    x0 = _to_x(model, model.initial(start))
    if method.startswith("cmaes"):
        x0 = _cmaes(model, recs, x0, cma_evals, seed, progress)
    if method == "cmaes":
        # one Jacobian at the optimum for the standard errors
        max_nfev_eff = 1
    else:
        max_nfev_eff = max_nfev
    sol = least_squares(residuals, x0, bounds=(0.0, 1.0), method="trf", loss=loss, f_scale=_loss_scale(recs),
                        diff_step=1e-3, x_scale=1.0, max_nfev=max_nfev_eff)
    if method != "lsq" and _mean_mae(model, recs, sol.x) > _mean_mae(model, recs, x0):
        # the soft-L1 polish traded MAE for squared error: keep the MAE optimum
        sol.x = x0
    if bar is not None:
        bar.close()
    params = _from_x(model, sol.x)
    stderr = _stderr(model, sol)
    maes = [simulation_mae(model, params, r) for r in recs]
    return FitResult(model.name, params, stderr, maes, float(sol.cost), count[0])


def _mean_mae(model, recs, x):
    params = _from_x(model, x)
    return float(np.mean([simulation_mae(model, params, r) for r in recs]))


def _cmaes(model, recs, x0, evals, seed, progress):
    try:
        import cma
    except ImportError as exc:  # optional dependency
        raise FitError("method 'cmaes' needs the 'cma' package (pip install cma)") from exc

    def score(x):
        v = _mean_mae(model, recs, x)
        return v if np.isfinite(v) else 1e3

    es = cma.CMAEvolutionStrategy(np.clip(x0, 0.0, 1.0), 0.15,
                                  {"bounds": [0.0, 1.0], "maxfevals": evals, "seed": seed,
                                   "verbose": -9})
    from servoloop.progress import Progress

    bar = Progress(evals, f"CMA-ES {model.name}", "evaluations") if progress else None
    while not es.stop():
        xs = es.ask()
        es.tell(xs, [score(x) for x in xs])
        if bar is not None:
            bar.set(es.countevals, f"best MAE {es.result.fbest * 1e3:.2f} mrad")
    if bar is not None:
        bar.close()
    return np.asarray(es.result.xbest)


def _stderr(model, sol):
    lo, hi = model.bounds()
    J = sol.jac
    dof = max(J.shape[0] - J.shape[1], 1)
    s2 = float(np.sum(sol.fun**2) / dof)
    try:
        cov = np.linalg.pinv(J.T @ J) * s2
        se = np.sqrt(np.clip(np.diag(cov), 0.0, None)) * (hi - lo)
    except np.linalg.LinAlgError:
        se = np.full(len(model.free), np.nan)
    return dict(zip(model.free, se.tolist(), strict=True))
