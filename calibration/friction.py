"""Friction curve from constant-velocity sweeps: Coulomb, viscous, Stribeck.

In velocity mode the servo holds each commanded speed; at steady state the
motor torque equals the friction, so the mean torque at each speed traces

    tau_f(v) = sgn(v) * (fc + fs * exp(-|v / vs|^2)) + fv * v

which is fitted by bounded least squares.  The sweep runs both directions
and restores the operating mode, torque, goals and angle limits afterwards.

Two ways to the motor torque:

* **Current** (X servos with a current sensor, XM / XH / XW / XC330 / XL330):
  ``present_current x kt``, kt = datasheet stall torque / stall current.
* **Present Load / Present PWM** (no current sensing: AX-12A, AX-18A, MX-28 /
  MX-64 / MX-106 on Protocol 1.0 in wheel mode -- both angle limits 0, Moving
  Speed with the direction bit; XL430 / XC430 in velocity mode, Present PWM).
  What these registers report is the PWM duty ``d`` (FIELD-NOTES a9), not a
  torque.  On the DC motor's line the duty is

      d * tau_s(V) = tau_m + k_e * v

  (``tau_s(V)`` the stall torque at the supply voltage read from Present Input
  Voltage, ``k_e`` the back-EMF slope), so the back-EMF share ``k_e v`` grows
  with speed and must come off.  ``k_e`` comes from the datasheet no-load speed
  ``w0`` at the rated voltage: an unloaded servo at full duty turns at ``w0``,
  so ``tau_s = fc + (k_e + fv) w0``.  Taking the datasheet unit's own viscous
  friction as negligible, ``k_e = (tau_s - fc) / w0`` and the sweep gives the
  linear model ``d tau_s(V) - tau_s v / w0 = fc (sgn v - v / w0) + fv v``
  (:func:`load_friction_torque`).

  Limits of that path:  at steady state only ``fc`` and the total slope
  ``k_e + fv`` are observable; the split comes from the datasheet.  So the
  viscous coefficient is the servo's *excess* slope over its datasheet motor
  line: a unit whose real no-load speed is 5 % off its datasheet shifts fv by
  about 5 % of ``tau_s / w0`` (0.009 N m s/rad on an AX-18A, as large as a
  typical fv), and a datasheet whose no-load speed already contains viscous
  loss hides that loss.  Treat fv from this path as indicative, fc as the
  measurement.  fc scales with the datasheet stall torque (units vary by
  +-10-20 %) and has the resolution of the register (AX / MX: 0.1 % of the
  stall torque, 1.8 mN m on an AX-18A; XL430 Present PWM: 0.113 %).  Duty
  readings at saturation (|d| > 0.98) carry no friction information and are
  dropped; no Stribeck term is fitted on this path.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from servoloop.calibration.errors import ExperimentError, FitError
from servoloop.firmware_bridge.errors import BridgeError

__all__ = ["FrictionCurve", "fit_friction_curve", "friction_torque", "load_friction_torque", "sweep_velocity"]

# a duty reading this close to full scale is the motor line, not the friction
_DUTY_SATURATED = 0.98


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


def load_friction_torque(velocity, duty, stall_supply_nm: float, stall_rated_nm: float,
                         no_load_rad_s: float):
    """Friction torque [N*m] at each speed from PWM-duty readings, back-EMF share removed.

    Parameters
    ----------
    velocity : (m,) array_like
        Steady speeds, rad/s.
    duty : (m,) array_like
        Mean Present Load / Present PWM at those speeds, fraction of full duty (-1..1).
    stall_supply_nm : float
        Stall torque at the supply voltage the sweep ran at, N*m.
    stall_rated_nm, no_load_rad_s : float
        Datasheet stall torque [N*m] and no-load speed [rad/s] at the rated voltage.

    Returns
    -------
    torque : (m,) ndarray
        ``d tau_s(V) - k_e v`` with ``k_e = (tau_s - fc) / w0`` (see the module docstring), N*m.
    fc, fv : float
        Coulomb [N*m] and viscous [N*m*s/rad] of the linear fit the torque came from.
    """
    v, d = np.asarray(velocity, float), np.asarray(duty, float)
    if v.shape != d.shape or v.ndim != 1:
        raise FitError(f"velocity and duty must be matching 1-D arrays, got {v.shape} and {d.shape}")
    if not (stall_supply_nm > 0 and stall_rated_nm > 0 and no_load_rad_s > 0 and math.isfinite(no_load_rad_s)):
        raise FitError("PWM-duty friction needs the datasheet stall torque and no-load speed (> 0)")
    ok = np.isfinite(v) & np.isfinite(d) & (v != 0.0) & (np.abs(d) < _DUTY_SATURATED)
    if ok.sum() < 2 or len(np.unique(np.abs(v[ok]))) < 2:
        raise FitError(f"need unsaturated duty readings at >= 2 distinct speeds, got {int(ok.sum())} points")
    lhs = d[ok] * stall_supply_nm - stall_rated_nm * v[ok] / no_load_rad_s
    A = np.column_stack([np.sign(v[ok]) - v[ok] / no_load_rad_s, v[ok]])
    (fc, fv), *_ = np.linalg.lstsq(A, lhs, rcond=None)
    k_e = (stall_rated_nm - fc) / no_load_rad_s
    torque = np.where(ok, d * stall_supply_nm - k_e * v, np.nan)
    return torque, float(fc), float(fv)


def _hold(bus, reader, names, settle_s, hold_s, clock, tick) -> list:
    """Mean of each register in ``names`` over ``hold_s`` s after ``settle_s`` s; ticks a lockstep clock."""
    t0 = clock()
    acc = [[] for _ in names]
    missed = 0
    while clock() - t0 < settle_s + hold_s:
        try:
            reader.read()
        except BridgeError:
            # a lost reply (USB latency, a busy host) costs one sample, not the sweep
            missed += 1
            if tick is not None:
                tick()
            continue
        if clock() - t0 >= settle_s:
            for a, n in zip(acc, names, strict=True):
                a.append(float(reader.values[n][0]))
        if tick is not None:
            tick()
    if not acc[0] or missed > len(acc[0]):
        raise ExperimentError(f"{missed} of the readings failed while holding a speed; "
                              f"check the port, baud rate and Return Delay Time")
    return [float(np.mean(a)) for a in acc]


def sweep_velocity(bus, servo_id: int, velocities, settle_s: float = 0.5, hold_s: float = 1.0,
                   clock=time.monotonic, progress: bool = True, tick=None) -> dict:
    """Run the sweep on hardware; returns arrays ``velocity`` [rad/s], ``torque`` [N*m].

    Servos with current sensing: the torque is ``present_current x kt`` (kt from
    the control table's datasheet stall torque / stall current).  Servos without
    (AX, MX(1.0), XL430, XC430): the PWM duty from Present Load / Present PWM,
    converted by :func:`load_friction_torque`; the result also carries ``duty``,
    ``source`` and the datasheet figures used.  Each of ``velocities`` [rad/s]
    runs in both directions.  ``clock`` gives seconds; ``tick`` (optional) is
    called once per reading (lockstep simulation advances its time there).
    """
    table = bus.table(servo_id)
    regs = table.registers
    targets = [s * v for v in velocities for s in (1.0, -1.0)]
    if "goal_velocity" in regs and "operating_mode" in regs and "present_current" in regs:
        kt = table.torque_constant_nm_per_a
        if not kt:
            raise ExperimentError(f"servo {servo_id} ({table.name}): no torque constant in the control table")
        means = _sweep_x(bus, servo_id, targets, "present_current", settle_s, hold_s, clock, tick, progress)
        return {"velocity": means[:, 0], "torque": means[:, 1] * kt}
    if "goal_velocity" in regs and "operating_mode" in regs and "present_pwm" in regs:
        source = "present_pwm"
    elif "moving_speed" in regs and "cw_angle_limit" in regs and "present_load" in regs:
        source = "present_load"
    else:
        raise ExperimentError(f"servo {servo_id} ({table.name}): no velocity (wheel) mode with current, "
                              f"load or PWM readings")
    ds = table.datasheet
    if ds is None or not ds.stall_torque_nm or not getattr(ds, "no_load_speed_rpm", None):
        raise ExperimentError(f"servo {servo_id} ({table.name}): the Present Load path needs the datasheet "
                              f"stall torque and no-load speed, and its control table ({table.source}) has none")
    volts = bus.read(servo_id, "present_input_voltage") if "present_input_voltage" in regs else ds.voltage_v
    if not volts > 0:
        raise ExperimentError(f"servo {servo_id} ({table.name}): Present Input Voltage reads {volts} V")
    if source == "present_pwm":
        means = _sweep_x(bus, servo_id, targets, "present_pwm", settle_s, hold_s, clock, tick, progress)
    else:
        means = _sweep_wheel(bus, servo_id, targets, settle_s, hold_s, clock, tick, progress)
    stall_supply = ds.stall_torque_nm * volts / ds.voltage_v
    w0 = ds.no_load_speed_rpm * 2.0 * math.pi / 60.0
    torque, _, _ = load_friction_torque(means[:, 0], means[:, 1], stall_supply, ds.stall_torque_nm, w0)
    ok = np.isfinite(torque)
    return {"velocity": means[ok, 0], "torque": torque[ok], "duty": means[ok, 1], "source": source,
            "supply_voltage_v": float(volts), "stall_torque_nm": ds.stall_torque_nm,
            "no_load_speed_rad_s": w0, "rated_voltage_v": ds.voltage_v}


def _bar(servo_id, n, progress):
    """A progress bar over the sweep's velocities (a terminal bar, plain lines when redirected)."""
    if not progress:
        return None
    from servoloop.progress import Progress

    return Progress(n, f"friction sweep servo {servo_id}", "velocities")


def _sweep_x(bus, servo_id, targets, reading, settle_s, hold_s, clock, tick, progress) -> np.ndarray:
    """Velocity mode (Operating Mode 1): mean (present_velocity, ``reading``) at each target."""
    saved = {n: bus.read_raw(servo_id, n) for n in ("torque_enable", "operating_mode", "goal_velocity")}
    reader = bus.sync_reader(["present_velocity", reading], [servo_id])
    out = []
    try:
        bus.write_raw(servo_id, "torque_enable", 0)
        bus.write_raw(servo_id, "operating_mode", 1)
        bus.write_raw(servo_id, "torque_enable", 1)
        bar = _bar(servo_id, len(targets), progress)
        for target in targets:
            bus.write(servo_id, "goal_velocity", target)
            out.append(_hold(bus, reader, ["present_velocity", reading], settle_s, hold_s, clock, tick))
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()
    finally:
        bus.write(servo_id, "goal_velocity", 0.0)
        bus.write_raw(servo_id, "torque_enable", 0)
        bus.write_raw(servo_id, "operating_mode", saved["operating_mode"])
        bus.write_raw(servo_id, "goal_velocity", saved["goal_velocity"])
        bus.write_raw(servo_id, "torque_enable", saved["torque_enable"])
    return np.array(out, dtype=float).reshape(-1, 2)


def _sweep_wheel(bus, servo_id, targets, settle_s, hold_s, clock, tick, progress) -> np.ndarray:
    """AX / MX(1.0) wheel mode (both angle limits 0; Moving Speed with the direction bit,
    e-Manual AX-12A "Moving Speed"): mean (present_velocity, present_load) at each target."""
    names = ("torque_enable", "cw_angle_limit", "ccw_angle_limit", "moving_speed", "goal_position")
    saved = {n: bus.read_raw(servo_id, n) for n in names}
    reader = bus.sync_reader(["present_velocity", "present_load"], [servo_id])
    out = []
    try:
        bus.write_raw(servo_id, "torque_enable", 0)
        bus.write_raw(servo_id, "cw_angle_limit", 0)
        bus.write_raw(servo_id, "ccw_angle_limit", 0)
        bus.write_raw(servo_id, "torque_enable", 1)
        bar = _bar(servo_id, len(targets), progress)
        for target in targets:
            bus.write(servo_id, "moving_speed", target)
            out.append(_hold(bus, reader, ["present_velocity", "present_load"], settle_s, hold_s, clock, tick))
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()
    finally:
        bus.write_raw(servo_id, "moving_speed", 0)
        bus.write_raw(servo_id, "torque_enable", 0)
        # joint mode again before the old speed: 1024-2047 is a wheel-mode value only
        for n in ("cw_angle_limit", "ccw_angle_limit", "moving_speed", "goal_position"):
            bus.write_raw(servo_id, n, saved[n])
        bus.write_raw(servo_id, "torque_enable", saved["torque_enable"])
    return np.array(out, dtype=float).reshape(-1, 2)
