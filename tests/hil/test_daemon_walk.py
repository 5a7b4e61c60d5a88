"""``walk`` in the daemon, lockstep against the virtual bus: the built-in humanoid (AX-18A,
200 Hz, compliant ground, IMU estimate) walks 10 steps with its default params, as
``servoloop run --robot humanoid --controller walk --lockstep``, then stands; and with the
learned reduced-order model (``model: builtin:five_link_4d``)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from servoloop.controller.config import ControllerConfig, builtin_config
from servoloop.controller.daemon import Daemon
from servoloop.controller.runtime import make_lockstep

pytestmark = pytest.mark.hil


def _run(cfg, run_s):
    """Run the daemon; the simulated base (x, y, z, tilt deg) every 50 ms of the run."""
    lock = make_lockstep(cfg)
    samples = []
    try:
        sim = lock.virtual.engine.plant.sim
        advance = lock.clock.on_advance
        nxt = [lock.virtual.time_s + cfg.startup.ramp_s]

        def on_advance(dt):
            advance(dt)
            if lock.virtual.time_s >= nxt[0]:
                nxt[0] += 0.05
                q = sim.q
                tilt = math.degrees(2 * math.asin(min(1.0, math.hypot(q[3], q[4]))))
                samples.append((float(q[0]), float(q[1]), float(q[2]), tilt))

        lock.clock.on_advance = on_advance
        daemon = Daemon(cfg, lock.bus, lock.clock, telemetry_path=None, socket_path=None)
        summary = daemon.run(cfg.startup.ramp_s + run_s)
        status = daemon.controller.status()
    finally:
        lock.close()
    return summary, np.array(samples), status


# The walk through the bus is fragile in speed (BENCHMARKS.md, "the built-in humanoid walks"):
# with the LIP it does 10 steps at 0.08, 0.12 and 0.16 m/s but falls at 0.10-0.14 otherwise;
# with the shipped learned model at 0.11, 0.13 and 0.14 but not at 0.10 or 0.12.  The LIP runs
# at the default speed (as --controller walk), the learned model at 0.13 m/s.
@pytest.mark.parametrize("model,speed", [("lip", 0.12), ("builtin:five_link_4d", 0.13)])
def test_the_humanoid_walks_ten_steps_through_the_virtual_bus(model, speed):
    from servoloop.controller.wholebody.lip import WalkTiming

    if model != "lip":
        pytest.importorskip("casadi")
    # {}: as --controller walk
    params = {} if model == "lip" else {"model": model, "speed_mps": speed}
    cfg = builtin_config("humanoid")
    cfg = replace(cfg, controller=ControllerConfig(name="walk", params=params))
    plan = WalkTiming()                        # the defaults: 10 steps of 0.32 s
    summary, s, status = _run(cfg, plan.duration + 1.5)
    assert summary["state"] == "done", summary["faults"]
    assert status["steps_done"] == 10 and status["walking"] is False
    z0 = s[0, 2]
    assert s[:, 2].min() > 0.9 * z0 and s[:, 3].max() < 15.0          # never fell
    # 9 step lengths (speed x 0.32 s) forward, the last step closes beside the other foot
    assert s[-1, 0] - s[0, 0] == pytest.approx(9 * speed * 0.32, rel=0.25)
    assert abs(s[-1, 1] - s[0, 1]) < 0.05
    # stopped: it stands where the walk ended (it rocks about there by ~1.5 cm and up to ~6
    # deg through the bus after the walk: the yaw it picked up on the way fights the feet)
    last, before = s[-20:], s[-40:-20]
    assert abs(last[:, 0].mean() - before[:, 0].mean()) < 0.01
    assert last[:, 2].min() > 0.9 * z0 and last[:, 3].max() < 12.0
