"""A calibrated servo friction reaches ``trot``'s servo-law inversion: lockstep through the
virtual bus, the same simulated robot whose XM430s have 0.30 N m of gearbox Coulomb friction
(the servo model's default is 0.134) trots at 0.1 m/s for 2.5 s twice, with the controller's
friction from ``servoloop calibrate actuator``'s file of that servo (a simulated bench) and with
the model's default.  Only the controller's friction differs: both runs load the same file (the
same stiffness, the same pinned gain), the second with ``coulomb_friction`` back to the default.

Measured (one run each, lockstep: deterministic): the foot over its swing reference at the
planned touchdown, median over the 28 swings after the first 0.5 s, 0.73 mm with the calibrated
0.30 N m and 2.11 mm with the default 0.134 (the knees stall short of the ground, as every foot
did before ``coulomb_compensation``; BENCHMARKS.md, daemon trot).  (0.71 and 2.03 mm before the
file's damping, 0.1502 N m s/rad for the plant's 0.15, reached the controller too: both runs use it.)
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from servoloop.calibration.cli import main as calibrate
from servoloop.controller.calibration_file import apply_calibration, load_calibration
from servoloop.controller.config import ControllerConfig, builtin_config
from servoloop.controller.daemon import Daemon
from servoloop.controller.runtime import make_lockstep
from servoloop.virtual_bus.robot_plant import make_plant

pytestmark = pytest.mark.hil

#: the servos' true gearbox Coulomb friction [N m] (the model's default: 0.134), kp [N m/rad]
#: and kd [N m s/rad] as the simulator's XM430-W350 has them
TRUE_KC, KP, KD = 0.30, 20.0, 0.15


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    """``servoloop calibrate actuator`` on a simulated bench of that servo, at the XM430's
    factory gain (800: pinning it changes nothing on the robot)."""
    out = tmp_path_factory.mktemp("cal") / "xm430.yaml"
    assert calibrate(["calibrate", "actuator", "--id", "1", "--simulate", f"{KP},{KD},{TRUE_KC}",
                      "--gains", "800", "--inertia", "0.002", "--cycles", "4", "--out", str(out)]) == 0
    return load_calibration(out)


def trot_recorded(cfg, status_key: str, **law):
    """Trot ``cfg`` at 0.1 m/s for 2.5 s in lockstep on the quadruped whose servos have the
    figures ``law`` (``RobotPlant.set_servo_law``); per tick, as the controller saw it, the
    stance flags (T, 4), the feet (T, 4, 3) [m] and their swing reference (T, 4, 3) [m]; the
    summary, with ``servoloop status``'s ``status_key`` as ``"status_" + status_key``."""
    plant = make_plant([(s.id, s.model) for s in cfg.servos], "quadruped")
    plant.set_servo_law(**law)
    lock = make_lockstep(cfg, plant=plant)
    stance, feet, ref = [], [], []
    try:
        daemon = Daemon(cfg, lock.bus, lock.clock, telemetry_path=None, socket_path=None)
        ctl = daemon.controller
        robot, step = ctl.robot, ctl.core.step

        def recorded(q, v, tg):
            tau = step(q, v, tg)
            robot.kinematics(q)
            feet.append([robot.foot_position(f).copy() for f in robot.feet])
            ref.append(tg.swing_position.copy())
            stance.append(tg.stance.copy())
            return tau

        ctl.core.step = recorded
        summary = daemon.run(2.5)
        summary["status_" + status_key] = daemon.status()[status_key]     # servoloop status's
    finally:
        lock.close()
    assert summary["state"] == "done", summary["faults"]
    return np.array(stance), np.array(feet), np.array(ref), summary


def touchdown_errors(cfg):
    """Foot over its swing reference at each planned touchdown after 0.5 s [m] (the
    controller's view), trotting at 0.1 m/s for 2.5 s on the robot with TRUE_KC (more gearbox
    friction than the model's); the summary."""
    stance, feet, ref, summary = trot_recorded(cfg, "friction", kc=TRUE_KC)
    z, ref = feet[..., 2], ref[..., 2]
    out = []
    for i in range(stance.shape[1]):
        lands = np.flatnonzero(np.diff((~stance[:, i]).astype(int)) == -1) + 1
        out += [z[k, i] - ref[k - 1, i] for k in lands[lands > round(0.5 * cfg.loop.rate_hz)]]
    return np.array(out), summary


def test_the_calibrated_friction_lands_the_feet_on_their_reference(calibration):
    # the file holds the bench servo's friction, and the daemon's config takes it
    kc = calibration.report["params"]["kc"]
    assert abs(kc - TRUE_KC) < 0.01, kc
    base = replace(builtin_config("quadruped"),
                   controller=ControllerConfig(name="trot", params={"speed_mps": 0.1}))
    calibrated = apply_calibration(base, calibration)
    assert {s.coulomb_friction for s in calibrated.servos} == {kc}
    default = replace(calibrated, servos=tuple(replace(s, coulomb_friction=None, friction_from=())
                                               for s in calibrated.servos))
    err_cal, summary = touchdown_errors(calibrated)
    err_def, _ = touchdown_errors(default)
    print(f"touchdown over the reference, median: calibrated {np.median(err_cal) * 1e3:.2f} mm, "
          f"default {np.median(err_def) * 1e3:.2f} mm ({len(err_cal)}, {len(err_def)} swings)")
    assert len(err_cal) >= 20 and len(err_def) >= 20
    # the run says which friction it used, and where it came from
    [entry] = summary["friction"]
    assert entry["coulomb_nm"] == kc and entry["coulomb_source"] == f"calibration {calibration.path}"
    assert summary["status_friction"] == summary["friction"]
    # measured: median 0.73 mm calibrated, 2.11 mm with the default friction
    med_cal, med_def = np.median(err_cal), np.median(err_def)
    assert med_cal < 1.0e-3, err_cal
    assert med_def > 1.6e-3, err_def
    assert med_def - med_cal > 1.0e-3, (med_cal, med_def)
