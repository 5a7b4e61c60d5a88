"""A robot description from the web, with meshes only, simulated from YAML alone.

Solo12 (example-robot-data, Open Dynamic Robot Initiative) collides with
STL meshes only.  Its config declares sphere feet (on the feet's fixed
links) and a trunk box under ``simulation.contacts``; with no plant named,
a config with a URDF runs on the contact simulator.  Through the daemon in
lockstep, the powered-off robot lies on the floor, startup stands it up
through a crouch, and it carries its weight level at the height its SRDF
gives (0.235 m).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.hil

SOLO = "cmeel.prefix/share/example-robot-data/robots/solo_description/robots/solo12.urdf"
LEGS = ("FL", "FR", "HL", "HR")


def _solo_urdf() -> Path:
    for key in ("purelib", "platlib"):
        p = Path(sysconfig.get_paths()[key]) / SOLO
        if p.exists():
            return p
    pytest.fail(f"example-robot-data's solo12.urdf not found ({SOLO}); it is in the test extra")


def _solo_config(folder: Path, contacts=True, imu=False) -> Path:
    shutil.copy(_solo_urdf(), folder / "solo12.urdf")     # the URDF alone: its meshes are not needed
    servos, pose, crouch = [], {}, {}
    for i, leg in enumerate(LEGS):
        s = 1 if leg[0] == "F" else -1       # SRDF "straight_standing": front 0.8/-1.6, hind -0.8/1.6
        for k, (joint, stand, low) in enumerate((("HAA", 0.0, 0.0), ("HFE", 0.8 * s, 1.4 * s),
                                                 ("KFE", -1.6 * s, -2.6 * s))):
            name = f"{leg}_{joint}"
            servos.append({"id": 1 + 3 * i + k, "model": "XM430-W350", "joint": name})
            pose[name], crouch[name] = stand, low
    cfg = {"robot": "solo12", "model": {"urdf": "solo12.urdf", "floating_base": True},
           "bus": {"baud": 4_000_000}, "servos": servos,
           "controller": {"name": "hold", "params": {"pose": pose}},
           "startup": {"ramp_s": 2.0, "via": [crouch]}}
    if contacts:
        cfg["simulation"] = {"contacts": [{"link": f"{leg}_FOOT", "shape": "sphere", "size": [0.016]}
                                          for leg in LEGS]
                             + [{"link": "base_link", "shape": "box", "size": [0.36, 0.2, 0.06]}]}
    if imu:
        cfg["imu"] = {"id": 200, "model": "OpenCR"}
    path = folder / "solo.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def test_a_meshes_only_urdf_stands_up_from_yaml_alone(tmp_path):
    from servoloop.controller.config import load_config
    from servoloop.controller.daemon import Daemon
    from servoloop.controller.runtime import make_lockstep

    cfg = load_config(_solo_config(tmp_path))
    lock = make_lockstep(cfg)
    try:
        sim = lock.virtual.engine.plant.sim
        z_lying = float(sim.q[2])
        seen = {}
        advance = lock.clock.on_advance

        def on_advance(dt):
            advance(dt)
            if not seen and lock.virtual.time_s >= 3.0:       # after the 2 s ramp, before shutdown
                seen.update(state=lock.virtual.engine.plant.base_state(),
                            fz=float(sim.contact_forces[:, 2].sum()), weight=sim.model.total_mass * 9.81)

        lock.clock.on_advance = on_advance
        summary = Daemon(cfg, lock.bus, lock.clock, telemetry_path=None, socket_path=None).run(3.5)
    finally:
        lock.close()
    assert summary["state"] == "done", summary["faults"]
    assert z_lying < 0.06                                        # found lying on its trunk
    assert seen["state"]["base_position_in_world"][2] == pytest.approx(0.235, abs=0.012)
    assert max(abs(a) for a in seen["state"]["base_rpy"][:2]) < 0.03   # level
    assert seen["fz"] == pytest.approx(seen["weight"], rel=0.02)      # on its feet


def test_the_cli_reports_the_simulated_base(tmp_path):
    path = _solo_config(tmp_path)
    r = subprocess.run([sys.executable, "-m", "servoloop", "run", "--config", str(path), "--lockstep",
                        "--duration", "3", "--json", "--quiet", "--telemetry", "none", "--socket", "none"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout.strip().splitlines()[-1])
    sim = s["simulation"]
    assert sim["base_position_in_world"][2] > 0.2 and len(sim["base_rpy"]) == 3
    # where it lay at power-up (the plant let it fall and settle first): low, and level
    start = sim["at_power_up"]
    assert start["base_position_in_world"][2] < 0.1 and len(start["base_rpy"]) == 3
    assert "estimate" not in s          # this config has no IMU: no base estimate to compare


@pytest.mark.parametrize("controller", ["wbc", "trot"])
def test_whole_body_control_named_on_the_cli_stands_it_where_its_config_does(tmp_path, controller):
    """``--controller wbc|trot`` on this config (written for ``hold``, no IMU, default params):
    the robot stands at its standing pose's height (0.235 m), not in the crouch its startup
    passes through (it sank to 0.07-0.09 m before the pose carried over)."""
    path = _solo_config(tmp_path)
    r = subprocess.run([sys.executable, "-m", "servoloop", "run", "--config", str(path), "--lockstep",
                        "--controller", controller, "--duration", "4", "--json", "--quiet",
                        "--telemetry", "none", "--socket", "none"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert s["state"] == "done" and not s["faults"], s["faults"]
    assert s["simulation"]["base_position_in_world"][2] == pytest.approx(0.225, abs=0.015)
    assert max(abs(a) for a in s["simulation"]["base_rpy"][:2]) < 0.05


def test_without_contacts_the_error_says_what_to_declare(tmp_path):
    path = _solo_config(tmp_path, contacts=False)
    r = subprocess.run([sys.executable, "-m", "servoloop", "run", "--config", str(path), "--lockstep",
                        "--duration", "1", "--quiet", "--telemetry", "none", "--socket", "none"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "simulation.contacts" in r.stderr and "solo12.urdf" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize(("contact", "message"), [
    ({"link": "NO_SUCH_LINK", "shape": "sphere", "size": [0.01]}, "NO_SUCH_LINK"),
    ({"link": "FL_FOOT", "shape": "cone", "size": [0.01]}, "cone"),
    ({"link": "FL_FOOT", "shape": "box", "size": [0.01]}, "full edge lengths"),
])
def test_bad_contacts_are_named(tmp_path, contact, message):
    path = _solo_config(tmp_path)
    doc = yaml.safe_load(path.read_text())
    doc["simulation"]["contacts"] = [contact]
    path.write_text(yaml.safe_dump(doc))
    r = subprocess.run([sys.executable, "-m", "servoloop", "run", "--config", str(path), "--lockstep",
                        "--duration", "0.5", "--quiet", "--telemetry", "none", "--socket", "none"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_xacro_is_refused_with_the_command_to_run(tmp_path):
    path = _solo_config(tmp_path)
    doc = yaml.safe_load(path.read_text())
    doc["model"]["urdf"] = "robot.urdf.xacro"
    path.write_text(yaml.safe_dump(doc))
    r = subprocess.run([sys.executable, "-m", "servoloop", "config", "check", str(path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "xacro robot.urdf.xacro > robot.urdf" in r.stderr


def test_declared_feet_are_feet_for_the_estimate_and_for_a_trot_that_names_them(tmp_path):
    """With an IMU the base estimator finds the feet declared in ``simulation.contacts`` (before:
    'base estimator feet none found'), and ``trot`` takes them by link name in ``feet`` (before:
    'carry no contact geometry' listing 'simulation.contacts[0] FL_FOOT'); it trots forward at
    0.1 m/s for 4 s, level, and the estimate follows the simulated base."""
    path = _solo_config(tmp_path, imu=True)
    feet = [f"{leg}_FOOT" for leg in LEGS]
    r = subprocess.run([sys.executable, "-m", "servoloop", "run", "--config", str(path), "--lockstep",
                        "--controller", "trot", "--param", f"feet=[{', '.join(feet)}]",
                        "--param", "speed_mps=0.1", "--duration", "4", "--json", "--quiet",
                        "--telemetry", "none", "--socket", "none"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert s["state"] == "done" and not s["faults"], s["faults"]
    sim, est = s["simulation"], s["estimate"]
    assert sorted(est["contact"]) == sorted(feet)
    start = sim["at_power_up"]["base_position_in_world"]
    moved = [sim["base_position_in_world"][i] - start[i] for i in (0, 1)]
    assert moved[0] > 0.2                                  # ~0.1 m/s after the 0.5 m/s^2 ramp
    assert abs(moved[1]) < 0.05
    assert sim["base_position_in_world"][2] > 0.19
    assert max(abs(a) for a in sim["base_rpy"][:2]) < 0.1
    # leg odometry under-counts a trot (here 0.38 of 0.45 m; the built-in quadruped 0.48 of 0.53)
    assert est["base_position_in_world"][0] == pytest.approx(moved[0], rel=0.25)
    assert est["base_position_in_world"][1] == pytest.approx(moved[1], abs=0.05)
    assert est["base_rpy"] == pytest.approx(sim["base_rpy"], abs=0.02)


@pytest.mark.parametrize(("feet", "message"), [
    ("[NOPE]", "'NOPE' is not a link of solo12.urdf"),
    ("[base_link]", "'base_link' is the floating base, not a foot"),
    ("[FL_LOWER_LEG]", "link 'FL_LOWER_LEG' carries no contact geometry (declare it in simulation.contacts)"),
])
def test_a_wrong_foot_is_named_with_what_is_wrong(tmp_path, feet, message):
    r = subprocess.run([sys.executable, "-m", "servoloop", "run", "--config", str(_solo_config(tmp_path)),
                        "--lockstep", "--controller", "wbc", "--param", f"feet={feet}", "--duration", "0.3",
                        "--quiet", "--telemetry", "none", "--socket", "none"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert "FL_FOOT, FR_FOOT, HL_FOOT, HR_FOOT" in r.stderr and "Traceback" not in r.stderr
