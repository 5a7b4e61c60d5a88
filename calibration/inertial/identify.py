"""Inertial + friction + armature identification from joint data, end to end.

:func:`identify` takes states and torques already filtered (see
:mod:`calibration.inertial.signals`), builds the regressor, regroups it,
solves one of three problems, optionally inside IRLS, and checks the result:

* ``"sdp"``  -- physically consistent (paper eq. 32), the default;
* ``"ols"``  -- unconstrained least squares on the base parameters;
* ``"friction"`` -- inertia fixed to the URDF's, friction/armature fitted.

:func:`identify_from_log` adds loading and filtering of a recorded log.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from servoloop.calibration.errors import FitError, RecordingFormatError
from servoloop.calibration.inertial.base_params import BaseParameters, regroup_model
from servoloop.calibration.inertial.consistency import ConsistencyReport, check_consistency
from servoloop.calibration.inertial.irls import IrlsResult, irls
from servoloop.calibration.inertial.regressor import RegressorModel
from servoloop.calibration.inertial.signals import FilterSettings, prepare_samples
from servoloop.calibration.inertial.solvers import DEFAULT_EPS, solve_friction, solve_ols, solve_sdp

__all__ = [
    "METHODS",
    "InertialResult",
    "identify",
    "identify_stacked",
    "load_joint_log",
    "identify_from_log",
    "write_report",
]

METHODS = ("sdp", "ols", "friction")


@dataclass
class InertialResult:
    """What :func:`identify` found.

    Attributes
    ----------
    method : str
    theta : ndarray (p,), standard parameters (layout of ``model.layout``)
    pi : ndarray (r,), base parameters (unique)
    base : BaseParameters
    cost : float, sum of squared (unweighted) torque residuals [N^2 m^2]
    rms_per_joint : ndarray (nv,), torque residual RMS [N m]
    consistency : ConsistencyReport of theta
    irls : IrlsResult or None
    n_samples : int
    condition_number : float, of the column-normalised base regressor (excitation quality)
    solver_status : str, the solver's word: "optimal", or "optimal_inaccurate" if any solve
        (IRLS solves several) met only the solver's relaxed tolerances
    """

    method: str
    theta: np.ndarray
    pi: np.ndarray
    base: BaseParameters
    cost: float
    rms_per_joint: np.ndarray
    consistency: ConsistencyReport
    irls: IrlsResult | None = None
    n_samples: int = 0
    condition_number: float = float("nan")
    names: list = field(default_factory=list)
    joint_names: list = field(default_factory=list)
    solver_status: str = "optimal"

    def to_dict(self) -> dict:
        """Plain-Python form for YAML/JSON reports."""
        out = {
            "method": self.method,
            "solver_status": self.solver_status,
            "n_samples": self.n_samples,
            "condition_number": self.condition_number,
            "cost": self.cost,
            "rms_torque_per_joint": dict(zip(self.joint_names, map(float, self.rms_per_joint), strict=True)),
            "theta": dict(zip(self.names, map(float, self.theta), strict=True)),
            "base_parameters": dict(zip(self.base.names(self.names), map(float, self.pi), strict=True)),
            "consistency": self.consistency.to_dict(),
        }
        if self.irls is not None:
            out["irls"] = {
                "noise_variance_per_joint": dict(zip(self.joint_names,
                                                     map(float, np.diag(self.irls.omega)), strict=True)),
                "rows_rejected": int(np.sum(self.irls.weights == 0)),
                "weight_iterations": self.irls.weight_iterations,
                "converged": self.irls.converged,
            }
        return out


def _fitter(method, model, base, eps, prior_weight, ni_fixed, statuses: list):
    """``fit(Phi, U) -> x``; each solve's status is appended to ``statuses``."""
    layout = model.layout
    if method == "ols":
        solve = lambda Phi, U: solve_ols(Phi, U)  # noqa: E731
    elif method == "sdp":
        solve = lambda Phi, U: solve_sdp(Phi, U, layout, eps=eps, prior=model.theta_urdf,  # noqa: E731
                                         prior_weight=prior_weight)
    else:
        solve = lambda Phi, U: solve_friction(Phi, U, layout, ni_fixed)  # noqa: E731

    def fit(Phi, U):
        sol = solve(Phi, U)
        statuses.append(sol.status)
        return sol.x

    return fit


