"""Seed 000's bench experiment on one servo, through ``firmware_bridge.bus.Bus``.

A square-wave goal (hold ``center + A`` for the half period, then
``center - A``, repeat) at each firmware position gain asked for, sampling
as fast as the bus allows: present position only on Protocol 1.0 (one read
per servo per register, so read only what the fit needs), position and
velocity (+ current/load when the model has it) on Protocol 2.0.

Servo quirks handled here:

* the servo is left as found: torque enable, goal, gain registers, compliance
  margins and torque limit are read first and written back in ``finally``,
  torque last;
* AX (compliance control): the compliance margin is a dead band around the
  goal, set to 0 during the run so that the law is seed 000's; the gain is
  the compliance slope (a larger slope is a softer servo);
* a large step saturates at the stall torque: the amplitude is picked from a
  short pilot step and the load/current register (peak torque at most
  ~80 % of the limit); the bench model also carries a torque limit.

Time, sampling and the goal writes go through small callables so that the
same loop runs against real servos (monotonic clock), the virtual servo bus
on a pty, or the in-process virtual bus in lockstep (simulated time).
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from servoloop.calibration.errors import ExperimentError
from servoloop.calibration.recording import Recording
from servoloop.firmware_bridge.errors import BridgeError
from servoloop.progress import Progress

__all__ = ["LoadSpec", "parse_load", "ServoSnapshot", "gain_registers", "snapshot_servo",
           "restore_servo", "square_wave_goal", "record_square_wave", "pilot_amplitude",
           "run_experiment", "ExperimentClock", "known_torque_limit"]


@dataclass(frozen=True)
class LoadSpec:
    """The load on the horn: a pendulum (mass [kg] at length [m]) or a bare inertia [kg*m^2]."""

    mass: float = 0.0
    length: float = 0.0
    inertia: float | None = None

    def describe(self) -> str:
        if self.inertia is not None:
            return f"inertia {self.inertia:g} kg*m^2"
        return f"pendulum {self.mass:g} kg at {self.length:g} m"


def parse_load(load: str | None, inertia: float | None) -> LoadSpec:
    """``pendulum:MASS:LENGTH`` or an inertia; ValueError naming the bad part."""
    if inertia is not None:
        if not inertia > 0:
            raise ValueError(f"--inertia must be > 0 kg*m^2, got {inertia}")
        return LoadSpec(inertia=float(inertia))
    parts = (load or "").split(":")
    if len(parts) != 3 or parts[0] != "pendulum":
        raise ValueError(f"--load must be pendulum:MASS:LENGTH (kg, m), got {load!r}")
    try:
        mass, length = float(parts[1]), float(parts[2])
    except ValueError:
        raise ValueError(f"--load {load!r}: MASS and LENGTH must be numbers") from None
    if not (mass > 0 and length > 0):
        raise ValueError(f"--load {load!r}: MASS and LENGTH must be > 0")
    return LoadSpec(mass=mass, length=length)


@dataclass
class ServoSnapshot:
    """Raw register values read before the experiment, written back after."""

    servo_id: int
    raw: dict = field(default_factory=dict)


def gain_registers(table) -> tuple[str, ...]:
    """Registers that set the position gain on this model (written together)."""
    regs = table.registers
    if "position_p_gain" in regs:
        return ("position_p_gain",)
    if "cw_compliance_slope" in regs:
        return ("cw_compliance_slope", "ccw_compliance_slope")
    raise ExperimentError(f"model {table.name}: no position gain register")


def _saved_registers(table) -> list[str]:
    names = ["torque_enable", "goal_position"] + list(gain_registers(table))
    for n in ("cw_compliance_margin", "ccw_compliance_margin", "torque_limit", "moving_speed",
              "profile_velocity", "profile_acceleration", "position_d_gain", "position_i_gain"):
        if n in table.registers:
            names.append(n)
    return names


def snapshot_servo(bus, servo_id: int) -> ServoSnapshot:
    """Read every register the experiment changes."""
    table = bus.table(servo_id)
    snap = ServoSnapshot(servo_id)
    for name in _saved_registers(table):
        snap.raw[name] = bus.read_raw(servo_id, name)
    if "operating_mode" in table.registers:
        mode = bus.read_raw(servo_id, "operating_mode")
        if mode != 3:
            raise ExperimentError(
                f"servo {servo_id}: operating mode {mode}, the experiment needs position control (3); "
                "set it yourself (EEPROM) so that nothing is changed behind your back")
    return snap


def restore_servo(bus, snap: ServoSnapshot) -> list[str]:
    """Write the snapshot back (torque off first, torque enable last); returns failures."""
    failures = []
    order = [n for n in snap.raw if n != "torque_enable"]
    try:
        bus.write_raw(snap.servo_id, "torque_enable", 0)
    except Exception as exc:  # keep restoring what can be
        failures.append(f"torque_enable: {exc}")
    for name in order + ["torque_enable"]:
        try:
            bus.write_raw(snap.servo_id, name, int(snap.raw[name]))
        except Exception as exc:
            failures.append(f"{name}: {exc}")
    return failures


def square_wave_goal(t: float, center: float, amplitude: float, half_period: float) -> float:
    """Seed 000's goal: ``center + A`` during even half periods, ``center - A`` during odd ones."""
    return center + amplitude if int(math.floor(t / half_period)) % 2 == 0 else center - amplitude


