"""The base estimate through a collapse onto the trunk, against the contact simulator's truth.

Lockstep through the in-process virtual bus: the built-in quadruped stands up under ``hold``
in a tall pose (legs nearly straight), then every servo's torque goes off (the control table's
Torque Enable cleared, as a servo that sheds its load does; the bus keeps answering, so the
estimate goes on).  The legs fold, the trunk falls ~0.25 m, strikes the ground at 1.7 m/s
(the accelerometer clips at +-2 g), bounces off it for a few ms and comes to rest, legs folded.
The estimate and the truth are taken every tick from the torque-off on.

x is odometry from where the estimate started, so it is compared as the change of the x error
over the collapse; the height is absolute.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from servoloop.controller.config import ControllerConfig, builtin_config
from servoloop.controller.daemon import Daemon
from servoloop.controller.runtime import make_lockstep

pytestmark = pytest.mark.hil


def _collapse(after_s: float = 1.5, lying_s: float = 1.5):
    """Rows (t s, estimate p (3,), truth p (3,), resting, the truth's trunk on the ground) every
    tick from the torque-off (``after_s`` past the startup ramp) to ``lying_s`` after it."""
    cfg = builtin_config("quadruped")
    pose = dict(cfg.controller.params["pose"])
    for leg in ("lf", "rf", "lh", "rh"):
        pose[f"{leg}_hip_flex"], pose[f"{leg}_knee"] = 0.25, -0.5
    # the folded knees pass their limits (a collapse does): no limit fault that ends the run
    cfg = replace(cfg, controller=ControllerConfig(name="hold", params={"pose": pose}),
                  safety=replace(cfg.safety, position_margin=3.0))
    t_off = cfg.startup.ramp_s + after_s
    lock = make_lockstep(cfg)
    rows = []
    try:
        plant = lock.virtual.engine.plant
        sim = plant.sim
        daemon = Daemon(cfg, lock.bus, lock.clock, telemetry_path=None, socket_path=None)
        be = daemon.loop.base_estimator
        feet = {f.body for f in be.feet}
        trunk = np.array([int(b) not in feet for b in sim.points.body])
        advance = lock.clock.on_advance
        off = []

        def on_advance(dt):
            advance(dt)
            t = lock.virtual.time_s
            if t >= t_off and not off:
                off.append(t)
                for servo in lock.virtual.engine.servos:
                    servo.mem[servo.info.a_torque] = 0
                    servo.refresh_actuation()
            if off:
                rows.append((t, be.p.copy(), np.array(sim.q[:3], dtype=float), be.resting,
                             bool(np.any(sim.contact_active & trunk))))

        lock.clock.on_advance = on_advance
        summary = daemon.run(after_s + lying_s)
    finally:
        lock.close()
    return rows, summary


def test_a_collapse_onto_the_trunk_is_followed_and_a_bounce_is_not_taken_as_rest():
    """Issue 11: the folded legs make the trunk the lowest point while it still falls, and it
    bounces off the ground.  Taken as resting at the first touch, the anchor pinned a zero
    velocity the trunk did not have (the clipped impacts had left the filter's at -1.5 m/s):
    the height ran 45 mm under the truth, and ``resting`` was true in the air.  Now resting
    needs ~1 g and a still trunk for 20 ms, and the touch-down restarts the covariance."""
    rows, summary = _collapse()
    assert summary["state"] == "done", summary["faults"]
    t = np.array([r[0] for r in rows])
    est = np.array([r[1] for r in rows])
    true = np.array([r[2] for r in rows])
    resting = np.array([r[3] for r in rows])
    lying = np.array([r[4] for r in rows])
    # it collapsed: from the tall stance (0.28 m) down onto the trunk (0.03 m)
    assert true[0, 2] > 0.25 and true[-1, 2] < 0.04 and lying[-1]
    first = int(np.argmax(lying))
    assert lying[first] and t[first] - t[0] > 0.3
    # it bounced: the truth's trunk left the ground again after touching it
    air = ~lying & (np.arange(len(t)) > first)
    assert np.count_nonzero(air) >= 3, "no bounce: the scenario no longer tests what it should"
    # the estimator never takes an airborne trunk as resting (it did, the old gate was geometry)
    assert not np.any(resting & ~lying), t[resting & ~lying]
    # it rests in the end (and came to rest within 0.2 s of the first touch)
    assert resting[-1] and np.all(resting[t > t[first] + 0.2])
    # the height through the fall, the bounce and lying: within 1 cm (the trunk bounces ~7 mm
    # high on a clipped accelerometer; it was 45 mm low), and within 2 mm at rest
    dz = est[:, 2] - true[:, 2]
    assert np.max(np.abs(dz)) < 0.01, (t[np.argmax(np.abs(dz))], np.max(np.abs(dz)))
    assert np.all(np.abs(dz[t > t[first] + 0.3]) < 0.002)
    # x: the error grows by less than 2 cm over the collapse (the feet slide as the legs fold
    # and the trunk slides 5-6 mm at its impact; measured 1.2 cm) and holds while it lies
    ex = (est[:, 0] - true[:, 0]) - (est[0, 0] - true[0, 0])
    assert np.max(np.abs(ex)) < 0.02, np.max(np.abs(ex))
    late = t > t[first] + 0.3
    assert np.ptp(ex[late]) < 0.001
