"""Identify kp, kd, kc from bench square-wave recordings (one servo, one or more gains).

Per firmware gain, on a 1 ms resampled grid, an output-error fit of the
"bench" model (seed 000's law + stall saturation + command latency, and the
gravity zero when the load is a pendulum):

1. search: least squares at 0.5 ms substeps from the best few of a scored
   grid of servos and seed 000's regressions (``bench_starts``; the
   regression alone is kept in the output as ``paper``), lowest cost kept;
2. refine: from there at a substep fine enough that the integrator's own
   damping is below 0.25 % of kd (``refinement_substep``), reweighted by
   the spread of each whole-tick reading (``reading_fit``).

When the stall torque is known (datasheet in the control table x the
torque-limit register) the saturation is fixed there instead of fitted.

3. on a pendulum, the rotor's armature is free and a profile over it gives
   kp's 95 % interval (``kp_inertia_profile``).  A square wave fixes
   kp / I and kd / I (natural frequency and damping ratio) sharply; kp and
   the inertia apart only through gravity's stiffness m g l next to kp, a
   few per cent of the step, that the Coulomb band can hide.  Measured on
   the emulated XL430 with 0.2 kg at 0.1 m, gains 400 and 800, 2 cycles
   (lockstep): armature fixed at 0 or 2e-3 kg*m^2 gave kp 9.87 or 20.7
   N*m/rad at gain 800 with the same 0.497 mrad MAE, while the Gauss-Newton
   standard error said +- 0.25.  The interval, not the standard error, is
   what the report shows, with a warning when it is wide.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from servoloop.calibration.bench_starts import grid_starts, pick_starts
from servoloop.calibration.errors import FitError, RecordingUnexcitedError
from servoloop.calibration.models import get_model
from servoloop.calibration.output_error import fit_output_error
from servoloop.calibration.reading_fit import fit_on_readings
from servoloop.calibration.recording import Recording, resample
from servoloop.calibration.seed000 import fit_seed000
from servoloop.calibration.simulation import simulation_mae

__all__ = ["identify_bench", "check_step_excitation", "refinement_substep", "kp_inertia_profile",
           "BENCH_DT_S", "KP_SEPARABLE_SPREAD"]

BENCH_DT_S = 0.001
# the search's step: cheap, and close enough to find the basin (its bias is a few %)
_SEARCH_SUBSTEP_S = 0.0005
# the refinement's: semi-implicit Euler at step h damps like kd * (1 + h kd / (2 I)) (the
# per-step velocity factor is 1 - h kd / I instead of exp(-h kd / I)), and kp follows kd.
# Measured against a servo integrated at 0.05 ms (seed 000's square wave, 12 random servos):
# identified at 0.5 ms kp was 3.4 % low on average at 2e-3 kg*m^2 (worst 5.9 %), at 0.1 ms
# 0.6 %, at 0.05 ms 0.1 %.  0.25 % of kd keeps the step's own error an order below the 3 %
# asked of kp and kd.
_DAMPING_ERROR = 0.0025
_FINEST_SUBSTEP_S = 1e-5
# windows short enough for a quartic to follow a ~50 ms transient: a better
# first guess than the paper's half-period windows
_SHORT_WINDOW_S = 0.04
_SEARCH_STARTS = 3
# the search only has to reach the right basin: the refinement polishes
_SEARCH_NFEV = 40
# search optima refined, the most likely kept (one: on 32 test servos a second never won)
_REFINED = 1
# armature values the kp / inertia profile refits at, as multiples of the load's inertia (the
# fitted value is added); BAM's XL330 armature, 1.8e-3 kg*m^2, is ~1x a 0.2 kg, 0.1 m pendulum
_PROFILE_ARMATURE = (0.0, 0.125, 0.25, 0.5, 1.0, 2.0, 4.0)
_PROFILE_NFEV = 20
# chi-square, one degree of freedom, 95 %: the profile's threshold
_CHI2_1_95 = 3.841
#: kp's 95 % interval wider than this fraction of kp: "not separable from the inertia" warning
KP_SEPARABLE_SPREAD = 0.10


def refinement_substep(kd: float, inertia: float) -> float:
    """Integration step [s] whose excess damping ``h kd / (2 I)`` is at most 0.25 % of kd.

    Parameters
    ----------
    kd : float
        Damping, N*m*s/rad.
    inertia : float
        Total inertia (load + rotor), kg*m^2.

    Returns
    -------
    float
        In [1e-5, 5e-4] s.
    """
    if kd <= 0.0:
        return _SEARCH_SUBSTEP_S
    return float(min(_SEARCH_SUBSTEP_S, max(_FINEST_SUBSTEP_S, 2.0 * _DAMPING_ERROR * inertia / kd)))


def _bench_spec(rec: Recording, dt: float, torque_limit: float | None, substep_s: float = _SEARCH_SUBSTEP_S,
                armature: float | None = None):
    spec = get_model("bench")
    free = list(spec.free)
    fixed = dict(spec.fixed, substeps=max(1, int(math.ceil(dt / substep_s - 1e-9))))
    if rec.load_mgl() > 0.0:
        # where the pendulum hangs is not known in servo angles; gravity is an absolute torque
        # reference, so the rotor's reflected inertia becomes identifiable too (how well:
        # kp_inertia_profile)
        free.append("q_offset")
        if armature is None:
            free.append("armature")
    if armature is not None:
        fixed["armature"] = float(armature)   # known (e.g. from a run that separated it)
    if rec.position_quantum > 0.0:
        free.append("reading_noise_ticks")  # compare with the expected whole-tick reading
    if torque_limit is not None:
        free.remove("torque_limit")
        fixed["torque_limit"] = float(torque_limit)
    return dataclasses.replace(spec, free=tuple(free), fixed=fixed)


def _from_first_step(r: Recording) -> Recording:
    """The run from just before its first goal step, starting at the averaged resting reading.

    The simulation starts from one logged sample; a single whole-tick reading
    can be a tick off, and with Coulomb friction a start a tick off stays a
    tick off for the whole first hold.  The mean of the readings over the
    100 ms before the step is the resting position to within a fraction of
    a tick.
    """
    steps = np.flatnonzero(np.abs(np.diff(r.goal)) > 1e-6)
    if steps.size == 0:
        return r
    i = int(steps[0])  # last sample before the step
    w = max(1, int(round(0.1 / r.dt)))
    q0 = float(np.mean(r.position[max(0, i - w + 1): i + 1]))
    out = dataclasses.replace(r, t=r.t[i:] - r.t[i], position=r.position[i:].copy(), goal=r.goal[i:],
                              speed=np.zeros(r.n - i), torque_enable=r.torque_enable[i:],
                              input_volts=r.input_volts[i:], extra={})
    out.position[0] = q0
    return out


def check_step_excitation(r: Recording, min_samples: int = 3) -> float:
    """Median rise time [s] of the goal steps; RecordingUnexcitedError if under ``min_samples``.

    A load too light for the servo makes the step response finish within a
    sample or two: nothing of kp, kd or kc is left to identify.
    """
    steps = np.flatnonzero(np.abs(np.diff(r.goal)) > 1e-6) + 1
    rises = []
    for i in steps:
        target, size = r.goal[i], abs(r.goal[i] - r.goal[i - 1])
        far = np.abs(r.position[i:] - target) > 0.37 * size
        k = int(np.argmin(far)) if not far.all() else far.size
        rises.append(k)
    if not rises:
        raise RecordingUnexcitedError(r.path, "no goal step: nothing excites the dynamics")
    med = float(np.median(rises))
    if med < min_samples:
        raise RecordingUnexcitedError(
            r.path, f"the step response settles within {med:.0f} samples ({med * r.dt * 1e3:.1f} ms): the load "
            "is too light to excite the dynamics at this sampling rate; add inertia (a longer or heavier pendulum)")
    return med * r.dt


def _check_identified(r: Recording, res) -> None:
    """kp and kd must be determined by the data (a light load leaves only their ratio; on a
    pendulum, the fitted armature can leave only kp / inertia)."""
    for k in ("kp", "kd"):
        v, se = res.params[k], res.stderr.get(k, math.nan)
        if not (math.isfinite(se) and se > 0.0 and se < 0.25 * abs(v)):
            if "armature" in res.params:
                raise RecordingUnexcitedError(
                    r.path, f"{k} is not determined by this run ({k} = {v:.4g} +- {se:.2g}, the rotor's "
                    f"armature {res.params['armature']:.2g} kg*m^2 fitted with it): the square wave fixes "
                    f"{k} / inertia, and gravity's torque over the step does not split them; give the "
                    "armature (--armature) or run a lower gain at a larger --amplitude")
            raise RecordingUnexcitedError(
                r.path, f"{k} is not determined by this run ({k} = {v:.4g} +- {se:.2g}): the load is too light "
                "to excite the dynamics (inertia plays no part in the step response); add inertia")


def _search(spec, r: Recording, guesses: list) -> list:
    """Least squares from the best few grid points and regressions; results by cost, best first."""
    common = {"torque_limit": 10.0, "command_delay": 0.001, "reading_noise_ticks": 0.3, "armature": 1e-4}
    candidates = [spec.initial(dict(common, kp=g.kp, kd=max(g.kd, 0.0), kc=max(g.kc, 0.005)))
                  for g in guesses if g.kp > 0.0]
    candidates += grid_starts(spec, r, common)
    found = [fit_output_error(spec, [r], start, method="lsq", max_nfev=_SEARCH_NFEV)
             for start in pick_starts(spec, r, candidates, _SEARCH_STARTS)]
    if not found:
        raise FitError(f"{r.path}: output-error fit failed")
    return sorted(found, key=lambda res: res.cost)


def _refine(r: Recording, dt: float, torque_limit, found: list, armature: float | None = None):
    """The search's best optima polished at a fine step; on whole-tick readings reweighted by
    each reading's spread, the most likely result kept."""
    best = None
    for res in found[:_REFINED]:
        inertia = r.load_inertia() + res.params.get("armature", armature or 0.0)
        spec = _bench_spec(r, dt, torque_limit, refinement_substep(res.params["kd"], inertia), armature)
        if r.position_quantum > 0.0:
            fit, score = fit_on_readings(spec, r, res.params)
        else:
            fit = fit_output_error(spec, [r], res.params, method="lsq", max_nfev=100)
            score = -fit.cost
        if best is None or score > best[1]:
            best = (fit, score, spec)
    return best[0], best[2]


