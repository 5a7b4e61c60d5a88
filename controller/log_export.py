"""Telemetry export: CSV (one row per tick) and MCAP (JSON messages, Foxglove-readable).

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
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(tel.columns)
        for row in tel.data:
            w.writerow(["" if math.isnan(v) else repr(float(v)) for v in row])
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
        "read_ok": {"type": "boolean"},
        "joints": {"type": "object", "description": "per field (q rad, dq rad/s, current, goal rad, "
                   "tau_ff N*m): {joint: value}"},
    },
}
_EVENT_SCHEMA = {"type": "object", "title": "servoloop.Event",
                 "properties": {"tick": {"type": "integer"}, "t_s": {"type": "number"},
                                "kind": {"type": "string"}, "message": {"type": "string"}}}


def _num(v: float):
    return None if math.isnan(v) else float(v)


def export_mcap(tel: Telemetry, path) -> int:
    """Write ticks to ``/servoloop/telemetry`` and events to ``/servoloop/events`` (JSON).

    Returns
    -------
    int
        Messages written.

    Raises
    ------
    ImportError
        The ``mcap`` package is not installed.
    """
    from mcap.writer import Writer

    from servoloop.controller.telemetry import JOINT_FIELDS, SCALAR_COLUMNS

    joints = tel.header.get("joint_names", [])
    col = {c: i for i, c in enumerate(tel.columns)}
    out, tmp = _atomic(path)
    count = 0
    with open(tmp, "wb") as f:
        w = Writer(f)
        w.start(profile="", library="servoloop")
        s_tick = w.register_schema(name="servoloop.Tick", encoding="jsonschema",
                                   data=json.dumps(_TICK_SCHEMA).encode())
        s_evt = w.register_schema(name="servoloop.Event", encoding="jsonschema",
                                  data=json.dumps(_EVENT_SCHEMA).encode())
        c_tick = w.register_channel(topic="/servoloop/telemetry", message_encoding="json", schema_id=s_tick)
        c_evt = w.register_channel(topic="/servoloop/events", message_encoding="json", schema_id=s_evt)
        ints = {"tick", "state", "missed", "comm_errors"}
        for seq, row in enumerate(tel.data):
            msg = {}
            for name in SCALAR_COLUMNS:
                v = row[col[name]]
                if name == "read_ok":
                    msg[name] = bool(v == 1.0)
                elif name in ints:
                    msg[name] = None if math.isnan(v) else int(v)
                else:
                    msg[name] = _num(v)
            msg["joints"] = {fld: {j: _num(row[col[f"{fld}.{j}"]]) for j in joints} for fld in JOINT_FIELDS}
            t_ns = max(0, int(round(row[col["t_s"]] * 1e9))) if not math.isnan(row[col["t_s"]]) else 0
            w.add_message(channel_id=c_tick, log_time=t_ns, publish_time=t_ns, sequence=seq,
                          data=json.dumps(msg).encode())
            count += 1
        for seq, ev in enumerate(tel.events):
            t = ev.get("t_s")
            t_ns = int(round(t * 1e9)) if isinstance(t, (int, float)) and math.isfinite(t) and t > 0 else 0
            w.add_message(channel_id=c_evt, log_time=t_ns, publish_time=t_ns, sequence=seq,
                          data=json.dumps(ev).encode())
            count += 1
        w.finish()
    os.replace(tmp, out)
    return count
