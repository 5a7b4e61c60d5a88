"""First guesses for the bench fit: a scored grid of servos plus seed 000's regression.

The output-error objective of a step response through whole-tick readings
has local minima (stick-slip moves where a joint comes to rest, and with
it many samples, by a whole tick at once).  Seed 000's regression is not a
safe first guess on a square wave read through the AX-18's 5.1 mrad ticks:
on random servos at 2e-3 to 4e-3 kg*m^2 it returned kp < 0 over half
periods and 30-70 % low over 40 ms windows, and least squares from there
ended 20-70 % off in 2 of 12 runs.  A coarse grid over natural frequency,
damping ratio and Coulomb band, scored by one cheap simulation each, puts
starts in every basin the data could mean; least squares from the few best
of them, kept by cost, then finds the global one.
"""

from __future__ import annotations

import math

import numpy as np

from servoloop.calibration.models import ModelSpec
from servoloop.calibration.output_error import output_error_cost
from servoloop.calibration.recording import Recording

__all__ = ["grid_starts", "pick_starts"]

# kp [N*m/rad] at the recorded gain, geometric: ratio 1.5 between neighbours
_KP_GRID = np.geomspace(0.3, 150.0, 16)
_ZETA_GRID = (0.3, 0.6, 0.9, 1.3)
# Coulomb band kc / kp in encoder ticks (the calibration tests draw 0.5-2)
_BAND_TICKS = (0.5, 1.5)
# without whole-tick readings: a band of ~1 mrad
_BAND_RAD = 1e-3


def grid_starts(spec: ModelSpec, rec: Recording, common: dict) -> list[dict]:
    """Starting points over kp x damping ratio x Coulomb band for a known load inertia.

    Parameters
    ----------
    spec : ModelSpec
        The bench model (its ``free`` decides which keys matter).
    rec : Recording
        Resampled run (its load inertia and encoder tick set the scales).
    common : dict
        Values of the other free parameters (delay, noise, armature ...).

    Returns
    -------
    list of dict
        Complete starting points (free parameters clipped to their bounds).
    """
    inertia = rec.load_inertia() + common.get("armature", 0.0)
    out = []
    for kp in _KP_GRID:
        for zeta in _ZETA_GRID:
            kd = 2.0 * zeta * math.sqrt(kp * inertia)
            bands = [b * rec.position_quantum for b in _BAND_TICKS] if rec.position_quantum > 0 else [_BAND_RAD]
            for band in bands:
                out.append(spec.initial(dict(common, kp=float(kp), kd=kd, kc=float(kp) * band)))
    return out


def pick_starts(spec: ModelSpec, rec: Recording, candidates: list[dict], count: int = 4,
                min_ratio: float = 1.6) -> list[dict]:
    """The ``count`` best candidates by output-error cost, no two within ``min_ratio`` in kp.

    Spreading the picks over kp keeps one bad basin (whose grid neighbours
    all score well) from taking every start.

    Returns
    -------
    list of dict
        Best first.
    """
    scored = sorted(((output_error_cost(spec, [rec], c), i) for i, c in enumerate(candidates)))
    picked: list[dict] = []
    for _, i in scored:
        c = candidates[i]
        if all(max(c["kp"], p["kp"]) / max(min(c["kp"], p["kp"]), 1e-12) >= min_ratio for p in picked):
            picked.append(c)
            if len(picked) == count:
                break
    return picked
