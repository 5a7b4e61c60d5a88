"""Simulate a recording with a model, and the simulation MAE as BAM computes it.

BAM's protocol (``bam/fit.py``, ``bam/mae.py``): the log is resampled to a
fixed 5 ms step; the servo is simulated from the first logged position and
speed with the logged goal and torque enable as the only inputs (the
control law runs on the *simulated* position); the score is the mean of
``|q_sim - q_log|`` over all samples, torque-off parts included.
"""

from __future__ import annotations

import numpy as np
from scipy.signal import lfilter
from scipy.special import ndtr

from servoloop.calibration.models import ModelSpec
from servoloop.calibration.recording import Recording
from servoloop.core_cy.actuator.simulate import simulate

__all__ = ["delayed_goal", "simulate_recording", "simulation_mae", "supply_voltage", "expected_reading"]


def delayed_goal(goal: np.ndarray, delay_s: float, dt: float) -> np.ndarray:
    """Goal sequence delayed by ``delay_s`` (fractional, held at the first sample).

    Same shift as BAM's ``fractional_delay_shift``.

    Parameters
    ----------
    goal : ndarray (n,)
    delay_s, dt : float
        Delay and step [s].

    Returns
    -------
    ndarray (n,)
    """
    if delay_s <= 0.0:
        return goal
    d = delay_s / dt
    d0 = int(np.floor(d))
    frac = d - d0
    idx = np.arange(goal.shape[0])
    i0 = np.clip(idx - d0, 0, goal.shape[0] - 1)
    i1 = np.clip(idx - d0 - 1, 0, goal.shape[0] - 1)
    return (1.0 - frac) * goal[i0] + frac * goal[i1]


def simulate_recording(model: ModelSpec, params: dict, rec: Recording):
    """Simulate ``rec`` (resampled) with ``model`` at ``params``.

    Returns
    -------
    q, qd, tau : ndarray (n,)
        Simulated position [rad], velocity [rad/s], motor torque [N*m].
    """
    if rec.dt is None:
        raise ValueError(f"{rec.path}: resample the recording before simulating it")
    p = model.vector(params, rec.kp_fw)
    values = model.values(params)
    goal = delayed_goal(rec.goal, values.get("command_delay", 0.0), rec.dt)
    vin = supply_voltage(model, rec)
    return simulate(p, goal, rec.torque_enable, vin, rec.dt, rec.position[0], rec.speed[0],
                    rec.load_inertia(), rec.load_mgl())


def supply_voltage(model: ModelSpec, rec: Recording) -> np.ndarray:
    """Voltage that drives the motor per step [V]: nominal, or recorded and low-passed."""
    if not model.recorded_voltage:
        return np.full(rec.n, rec.vin)
    if model.voltage_filter_s <= 0.0:
        return rec.input_volts
    # first-order low-pass y[i] = y[i-1] + a (x[i] - y[i-1]), started at x[0]
    a = min(rec.dt / model.voltage_filter_s, 1.0)
    y, _ = lfilter([a], [1.0, a - 1.0], rec.input_volts, zi=[(1.0 - a) * rec.input_volts[0]])
    return y


def expected_reading(q: np.ndarray, tick: float, noise_ticks: float) -> np.ndarray:
    """Mean of ``tick * round(q / tick + noise_ticks * N(0, 1))``: what an encoder reports on average.

    A servo reports whole ticks; comparing a simulated position with such
    readings directly biases a fit whenever the motion rests between two
    ticks (the AX-18's 5.1 mrad tick is larger than seed 000's Coulomb band
    kc/kp = 3.2 mrad).  Comparing with the expected reading instead is
    unbiased.  Closed form, with c = round(x), x = q/tick:
    ``c + sum_{m>=c} Phi((x-m-1/2)/s) - sum_{m<c} Phi((m+1/2-x)/s)`` (4 terms each way).

    Parameters
    ----------
    q : ndarray (n,)
        Position [rad].
    tick : float
        Encoder resolution [rad].
    noise_ticks : float
        Reading noise std before rounding [ticks] (> 0).

    Returns
    -------
    ndarray (n,)
    """
    x = q / tick
    c = np.round(x)
    e = c.copy()
    s = max(noise_ticks, 1e-3)
    for j in range(4):
        e += ndtr((x - c - j - 0.5) / s)
        e -= ndtr((c - j - 0.5 - x) / s)
    return e * tick


def simulation_mae(model: ModelSpec, params: dict, rec: Recording) -> float:
    """Mean |q_sim - q_log| over all samples [rad] (BAM's score)."""
    q, _, _ = simulate_recording(model, params, rec)
    return float(np.mean(np.abs(q - rec.position)))