def identify(model: RegressorModel, Q, V, A, tau, method: str = "sdp", use_irls: bool = False,
             base: BaseParameters | None = None, eps: float = DEFAULT_EPS,
             prior_weight: float = 1e-3, irls_k: float = 3.0, theta_inertial=None) -> InertialResult:
    """Identify theta from N samples.

    Parameters
    ----------
    model : RegressorModel
    Q, V, A : ndarray (N, nq) / (N, nv) / (N, nv), positions [rad], velocities [rad/s],
        accelerations [rad/s^2]
    tau : ndarray (N, nv), joint torques [N m]
    method : {"sdp", "ols", "friction"}
    use_irls : bool, wrap the solver in IRLS (noise covariance + outlier rejection)
    base : BaseParameters or None (default: structural regrouping of ``model``)
    eps : float, LMI margin for "sdp" [kg m^2]
    prior_weight : float, pull toward the URDF's theta along unidentifiable directions ("sdp";
        null space of W only, so pi is not biased; 0 = off)
    irls_k : float, IRLS cut-off [sigma]
    theta_inertial : ndarray or None, fixed inertia for "friction" (default: the URDF's)
    """
    tau = np.asarray(tau, dtype=float)
    if tau.shape != np.shape(V):
        raise FitError(f"identify: tau {tau.shape} and V {np.shape(V)} differ")
    W = model.stacked(Q, V, A)
    if base is None:
        base = regroup_model(model)
    return identify_stacked(model, W, tau, base, method=method, use_irls=use_irls, eps=eps,
                            prior_weight=prior_weight, irls_k=irls_k,
                            theta_inertial=theta_inertial, row_names=_row_names(model))


def identify_stacked(model: RegressorModel, W, tau, base: BaseParameters, method: str = "sdp",
                     use_irls: bool = False, eps: float = DEFAULT_EPS, prior_weight: float = 1e-3,
                     irls_k: float = 3.0, theta_inertial=None, row_names=None) -> InertialResult:
    """:func:`identify` on a regressor already stacked, e.g. projected by ``G^T`` for a
    closed chain (:mod:`calibration.inertial.closed_chain`).

    Parameters
    ----------
    model : RegressorModel (for the layout and the URDF's parameters)
    W : ndarray (N * m, p), m rows per sample, sample-major
    tau : ndarray (N, m), measured torques of those rows [N m]
    base : BaseParameters of W (regroup the stack you solve)
    row_names : list of m str, names of the rows (default: the model's joints)
    (other parameters as in :func:`identify`)
    """
    if method not in METHODS:
        raise FitError(f"identify: method {method!r}; choose one of {', '.join(METHODS)}")
    tau = np.asarray(tau, dtype=float)
    W = np.asarray(W, dtype=float)
    ncv = tau.shape[1]
    if W.shape != (tau.size, model.layout.n_params):
        raise FitError(f"identify: W {W.shape} does not match tau {tau.shape} and "
                       f"{model.layout.n_params} parameters")
    U = tau.reshape(-1)
    layout = model.layout
    ni_fixed = model.theta_urdf if theta_inertial is None else np.asarray(theta_inertial, dtype=float)
    Phi = base.base_regressor(W) if method == "ols" else W
    statuses: list[str] = []
    fit = _fitter(method, model, base, eps, prior_weight, ni_fixed, statuses)
    result_irls = None
    if use_irls:
        n_params = base.rank if method != "friction" else 4 * len(layout.joint_names)
        result_irls = irls(Phi, U, ncv, fit, n_params=n_params, k=irls_k)
        x = result_irls.x
    else:
        x = fit(Phi, U)
    if method == "ols":
        # theta_d from the URDF: only pi is identified, and the URDF's values
        # of the unidentifiable directions beat zeros (zero masses) in a report.
        pi, theta = x, base.theta_from_pi(x, model.theta_urdf[base.idx_d])
    else:
        theta, pi = x, base.pi_from_theta(x)
    res = (W @ theta - U).reshape(-1, ncv)
    Y = base.base_regressor(W)
    Ys = Y / np.maximum(np.linalg.norm(Y, axis=0), 1e-300)
    lam = np.linalg.eigvalsh(Ys.T @ Ys)
    cond = float(np.sqrt(lam[-1] / lam[0])) if lam[0] > 0 else float("inf")
    report = check_consistency(theta, layout, eps=eps if method == "sdp" else 0.0,
                               friction_tol=1e-9)
    names = list(row_names) if row_names is not None else _row_names(model)
    if len(names) != ncv:
        raise FitError(f"identify: {len(names)} row names for {ncv} rows per sample")
    return InertialResult(method, theta, pi, base, float(np.sum(res**2)),
                          np.sqrt(np.mean(res**2, axis=0)), report, result_irls,
                          n_samples=len(tau), condition_number=cond, names=layout.names(),
                          joint_names=names,
                          solver_status=next((st for st in statuses if st != "optimal"), "optimal"))


