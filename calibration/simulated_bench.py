"""The bench experiment simulated in-process with the compiled actuator model.

For when no bus (real or virtual) is at hand: the same square wave, the
servo replaced by seed 000's law (+ stall saturation) integrated by
``core_cy.actuator.simulate`` at fine substeps, the reading rounded to encoder ticks
with Gaussian noise before rounding (as the virtual servo bus does).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from servoloop.calibration.experiment import LoadSpec, square_wave_goal
from servoloop.calibration.models import get_model
from servoloop.calibration.recording import GRAVITY, Recording
from servoloop.core_cy.actuator.simulate import simulate

__all__ = ["simulate_square_wave"]


def simulate_square_wave(kp: float, kd: float, kc: float, load: LoadSpec, half_period: float = 0.67,
                         amplitude: float = 0.08, cycles: int = 4, dt: float = 0.001,
                         torque_limit: float = math.inf, tick_rad: float = 2 * math.pi / 4096,
                         noise_ticks: float = 0.25, substeps: int = 20, seed: int = 0,
                         gain: float = 32.0) -> Recording:
    """A raw recording of the square-wave experiment on a simulated servo.

    Parameters
    ----------
    kp, kd, kc : float
        True gains (N*m/rad, N*m*s/rad, N*m).
    load : LoadSpec
    half_period, amplitude, cycles, dt
        Square wave (s, rad, count) and sampling step (s).
    torque_limit : float
        Stall saturation, N*m.
    tick_rad, noise_ticks : float
        Encoder resolution and reading noise (ticks, std, before rounding).
    substeps : int
        Integration substeps per sample.

    Returns
    -------
    Recording
    """
    n = int(round(2 * half_period * cycles / dt))
    t = np.arange(n) * dt
    goal = np.array([square_wave_goal(x, 0.0, amplitude, half_period) for x in t])
    spec = dataclasses.replace(get_model("bench"), fixed={"substeps": substeps})
    p = spec.vector({"kp": kp, "kd": kd, "kc": kc, "torque_limit": torque_limit, "command_delay": 0.0}, gain)
    inertia = load.inertia if load.inertia is not None else load.mass * load.length**2
    mgl = load.mass * GRAVITY * load.length if load.inertia is None else 0.0
    q, qd, _ = simulate(p, goal, np.ones(n, bool), 0.0, dt, 0.0, 0.0, inertia, mgl)
    rng = np.random.default_rng(seed)
    reading = np.round(q / tick_rad + noise_ticks * rng.standard_normal(n)) * tick_rad
    return Recording(path=f"simulated_gain{int(gain)}", t=t, position=reading, goal=goal, speed=np.zeros(n),
                     torque_enable=np.ones(n, bool), input_volts=np.zeros(n), kp_fw=float(gain), vin=0.0,
                     mass=load.mass, length=load.length, inertia=load.inertia, servo_model="simulated",
                     trajectory="square_wave", position_quantum=tick_rad)
