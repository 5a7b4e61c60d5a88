"""Friction curve from constant-velocity sweeps: Coulomb, viscous, Stribeck.

In velocity mode the servo holds each commanded speed; at steady state the
motor torque equals the friction, so the mean torque (current x torque
constant, or the load register x stall torque) at each speed traces

    tau_f(v) = sgn(v) * (fc + fs * exp(-|v / vs|^2)) + fv * v

which is fitted by bounded least squares.  The sweep runs both directions
and restores the operating mode, torque and goal afterwards.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from servoloop.calibration.errors import ExperimentError, FitError

__all__ = ["FrictionCurve", "fit_friction_curve", "friction_torque", "sweep_velocity"]


@dataclass
class FrictionCurve:
    """Identified friction: Coulomb ``fc`` [N*m], viscous ``fv`` [N*m*s/rad],
    Stribeck excess ``fs`` [N*m] and velocity ``vs`` [rad/s]; ``stderr`` and ``rms`` [N*m]."""

    fc: float
    fv: float
    fs: float
    vs: float
    stderr: dict
    rms: float

    def params(self) -> dict:
        return {"coulomb": self.fc, "viscous": self.fv, "stribeck": self.fs, "stribeck_velocity": self.vs}


def friction_torque(v, fc, fv, fs, vs):
    """Friction torque [N*m] at velocity ``v`` [rad/s] (array)."""
    v = np.asarray(v, dtype=float)
    return np.sign(v) * (fc + fs * np.exp(-((v / vs) ** 2))) + fv * v


def fit_friction_curve(velocity, torque, stribeck: bool = True) -> FrictionCurve:
    """Fit the curve to steady-state (velocity [rad/s], torque [N*m]) pairs, shape (m,) each."""
    v, tau = np.asarray(velocity, float), np.asarray(torque, float)
    if v.shape != tau.shape or v.ndim != 1:
        raise FitError(f"velocity and torque must be matching 1-D arrays, got {v.shape} and {tau.shape}")
    ok = np.isfinite(v) & np.isfinite(tau) & (v != 0.0)
    if ok.sum() < (4 if stribeck else 2) or len(np.unique(np.abs(v[ok]))) < (3 if stribeck else 2):
        raise FitError(f"need steady-state torque at >= {3 if stribeck else 2} distinct speeds, got {int(ok.sum())} points")
    v, tau = v[ok], tau[ok]
    A = np.column_stack([np.sign(v), v])
    (fc0, fv0), *_ = np.linalg.lstsq(A, tau, rcond=None)
    vmax = float(np.max(np.abs(v)))
    if stribeck:
        x0 = [max(fc0, 0.0), max(fv0, 0.0), 0.1 * max(abs(fc0), 1e-3), 0.2 * vmax]
        lo, hi = [0, 0, 0, 1e-3 * vmax], [np.inf, np.inf, np.inf, vmax]

        def res(x):
            return friction_torque(v, *x) - tau
    else:
        x0, lo, hi = [max(fc0, 0.0), max(fv0, 0.0)], [0, 0], [np.inf, np.inf]

        def res(x):
            return friction_torque(v, x[0], x[1], 0.0, 1.0) - tau
    sol = least_squares(res, np.clip(x0, lo, [h if math.isfinite(h) else 1e9 for h in hi]), bounds=(lo, hi))
    dof = max(v.size - sol.x.size, 1)
    cov = np.linalg.pinv(sol.jac.T @ sol.jac) * float(sol.fun @ sol.fun) / dof
    se = np.sqrt(np.clip(np.diag(cov), 0, None))
    names = ["coulomb", "viscous", "stribeck", "stribeck_velocity"][: sol.x.size]
    x = list(sol.x) + ([0.0, 1.0] if not stribeck else [])
    return FrictionCurve(*(float(a) for a in x), dict(zip(names, se.tolist(), strict=True)),
                         float(np.sqrt(np.mean(sol.fun**2))))


def sweep_velocity(bus, servo_id: int, velocities, settle_s: float = 0.5, hold_s: float = 1.0,
                   clock=time.monotonic, progress: bool = True) -> dict:
    """Run the sweep on hardware (X/MX 2.0 velocity mode); returns arrays ``velocity``, ``torque``.

    The torque is ``present_current x kt`` with kt from the control table's
    datasheet stall torque / stall current.
    """
    table = bus.table(servo_id)
    regs = table.registers
    if "goal_velocity" not in regs or "operating_mode" not in regs or "present_current" not in regs:
        raise ExperimentError(f"servo {servo_id} ({table.name}): no velocity mode with current sensing")
    kt = table.torque_constant_nm_per_a
    if not kt:
        raise ExperimentError(f"servo {servo_id} ({table.name}): no torque constant in the control table")
    saved = {n: bus.read_raw(servo_id, n) for n in ("torque_enable", "operating_mode")}
    reader = bus.sync_reader(["present_velocity", "present_current"], [servo_id])
    v_out, tau_out = [], []
    targets = [s * v for v in velocities for s in (1.0, -1.0)]
    try:
        bus.write_raw(servo_id, "torque_enable", 0)
        bus.write_raw(servo_id, "operating_mode", 1)
        bus.write_raw(servo_id, "torque_enable", 1)
        from servoloop.progress import Progress

        bar = Progress(len(targets), f"friction sweep servo {servo_id}", "velocities") if progress else None
        for target in targets:
            bus.write(servo_id, "goal_velocity", target)
            t0 = clock()
            vs, cs = [], []
            while clock() - t0 < settle_s + hold_s:
                reader.read()
                if clock() - t0 >= settle_s:
                    vs.append(float(reader.values["present_velocity"][0]))
                    cs.append(float(reader.values["present_current"][0]))
            v_out.append(np.mean(vs))
            tau_out.append(np.mean(cs) * kt)
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()
    finally:
        bus.write(servo_id, "goal_velocity", 0.0)
        bus.write_raw(servo_id, "torque_enable", 0)
        bus.write_raw(servo_id, "operating_mode", saved["operating_mode"])
        bus.write_raw(servo_id, "torque_enable", saved["torque_enable"])
    return {"velocity": np.array(v_out), "torque": np.array(tau_out)}
