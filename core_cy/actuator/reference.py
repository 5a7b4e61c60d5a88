"""Slow NumPy references of the servo law (core_cy/actuator/_law.pxd) and of the
servo + pendulum simulation (core_cy/actuator/_actuator.pyx).

The simulation follows BAM's ``Simulator.step`` line by line (Rhoban/bam
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
    P_EMF,
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
    P_OFF_DAMP,
    P_Q_OFFSET,
    P_R,
    P_STALL,
    P_SUBSTEPS,
    P_V_RATED,
    P_VISC,
    P_VS,
)

__all__ = ["simulate_reference", "motor_torque_reference", "friction_budget_reference",
           "servo_torque_reference", "DRIVE_POSITION", "DRIVE_VELOCITY", "DRIVE_TORQUE"]

DRIVE_POSITION, DRIVE_VELOCITY, DRIVE_TORQUE = 0, 1, 2


def servo_torque_reference(drive, on, kp, kd, kv, stall, emf, limit, goal, q, qd, command):
    """The servo law on arrays (n,): active torque [N m] and its slope d tau / d qd.

    demand by drive (0 position ``kp (goal - q) - kd qd``, 1 velocity
    ``kv (command - qd)``, 2 torque ``command``); bounded by the motor line
    ``[-stall - emf qd, stall - emf qd]``, then by ``+-limit``; 0 with torque off.
    """
    drive = np.asarray(drive)
    demand = np.where(drive == DRIVE_VELOCITY, kv * (command - qd),
                      np.where(drive == DRIVE_TORQUE, command, kp * (goal - q) - kd * qd))
    slope = np.where(drive == DRIVE_VELOCITY, -kv, np.where(drive == DRIVE_TORQUE, 0.0, -kd))
    hi, lo = stall - emf * qd, -stall - emf * qd
    line = (demand > hi) | (demand < lo)
    tau = np.clip(demand, lo, hi)
    slope = np.where(line, -emf, slope)
    capped = np.abs(tau) > limit
    tau = np.clip(tau, -limit, limit)
    slope = np.where(capped, 0.0, slope)
    on = np.asarray(on, dtype=bool)
    return np.where(on, tau, 0.0), np.where(on, slope, 0.0)


def motor_torque_reference(p, goal, q, qd, vin, torque_on):
    """Motor torque [N*m] for one state; see :mod:`core_cy.actuator.layout`."""
    if not torque_on:
        return 0.0
    err = goal - q
    if p[P_MODE] == MODE_PD:
        ratio = vin / p[P_V_RATED] if p[P_V_RATED] > 0 else 1.0
        tau = p[P_GAIN] * p[P_KP_FW] * err - p[P_KD] * qd
        stall = p[P_STALL] * ratio if p[P_STALL] > 0 else math.inf
        tau = min(max(tau, -stall - p[P_EMF] * qd), stall - p[P_EMF] * qd)
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
            if not torque_on[k]:
                visc += p[P_OFF_DAMP]
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


def step_independent_reference(S, goal, on, drive, command, n_sub, h, q, qd):
    """NumPy reference of ``_actuator.step_independent`` (core_cy/actuator/independent.py).

    S (n, 12): columns of :data:`core_cy.actuator.independent.COLUMNS`.
    Returns new (q, qd, tau) arrays (n,).
    """
    S = np.asarray(S, dtype=float)
    q, qd = np.array(q, dtype=float), np.array(qd, dtype=float)
    tau = np.zeros(len(q))
    on = np.asarray(on, dtype=bool)
    kp, kd, kv, stall, emf, limit, coulomb, visc, off, inertia, mgl, qdown = S.T
    for _ in range(int(n_sub)):
        tau, _ = servo_torque_reference(drive, on, kp, kd, kv, stall, emf, limit, goal, q, qd, command)
        net = tau - mgl * np.sin(q - qdown)
        f = coulomb + (visc + np.where(on, 0.0, off)) * np.abs(qd)
        tau_stop = inertia / h * qd + net
        net = net - np.sign(tau_stop) * np.minimum(np.abs(tau_stop), f)
        qd = qd + net / inertia * h
        q = q + qd * h
    return q, qd, tau