def _row_names(model) -> list[str]:
    """One name per regressor row: the free-flyer's 6 rows, then the joints."""
    base = ["base_vx", "base_vy", "base_vz", "base_wx", "base_wy", "base_wz"]
    return (base if model.floating_base else []) + list(model.layout.joint_names)


def load_joint_log(path, joint_names=None):
    """A multi-joint log: ``.npz`` with ``t`` (N,), ``q`` (N, n), ``tau`` (N, n), optional
    ``v`` (N, n) and ``joint_names`` (n,) -- SI units (s, rad, rad/s, N m); or the
    daemon's telemetry (``.sltl``, see :mod:`calibration.inertial.sltl`).

    If both the log and ``joint_names`` name the joints, the columns are
    reordered to ``joint_names``.

    Returns
    -------
    t, q, v (or None), tau
    """
    path = Path(path)
    from servoloop.calibration.inertial.sltl import is_sltl, load_sltl_log

    if is_sltl(path):
        t, q, v, tau = load_sltl_log(path, joint_names)
        return _checked(path, t, q, v, tau)
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise RecordingFormatError(path, f"not a readable .npz log ({exc})") from exc
    for key in ("t", "q", "tau"):
        if key not in data:
            raise RecordingFormatError(path, f"missing array {key!r} (have {sorted(data.files)})")
    t, q, tau = (np.asarray(data[k], dtype=float) for k in ("t", "q", "tau"))
    v = np.asarray(data["v"], dtype=float) if "v" in data else None
    _checked(path, t, q, v, tau)
    if joint_names is not None and "joint_names" in data:
        have = [str(s) for s in data["joint_names"]]
        missing = [j for j in joint_names if j not in have]
        if missing:
            raise RecordingFormatError(path, f"joints {missing} of the model are not in the log {have}")
        order = [have.index(j) for j in joint_names]
        q, tau = q[:, order], tau[:, order]
        v = None if v is None else v[:, order]
    return t, q, v, tau


def _checked(path, t, q, v, tau):
    """``(t, q, v, tau)`` after the shape and finiteness checks (RecordingFormatError)."""
    for key, arr in (("q", q), ("tau", tau), ("v", v)):
        if arr is not None and (arr.ndim != 2 or arr.shape[0] != t.size):
            raise RecordingFormatError(path, f"array {key!r} has shape {arr.shape}, need ({t.size}, n)")
        if arr is not None and not np.all(np.isfinite(arr)):
            bad = int(np.argwhere(~np.isfinite(arr))[0, 0])
            raise RecordingFormatError(path, f"array {key!r} is not finite", index=bad)
    return t, q, v, tau


def identify_from_log(log_path, urdf_path, method: str = "sdp", use_irls: bool = True,
                      settings: FilterSettings | None = None, backend: str = "auto",
                      **kwargs) -> InertialResult:
    """Load, filter, decimate and identify (the ``servoloop calibrate inertial`` work).

    Parameters
    ----------
    log_path : path of a log readable by :func:`load_joint_log`
    urdf_path : path of the robot's URDF (fixed base)
    method, use_irls, **kwargs : see :func:`identify`
    settings : FilterSettings or None (cutoffs, decimation; None = defaults)
    """
    settings = FilterSettings() if settings is None else settings
    model = RegressorModel(urdf_path, backend=backend)
    t, q, v, tau = load_joint_log(log_path, list(model.layout.joint_names))
    if q.shape[1] != model.nv:
        raise RecordingFormatError(log_path, f"log has {q.shape[1]} joints, {urdf_path} has {model.nv}")
    Q, V, A, T = prepare_samples(t, q, tau, v, settings)
    if Q.shape[0] * model.nv < 2 * model.layout.n_params:
        raise FitError(f"{log_path}: {Q.shape[0]} samples after decimation are too few "
                       f"for {model.layout.n_params} parameters")
    return identify(model, Q, V, A, T, method=method, use_irls=use_irls, **kwargs)


def write_report(result: InertialResult, path) -> Path:
    """Write ``result.to_dict()`` as YAML, atomically (temporary file, then rename)."""
    import yaml

    from servoloop.calibration.report import atomic_path

    path = Path(path)
    with atomic_path(path) as tmp, open(tmp, "w") as f:
        yaml.safe_dump(result.to_dict(), f, sort_keys=False)
    return path