def _plain_fit(spec, r: Recording, start: dict):
    """Unweighted least squares (every sample alike): the profile's common objective."""
    return fit_output_error(spec, [r], start, method="lsq", max_nfev=_PROFILE_NFEV, loss="linear")


def _sum_squares(spec, params: dict, r: Recording) -> tuple[float, float]:
    """Sum of squared simulation errors [rad^2] and their lag-1 autocorrelation."""
    from servoloop.calibration.simulation import simulate_recording

    e = simulate_recording(spec, params, r)[0] - r.position
    e = e[np.isfinite(e)]
    rho = float(np.corrcoef(e[:-1], e[1:])[0, 1]) if e.size > 2 and np.std(e) > 0 else 0.0
    return float(np.sum(e * e)), rho


def kp_inertia_profile(r: Recording, spec, params: dict) -> dict | None:
    """kp's 95 % interval from a profile over the rotor's armature (pendulum loads only).

    At each armature of a grid (multiples of the load's inertia, and the fitted
    one) the other parameters are refitted, kp and kd started along the valley
    ``kp / I`` = const from the neighbour nearer to the fit.  The sum
    of squared simulation errors S(a) is compared with the best: a value is kept while ``n_eff (S(a) - S_min) / S_min`` < 3.84 (chi-square,
    one degree of freedom, 95 %), ``n_eff = n (1 - rho) / (1 + rho)`` counting
    samples whose errors are correlated (lag-1 autocorrelation rho) as fewer.

    Parameters
    ----------
    r : Recording
        The resampled run the fit used.
    spec : ModelSpec
        The refinement's bench model (armature free).
    params : dict
        The fit.

    Returns
    -------
    dict or None
        ``kp_low``, ``kp_high`` [N*m/rad] (where the statistic crosses 3.84, linear between
        grid points; always holding the fitted kp),
        ``armature_low``, ``armature_high`` [kg*m^2] (armature 0 is the physical end),
        ``open_high`` (True when the grid's largest armature was kept: kp reaches at
        least ``kp_high``), ``effective_samples``,
        ``points`` (armature, kp, kd, chi2, rms_rad, kept); None without a free armature.
    """
    if "armature" not in spec.free:
        return None
    held = dataclasses.replace(spec, free=tuple(k for k in spec.free if k not in ("armature", "reading_noise_ticks")),
                               fixed=dict(spec.fixed, reading_noise_ticks=params.get("reading_noise_ticks", 0.3)))
    load = r.load_inertia()
    a_fit = float(params["armature"])
    grid = [float(m * load) for m in _PROFILE_ARMATURE]
    if min(abs(a_fit - a) for a in grid) > 0.01 * load:
        grid = sorted(grid + [a_fit])

    def refit(a, base):
        sp = dataclasses.replace(held, fixed=dict(held.fixed, armature=a))
        scale = (load + a) / (load + base["armature"])
        start = {k: v for k, v in base.items() if k in sp.free}
        start["kp"], start["kd"] = base["kp"] * scale, base["kd"] * scale
        fit = _plain_fit(sp, r, start)
        ss, rho = _sum_squares(sp, fit.params, r)
        return dict(fit.params, armature=a, ss=ss, rho=rho)

    # outward from the fit, each point started from its inner neighbour's optimum (scaled
    # along the valley): a continuation.  Started from the fit itself, refits far out stopped
    # in local minima of the stick-slip objective (on the trial's gain 800 the interval ended
    # at kp 14.9 instead of 17.6 N*m/rad, the valley being flat to 20.7)
    fitted = dict(params, armature=a_fit)
    centre = min(range(len(grid)), key=lambda i: abs(grid[i] - a_fit))
    done = {centre: refit(grid[centre], fitted)}
    for order in (range(centre + 1, len(grid)), range(centre - 1, -1, -1)):
        inner = done[centre]
        for i in order:
            done[i] = inner = refit(grid[i], inner)
    points = [{"armature": grid[i], "kp": float(done[i]["kp"]), "kd": float(done[i]["kd"]),
               "ss": done[i]["ss"], "rho": done[i]["rho"]} for i in range(len(grid))]
    best = min(points, key=lambda p: p["ss"])
    s_min, rho = best["ss"], min(max(best["rho"], 0.0), 0.99)
    n_eff = r.n * (1.0 - rho) / (1.0 + rho)
    for p in points:
        p["chi2"] = n_eff * (p["ss"] - s_min) / max(s_min, 1e-30)
        p["kept"] = bool(p["chi2"] < _CHI2_1_95)
        p["rms_rad"] = math.sqrt(p.pop("ss") / r.n)
        p.pop("rho")
    kept = [i for i, p in enumerate(points) if p["kept"]]
    lo, hi = _edge(points, kept[0], -1), _edge(points, kept[-1], +1)
    # the reported kp is the weighted refinement's; the profile's plain objective can put it
    # just outside: the interval always holds it
    kps = (lo["kp"], hi["kp"], float(params["kp"]))
    return {"kp_low": min(kps), "kp_high": max(kps),
            "armature_low": lo["armature"], "armature_high": hi["armature"],
            "open_high": bool(points[-1]["kept"]), "effective_samples": n_eff,
            "points": points}


