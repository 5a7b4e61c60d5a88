"""Output-error fit on whole-tick readings, each weighted by how much it can say.

Iteratively reweighted least squares: at the current parameters, simulate
the run, estimate the reading noise by maximum likelihood of the readings
about that trajectory (``encoder_reading.fit_reading_noise``), weight each
sample by 1 / std of its reading there (plus a floor for model error), and
fit the other parameters by plain least squares on the expected reading
with that noise held; repeat.  A reading predicted at a tick's centre is
nearly certain and one half-way between two ticks is a coin toss; the
unweighted fit treats both alike.  The weighted objective is rugged (a rest
position that moves by a tick moves many samples' weights), so two chains
run from the start, one opening with an unweighted round, and the round
whose parameters make the readings most likely is kept.

Measured (seed 000's square wave, 4 cycles, AX-18 ticks, 0.25 tick noise,
random servos at 2e-3 and 4e-3 kg*m^2, truth integrated at 0.05 ms):

* 12 servos through the virtual bus, identifier at 0.05 ms started at the
  truth: worst kp / kd error 4.0 % / 3.8 % unweighted with the noise fitted
  jointly (it settles at ~0.19 ticks), 1.9 % / 2.6 % reweighted;
* one servo, five noise draws: kp -0.7..+3.7 % with the noise by likelihood
  but unweighted, -2.0..+1.1 % reweighted;
* the weighted chain alone drifted to +24 % on one of 20 simulated servos;
  with both chains 0 of 32 servos (12 bus, 20 simulated) fall outside
  kp, kd 3 % / kc 15 % (worst kp 2.5 %, kd 2.9 %).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from servoloop.calibration.encoder_reading import (
    fit_reading_noise,
    reading_log_probability,
    reading_variance,
)
from servoloop.calibration.models import ModelSpec
from servoloop.calibration.output_error import FitResult, fit_output_error
from servoloop.calibration.recording import Recording
from servoloop.calibration.simulation import simulate_recording

__all__ = ["fit_on_readings"]

# std [ticks] added to each reading's: the model's rest positions are not exact either,
# and a weight without a cap would let one "certain" reading outweigh a whole transient
_MODEL_ERROR_TICKS = 0.05
_NOISE_KEY = "reading_noise_ticks"


def fit_on_readings(spec: ModelSpec, rec: Recording, start: dict,
                    schedules: tuple = (("weighted", "weighted"), ("plain", "weighted")),
                    max_nfev: int = 100) -> tuple[FitResult, float]:
    """Reweighted fit of ``spec`` on one resampled run with whole-tick readings.

    Parameters
    ----------
    spec : ModelSpec
        Its free parameters may include ``reading_noise_ticks`` (estimated
        apart, see the module notes); the others are fitted.
    rec : Recording
        Resampled, ``position_quantum`` > 0.
    start : dict
        Initial values of the free parameters.
    schedules : tuple of tuple of {"weighted", "plain"}
        Chains of rounds, each from ``start``: a "plain" round weights every
        sample alike (a wider basin), a "weighted" one by its reading's spread.
    max_nfev : int
        Least-squares budget per round.

    Returns
    -------
    result : FitResult
        Of the round, over all chains, whose parameters make the readings
        most likely (``params`` include the noise).
    log_likelihood : float
        Of the readings at that result.
    """
    tick = rec.position_quantum
    readings = np.round(rec.position / tick)
    bounds = tuple(float(b[0]) for b in dataclasses.replace(spec, free=(_NOISE_KEY,)).bounds())
    held = dataclasses.replace(spec, free=tuple(k for k in spec.free if k != _NOISE_KEY))
    best, best_ll = None, -np.inf
    for schedule in schedules:
        params = {k: v for k, v in start.items() if k in held.free}
        noise = float(start.get(_NOISE_KEY, 0.3))
        for kind in schedule:
            x = _trajectory_ticks(held, params, noise, rec)
            noise = fit_reading_noise(x, readings, bounds)
            if kind == "weighted":
                weights = 1.0 / np.sqrt(reading_variance(x, noise) + _MODEL_ERROR_TICKS**2) / tick
            else:
                weights = np.full(rec.n, 1.0 / tick)
            model = dataclasses.replace(held, fixed=dict(held.fixed, **{_NOISE_KEY: noise}))
            res = fit_output_error(model, [rec], params, method="lsq", max_nfev=max_nfev,
                                   sample_weights=[weights], loss="linear")
            params = dict(res.params)
            # each round is scored by what the weighting approximates, the likelihood of the
            # readings: the weighted objective is rugged where a rest position moves by a tick
            x = _trajectory_ticks(held, params, noise, rec)
            res.params[_NOISE_KEY] = noise = fit_reading_noise(x, readings, bounds)
            ll = float(np.sum(reading_log_probability(x, readings, noise)))
            if ll > best_ll:
                best, best_ll = res, ll
    best.stderr.setdefault(_NOISE_KEY, float("nan"))
    return best, best_ll


def _trajectory_ticks(model: ModelSpec, params: dict, noise: float, rec: Recording) -> np.ndarray:
    model = dataclasses.replace(model, fixed=dict(model.fixed, **{_NOISE_KEY: noise}))
    return simulate_recording(model, params, rec)[0] / rec.position_quantum
