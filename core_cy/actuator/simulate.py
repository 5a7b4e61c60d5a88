"""Servo actuator model: simulate a servo driving a pendulum from logged inputs.

Thin checked wrapper over the compiled kernel ``core_cy.actuator._actuator``; the
parameter vector layout is :mod:`core_cy.actuator.layout`, the NumPy
reference :mod:`core_cy.actuator.reference`.
"""

import numpy as np

from servoloop.core_cy.actuator import _actuator
from servoloop.core_cy.actuator.layout import NP

__all__ = ["simulate", "simulate_into", "NP"]


def _vec(name, x, n=None, dtype=np.float64):
    a = np.ascontiguousarray(x, dtype=dtype)
    if a.ndim != 1 or (n is not None and a.shape[0] != n):
        raise ValueError(f"{name}: expected shape ({n if n is not None else 'n'},), got {a.shape}")
    return a


def simulate(p, goal, torque_on, vin, dt, q0, qd0, load_inertia, load_mgl):
    """Simulate one servo + pendulum run (compiled, GIL released).

    Parameters
    ----------
    p : array_like (NP,)
        Parameter vector, see :mod:`core_cy.actuator.layout`.
    goal : array_like (n,)
        Goal position per step [rad].
    torque_on : array_like (n,) bool
        Torque enable per step.
    vin : array_like (n,) or float
        Supply voltage per step [V] (voltage drive only).
    dt : float
        Fixed step [s].
    q0, qd0 : float
        Initial position [rad] and velocity [rad/s] (the first logged sample).
    load_inertia : float
        Load inertia about the axis [kg*m^2] (the armature is added).
    load_mgl : float
        Gravity torque amplitude [N*m]: bias = -mgl*sin(q + q_offset).

    Returns
    -------
    q, qd, tau : ndarray (n,)
        Position [rad] and velocity [rad/s] at the start of each step, and the
        motor torque [N*m] during it.
    """
    goal = _vec("goal", goal)
    n = goal.shape[0]
    out = (np.empty(n), np.empty(n), np.empty(n))
    simulate_into(p, goal, torque_on, vin, dt, q0, qd0, load_inertia, load_mgl, *out)
    return out


def simulate_into(p, goal, torque_on, vin, dt, q0, qd0, load_inertia, load_mgl, q_out, qd_out, tau_out):
    """As :func:`simulate`, writing into preallocated float64 arrays (n,)."""
    p = _vec("p", p, NP)
    goal = _vec("goal", goal)
    n = goal.shape[0]
    torque_on = _vec("torque_on", np.asarray(torque_on).astype(bool), n, np.uint8)
    if np.isscalar(vin):
        vin = np.full(n, float(vin))
    vin = _vec("vin", vin, n)
    if not dt > 0.0:
        raise ValueError(f"dt must be > 0, got {dt}")
    if not load_inertia + p[7] > 0.0:
        raise ValueError(f"load_inertia + armature must be > 0, got {load_inertia} + {p[7]}")
    for name, a in (("q_out", q_out), ("qd_out", qd_out), ("tau_out", tau_out)):
        if not (isinstance(a, np.ndarray) and a.dtype == np.float64 and a.shape == (n,) and a.flags.c_contiguous):
            raise ValueError(f"{name}: expected contiguous float64 array of shape ({n},)")
    _actuator.simulate(p, goal, torque_on, vin, float(dt), float(q0), float(qd0),
                       float(load_inertia), float(load_mgl), q_out, qd_out, tau_out)