def _edge(points: list, i: int, step: int) -> dict:
    """Where the profile crosses the threshold between kept point ``i`` and its neighbour
    ``i + step`` (linear in the statistic); point ``i`` itself at the grid's end."""
    j = i + step
    if not 0 <= j < len(points):
        return {"armature": points[i]["armature"], "kp": points[i]["kp"]}
    a, b = points[i], points[j]
    w = (_CHI2_1_95 - a["chi2"]) / max(b["chi2"] - a["chi2"], 1e-12)
    w = min(max(w, 0.0), 1.0)
    return {k: a[k] + w * (b[k] - a[k]) for k in ("armature", "kp")}


def _separability_warning(rec: Recording, params: dict, prof: dict | None) -> str | None:
    """The report's warning when kp's interval is wider than KP_SEPARABLE_SPREAD of kp.

    What splits kp from the inertia is gravity's torque over the step, m g l x
    amplitude, standing out of the Coulomb band kc: the warning gives both.
    """
    if prof is None:
        return None
    kp, lo, hi = params["kp"], prof["kp_low"], prof["kp_high"]
    if (hi - lo) <= KP_SEPARABLE_SPREAD * kp:
        return None
    more = " or more" if prof["open_high"] else ""
    amp = 0.5 * float(np.max(rec.goal) - np.min(rec.goal))
    return (f"gain {rec.kp_fw:g}: kp is not separable from the inertia in this run: kp from {lo:.3g} to "
            f"{hi:.3g}{more} N*m/rad fits it equally well (95 %; reported {kp:.3g}), the rotor's armature "
            f"from {prof['armature_low']:.2g} to {prof['armature_high']:.2g} kg*m^2 on the load's "
            f"{rec.load_inertia():.2g}. The square wave fixes kp / inertia; only gravity's torque over the "
            f"step, m g l x amplitude = {rec.load_mgl() * amp:.3g} N*m, splits them, and it hardly stands "
            f"out of the Coulomb friction kc = {params['kc']:.3g} N*m. Use this kp only with a known "
            "armature, or run a lower gain at a larger --amplitude (several times kc / m g l rad, the "
            "step still well below the stall torque)")


