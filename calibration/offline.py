"""Offline identification from recordings: fit, score held-out logs, cross-validate by gain.

This is what ``servoloop calibrate fit`` runs.  Model "seed000" is fitted
by output error like the others (one kp scale across firmware gains); the
paper's own regression is :mod:`calibration.seed000`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from servoloop.calibration.errors import FitError
from servoloop.calibration.models import BAM_XL330_PUBLISHED, get_model
from servoloop.calibration.output_error import fit_output_error
from servoloop.calibration.recording import Recording, load_recording, resample
from servoloop.calibration.simulation import simulate_recording, simulation_mae

__all__ = ["load_resampled", "fit_logs", "score_logs", "cross_validate_by_gain", "default_start",
           "OfflineFit"]

BAM_DT_S = 0.005


def load_resampled(paths, dt: float = BAM_DT_S) -> list[Recording]:
    """Load, check and resample recordings (BAM's 5 ms by default)."""
    return [resample(load_recording(p), dt) for p in paths]


def default_start(model_name: str) -> dict | None:
    """Starting point: BAM's published XL330 parameters for the voltage models."""
    spec = get_model(model_name)
    if spec.drive != "voltage":
        return None
    start = dict(BAM_XL330_PUBLISHED["m6"])
    start.setdefault("load_friction_base", start["load_friction_motor"])
    start.setdefault("load_friction_stribeck", start["load_friction_external_stribeck"])
    start.setdefault("command_delay", 0.008)
    return start


@dataclass
class OfflineFit:
    """A fit and its per-log scores.

    Attributes
    ----------
    model : str
    params : dict
    stderr : dict
    logs : list of dict
        ``{"file", "role", "kp_fw", "trajectory", "mae_rad", "mae_deg"}``.
    nfev : int
    """

    model: str
    params: dict
    stderr: dict
    logs: list
    nfev: int

    def mean_mae(self, role: str) -> float:
        v = [r["mae_rad"] for r in self.logs if r["role"] == role]
        return float(np.mean(v)) if v else math.nan

    def to_json(self) -> dict:
        return {"model": self.model, "params": self.params, "stderr": self.stderr,
                "logs": [{k: r[k] for k in ("file", "role", "mae_rad", "mae_deg", "kp_fw", "trajectory")}
                         for r in self.logs],
                "mean_mae_rad": {k: (v if math.isfinite(v) else None)
                                 for k, v in (("train", self.mean_mae("train")),
                                              ("holdout", self.mean_mae("holdout")))}}


def score_logs(model_name: str, params: dict, recs: list[Recording], role: str) -> list[dict]:
    """Simulation MAE of each recording (BAM's score), as report rows."""
    spec = get_model(model_name)
    rows = []
    for r in recs:
        mae = simulation_mae(spec, params, r)
        rows.append({"file": r.path, "role": role, "kp_fw": r.kp_fw, "trajectory": r.trajectory,
                     "mae_rad": mae, "mae_deg": math.degrees(mae)})
    return rows


def fit_logs(model_name: str, train: list[Recording], holdout: list[Recording] = (),
             method: str = "cmaes+lsq", evals: int = 4000, start: dict | None = None,
             progress: bool = False, seed: int = 1) -> OfflineFit:
    """Fit one parameter set on ``train`` (all firmware gains), score train and holdout."""
    if not train:
        raise FitError("no training logs")
    spec = get_model(model_name)
    if "kt" in spec.fixed:
        # v3/v6 carry the XL330-M288 datasheet motor; other servos need their own
        other = sorted({r.servo_model for r in list(train) + list(holdout)
                        if "xl330" not in r.servo_model.lower().replace("-", "")})
        if other:
            raise FitError(f"model {model_name} fixes the XL330-M288 datasheet motor (kt, R); "
                           f"recordings of {', '.join(other)} need m1..m6 (kt, R fitted)")
    start = default_start(model_name) if start is None else start
    res = fit_output_error(spec, list(train), start, method=method, cma_evals=evals,
                           progress=progress, seed=seed)
    params = dict(spec.values(res.params))
    logs = score_logs(model_name, params, train, "train") + score_logs(model_name, params, list(holdout), "holdout")
    return OfflineFit(model_name, params, res.stderr, logs, res.nfev)


def cross_validate_by_gain(model_name: str, recs: list[Recording], **kw) -> list[OfflineFit]:
    """Fit on the logs of all firmware gains but one, predict that one; for each gain.

    Returns
    -------
    list of OfflineFit
        One per held-out gain, in increasing gain order.
    """
    gains = sorted({r.kp_fw for r in recs})
    if len(gains) < 2:
        raise FitError(f"cross-validation by gain needs logs at two firmware gains or more, got {gains}")
    out = []
    for g in gains:
        train = [r for r in recs if r.kp_fw != g]
        test = [r for r in recs if r.kp_fw == g]
        out.append(fit_logs(model_name, train, test, **kw))
    return out


def simulated_runs(model_name: str, params: dict, recs: list[Recording], role: str) -> list[dict]:
    """Rows for :func:`calibration.report.plot_fit`."""
    spec = get_model(model_name)
    runs = []
    for r in recs:
        q, _, _ = simulate_recording(spec, params, r)
        runs.append({"name": r.name, "t": r.t, "goal": r.goal, "measured": r.position,
                     "simulated": q, "role": role})
    return runs
