"""``wbc`` and ``trot`` with default params on a hexapod we did not build (a user's trial).

``tests/fixtures/hexapod19.urdf`` is a 1.9 kg hobby hexapod on 19 x AX-12A (Protocol 1.0,
1.5 N m): six 3-joint legs (coxa 52 mm, femur 66 mm, tibia 130 mm, 10 mm foot spheres) and
a turret on top.  Its config is written the way docs/own-robot.md says: servos, the standing
pose, a crouch to stand up through, a 200 Hz loop (Protocol 1.0 reads one servo at a time),
no IMU.  With the old default ``position_servo: torque`` the ID's tick-to-tick torque steps
(~1.1 N m on a need of 0.1-0.5 N m) met the AX-12A's 1.5 N m and the body lay down on its
belly at 0.05 m; its position-only servos now default to ``impedance``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.hil

URDF = Path(__file__).resolve().parents[1] / "fixtures" / "hexapod19.urdf"
LEGS = ("LF", "LM", "LH", "RF", "RM", "RH")
STARTUP_S = 2.0


def _config(folder: Path, controller: str = "hold") -> Path:
    """The robot's YAML as a user writes it from the docs: servos 1-18 the legs, 19 the turret."""
    shutil.copy(URDF, folder / URDF.name)
    servos, pose, crouch = [], {}, {}
    for i, leg in enumerate(LEGS):
        for k, (joint, stand, low) in enumerate((("coxa", 0.0, 0.0), ("femur", -0.4, -1.2),
                                                 ("tibia", 1.7, 2.4))):
            name = f"{leg}_{joint}_joint"
            servos.append({"id": 1 + 3 * i + k, "model": "AX-12A", "joint": name})
            pose[name], crouch[name] = stand, low
    servos.append({"id": 19, "model": "AX-12A", "joint": "turret_joint"})
    pose["turret_joint"] = crouch["turret_joint"] = 0.0
    cfg = {"robot": "hexapod19", "model": {"urdf": URDF.name, "floating_base": True},
           "bus": {"baud": 1_000_000, "protocol": 1}, "servos": servos, "loop": {"rate_hz": 200},
           "controller": {"name": controller, "params": {"pose": pose}} if controller == "hold"
           else {"name": controller},
           "startup": {"ramp_s": STARTUP_S, "via": [crouch] + ([] if controller == "hold" else [pose])}}
    path = folder / "hexapod19.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def _cli(path: Path, seconds: float, *extra: str) -> dict:
    r = subprocess.run([sys.executable, "-m", "servoloop", "run", "--config", str(path), "--lockstep",
                        "--duration", str(seconds), "--json", "--quiet", "--telemetry", "none",
                        "--socket", "none", *extra], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def _standing_height(tmp_path) -> float:
    """The base height ``hold`` stands the robot at in its pose [m] (0.109)."""
    s = _cli(_config(tmp_path, "hold"), 1)
    assert s["state"] == "done" and not s["faults"], s["faults"]
    return s["simulation"]["base_position_in_world"][2]


def test_wbc_with_default_params_stands_an_ax12a_hexapod(tmp_path):
    """A config written for ``wbc`` (no params): the AX-12A (no current control) take their
    torque as ``impedance`` about the posture, and the robot stands 3 s where ``hold`` stands
    it, level; before, with ``torque``, it lay on its belly (0.048 m) within a second."""
    from servoloop.controller.config import load_config
    from servoloop.controller.controllers import make_controller
    from servoloop.controller.controllers.base import ControllerContext

    stand = _standing_height(tmp_path)
    assert stand > 0.09
    path = _config(tmp_path, "wbc")
    ctrl = make_controller("wbc", ControllerContext.from_config(load_config(path)))
    assert ctrl.status()["position_servo"] == "impedance"
    assert sorted(ctrl.status()["feet"]) == sorted(f"{leg}_foot" for leg in LEGS)
    s = _cli(path, 3)
    assert s["state"] == "done" and not s["faults"], s["faults"]
    sim = s["simulation"]
    assert sim["base_position_in_world"][2] == pytest.approx(stand, abs=0.01)
    assert max(abs(a) for a in sim["base_rpy"][:2]) < 0.02
    assert not [w for w in s["warnings"] if "collapsed" in w], s["warnings"]
    # torque mode, asked for, still is what it was: the robot down, and the summary says it
    # (no IMU: wbc watches for the collapse on its leg odometry)
    s = _cli(path, 3, "--param", "position_servo=torque")
    z = s["simulation"]["base_position_in_world"][2]
    assert z < 0.5 * stand
    said = [w for w in s["warnings"] if "collapsed" in w]
    assert len(said) == 1 and said[0].startswith("wbc: the robot collapsed: its base sank to"), s["warnings"]


def _tripod_trot(tmp_path, feet_in_air, speed_mps: float = 0.1):
    """``trot`` at ``speed_mps`` for 3 s on the hexapod with XM430-W350 servos at 1 kHz, the
    share of the ticks each foot is off the ground (from 0.5 s into the run) into
    ``feet_in_air`` {link: [bool per tick]}; returns the run summary."""
    from dataclasses import replace

    import numpy as np

    from servoloop.controller.config import load_config
    from servoloop.controller.daemon import Daemon
    from servoloop.controller.runtime import make_lockstep

    cfg = load_config(_config(tmp_path, "trot"))
    cfg = replace(cfg, servos=[replace(s, model="XM430-W350") for s in cfg.servos],
                  bus=replace(cfg.bus, protocol=2), loop=replace(cfg.loop, rate_hz=1000),
                  controller=replace(cfg.controller, params={"speed_mps": speed_mps}))
    lock = make_lockstep(cfg)
    try:
        plant = lock.virtual.engine.plant
        sim = plant.sim
        daemon = Daemon(cfg, lock.bus, lock.clock, telemetry_path=None, socket_path=None)
        feet = {f.link: np.asarray(sim.points.body) == f.body for f in daemon.controller.robot.feet}
        advance = lock.clock.on_advance

        def on_advance(dt):
            advance(dt)
            if lock.virtual.time_s >= STARTUP_S + 0.5:
                fz = sim.contact_forces[:, 2]
                for link, on in feet.items():
                    feet_in_air.setdefault(link, []).append(bool(fz[on].sum() < 1e-6))

        lock.clock.on_advance = on_advance
        summary = daemon.run(3.0)
        end = plant.base_state()
        summary["x_m"], summary["rpy"] = end["base_position_in_world"][0], end["base_rpy"]
    finally:
        lock.close()
    return summary


def test_trot_on_six_feet_swings_alternating_tripods(tmp_path):
    """Six feet trot in tripods (front and hind of one side with the middle of the other), the
    trot's timing unchanged; through the virtual bus for 3 s at 0.1 m/s every foot swings and
    the feet of one tripod are off the ground together, never with the other tripod's, and
    the robot walks forward level.  Before, the feet were paired by name (LF, RM, RH with LM,
    LH, RF), a gait with two feet of one side lifting together."""
    import numpy as np

    air = {}
    s = _tripod_trot(tmp_path, air)
    assert s["state"] == "done" and not s["faults"], s["faults"]
    air = {k: np.array(v) for k, v in air.items()}
    for link, a in air.items():
        assert 0.08 < a.mean() < 0.3, (link, a.mean())        # swings 25 % less early landings
    a, b = ("LF_foot", "LH_foot", "RM_foot"), ("RF_foot", "RH_foot", "LM_foot")
    for group, other in ((a, b), (b, a)):
        up = np.all([air[f] for f in group], axis=0)
        assert up.mean() > 0.05                               # the tripod lifts together
        assert not np.any(up & np.any([air[f] for f in other], axis=0))   # three always stand
    assert s["x_m"] > 0.2                                     # 0.1 m/s for ~2.9 s: 0.295 m
    assert max(abs(x) for x in s["rpy"][:2]) < 0.05


def test_trot_on_feet_it_cannot_group_is_refused_at_start(tmp_path):
    """Five feet (a ``feet`` param leaving one out), or six not three a side, are refused
    before the run with the count and what trot supports; before, five ran."""
    r = subprocess.run([sys.executable, "-m", "servoloop", "run", "--config", str(_config(tmp_path, "wbc")),
                        "--lockstep", "--duration", "1", "--json", "--quiet", "--telemetry", "none",
                        "--socket", "none", "--controller", "trot",
                        "--param", "feet=[LF_foot, LM_foot, LH_foot, RF_foot, RM_foot]"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "this robot has 5 (LF_foot, LM_foot, LH_foot, RF_foot, RM_foot)" in r.stderr
    assert "needs 4 (diagonal pairs) or 6 (tripods)" in r.stderr


def test_trot_on_ax12a_says_the_feet_barely_lift(tmp_path):
    """On the AX-12A (impedance by default) the trot runs but its feet barely leave the
    ground; the summary says why and what trots."""
    s = _cli(_config(tmp_path, "wbc"), 1, "--controller", "trot")
    assert s["state"] == "done" and not s["faults"], s["faults"]
    said = [w for w in s["warnings"] if "impedance about the standing posture" in w]
    assert len(said) == 1 and "19 position servos" in said[0], s["warnings"]
