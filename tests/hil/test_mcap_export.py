"""A real run's telemetry exported to MCAP opens in Foxglove: read back with the mcap library."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from mcap.reader import make_reader

pytestmark = pytest.mark.hil

YEAR_2020_NS = 1_577_836_800 * 10**9


def test_arm_run_exports_logs_frames_and_wall_clock_times(tmp_path):
    sltl = tmp_path / "arm.sltl"
    r = subprocess.run([sys.executable, "-m", "servoloop", "run", "--robot", "arm", "--lockstep",
                        "--duration", "2", "--quiet", "--telemetry", str(sltl), "--socket", "none"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "arm.mcap"
    r = subprocess.run([sys.executable, "-m", "servoloop", "log", "export", str(sltl), "--mcap", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    by_schema: dict[str, list] = {}
    times = []
    with open(out, "rb") as f:
        reader = make_reader(f)
        meta = {m.name: m.metadata for m in reader.iter_metadata()}
        for schema, channel, message in reader.iter_messages():
            by_schema.setdefault(schema.name, []).append((channel.topic, json.loads(message.data)))
            times.append(message.log_time)
    assert min(times) > YEAR_2020_NS                              # wall clock, not 1970
    events = by_schema["foxglove.Log"]
    from servoloop.controller.telemetry_format import read_telemetry

    tel = read_telemetry(sltl)
    assert len(events) == len(tel.events) > 0                     # one Log per event
    assert all(1 <= e["level"] <= 5 and e["message"] for _, e in events)
    tf = by_schema["foxglove.FrameTransforms"]
    frames = {(t["parent_frame_id"], t["child_frame_id"]) for _, m in tf for t in m["transforms"]}
    assert len(frames) == 6 and ("base_link", "shoulder_link") in frames   # one per joint, URDF links
    t = tel.column("t_s")
    assert abs(len(tf) - (t.max() - t.min()) / 0.02) <= 2         # /tf at 50 Hz over the run
    assert by_schema["std_msgs/String"][0][0] == "/robot_description"
    assert "<robot" in by_schema["std_msgs/String"][0][1]["data"]
    assert len(by_schema["servoloop.Tick"]) == tel.data.shape[0]
    assert json.loads(meta["servoloop"]["joint_names"]) == tel.header["joint_names"]
