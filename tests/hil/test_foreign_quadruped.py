"""``wbc`` and ``trot`` with default params on a quadruped we did not build (issue 11's trial).

``tests/fixtures/quad13.urdf`` is a 13 kg quadruped modelled on the Unitree Go1
(its masses, leg lengths and collision primitives): every link carries contact
geometry (trunk box, hip cylinders, thigh and calf boxes, foot spheres), so the
default ``feet`` must be found as the lowest links.  Its config is written the
way docs/own-robot.md says: servos, the standing pose as ``hold``'s ``pose``,
a crouch to stand up through, an IMU; it is driven on XM540-W270, the
strongest virtual-bus servo, at 10.6 N m.  Standing asks up to ~12 N m of a
hind knee and a trot's two-legged support ~25 N m: the run summary must say
so (a trot sagged 7 cm, and at 0.1 m/s fell, with nothing in the summary).
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

URDF = Path(__file__).resolve().parents[1] / "fixtures" / "quad13.urdf"
LEGS = ("FL", "FR", "RL", "RR")
FEET = sorted(f"{leg}_foot" for leg in LEGS)
STARTUP_S = 2.0


def _config(folder: Path, controller: str = "hold") -> Path:
    """The robot's YAML as a user writes it from the docs (standing pose: Go1's SRDF)."""
    shutil.copy(URDF, folder / URDF.name)
    servos, pose, crouch = [], {}, {}
    for i, leg in enumerate(LEGS):
        for k, (joint, stand, low) in enumerate((("hip", 0.0, 0.0), ("thigh", 0.8, 1.3),
                                                 ("calf", -1.853, -2.6))):
            name = f"{leg}_{joint}_joint"
            servos.append({"id": 1 + 3 * i + k, "model": "XM540-W270", "joint": name})
            pose[name], crouch[name] = stand, low
    cfg = {"robot": "quad13", "model": {"urdf": URDF.name, "floating_base": True},
           "bus": {"baud": 4_000_000}, "servos": servos,
           "controller": {"name": controller, "params": {"pose": pose}} if controller == "hold"
           else {"name": controller},
           "startup": {"ramp_s": STARTUP_S, "via": [crouch] + ([] if controller == "hold" else [pose])},
           "imu": {"id": 200, "model": "OpenCR"}}
    path = folder / "quad13.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def _cli(path: Path, seconds: float, *extra: str) -> dict:
    r = subprocess.run([sys.executable, "-m", "servoloop", "run", "--config", str(path), "--lockstep",
                        "--duration", str(seconds), "--json", "--quiet", "--telemetry", "none",
                        "--socket", "none", *extra], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_wbc_with_default_params_stands_it_on_its_feet_and_the_estimate_follows(tmp_path):
    """A config written for ``wbc`` (no params): feet are the four foot spheres, for the
    controller and the estimator (not the calves, whose boxes end 1.2 cm above them on the same
    rigid body: the estimator took them too), the height is where startup left the base, and the
    robot stands there 3 s, level, on all four feet; the IMU + leg estimate tracks the truth."""
    from servoloop.controller.config import load_config
    from servoloop.controller.daemon import Daemon
    from servoloop.controller.runtime import make_lockstep

    cfg = load_config(_config(tmp_path, "wbc"))
    lock = make_lockstep(cfg)
    seen = {}
    try:
        plant = lock.virtual.engine.plant
        sim = plant.sim
        power_up = plant.base_state()
        advance = lock.clock.on_advance

        def on_advance(dt):
            advance(dt)
            t = lock.virtual.time_s
            if "end_of_startup" not in seen and t >= STARTUP_S:
                seen["end_of_startup"] = plant.base_state()
            if "standing" not in seen and t >= STARTUP_S + 3.0:
                seen.update(standing=plant.base_state(), fz=float(sim.contact_forces[:, 2].sum()),
                            weight=sim.model.total_mass * 9.81)

        lock.clock.on_advance = on_advance
        daemon = Daemon(cfg, lock.bus, lock.clock, telemetry_path=None, socket_path=None)
        summary = daemon.run(3.2)
        status = daemon.controller.status()
    finally:
        lock.close()
    assert summary["state"] == "done" and not summary["faults"], summary["faults"]
    assert sorted(status["feet"]) == FEET
    goal_z = status["base_goal"]["z"]
    assert goal_z == pytest.approx(seen["end_of_startup"]["base_position_in_world"][2], abs=0.01)
    truth = seen["standing"]
    assert truth["base_position_in_world"][2] == pytest.approx(goal_z, abs=0.01)
    assert truth["base_position_in_world"][2] > 0.2                 # standing, not the crouch
    assert max(abs(a) for a in truth["base_rpy"][:2]) < 0.03
    assert seen["fz"] == pytest.approx(seen["weight"], rel=0.03)
    # the estimate (from where it was powered up) against the simulator's truth at the end
    est, end = summary["estimate"], plant.base_state()
    assert sorted(est["contact"]) == FEET and all(est["contact"].values())   # not the calves
    moved = [end["base_position_in_world"][i] - power_up["base_position_in_world"][i] for i in (0, 1)]
    assert est["base_position_in_world"][:2] == pytest.approx(moved, abs=0.02)
    assert est["base_position_in_world"][2] == pytest.approx(end["base_position_in_world"][2], abs=0.01)
    assert est["base_rpy"][:2] == pytest.approx(end["base_rpy"][:2], abs=0.01)


def test_trot_on_servos_too_weak_for_it_says_so_in_the_summary(tmp_path):
    """``--controller trot`` (default params) on the ``hold`` config: a trot in place for 3 s
    carries the 13 kg on two legs at a time, more than an XM540-W270 gives; the run ends
    normally, the robot still on its feet, and the summary names the hind knees and the servo."""
    s = _cli(_config(tmp_path), 3, "--controller", "trot")
    assert s["state"] == "done" and not s["faults"], s["faults"]
    sim = s["simulation"]
    assert sim["base_position_in_world"][2] > 0.15
    assert max(abs(a) for a in sim["base_rpy"][:2]) < 0.4
    torque = [w for w in s["warnings"] if "stall torque" in w]
    assert len(torque) == 1, s["warnings"]
    assert torque[0].startswith("trot:") and "R" in torque[0] and "_calf_joint up to" in torque[0]
    assert "XM540-W270: 10.6" in torque[0]


@pytest.mark.parametrize("order", [(0, 1, 2, 3), (0, 1, 3, 2), (2, 0, 3, 1)])
def test_trot_pairs_the_feet_diagonally_whatever_order_they_are_listed_in(tmp_path, order):
    """Foot names other than ``lf_`` ... (Go1's ``FL_foot``, ``RR_foot``) were paired by list
    order: ``feet: [FL, FR, RR, RL]`` trotted lateral pairs (a pace; Solo12 sank 4 cm).  The
    pairs now come from where the feet stand: FL with RR, FR with RL."""
    from servoloop.controller.config import load_config
    from servoloop.controller.controllers import make_controller
    from servoloop.controller.controllers.base import ControllerContext

    feet = [FEET[i] for i in order]          # FL, FR, RL, RR permuted
    ctrl = make_controller("trot", ControllerContext.from_config(load_config(_config(tmp_path))),
                           {"feet": feet})
    phase = dict(zip((f.link for f in ctrl.robot.feet), ctrl._gait().touchdown, strict=True))
    assert phase["FL_foot"] == phase["RR_foot"] and phase["FR_foot"] == phase["RL_foot"]
    assert abs(phase["FL_foot"] - phase["FR_foot"]) == pytest.approx(0.5)


def _weakened_run(tmp_path, pwm_share: float) -> tuple[dict, dict]:
    """``hold`` stands the robot; 1 s into the run every servo's PWM limit is cut to
    ``pwm_share`` of its value (a weaker servo, a sagging supply), 2 s more; the summary and
    the simulator's base state at the end."""
    from servoloop.controller.config import load_config
    from servoloop.controller.daemon import Daemon
    from servoloop.controller.runtime import make_lockstep

    cfg = load_config(_config(tmp_path))
    lock = make_lockstep(cfg)
    try:
        plant = lock.virtual.engine.plant
        advance = lock.clock.on_advance
        cut = []

        def on_advance(dt):
            advance(dt)
            if not cut and lock.virtual.time_s >= STARTUP_S + 1.0:
                cut.append(lock.virtual.time_s)
                for servo in lock.virtual.engine.servos:
                    r = servo.info.reg["pwm_limit"]
                    raw = int.from_bytes(bytes(servo.mem[r.address:r.address + r.size]), "little")
                    servo.mem[r.address:r.address + r.size] = int(raw * pwm_share).to_bytes(r.size, "little")
                    servo.refresh_actuation()

        lock.clock.on_advance = on_advance
        daemon = Daemon(cfg, lock.bus, lock.clock, telemetry_path=None, socket_path=None)
        summary = daemon.run(3.0)
        end = plant.base_state()
    finally:
        lock.close()
    return summary, end


def test_a_robot_that_collapses_onto_its_belly_is_told_in_the_summary(tmp_path):
    """Servos cut to 12 % of their PWM: the 13 kg robot sinks from 0.24 m onto its belly
    (0.07 m) without tipping, so no fall; the run goes on to ``done`` (a warning, not a fault:
    controller/fall.py says why) and the summary says it collapsed, with the heights.  Before,
    nothing was said.  Cut to 30 % it sags to ~0.13 m, over half its height: no collapse."""
    s, end = _weakened_run(tmp_path, 0.12)
    assert s["state"] == "done" and not s["faults"], s["faults"]
    assert end["base_position_in_world"][2] < 0.09                      # on its belly
    assert max(abs(a) for a in end["base_rpy"][:2]) < 0.2              # not tipped
    assert s["fall"] is None
    said = [w for w in s["warnings"] if "collapsed" in w]
    assert len(said) == 1, s["warnings"]
    c = s["collapse"]
    assert c["standing_height_m"] > 0.2 and c["height_m"] == pytest.approx(
        end["base_position_in_world"][2], abs=0.02)
    assert STARTUP_S + 1.0 < c["t_s"] < STARTUP_S + 2.0
    assert f"{c['height_m']:.3f} m from {c['standing_height_m']:.3f} m" in said[0]

    s, end = _weakened_run(tmp_path, 0.3)
    assert 0.11 < end["base_position_in_world"][2] < 0.16                # sagged, not lying
    assert s["collapse"] is None and not [w for w in s["warnings"] if "collapsed" in w]
