"""Telemetry export: CSV (one row per tick) and MCAP for Foxglove.

MCAP: log times are wall-clock ns since the Unix epoch (the telemetry
header's creation time plus each tick's time); ticks go to
``/servoloop/telemetry``; events are ``foxglove.Log`` messages on
``/servoloop/log``; with a URDF (the config's), the robot description is
on ``/robot_description`` and the joints' frames on ``/tf`` as
``foxglove.FrameTransforms`` (at most 50 Hz), so Foxglove's 3D panel shows
the robot move; the config and the header are MCAP metadata.

Both are written to a temporary file and renamed, so a failed export never
leaves a half file behind under the requested name.
"""

from __future__ import annotations

import csv
import json
import math
import os
from pathlib import Path

from servoloop.controller.telemetry_format import Telemetry

__all__ = ["export_csv", "export_mcap"]


def _atomic(path) -> tuple[Path, Path]:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    return p, p.with_name(f".{p.name}.tmp{os.getpid()}")


def export_csv(tel: Telemetry, path) -> int:
    """Write every row as CSV (header = column names; NaN as empty).

    Returns
    -------
    int
        Rows written.
    """
    out, tmp = _atomic(path)
    ints = [c in _INT_COLUMNS or c.startswith("hw_error.") for c in tel.columns]
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(tel.columns)
        for row in tel.data:
            w.writerow(["" if math.isnan(v) else (str(int(v)) if is_int else repr(float(v)))
                        for v, is_int in zip(row, ints, strict=True)])
    os.replace(tmp, out)
    return int(tel.data.shape[0])


_TICK_SCHEMA = {
    "type": "object",
    "title": "servoloop.Tick",
    "properties": {
        "tick": {"type": "integer"}, "t_s": {"type": "number"},
        "late_us": {"type": "number"}, "period_us": {"type": "number"},
        "cost_us": {"type": "number"}, "state": {"type": "integer"},
        "missed": {"type": "integer"}, "comm_errors": {"type": "integer"},
        "read_ok": {"type": "boolean"}, "bus_us": {"type": "number"},
        "missed_compute": {"type": "integer"}, "missed_bus": {"type": "integer"},
        "missed_wakeup": {"type": "integer"}, "stale_reads": {"type": "integer"},
        "joints": {"type": "object", "description": "per field (q rad, dq rad/s, current, goal rad, "
                   "tau_ff N*m, temperature degC, voltage V, hw_error bits): {joint: value}"},
    },
}
_INT_COLUMNS = frozenset({"tick", "state", "missed", "comm_errors", "read_ok", "missed_compute",
                          "missed_bus", "missed_wakeup", "stale_reads"})
_TF_PERIOD_S = 0.02            # /tf at 50 Hz: enough for a 3D view, small files


def _num(v: float):
    return None if math.isnan(v) else float(v)


def _urdf_of(tel: Telemetry) -> Path | None:
    """The URDF the run used: the header's, else its config's (None when neither resolves)."""
    urdf = tel.header.get("urdf")
    if urdf and Path(urdf).exists():
        return Path(urdf)
    cfg_path = tel.header.get("config")
    if cfg_path and Path(cfg_path).exists():
        try:
            from servoloop.controller.config import load_config

            p = load_config(cfg_path).urdf_path()
            return p if p is not None and p.exists() else None
        except Exception:  # noqa: BLE001 - an unreadable config just means no 3D view
            return None
    robot = tel.header.get("robot")
    from servoloop.robots import NAMES, urdf_path

    return urdf_path(robot) if robot in NAMES else None


def _metadata(tel: Telemetry) -> dict[str, str]:
    meta = {k: json.dumps(v) if not isinstance(v, str) else v for k, v in tel.header.items()
            if k not in ("columns", "units", "lower", "upper")}
    cfg_path = tel.header.get("config")
    if cfg_path and Path(cfg_path).exists():
        meta["config_yaml"] = Path(cfg_path).read_text()
    return meta


def export_mcap(tel: Telemetry, path) -> int:
    """Write the run as MCAP for Foxglove (see the module docstring).

    Returns
    -------
    int
        Messages written.

    Raises
    ------
    ImportError
        The ``mcap`` package is not installed (``pip install servoloop[telemetry]``).
    """
    from mcap.writer import Writer

    from servoloop.controller import foxglove_schemas as F
    from servoloop.controller.telemetry import JOINT_FIELDS, SCALAR_COLUMNS

    joints = tel.header.get("joint_names", [])
    col = {c: i for i, c in enumerate(tel.columns)}
    start_ns = int(round(float(tel.header.get("created_unix", 0.0)) * 1e9))
    urdf = _urdf_of(tel)
    frames = F.UrdfFrames(urdf, joints) if urdf is not None else None
    q_cols = [col[f"q.{j}"] for j in joints]
    # files from before the monitor columns lack them
    fields = [f for f in JOINT_FIELDS if all(f"{f}.{j}" in col for j in joints)]
    out, tmp = _atomic(path)
    count = 0

    def when(t_s) -> int:
        ok = isinstance(t_s, (int, float)) and math.isfinite(t_s) and t_s > 0
        return start_ns + (int(round(t_s * 1e9)) if ok else 0)

    with open(tmp, "wb") as f:
        w = Writer(f)
        w.start(profile="", library="servoloop")

        def channel(topic, schema):
            sid = w.register_schema(name=schema["title"], encoding="jsonschema", data=json.dumps(schema).encode())
            return w.register_channel(topic=topic, message_encoding="json", schema_id=sid)

        c_tick = channel("/servoloop/telemetry", _TICK_SCHEMA)
        c_log = channel("/servoloop/log", F.LOG_SCHEMA)
        if frames is not None:
            c_tf = channel("/tf", F.FRAME_TRANSFORMS_SCHEMA)
            c_desc = channel("/robot_description", F.STRING_SCHEMA)
            w.add_message(channel_id=c_desc, log_time=start_ns, publish_time=start_ns, sequence=0,
                          data=json.dumps({"data": frames.text}).encode())
            count += 1
        ints = _INT_COLUMNS - {"read_ok"}
        next_tf = -math.inf
        for seq, row in enumerate(tel.data):
            msg = {}
            for name in SCALAR_COLUMNS:
                if name not in col:  # a file from before the column existed
                    continue
                v = row[col[name]]
                if name == "read_ok":
                    msg[name] = bool(v == 1.0)
                elif name in ints:
                    msg[name] = None if math.isnan(v) else int(v)
                else:
                    msg[name] = _num(v)
            msg["joints"] = {fld: {j: _num(row[col[f"{fld}.{j}"]]) for j in joints} for fld in fields}
            t_s = row[col["t_s"]]
            t_ns = when(float(t_s))
            w.add_message(channel_id=c_tick, log_time=t_ns, publish_time=t_ns, sequence=seq,
                          data=json.dumps(msg).encode())
            count += 1
            if frames is not None and math.isfinite(t_s) and t_s >= next_tf:
                next_tf = t_s + _TF_PERIOD_S
                tf = frames.transforms(row[q_cols], t_ns)
                w.add_message(channel_id=c_tf, log_time=t_ns, publish_time=t_ns, sequence=seq,
                              data=json.dumps({"transforms": tf}).encode())
                count += 1
        for seq, ev in enumerate(tel.events):
            t_ns = when(ev.get("t_s"))
            w.add_message(channel_id=c_log, log_time=t_ns, publish_time=t_ns, sequence=seq,
                          data=json.dumps(F.log_message(ev, t_ns)).encode())
            count += 1
        w.add_metadata("servoloop", _metadata(tel))
        w.finish()
    os.replace(tmp, out)
    return count