class ExperimentClock:
    """Wall-clock pacing: ``now()`` is time.monotonic, ``tick()`` does nothing (read as fast as possible).

    Lockstep tests pass an object whose ``tick()`` advances an in-process
    virtual bus by a fixed step and whose ``now()`` is its simulated time.
    """

    def now(self) -> float:
        return time.monotonic()

    def tick(self) -> None:
        return None


# a run survives lost replies until the servo has been silent this long [s] ...
LOST_RUN_S = 0.25
# ... or more than this fraction of the samples so far were lost
LOST_FRACTION = 0.05


class LossBudget:
    """Lost replies cost samples, not the run; a servo that stops answering ends it.

    A sample whose reply is lost (USB latency, a busy host, line noise) is
    skipped: the fit resamples onto a fixed grid.  The run ends with
    :class:`ExperimentError` once the servo has been silent for
    ``LOST_RUN_S`` or more than ``LOST_FRACTION`` of the samples are lost.
    """

    def __init__(self, clock, what: str):
        self.clock, self.what = clock, what
        self.lost, self.samples, self._since = 0, 0, None

    def _lose(self, exc) -> None:
        self.lost += 1
        now = self.clock.now()
        self._since = now if self._since is None else self._since
        if now - self._since >= LOST_RUN_S or self.lost > max(5, LOST_FRACTION * self.samples):
            raise ExperimentError(f"{self.what}: bus failed after {self.samples} samples "
                                  f"({self.lost} replies lost): {exc}") from exc

    def read(self, reader) -> bool:
        """One group read; False when its reply was lost (within budget)."""
        try:
            reader.read()
        except BridgeError as exc:
            self._lose(exc)
            return False
        self.samples += 1
        self._since = None
        return True

    def write(self, bus, servo_id: int, name: str, value) -> bool:
        """One register write; False when its status reply was lost (within budget)."""
        try:
            bus.write(servo_id, name, value)
        except BridgeError as exc:
            self._lose(exc)
            return False
        return True


def write_retrying(bus, servo_id: int, name: str, value, tries: int = 3) -> None:
    """A write whose status may be lost once or twice (rewriting a register is idempotent)."""
    for i in range(tries):
        try:
            bus.write(servo_id, name, value)
            return
        except BridgeError:
            if i == tries - 1:
                raise


def _read_names(table) -> list[str]:
    regs = table.registers
    if table.protocol == 1:
        # Protocol 1.0: one READ per register per servo; position is all the fit needs
        return ["present_position"]
    names = ["present_position"]
    for n in ("present_velocity", "present_current", "present_input_voltage"):
        if n in regs:
            names.append(n)
    return names


