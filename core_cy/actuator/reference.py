"""Slow NumPy reference of the servo + pendulum simulation (core_cy/actuator/_actuator.pyx).

It follows BAM's ``Simulator.step`` line by line (Rhoban/bam
``bam/simulate.py``, ``bam/model.py``, ``bam/actuator.py``), generalised to
the parameter vector of :mod:`core_cy.actuator.layout`.
"""

import math

import numpy as np

from servoloop.core_cy.actuator.layout import (
    MODE_PD,
    P_ALPHA,
    P_ARMATURE,
    P_ASYM,
    P_DUTY0,
    P_DUTY0_ERR,
    P_FB,
    P_FS,
    P_GAIN,
    P_INTEGRATOR,
    P_KD,
    P_KE,
    P_KP_FW,
    P_KT,
    P_LFE,
    P_LFEQ,
    P_LFES,
    P_LFM,
    P_LFMQ,
    P_LFMS,
    P_LIMIT,
    P_MAX_CURRENT,
    P_MODE,
    P_Q_OFFSET,
    P_R,
    P_SUBSTEPS,
    P_VISC,
    P_VS,
)

__all__ = ["simulate_reference", "motor_torque_reference", "friction_budget_reference"]


def motor_torque_reference(p, goal, q, qd, vin, torque_on):
    """Motor torque [N*m] for one state; see :mod:`core_cy.actuator.layout`."""
    if not torque_on:
        return 0.0
    err = goal - q
    if p[P_MODE] == MODE_PD:
        tau = p[P_GAIN] * p[P_KP_FW] * err - p[P_KD] * qd
        tau = float(np.clip(tau, -p[P_LIMIT], p[P_LIMIT]))
        return tau * (1.0 + p[P_ASYM] * np.sign(tau))
    duty = err * p[P_KP_FW] * p[P_GAIN] + p[P_DUTY0] * math.tanh(err / p[P_DUTY0_ERR])
    if math.isfinite(p[P_MAX_CURRENT]):
        # BAM's firmware current limiter: a duty window keeping |I| <= Imax.
        span = p[P_R] * p[P_MAX_CURRENT] / vin
        center = p[P_KE] * qd / vin
        duty = float(np.clip(duty, center - span, center + span))
    duty = float(np.clip(duty, -p[P_LIMIT], p[P_LIMIT]))
    volts = vin * duty
    tau = p[P_KT] * volts / p[P_R] - p[P_KT] * p[P_KE] * qd / p[P_R]
    return tau * (1.0 + p[P_ASYM] * np.sign(tau))


def friction_budget_reference(p, tm, te, qd):
    """(frictionloss [N*m], damping [N*m*s/rad]) as BAM's Model.compute_frictions."""
    s = math.exp(-(abs(qd / p[P_VS]) ** p[P_ALPHA]))
    f = p[P_FB] + p[P_FS] * s
    f += abs(te * p[P_LFE] - tm * p[P_LFM])
    f += s * abs(te * p[P_LFES] - tm * p[P_LFMS])
    if np.sign(te) != np.sign(tm):
        if abs(te) < abs(tm):
            f += s * p[P_LFEQ] * te * te
        elif abs(te) > abs(tm):
            f += s * p[P_LFMQ] * tm * tm
    return f, p[P_VISC]


def simulate_reference(p, goal, torque_on, vin, dt, q0, qd0, load_inertia, load_mgl):
    """Simulate one servo driving a pendulum from logged inputs.

    Parameters
    ----------
    p : ndarray (NP,)
        Parameter vector (core_cy.actuator.layout).
    goal : ndarray (n,)
        Goal position [rad] per step.
    torque_on : ndarray (n,) bool
        Torque enable per step.
    vin : ndarray (n,)
        Supply voltage [V] per step (voltage drive only).
    dt : float
        Step [s].
    q0, qd0 : float
        Initial position [rad] and velocity [rad/s].
    load_inertia : float
        Load inertia about the axis [kg*m^2] (armature is added).
    load_mgl : float
        Gravity torque amplitude [N*m]; bias torque = -mgl*sin(q + q_offset).

    Returns
    -------
    q, qd, tau : ndarray (n,)
        Position, velocity at the start of each step, motor torque applied
        during it (BAM records the state before stepping).
    """
    n = len(goal)
    q_out, qd_out, tau_out = np.empty(n), np.empty(n), np.empty(n)
    q, qd = float(q0), float(qd0)
    inertia = load_inertia + p[P_ARMATURE]
    m = max(int(p[P_SUBSTEPS]), 1)
    h = dt / m
    for k in range(n):
        q_out[k], qd_out[k] = q, qd
        for _ in range(m):
            qe = q + p[P_Q_OFFSET]
            te = -load_mgl * math.sin(qe)
            tm = motor_torque_reference(p, goal[k], q, qd, vin[k], bool(torque_on[k]))
            f, visc = friction_budget_reference(p, tm, te, qd)
            net = tm + te
            tau_stop = (inertia / h) * qd + net
            net -= np.sign(tau_stop) * min(abs(tau_stop), f + visc * abs(qd))
            acc = net / inertia
            qd = float(np.clip(qd + acc * h, -100.0, 100.0))
            q += qd * h
            if p[P_INTEGRATOR] != 0.0:
                q += 0.5 * acc * h * h
        tau_out[k] = tm
    return q_out, qd_out, tau_out
