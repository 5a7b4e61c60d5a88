"""``trot``'s swing feet in the daemon, lockstep through the virtual bus (issue 11).

The simulator's foot points (the controller's robot model at the plant's true state)
every tick of 2.5 s of trot at 0.1 m/s: how high each swing foot rises over where it lifted
off, against the gait's ``step_height`` (1.5 cm), and how fast it comes down when it
lands.  Measured (BENCHMARKS.md, daemon trot): the feet rise 5-6 mm and land at up to
~0.3 m/s.  The gait's swing asks ~10 rad/s of the hips and knees, twice the
XM430-W350's no-load speed (4.8 rad/s at 12 V); the goal slew limit (at that speed)
clips the torque carried by the position servos' goal offsets (swing joints get 0.56 of
it; without the limit 0.85 and the feet 7.5 mm), and the posture task takes a third of
the swing's acceleration (with ideal, uncapped torque sources and the posture out of the
way the feet reach 14 mm).  The target stays as an expected failure.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from servoloop.controller.config import ControllerConfig, builtin_config
from servoloop.controller.daemon import Daemon
from servoloop.controller.runtime import make_lockstep
from servoloop.controller.wholebody.gait import LAND_DEPTH, LAND_FRACTION

pytestmark = pytest.mark.hil

STEP_HEIGHT = 0.015
#: [m/s] touchdown bound: the gait's own final descent is LAND_DEPTH / (LAND_FRACTION *
#: swing time) = 0.067 m/s; a foot on its spline within a few mm lands within twice that
LAND_SPEED = 2.0 * LAND_DEPTH / (LAND_FRACTION * 0.25 * 0.3)


@pytest.fixture(scope="module")
def swings():
    """Per finished swing after the first 0.5 s of trot: (foot, peak rise [m], touchdown
    speed [m/s]); and the controller's status."""
    cfg = builtin_config("quadruped")
    cfg = replace(cfg, controller=ControllerConfig(name="trot", params={"speed_mps": 0.1}))
    lock = make_lockstep(cfg)
    z, vz, stance = [], [], []
    try:
        sim = lock.virtual.engine.plant.sim
        daemon = Daemon(cfg, lock.bus, lock.clock, telemetry_path=None, socket_path=None)
        ctl = daemon.controller
        robot, step = ctl.robot, ctl.core.step

        def recorded(q, v, tg):
            tau = step(q, v, tg)
            qs, vs = sim.q.copy(), sim.v.copy()
            robot.kinematics(qs)
            z.append([robot.foot_position(f)[2] for f in robot.feet])
            vz.append([(robot.point_jacobian(qs, f.body, f.center, f.radius) @ vs)[2]
                       for f in robot.feet])
            stance.append(tg.stance.copy())
            return tau

        ctl.core.step = recorded
        summary = daemon.run(2.5)
        status = ctl.status()
    finally:
        lock.close()
    assert summary["state"] == "done", summary["faults"]
    z, vz, stance = np.array(z), np.array(vz), np.array(stance)
    out = []
    first = round(0.5 * cfg.loop.rate_hz)            # ticks: past the stand and first steps
    for i in range(z.shape[1]):
        sw = (~stance[:, i]).astype(int)
        lifts = np.flatnonzero(np.diff(sw) == 1) + 1
        for a in lifts[lifts > first]:
            z0 = z[a, i]
            top = a + int(np.argmax(z[a:a + 300, i]))
            down = np.flatnonzero(z[top:, i] <= z0 + 3e-4)
            if len(down) == 0:
                continue                         # still in the air when the run ended
            td = top + down[0]
            out.append((i, z[top, i] - z0, float(np.abs(vz[max(td - 3, top):td + 1, i]).max())))
    status["summary_warnings"] = summary["warnings"]
    return np.array(out), status


def test_the_swing_measurement_sees_every_foot_lift_and_land(swings):
    s, status = swings
    assert set(s[:, 0].astype(int)) == {0, 1, 2, 3} and len(s) >= 16      # 6-7 a foot in 2 s
    assert s[:, 1].min() > 0.002                  # the feet do leave the ground
    # the demand the status reports: more than the servos' no-load speed
    assert status["swing_joint_speed_rad_s"] > 2.0 * status["servo_no_load_speed_rad_s"]
    # and the run's summary says so, with what to change
    assert any(w.startswith("trot: the swing asks") and "step_height" in w for w in status["summary_warnings"])


@pytest.mark.xfail(strict=True, reason="issue 11: the swing asks twice the XM430-W350's "
                   "no-load speed, and the goal slew limit clips the swing legs' torque "
                   "(BENCHMARKS.md, daemon trot)")
def test_swing_feet_follow_the_step_height_and_land_softly(swings):
    s, _ = swings
    assert np.all(np.abs(s[:, 1] - STEP_HEIGHT) < 0.3 * STEP_HEIGHT), s[:, 1]
    assert s[:, 2].max() < LAND_SPEED, s[:, 2]
