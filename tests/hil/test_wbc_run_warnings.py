"""What the run summary says about a robot ``wbc`` cannot serve well, and only then (issue 11).

The reviewer's trial (tests/hil/test_foreign_quadruped.py) found runs that sagged or fell
with nothing in the summary: servos weaker than the torques asked, and a biped without an
IMU, whose lean leg odometry cannot see (it takes the base level over fewer than 3 feet).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import yaml

from servoloop.robots import robot_dir

pytestmark = pytest.mark.hil


def _run(*args: str, done: bool = True) -> dict:
    r = subprocess.run([sys.executable, "-m", "servoloop", "run", "--lockstep", *args, "--json", "--quiet",
                        "--telemetry", "none", "--socket", "none"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode in ((0,) if done else (0, 1)), r.stderr
    s = json.loads(r.stdout.strip().splitlines()[-1])
    if done:
        assert s["state"] == "done" and not s["faults"], s["faults"]
    return s


def test_the_builtin_quadruped_gets_no_stall_torque_warning():
    """The warning is about the servos, not every run: the built-in quadruped (2.5 kg on
    XM430-W350) balancing with ``wbc`` asks less than their 4.1 N m."""
    s = _run("--controller", "wbc", "--duration", "2")
    assert not [w for w in s["warnings"] if "stall torque" in w or "imu" in w], s["warnings"]


@pytest.mark.parametrize("imu", [True, False])
def test_a_biped_without_an_imu_is_told_its_lean_is_not_observed(tmp_path, imu):
    """The built-in humanoid (two feet) with its IMU: no warning; its config without ``imu``:
    the summary says the tilt is not observed and what to add."""
    for f in ("humanoid.urdf", "humanoid.yaml"):
        shutil.copy(robot_dir("humanoid") / f, tmp_path / f)
    doc = yaml.safe_load((tmp_path / "humanoid.yaml").read_text())
    if not imu:
        del doc["imu"]
    (tmp_path / "humanoid.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    s = _run("--config", str(tmp_path / "humanoid.yaml"), "--duration", "0.3")
    said = [w for w in s["warnings"] if "no imu" in w]
    if imu:
        assert not said, s["warnings"]
    else:
        assert len(said) == 1 and "2 feet" in said[0] and "imu:" in said[0], s["warnings"]


def test_trot_on_a_biped_is_refused_naming_its_feet_and_walk():
    """A trot swings diagonal pairs: on two feet it fell and stopped on a joint-limit fault."""
    r = subprocess.run([sys.executable, "-m", "servoloop", "run", "--robot", "humanoid", "--lockstep",
                        "--controller", "trot", "--duration", "1", "--quiet", "--telemetry", "none",
                        "--socket", "none"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr
    assert "needs 4" in r.stderr and "l_foot, r_foot" in r.stderr and "walk" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("impulse", [0.0, 2.0])
def test_a_fall_is_said_in_the_summary(tmp_path, impulse):
    """A shove at the pelvis through the bus (N s): the built-in humanoid takes none standing and
    falls over at 2 N s (the fall is a fault of its own: ``safety.on_fall``); a run that ended
    with the robot on the floor did not say it had fallen (the estimate's rpy was the only sign). The torques asked once it is down are not counted
    against the servos' stall torque."""
    for f in ("humanoid.urdf", "humanoid.yaml"):
        shutil.copy(robot_dir("humanoid") / f, tmp_path / f)
    doc = yaml.safe_load((tmp_path / "humanoid.yaml").read_text())
    if impulse:
        doc["simulation"]["pushes"] = [{"t_s": 2.0, "impulse": [impulse, 0.0, 0.0]}]
    (tmp_path / "humanoid.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    s = _run("--config", str(tmp_path / "humanoid.yaml"), "--duration", "3", done=not impulse)
    fell = [w for w in s["warnings"] if "the robot fell" in w]
    if not impulse:
        assert not fell and max(abs(a) for a in s["simulation"]["base_rpy"][:2]) < 0.1, s["warnings"]
        assert s["fall"] is None
        return
    # the loop's fall detector (controller/fall.py) reacts: safety.on_fall damp by default
    assert s["state"] == "fault" and [f["kind"] for f in s["fault_details"]] == ["fall"], s["faults"]
    assert s["fall"]["reaction"] == "damp" and s["fall"]["tilt_rad"] > 0.4
    assert "the robot fell" in s["faults"][0] and not fell, s["warnings"]     # said once
    assert max(abs(a) for a in s["simulation"]["base_rpy"][:2]) > 0.8      # it is down
    assert not [w for w in s["warnings"] if "stall torque" in w], s["warnings"]
