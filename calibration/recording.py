"""Bench recordings: load (BAM JSON or ours), check, resample, save.

A recording is one run of one servo driving a known load: time, goal,
measured position and speed, torque enable and the supply voltage, plus the
firmware position gain and the load.  Two file formats are read:

* BAM's JSON log as-is (Rhoban/bam, ``entries`` list, ``mass``, ``length``,
  ``kp``, ``vin``); the files in ``shared/data/bam-xl330`` are such logs.
* ours: the same fields plus ``format``, ``servo_model`` and ``servo_id``,
  as JSON (``.json``) or NumPy (``.npz``: one array per channel and a
  ``meta`` JSON string).

Resampling follows BAM's ``process.py`` exactly (linear interpolation on
``arange(0, t_last, dt)``, torque enable thresholded at 0.5), so that MAE
figures are comparable with BAM's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from servoloop.calibration.errors import (
    RecordingFormatError,
    RecordingGapError,
    RecordingNaNError,
    RecordingTimeError,
    RecordingTooShortError,
    RecordingUnexcitedError,
)

__all__ = [
    "Recording",
    "FORMAT_TAG",
    "GRAVITY",
    "load_recording",
    "save_recording",
    "resample",
    "check_recording",
]

FORMAT_TAG = "servoloop-recording/1"
GRAVITY = 9.80665  # m/s^2, the value BAM uses
# A gap is a step larger than this many median periods (the rule).
GAP_FACTOR = 3.0
MIN_SAMPLES = 50
MIN_DURATION_S = 0.5
# XL330/X-series encoder tick; a tracking error below a few ticks carries no
# information about the load's dynamics.
_TICK_RAD = 2.0 * np.pi / 4096.0
MIN_TRACKING_ERROR_RAD = 4.0 * _TICK_RAD
MIN_GOAL_RANGE_RAD = 0.02

_CHANNELS = ("t", "position", "goal", "speed", "torque_enable", "input_volts")


@dataclass
class Recording:
    """One run of one servo on a known load.

    Attributes
    ----------
    path : str
        Where it was read from (used in every error message).
    t : ndarray (n,)
        Time [s], strictly increasing.
    position, goal : ndarray (n,)
        Measured and commanded position [rad].
    speed : ndarray (n,)
        Measured velocity [rad/s] (zeros when the servo does not report it).
    torque_enable : ndarray (n,) bool
        Torque on; off segments let the load fall freely.
    input_volts : ndarray (n,)
        Measured supply voltage [V] (``vin`` repeated when not recorded).
    kp_fw : float
        Firmware position P gain (register units).
    vin : float
        Nominal supply voltage [V].
    mass, length, arm_mass : float
        Pendulum point mass [kg] at ``length`` [m] and a uniform arm [kg].
    inertia : float or None
        Load inertia about the axis [kg m^2]; overrides the pendulum inertia
        (and then gravity is taken from mass/length, zero when absent).
    servo_model : str
        Servo model name ("xl330" for BAM logs).
    trajectory : str
        Name of the goal trajectory.
    dt : float or None
        Fixed sampling step [s] once resampled, else None.
    extra : dict
        Other channels (``load``, ``temp``, ``current`` ...), arrays (n,).
    position_quantum : float
        Encoder tick [rad] when the position is reported in whole ticks
        (recorded for the report; 0 when unknown).
    """

    path: str
    t: np.ndarray
    position: np.ndarray
    goal: np.ndarray
    speed: np.ndarray
    torque_enable: np.ndarray
    input_volts: np.ndarray
    kp_fw: float
    vin: float
    mass: float = 0.0
    length: float = 0.0
    arm_mass: float = 0.0
    inertia: float | None = None
    servo_model: str = "xl330"
    trajectory: str = ""
    servo_id: int | None = None
    dt: float | None = None
    extra: dict = field(default_factory=dict)
    position_quantum: float = 0.0

    @property
    def n(self) -> int:
        return int(self.t.shape[0])

    @property
    def name(self) -> str:
        return Path(self.path).name

    def load_inertia(self) -> float:
        """Inertia of the load about the servo axis [kg m^2] (BAM's Pendulum)."""
        if self.inertia is not None:
            return float(self.inertia)
        return self.mass * self.length**2 + (self.arm_mass / 3.0) * self.length**2

    def load_mgl(self) -> float:
        """Gravity torque amplitude [N m]: bias torque = -mgl * sin(q)."""
        return (self.mass + self.arm_mass / 2.0) * GRAVITY * self.length

    def meta(self) -> dict:
        """Scalar fields as a JSON-able dict (our file header)."""
        return {
            "format": FORMAT_TAG,
            "servo_model": self.servo_model,
            "servo_id": self.servo_id,
            "kp": self.kp_fw,
            "vin": self.vin,
            "mass": self.mass,
            "length": self.length,
            "arm_mass": self.arm_mass,
            "inertia": self.inertia,
            "trajectory": self.trajectory,
            "dt": self.dt,
            "position_quantum": self.position_quantum,
        }


def _require(data: dict, key: str, path) -> object:
    if key not in data:
        raise RecordingFormatError(path, f"missing key {key!r}")
    return data[key]


def _from_entries(data: dict, path) -> Recording:
    entries = _require(data, "entries", path)
    if not isinstance(entries, list) or not entries:
        raise RecordingFormatError(path, "'entries' must be a non-empty list")
    vin = float(data.get("vin", 7.4))

    def column(key, default=None):
        out = np.empty(len(entries))
        for i, e in enumerate(entries):
            if key in e:
                v = e[key]
            elif default is not None:
                v = default
            else:
                raise RecordingFormatError(path, f"missing key {key!r}", index=i)
            try:
                out[i] = float(v) if v is not None else np.nan
            except (TypeError, ValueError):
                raise RecordingFormatError(path, f"{key!r} is not a number: {v!r}", index=i) from None
        return out

    rec = Recording(
        path=str(path),
        t=column("timestamp"),
        position=column("position"),
        goal=column("goal_position"),
        speed=column("speed", 0.0),
        torque_enable=column("torque_enable", 1.0) > 0.5,
        input_volts=column("input_volts", vin),
        kp_fw=float(_require(data, "kp", path)),
        vin=vin,
        mass=float(data.get("mass", 0.0)),
        length=float(data.get("length", 0.0)),
        arm_mass=float(data.get("arm_mass", 0.0) or 0.0),
        inertia=None if data.get("inertia") is None else float(data["inertia"]),
        servo_model=str(data.get("servo_model", data.get("motor", "xl330"))),
        trajectory=str(data.get("trajectory", "")),
        servo_id=data.get("servo_id"),
        dt=None,
        position_quantum=float(data.get("position_quantum") or 0.0),
    )
    for key in ("load", "temp", "current"):
        if key in entries[0]:
            rec.extra[key] = column(key, np.nan)
    return rec


def _from_npz(path) -> Recording:
    with np.load(path, allow_pickle=False) as z:
        if "meta" not in z:
            raise RecordingFormatError(path, "missing array 'meta' (JSON header)")
        meta = json.loads(str(z["meta"]))
        arrays = {k: np.asarray(z[k], dtype=float) for k in z.files if k != "meta"}
    for key in ("t", "position", "goal", "torque_enable"):
        if key not in arrays:
            raise RecordingFormatError(path, f"missing array {key!r}")
    n = arrays["t"].shape[0]
    vin = float(meta.get("vin", 7.4))
    rec = Recording(
        path=str(path),
        t=arrays.pop("t"),
        position=arrays.pop("position"),
        goal=arrays.pop("goal"),
        speed=arrays.pop("speed", np.zeros(n)),
        torque_enable=arrays.pop("torque_enable") > 0.5,
        input_volts=arrays.pop("input_volts", np.full(n, vin)),
        kp_fw=float(_require(meta, "kp", path)),
        vin=vin,
        mass=float(meta.get("mass", 0.0)),
        length=float(meta.get("length", 0.0)),
        arm_mass=float(meta.get("arm_mass", 0.0) or 0.0),
        inertia=None if meta.get("inertia") is None else float(meta["inertia"]),
        servo_model=str(meta.get("servo_model", "xl330")),
        trajectory=str(meta.get("trajectory", "")),
        servo_id=meta.get("servo_id"),
        dt=meta.get("dt"),
        extra=arrays,
        position_quantum=float(meta.get("position_quantum") or 0.0),
    )
    for key in ("position", "goal", "speed", "input_volts"):
        if getattr(rec, key).shape != (n,):
            raise RecordingFormatError(path, f"array {key!r} has shape {getattr(rec, key).shape}, expected ({n},)")
    return rec


def load_recording(path, check: bool = True) -> Recording:
    """Read a recording (BAM JSON, our JSON or our NPZ).

    Parameters
    ----------
    path : str or Path
        The file.
    check : bool
        Run :func:`check_recording` (gaps, NaNs, time order, length,
        excitation) and raise on the first problem.

    Returns
    -------
    Recording
        Raw samples (not resampled).

    Raises
    ------
    RecordingError
        Subclass naming the file and, where it applies, the sample index.
    """
    path = Path(path)
    if not path.exists():
        raise RecordingFormatError(path, "no such file")
    if path.suffix == ".npz":
        rec = _from_npz(path)
    else:
        try:
            with open(path) as f:
                data = json.load(f)
        except json.JSONDecodeError as exc:
            raise RecordingFormatError(path, f"not valid JSON ({exc})") from None
        if not isinstance(data, dict):
            raise RecordingFormatError(path, "top level must be an object")
        rec = _from_entries(data, path)
        rec.dt = data.get("dt") if data.get("format") == FORMAT_TAG else None
    if rec.load_inertia() <= 0.0:
        raise RecordingFormatError(path, "no load: give mass and length (pendulum) or inertia")
    if check:
        check_recording(rec)
    return rec


def check_recording(rec: Recording) -> None:
    """Raise on the first defect: NaN, time order, gap, length, excitation.

    Raises
    ------
    RecordingNaNError, RecordingTimeError, RecordingGapError,
    RecordingTooShortError, RecordingUnexcitedError
    """
    # the bench's scalars: a NaN gain or supply voltage makes every simulation NaN
    for key, name in (("kp_fw", "kp"), ("vin", "vin"), ("mass", "mass"), ("length", "length"),
                      ("arm_mass", "arm_mass"), ("inertia", "inertia"),
                      ("position_quantum", "position_quantum")):
        v = getattr(rec, key)
        if v is not None and not np.isfinite(v):
            raise RecordingNaNError(rec.path, f"{name} is not finite ({v})")
    for key in ("t", "position", "goal", "speed", "input_volts"):
        bad = np.flatnonzero(~np.isfinite(getattr(rec, key)))
        if bad.size:
            raise RecordingNaNError(rec.path, f"{key} is not finite ({getattr(rec, key)[bad[0]]})", index=int(bad[0]))
    if rec.n < MIN_SAMPLES:
        raise RecordingTooShortError(rec.path, f"{rec.n} samples, need at least {MIN_SAMPLES}")
    dts = np.diff(rec.t)
    bad = np.flatnonzero(dts <= 0.0)
    if bad.size:
        i = int(bad[0]) + 1
        raise RecordingTimeError(rec.path, f"time does not increase ({rec.t[i - 1]:.6f} s then {rec.t[i]:.6f} s)", index=i)
    med = float(np.median(dts))
    bad = np.flatnonzero(dts > GAP_FACTOR * med)
    if bad.size:
        i = int(bad[0]) + 1
        raise RecordingGapError(
            rec.path,
            f"gap of {dts[i - 1] * 1e3:.1f} ms before this sample (median step {med * 1e3:.2f} ms, limit {GAP_FACTOR:g}x)",
            index=i,
        )
    duration = rec.t[-1] - rec.t[0]
    if duration < MIN_DURATION_S:
        raise RecordingTooShortError(rec.path, f"lasts {duration:.3f} s, need at least {MIN_DURATION_S} s")
    _check_excitation(rec)


def _check_excitation(rec: Recording) -> None:
    on = rec.torque_enable
    goal_range = float(np.ptp(rec.goal[on])) if on.any() else 0.0
    if goal_range < MIN_GOAL_RANGE_RAD and on.all():
        raise RecordingUnexcitedError(rec.path, f"the goal moves by {goal_range:.4f} rad only: nothing excites the dynamics")
    if on.any():
        err = np.abs(rec.position - rec.goal)[on]
        i = int(np.argmax(err))
        if err[i] < MIN_TRACKING_ERROR_RAD and on.all():
            raise RecordingUnexcitedError(
                rec.path,
                f"the tracking error never exceeds {err[i]:.4f} rad ({MIN_TRACKING_ERROR_RAD / _TICK_RAD:.0f} encoder ticks):"
                " the load is too light to excite the dynamics; use a heavier or longer pendulum",
            )


def resample(rec: Recording, dt: float = 0.005) -> Recording:
    """Resample to a fixed step exactly as BAM's ``process.py`` does.

    Samples at ``arange(0, t_last, dt)``, each channel linearly interpolated
    between the two bracketing raw samples (extrapolated from the first two
    before the first one), torque enable thresholded at 0.5.

    Parameters
    ----------
    rec : Recording
        Raw, checked recording.
    dt : float
        Step [s].

    Returns
    -------
    Recording
        New recording with ``dt`` set; ``t`` (m,).
    """
    ts = np.arange(0.0, rec.t[-1], dt)
    # BAM walks frame forward while t > t[frame+1]: the bracket is the first
    # raw interval whose right end is >= t.
    frame = np.searchsorted(rec.t, ts, side="left") - 1
    frame = np.clip(frame, 0, rec.n - 2)
    t1, t2 = rec.t[frame], rec.t[frame + 1]
    w = (ts - t1) / (t2 - t1)

    def interp(x):
        x = np.asarray(x, dtype=float)
        return x[frame] + (x[frame + 1] - x[frame]) * w

    return replace(
        rec,
        t=ts,
        position=interp(rec.position),
        goal=interp(rec.goal),
        speed=interp(rec.speed),
        torque_enable=interp(rec.torque_enable.astype(float)) > 0.5,
        input_volts=interp(rec.input_volts),
        extra={k: interp(v) for k, v in rec.extra.items()},
        dt=float(dt),
    )


def save_recording(rec: Recording, path) -> Path:
    """Write a recording in our format, atomically (tmp file + rename).

    ``.npz`` writes one array per channel plus ``meta``; anything else writes
    BAM-compatible JSON (``entries``) with our extra header fields, so BAM's
    own tools can read it too.

    Returns
    -------
    Path
        The written file.
    """
    from servoloop.calibration.report import atomic_path

    path = Path(path)
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        if path.suffix == ".npz":
            arrays = {k: getattr(rec, k) for k in _CHANNELS}
            arrays["torque_enable"] = rec.torque_enable.astype(np.uint8)
            arrays.update(rec.extra)
            np.savez(f, meta=np.array(json.dumps(rec.meta())), **arrays)
        else:
            f.write(json.dumps(_to_json(rec)).encode())
    return path


def _to_json(rec: Recording) -> dict:
    data = rec.meta()
    data["motor"] = rec.servo_model
    entries = []
    for i in range(rec.n):
        e = {
            "timestamp": float(rec.t[i]),
            "position": float(rec.position[i]),
            "goal_position": float(rec.goal[i]),
            "speed": float(rec.speed[i]),
            "torque_enable": bool(rec.torque_enable[i]),
            "input_volts": float(rec.input_volts[i]),
        }
        for k, v in rec.extra.items():
            e[k] = float(v[i])
        entries.append(e)
    data["entries"] = entries
    return data
