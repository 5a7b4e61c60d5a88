"""A calibrated servo damping ``kd`` reaches ``trot``'s servo-law inversion: lockstep through the
virtual bus, the same simulated robot whose XM430s are damped 0.6 N m s/rad (the servo model's
default: 0.15) trots at 0.1 m/s for 2.5 s twice, with the controller's damping from ``servoloop
calibrate actuator``'s file of that servo (a simulated bench) and with the model's default.
Only the controller's damping differs: both runs load the same file (the same stiffness, the same
friction, the same pinned gain), the second with ``position_damping`` back to the default.

The goal's damping advance ``(k_d / k_p) dq`` is what keeps a position servo's own damping from
eating the torque a moving joint is asked for: with the default a quarter of the robot's k_d is
advanced, and the swinging feet lag their reference.

Measured (one run each, lockstep: deterministic): the swinging feet's distance from their swing
reference, mean over the swing ticks after the first 0.5 s, 1.4 mm with the calibrated 0.61 and
9.8 mm with the default 0.15.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from servoloop.calibration.cli import main as calibrate
from servoloop.controller.calibration_file import apply_calibration, load_calibration
from servoloop.controller.config import ControllerConfig, builtin_config
from tests.hil.test_daemon_trot_calibrated_friction import trot_recorded

pytestmark = pytest.mark.hil

#: the servos' true damping [N m s/rad] (the XM430-W350 model's default: 0.15), kp [N m/rad]
#: and gearbox Coulomb friction [N m] (the model's defaults) as the simulated robot has them
TRUE_KD, KP, KC = 0.6, 20.0, 0.134
DEFAULT_KD = 0.15


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    """``servoloop calibrate actuator`` on a simulated bench of that servo, at the XM430's
    factory gain (800: pinning it changes nothing on the robot)."""
    out = tmp_path_factory.mktemp("cal") / "xm430.yaml"
    assert calibrate(["calibrate", "actuator", "--id", "1", "--simulate", f"{KP},{TRUE_KD},{KC}",
                      "--gains", "800", "--inertia", "0.002", "--cycles", "4", "--out", str(out)]) == 0
    return load_calibration(out)


def swing_errors(cfg):
    """Each swinging foot's distance from its swing reference [m] (the controller's view; the
    reference of the tick before, the one the torques were for), every swing tick after 0.5 s,
    trotting at 0.1 m/s for 2.5 s on the robot damped TRUE_KD (more than the model's); the
    summary."""
    stance, feet, ref, summary = trot_recorded(cfg, "servo_law", kd=TRUE_KD)
    err = np.linalg.norm(feet[1:] - ref[:-1], axis=-1)
    late = np.arange(1, len(feet)) > round(0.5 * cfg.loop.rate_hz)
    return err[~stance[1:] & late[:, None]], summary


def test_the_calibrated_damping_keeps_the_swinging_feet_on_their_reference(calibration):
    # the file holds the bench servo's damping, and the daemon's config takes it
    kd = calibration.report["params"]["kd"]
    assert abs(kd - TRUE_KD) < 0.03, kd
    base = replace(builtin_config("quadruped"),
                   controller=ControllerConfig(name="trot", params={"speed_mps": 0.1}))
    calibrated = apply_calibration(base, calibration)
    assert {s.position_damping for s in calibrated.servos} == {kd}
    default = replace(calibrated, servos=tuple(replace(s, position_damping=None, friction_from=())
                                               for s in calibrated.servos))
    err_cal, summary = swing_errors(calibrated)
    err_def, summary_def = swing_errors(default)
    print(f"swinging foot from its reference, mean: calibrated {err_cal.mean() * 1e3:.2f} mm, "
          f"default {err_def.mean() * 1e3:.2f} mm ({len(err_cal)}, {len(err_def)} swing ticks)")
    assert len(err_cal) >= 1000 and len(err_def) >= 1000
    # the run says which damping it used, and where it came from
    [entry] = summary["servo_law"]
    assert entry["kd_nm_s_per_rad"] == kd and entry["kd_source"] == f"calibration {calibration.path}"
    assert len(entry["joints"]) == 12
    assert summary["status_servo_law"] == summary["servo_law"]
    [entry] = summary_def["servo_law"]
    assert (entry["kd_nm_s_per_rad"], entry["kd_source"]) == (DEFAULT_KD, "XM430-W350 default")
    # measured: mean 1.4 mm calibrated, 9.8 mm with the default damping
    assert err_cal.mean() < 3.0e-3, err_cal.mean()
    assert err_def.mean() > 6.0e-3, err_def.mean()
    assert err_def.mean() > 3.0 * err_cal.mean(), (err_cal.mean(), err_def.mean())
