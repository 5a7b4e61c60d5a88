"""The daemon's own telemetry (``.sltl``) as a joint log for inertial identification.

A run's telemetry has per tick the joint position ``q.J`` (rad), velocity
``dq.J`` (rad/s) and effort ``current.J`` (A from ``present_current``, or
a fraction of stall torque from ``present_load``; joint sign).  The joint
torque is that effort times ``effort_nm_per_unit`` of the file's header
(the datasheet's stall torque / stall current, or the stall torque); a log
written before that field existed gets it from the servo models its header
or its config names.

Rows kept: the run state (startup ramp and shutdown left out) with a good
read; time is the loop time ``t_s``.  A row lost in between (a failed read,
a late tick) makes the time non-uniform and the identification refuses it,
naming the step: cut such a log or record again.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from servoloop.calibration.errors import RecordingFormatError

__all__ = ["is_sltl", "load_sltl_log"]


def is_sltl(path) -> bool:
    """True for a ``.sltl`` file (by its name or its first bytes)."""
    from servoloop.controller.telemetry_format import MAGIC

    p = Path(path)
    if p.suffix == ".sltl":
        return True
    try:
        with open(p, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def _torque_scale(tel, path) -> np.ndarray:
    """N*m per unit of each joint's ``current`` column (see the module docstring)."""
    header = tel.header
    scale = header.get("effort_nm_per_unit")
    if scale is None:
        models = header.get("servo_models")
        if models is None:
            models = _models_from_config(header)
        if models is None:
            raise RecordingFormatError(path, "the header names neither effort_nm_per_unit nor the servo "
                                       "models (nor a config that can be read): torque unknown")
        from servoloop.controller.telemetry import servo_header
        from servoloop.firmware_bridge.control_table import get_table

        class _Cfg:  # servo_header reads only the models of the servos
            servos = [type("S", (), {"model": m}) for m in models]

        scale = servo_header(_Cfg, [get_table(m) for m in models])["effort_nm_per_unit"]
    unknown = [j for j, k in zip(header.get("joint_names", []), scale, strict=False) if k is None]
    if unknown:
        raise RecordingFormatError(path, f"joints {unknown}: their servos report no current or load "
                                   "(the torque is unknown)")
    return np.asarray(scale, dtype=float)


def _models_from_config(header) -> list[str] | None:
    try:
        from servoloop.controller.config import builtin_config, load_config
        from servoloop.robots import NAMES

        src = header.get("config")
        if src and Path(src).exists():
            cfg = load_config(src)
        elif header.get("robot") in NAMES:
            cfg = builtin_config(header["robot"])
        else:
            return None
        return [s.model for s in cfg.servos]
    except Exception:  # noqa: BLE001 - an unreadable config means: not known
        return None


def load_sltl_log(path, joint_names=None):
    """``t, q, v, tau`` (SI, joints in ``joint_names`` order when given) of a telemetry file.

    Raises
    ------
    RecordingFormatError
        Not a readable telemetry file, no run-state rows, a joint of ``joint_names`` missing,
        or no way to turn the effort into torque; the message names the file.
    """
    from servoloop.controller.errors import TelemetryFormatError
    from servoloop.controller.lifecycle import State
    from servoloop.controller.telemetry_format import read_telemetry

    try:
        tel = read_telemetry(path)
    except TelemetryFormatError as exc:
        raise RecordingFormatError(path, str(exc)) from exc
    have = list(tel.header.get("joint_names", []))
    names = have if joint_names is None else list(joint_names)
    missing = [j for j in names if j not in have]
    if missing:
        raise RecordingFormatError(path, f"joints {missing} of the model are not in the log {have}")
    scale = _torque_scale(tel, path)
    keep = (tel.column("state") == int(State.RUN)) & (tel.column("read_ok") == 1.0)
    if not keep.any():
        raise RecordingFormatError(path, "no run-state rows with a good read")

    def block(field):
        return np.column_stack([tel.column(f"{field}.{j}")[keep] for j in names])

    order = [have.index(j) for j in names]
    t = tel.column("t_s")[keep]
    return t, block("q"), block("dq"), block("current") * scale[order]