def _identify_one(rec: Recording, dt: float, half_period: float, torque_limit, armature=None) -> dict:
    r = _from_first_step(resample(rec, dt))
    check_step_excitation(r)
    paper = fit_seed000([r], max_segment_s=half_period)
    short = fit_seed000([r], max_segment_s=_SHORT_WINDOW_S)
    found = _search(_bench_spec(r, dt, torque_limit, armature=armature), r, [short, paper])
    best, spec = _refine(r, dt, torque_limit, found, armature)
    _check_identified(r, best)
    mae = simulation_mae(spec, best.params, r)
    h = dt / spec.fixed["substeps"]
    prof = kp_inertia_profile(r, spec, best.params)
    return {"gain": rec.kp_fw, "params": best.params, "stderr": best.stderr, "mae_rad": mae,
            "paper": paper, "samples": r.n, "substep_s": h, "kp_profile": prof, "armature": armature,
            "warning": _separability_warning(r, best.params, prof)}


def identify_bench(recs: list[Recording], half_period: float = 0.67, dt: float = BENCH_DT_S,
                   torque_limit: float | None = None, armature: float | None = None) -> dict:
    """Identification result in the CLI's JSON shape.

    torque_limit : float, optional
        Known saturation of the drive [N*m] (else fitted).
    armature : float, optional
        Known reflected rotor inertia [kg*m^2], added to the load's; on a pendulum
        it is otherwise fitted, and kp is then only as sharp as the profile says.

    Returns
    -------
    dict
        ``params`` (kp N*m/rad, kd N*m*s/rad, kc N*m, torque_limit N*m,
        command_delay s, [q_offset rad]) of the first gain plus
        ``kp_by_gain``; ``stderr`` (same keys); ``fit`` (MAE, samples, per
        gain, each with ``kp_interval_95`` on a pendulum); ``paper`` (seed
        000's regression: kp, kd, kc); ``warnings`` (list of str: kp not
        separable from the inertia, with the numbers).
    """
    if not recs:
        raise FitError("no recordings to identify")
    if armature is not None and not (math.isfinite(armature) and armature >= 0.0):
        raise ValueError(f"armature must be a finite number >= 0 kg*m^2, got {armature}")
    per_gain = [_identify_one(r, dt, half_period, torque_limit, armature) for r in recs]
    first = per_gain[0]
    params = dict(first["params"])
    params["kp_by_gain"] = {str(int(g["gain"])): g["params"]["kp"] for g in per_gain}
    if armature is not None:
        params["armature"] = float(armature)      # given, not fitted: the report still says which
    return {
        "params": params,
        "stderr": first["stderr"],
        "fit": {
            "method": "output-error (scipy least_squares): multi-start search, then a fine-step "
                      "fit weighted by each whole-tick reading's spread",
            "mae_rad": first["mae_rad"], "mae_deg": math.degrees(first["mae_rad"]),
            "samples": first["samples"], "resample_dt_s": dt,
            "substep_s": first["substep_s"],
            "per_gain": [{"gain": g["gain"], "params": g["params"], "stderr": g["stderr"],
                          "mae_rad": g["mae_rad"], "substep_s": g["substep_s"],
                          "paper": g["paper"].params(), "paper_stderr": g["paper"].stderr,
                          **({"armature_fixed": g["armature"]} if g["armature"] is not None else {}),
                          **({"kp_interval_95": [g["kp_profile"]["kp_low"], g["kp_profile"]["kp_high"]],
                              "kp_profile": g["kp_profile"]} if g["kp_profile"] else {})}
                         for g in per_gain],
        },
        "warnings": [g["warning"] for g in per_gain if g["warning"]],
        "paper": first["paper"].params(),
        "paper_stderr": first["paper"].stderr,
    }
