"""``servoloop config check`` on a robot from the web: it finds what ``run`` would refuse.

The fixture is ROBOTIS's OpenManipulator-X URDF as published (package:// meshes that are
not there, a <mimic> gripper finger, a fixed end-effector link) with a config written from
docs/own-robot.md.  Before, ``config check`` said "ok" for a config whose URDF had a mimic
joint, named a joint the URDF does not have, or did not exist, and ``run`` then refused it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from servoloop.cli import main

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "open_manipulator_x"


@pytest.fixture
def omx(tmp_path):
    for f in FIXTURE.iterdir():
        shutil.copy(f, tmp_path / f.name)
    return tmp_path / "omx.yaml"


def _edit(path: Path, old: str, new: str) -> Path:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    return path


def _check(path, capsys):
    rc = main(["config", "check", str(path)])
    out = capsys.readouterr()
    return rc, out.out + out.err


def test_a_mimic_joint_is_found_by_check_with_the_key_to_set(omx, capsys):
    rc, text = _check(omx, capsys)
    assert rc == 0, text                      # the published arm, as the config gives it
    assert "ok (5 servos" in text
    _edit(omx, ", mimic: independent}", "}")
    rc, text = _check(omx, capsys)
    assert rc == 2
    assert "gripper_right_joint" in text and "mimic: independent" in text
    assert "Traceback" not in text


def test_a_servo_joint_missing_from_the_urdf_is_named_with_its_line(omx, capsys):
    _edit(omx, "joint: joint4,", "joint: joint_4,")
    rc, text = _check(omx, capsys)
    assert rc == 2
    assert "servos[3].joint 'joint_4'" in text and "line 11" in text
    assert "joint4" in text.split("without a servo")[1]     # the one the user meant


def test_a_missing_urdf_is_named(omx, capsys):
    (omx.parent / "open_manipulator_x.urdf").unlink()
    rc, text = _check(omx, capsys)
    assert rc == 2
    assert "model.urdf" in text and "open_manipulator_x.urdf not found" in text


def test_a_contact_on_a_link_the_urdf_lacks_is_named(omx, capsys):
    with omx.open("a") as f:
        f.write("simulation:\n  contacts:\n    - {link: link_9, shape: sphere, size: [0.01]}\n")
    rc, text = _check(omx, capsys)
    assert rc == 2
    assert "simulation.contacts[0].link 'link_9'" in text


def test_masses_in_grams_are_a_warning_naming_the_joint(omx, capsys):
    rc, text = _check(omx, capsys)
    assert rc == 0 and "warning" not in text          # the published masses (kg) hold easily
    urdf = omx.parent / "open_manipulator_x.urdf"
    _edit(urdf, '<mass value="1.3850917e-01"/>', '<mass value="138.50917"/>')   # link3 in g
    rc, text = _check(omx, capsys)
    assert rc == 0, text                              # a warning, not a refusal
    warned = [line for line in text.splitlines() if "warning" in line]
    assert [w.split("'")[1] for w in warned] == ["joint2"]      # link3 hangs on joint2 only
    assert "XM430-W350 stalls at 4.1 N m" in warned[0] and "kg (not g)" in warned[0]


def test_run_on_the_simulated_robot_says_it_as_check_does(omx, capsys):
    # before: "cannot simulate the robot: RobotPlant: joints ['joint_4'] not in /.../x.urdf"
    _edit(omx, "joint: joint4,", "joint: joint_4,")
    rc = main(["run", "--config", str(omx), "--lockstep", "--duration", "0.1",
               "--telemetry", "none", "--socket", "none"])
    text = capsys.readouterr().err
    assert rc == 2
    assert "line 11: servos[3].joint 'joint_4'" in text and "RobotPlant" not in text
