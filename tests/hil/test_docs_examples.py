"""The examples in docs/ run as written (a doc whose example fails is worse than none)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from servoloop.robots import robot_dir

pytestmark = pytest.mark.hil

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _blocks(doc: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", (DOCS / doc).read_text(), flags=re.S)


def test_the_fifteen_line_controller_sways_the_arm(tmp_path):
    from servoloop.controller.config import load_config
    from servoloop.controller.daemon import Daemon
    from servoloop.controller.runtime import make_lockstep

    (tmp_path / "my_controllers.py").write_text(_blocks("own-controller.md", "python")[0])
    for f in ("arm.urdf", "arm.yaml"):
        shutil.copy(robot_dir("arm") / f, tmp_path / f)
    doc = yaml.safe_load((tmp_path / "arm.yaml").read_text())
    line = yaml.safe_load(_blocks("own-controller.md", "yaml")[0])["controller"]
    joint = doc["servos"][1]["joint"]
    doc["controller"] = {"name": line["name"], "params": {"joint": joint, "amplitude": 0.3}}
    (tmp_path / "arm.yaml").write_text(yaml.safe_dump(doc))
    cfg = load_config(tmp_path / "arm.yaml")        # the module is found next to the config
    lock = make_lockstep(cfg)
    seen = []
    advance = lock.clock.on_advance

    def on_advance(dt):
        advance(dt)
        if lock.virtual.time_s > cfg.startup.ramp_s + 0.5:
            seen.append(lock.virtual.engine.position.copy())

    lock.clock.on_advance = on_advance
    try:
        summary = Daemon(cfg, lock.bus, lock.clock, telemetry_path=None, socket_path=None).run(
            cfg.startup.ramp_s + 5.0)
    finally:
        lock.close()
    assert summary["state"] == "done", summary["faults"]
    q = np.array(seen)
    i = [s["joint"] for s in doc["servos"]].index(joint)
    swing = q[:, i].max() - q[:, i].min()
    assert swing == pytest.approx(0.6, rel=0.15)            # 2 x the 0.3 rad amplitude
    others = np.delete(q, i, axis=1)
    assert (others.max(0) - others.min(0)).max() < 0.05      # the other joints hold


def test_the_trajectory_example_plays_on_an_arm_from_the_web(tmp_path):
    """docs/own-robot.md 6c on ROBOTIS's OpenManipulator-X (tests/fixtures): the CSV and
    the controller line as written, seconds of lockstep through the virtual bus."""
    from servoloop.controller.config import load_config
    from servoloop.controller.daemon import Daemon
    from servoloop.controller.runtime import make_lockstep

    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "open_manipulator_x"
    for f in fixture.iterdir():
        shutil.copy(f, tmp_path / f.name)
    (tmp_path / "wave.csv").write_text(_blocks("own-robot.md", "csv")[0])
    line = next(yaml.safe_load(b) for b in _blocks("own-robot.md", "yaml") if "name: trajectory" in b)
    doc = yaml.safe_load((tmp_path / "omx.yaml").read_text())
    doc["controller"] = line["controller"]
    (tmp_path / "omx.yaml").write_text(yaml.safe_dump(doc))
    cfg = load_config(tmp_path / "omx.yaml")
    lock = make_lockstep(cfg)
    seen = []
    advance = lock.clock.on_advance

    def on_advance(dt):
        advance(dt)
        seen.append(lock.virtual.engine.position[:3].copy())

    lock.clock.on_advance = on_advance
    try:
        summary = Daemon(cfg, lock.bus, lock.clock, telemetry_path=None, socket_path=None).run(
            cfg.startup.ramp_s + 4.0)
    finally:
        lock.close()
    assert summary["state"] == "done", summary["faults"]
    q = np.array(seen)                                  # joint1..3, bus order = the config's
    assert q[:, 0].max() == pytest.approx(0.8, abs=0.05)          # the keyframe at 1.5 s
    assert q[:, 1].min() == pytest.approx(-0.6, abs=0.05)
    # the last one, held (the shoulder sags ~30 mrad under the arm: a P-only position servo)
    assert q[-1] == pytest.approx([-0.8, 0.3, -0.2], abs=0.05)