def record_square_wave(bus, servo_id: int, center: float, amplitude: float, half_period: float,
                       cycles: int, clock=None, progress: bool = True, label: str = "") -> dict:
    """Drive the square wave and sample; returns raw channels (SI) as arrays.

    Returns
    -------
    dict
        ``t`` [s from the first sample], ``goal``, ``position`` [rad] and
        whatever else was read (``present_velocity`` ...), each (n,).
    """
    clock = clock or ExperimentClock()
    table = bus.table(servo_id)
    reader = bus.sync_reader(_read_names(table), [servo_id])
    duration = 2.0 * half_period * cycles
    rows: list[tuple] = []
    # what the servo will hold is the goal rounded to a whole tick: record that
    greg = table["goal_position"]
    hi, lo = (_as_sent(greg, center + amplitude), _as_sent(greg, center - amplitude))
    center, amplitude = 0.5 * (hi + lo), 0.5 * (hi - lo)
    goal = square_wave_goal(0.0, center, amplitude, half_period)
    write_retrying(bus, servo_id, "goal_position", goal)
    unsent = False
    t0 = clock.now()
    last_print = -1.0
    bar = Progress(round(duration, 2), label or f"servo {servo_id} square wave", "s") if progress else None
    budget = LossBudget(clock, f"servo {servo_id}")
    while True:
        clock.tick()
        try:
            if not budget.read(reader):
                continue
        except ExperimentError as err:
            if bar is not None:
                bar.close()
            err.partial = _channels(rows, reader) if rows else None
            raise
        t = clock.now() - t0
        if t >= duration:
            break
        vals = tuple(float(reader.values[n][0]) for n in reader.values)
        new_goal = square_wave_goal(t, center, amplitude, half_period)
        if new_goal != goal:
            goal = new_goal
            unsent = not budget.write(bus, servo_id, "goal_position", goal)
        elif unsent:
            # the last goal's status was lost: write it again (idempotent if it had landed)
            unsent = not budget.write(bus, servo_id, "goal_position", goal)
        # sample k holds the goal in force from t_k to t_k+1 (the simulator's convention)
        rows.append((t, goal) + vals)
        if bar is not None and t - last_print >= 0.25:
            last_print = t
            bar.set(round(min(t, duration), 2))
    if bar is not None:
        bar.set(round(duration, 2))
        bar.close()
    if len(rows) < 10:
        raise ExperimentError(f"servo {servo_id}: only {len(rows)} samples in {duration:.1f} s")
    return _channels(rows, reader)


def _channels(rows, reader) -> dict:
    names = ["t", "goal"] + [("position" if n == "present_position" else n) for n in reader.values]
    arr = np.array(rows, dtype=float)
    return {n: arr[:, i].copy() for i, n in enumerate(names)}


def _as_sent(register, value: float) -> float:
    from servoloop.firmware_bridge.units import from_si, to_si

    return to_si(register, from_si(register, value))


def pilot_amplitude(bus, servo_id: int, center: float, clock=None, pilot_rad: float = 0.05,
                    duration_s: float = 0.3, fraction: float = 0.8) -> tuple[float, float | None]:
    """Amplitude A such that the 2A step peaks at ``fraction`` of the torque limit.

    A short pilot step of ``pilot_rad`` is read with the load (AX/MX 1.0) or
    current register; the peak grows linearly with the step below
    saturation, so ``A = fraction * pilot / (2 * peak_ratio)``.

    Returns
    -------
    amplitude : float
        rad, clipped to [0.05, 0.6].
    peak_ratio : float or None
        Peak load as a fraction of the limit (None when the model reports none).
    """
    clock = clock or ExperimentClock()
    table = bus.table(servo_id)
    regs = table.registers
    if "present_load" in regs:
        name, full = "present_load", 1.0
    elif "present_current" in regs and "current_limit" in regs:
        name, full = "present_current", None
    else:
        return 0.2, None
    if full is None:
        full = bus.read(servo_id, "current_limit")
    # AX/MX(1.0) Present Load is the PWM duty: its back-EMF share v / w0 is no torque
    ds = table.datasheet
    emf = (1.0 / ds.no_load_speed_rad_s if name == "present_load" and ds is not None
           and ds.no_load_speed_rpm and "present_velocity" in regs else 0.0)
    reader = bus.sync_reader([name, "present_velocity"] if emf else [name], [servo_id])
    budget = LossBudget(clock, f"servo {servo_id} (pilot step)")
    write_retrying(bus, servo_id, "goal_position", center + pilot_rad)
    t0 = clock.now()
    peak = 0.0
    while clock.now() - t0 < duration_s:
        clock.tick()
        if not budget.read(reader):
            continue
        v = float(reader.values["present_velocity"][0]) if emf else 0.0
        peak = max(peak, abs(float(reader.values[name][0]) - emf * v))
    write_retrying(bus, servo_id, "goal_position", center)
    settle = clock.now()
    while clock.now() - settle < duration_s:
        clock.tick()
        budget.read(reader)
    ratio = peak / full if full else None
    if not ratio or ratio <= 1e-3:
        return 0.2, ratio
    return float(np.clip(fraction * pilot_rad / (2.0 * ratio), 0.05, 0.6)), ratio


