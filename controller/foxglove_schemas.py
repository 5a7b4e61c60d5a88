"""Foxglove's well-known message schemas (JSON Schema encoding) and the robot's frames.

Foxglove Studio renders these without configuration: ``foxglove.Log`` in
its Log panel, ``foxglove.FrameTransforms`` in the 3D panel (with the URDF
the robot description gives).  The schemas follow Foxglove's published
definitions (``foxglove/schemas``); only the fields we fill are required.

:class:`UrdfFrames` turns joint positions into the parent -> child
transforms of the URDF's movable joints, as ``robot_state_publisher`` does
in ROS: the 3D panel composes them with the URDF's fixed joints itself.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

__all__ = ["LOG_SCHEMA", "FRAME_TRANSFORMS_SCHEMA", "STRING_SCHEMA", "LOG_LEVEL", "log_message",
           "UrdfFrames", "timestamp"]

_TIME = {"type": "object", "properties": {"sec": {"type": "integer"}, "nsec": {"type": "integer"}}}
_VEC3 = {"type": "object", "properties": {k: {"type": "number"} for k in "xyz"}}
_QUAT = {"type": "object", "properties": {k: {"type": "number"} for k in "xyzw"}}

LOG_SCHEMA = {
    "title": "foxglove.Log", "type": "object",
    "properties": {
        "timestamp": _TIME,
        "level": {"type": "integer", "description": "0 UNKNOWN, 1 DEBUG, 2 INFO, 3 WARNING, 4 ERROR, 5 FATAL"},
        "message": {"type": "string"}, "name": {"type": "string"},
        "file": {"type": "string"}, "line": {"type": "integer"},
    },
}
FRAME_TRANSFORMS_SCHEMA = {
    "title": "foxglove.FrameTransforms", "type": "object",
    "properties": {"transforms": {"type": "array", "items": {
        "type": "object", "properties": {
            "timestamp": _TIME, "parent_frame_id": {"type": "string"}, "child_frame_id": {"type": "string"},
            "translation": _VEC3, "rotation": _QUAT}}}},
}
STRING_SCHEMA = {"title": "std_msgs/String", "type": "object", "properties": {"data": {"type": "string"}}}

#: event kind -> foxglove.Log level
LOG_LEVEL = {"fault": 4, "fall": 4, "error": 4, "warning": 3, "warn": 3, "comm": 3, "hardware_error": 4,
             "collapse": 3}


def timestamp(t_ns: int) -> dict:
    """``{"sec", "nsec"}`` of a time in ns."""
    return {"sec": int(t_ns // 1_000_000_000), "nsec": int(t_ns % 1_000_000_000)}


def log_message(event: dict, t_ns: int) -> dict:
    """A daemon event (``kind``, ``message``, ``tick``) as a ``foxglove.Log`` message."""
    kind = str(event.get("kind", "event"))
    level = LOG_LEVEL.get(kind, 2)
    return {"timestamp": timestamp(t_ns), "level": level, "message": str(event.get("message", "")),
            "name": f"servoloop.{kind}", "file": "", "line": int(event.get("tick") or 0)}


def _rpy_quat(r: float, p: float, y: float) -> np.ndarray:
    cr, sr, cp, sp, cy, sy = (math.cos(r / 2), math.sin(r / 2), math.cos(p / 2), math.sin(p / 2),
                              math.cos(y / 2), math.sin(y / 2))
    return np.array([sr * cp * cy - cr * sp * sy, cr * sp * cy + sr * cp * sy,
                     cr * cp * sy - sr * sp * cy, cr * cp * cy + sr * sp * sy])   # x y z w


def _qmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return np.array([aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz])


def _qrot(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    u, w = q[:3], q[3]
    return v + 2.0 * np.cross(u, np.cross(u, v) + w * v)


class UrdfFrames:
    """The movable joints of a URDF: ``transforms(positions)`` -> parent/child poses.

    Parameters
    ----------
    urdf : path of the URDF
    joint_names : the telemetry's joint order (names of URDF joints; others are skipped)
    """

    def __init__(self, urdf, joint_names):
        root = ET.parse(str(urdf)).getroot()
        self.text = Path(urdf).read_text()
        self.joints = []          # (column index, parent, child, origin p, origin q, axis, type)
        index = {j: i for i, j in enumerate(joint_names)}
        for j in root.findall("joint"):
            kind = j.get("type")
            if kind not in ("revolute", "continuous", "prismatic") or j.get("name") not in index:
                continue
            o = j.find("origin")
            xyz = np.array([float(v) for v in (o.get("xyz", "0 0 0") if o is not None else "0 0 0").split()])
            rpy = [float(v) for v in (o.get("rpy", "0 0 0") if o is not None else "0 0 0").split()]
            a = j.find("axis")
            axis = np.array([float(v) for v in (a.get("xyz") if a is not None else "1 0 0").split()])
            axis /= np.linalg.norm(axis)
            self.joints.append((index[j.get("name")], j.find("parent").get("link"), j.find("child").get("link"),
                                xyz, _rpy_quat(*rpy), axis, kind))

    def transforms(self, positions, t_ns: int) -> list[dict]:
        """``foxglove.FrameTransform`` dicts for joint ``positions`` (rad or m, telemetry order)."""
        out = []
        stamp = timestamp(t_ns)
        for col, parent, child, p, q0, axis, kind in self.joints:
            x = float(positions[col])
            if not math.isfinite(x):
                continue
            if kind == "prismatic":
                trans, rot = p + _qrot(q0, axis * x), q0
            else:
                half = 0.5 * x
                trans, rot = p, _qmul(q0, np.array([*(axis * math.sin(half)), math.cos(half)]))
            out.append({"timestamp": stamp, "parent_frame_id": parent, "child_frame_id": child,
                        "translation": dict(zip("xyz", map(float, trans), strict=True)),
                        "rotation": dict(zip("xyzw", map(float, rot), strict=True))})
        return out