def known_torque_limit(bus, servo_id: int) -> float | None:
    """Stall torque from the datasheet (control table) x the torque-limit register, N*m, or None."""
    table = bus.table(servo_id)
    stall = getattr(table, "stall_torque_nm", None)
    if not stall:
        return None
    if "torque_limit" in table.registers:
        return float(stall) * min(1.0, float(bus.read(servo_id, "torque_limit")))
    return float(stall)


def run_experiment(bus, servo_id: int, load: LoadSpec, gains: list[int] | None, half_period: float,
                   amplitude: float | None, cycles: int, clock=None, progress: bool = True,
                   on_recording=None) -> list[Recording]:
    """The whole bench run: snapshot, per gain (pilot +) square wave, restore.

    Parameters
    ----------
    bus : firmware_bridge.bus.Bus
        Open bus holding ``servo_id`` (others on it are never written).
    load : LoadSpec
    gains : list of int or None
        Raw gain register values (X/MX 2.0: Position P Gain; AX: compliance
        slope); None keeps the servo's own.
    half_period, amplitude, cycles
        Square wave (s, rad or None = pilot step, count).
    clock : ExperimentClock-like, optional
    on_recording : callable(Recording), optional
        Called with each raw recording as soon as it exists (write it first).

    Returns
    -------
    list of Recording
        Raw (not resampled), one per gain.
    """
    table = bus.table(servo_id)
    snap = snapshot_servo(bus, servo_id)
    gain_regs = gain_registers(table)
    gains = list(gains) if gains else [int(snap.raw[gain_regs[0]])]
    recs: list[Recording] = []
    try:
        for name in ("cw_compliance_margin", "ccw_compliance_margin"):
            if name in snap.raw:
                bus.write_raw(servo_id, name, 0)  # AX dead band off: seed 000's law
        center = bus.read(servo_id, "present_position")
        for gain in gains:
            for r in gain_regs:
                bus.write_raw(servo_id, r, int(gain))
            bus.write(servo_id, "goal_position", center)
            bus.write_raw(servo_id, "torque_enable", 1)
            amp, ratio = (amplitude, None) if amplitude else pilot_amplitude(bus, servo_id, center, clock)
            try:
                ch = record_square_wave(bus, servo_id, center, amp, half_period, cycles, clock, progress,
                                        label=f"servo {servo_id} gain {gain}")
            except ExperimentError as exc:
                if getattr(exc, "partial", None) is not None and on_recording is not None:
                    on_recording(_to_recording(exc.partial, servo_id, gain, load, table, amp, partial=True))
                raise
            rec = _to_recording(ch, servo_id, gain, load, table, amp)
            recs.append(rec)
            if on_recording is not None:
                on_recording(rec)
    finally:
        failures = restore_servo(bus, snap)
        if failures:
            print(f"servo {servo_id}: could not restore " + "; ".join(failures), file=sys.stderr)
    return recs


def _to_recording(ch: dict, servo_id, gain, load: LoadSpec, table, amp, partial=False) -> Recording:
    """Raw channels of one run as a Recording (``_partial`` appended when cut short)."""
    n = ch["t"].shape[0]
    vin = ch.get("present_input_voltage", np.full(n, math.nan))
    rec = Recording(
        path=f"servo{servo_id}_gain{int(gain)}" + ("_partial" if partial else ""),
        t=ch["t"], position=ch["position"], goal=ch["goal"],
        speed=ch.get("present_velocity", np.zeros(n)), torque_enable=np.ones(n, bool),
        input_volts=np.where(np.isfinite(vin), vin, 0.0), kp_fw=float(gain), vin=0.0,
        mass=load.mass, length=load.length, inertia=load.inertia, servo_model=table.name,
        trajectory="square_wave", servo_id=servo_id,
        extra={k: v for k, v in ch.items() if k in ("present_current",)},
        position_quantum=float(table["present_position"].scale),
    )
    rec.extra["amplitude_rad"] = np.full(n, float(amp))
    return rec
