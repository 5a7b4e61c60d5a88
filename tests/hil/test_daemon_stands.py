"""The daemon's default run: the built-in quadruped, lying powered-off on the
contact simulator behind the virtual bus, is stood up by startup (goal :=
present, torque on, ramp through a crouch to the standing pose) and carries
its weight; at the end the shutdown (torque off) lets it lie down again.

Lockstep (simulated time, in-process virtual bus on a real pty), so the
result does not depend on the machine's speed.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from servoloop.controller.config import builtin_config
from servoloop.controller.daemon import Daemon
from servoloop.controller.runtime import make_lockstep

pytestmark = pytest.mark.hil

G = 9.81


def _roll_pitch_deg(quat_xyzw):
    x, y, z, w = quat_xyzw
    roll = np.arctan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    pitch = np.arcsin(np.clip(2 * (w * y - z * x), -1, 1))
    return np.degrees([roll, pitch])


def stand_up(cfg, hold_s=1.0):
    """Run the daemon; sample the simulated robot after the ramp, before shutdown."""
    lock = make_lockstep(cfg)
    try:
        plant = lock.virtual.engine.plant
        sim = plant.sim
        lying = (float(sim.q[2]), sim.q[7:].copy())
        seen = {}
        t_sample = cfg.startup.ramp_s + 0.8 * hold_s
        advance = lock.clock.on_advance

        def on_advance(dt):
            advance(dt)
            if not seen and lock.virtual.time_s >= t_sample:
                seen.update(z=float(sim.q[2]), q=sim.q[7:].copy(), fz=sim.contact_forces[:, 2].sum(),
                            rp=_roll_pitch_deg(sim.q[3:7]), mass=sim.model.total_mass,
                            names=list(sim.model.actuated_joint_names))

        lock.clock.on_advance = on_advance
        daemon = Daemon(cfg, lock.bus, lock.clock, telemetry_path=None, socket_path=None)
        summary = daemon.run(cfg.startup.ramp_s + hold_s)
    finally:
        lock.close()
    return summary, lying, seen


def test_startup_stands_the_quadruped_up_and_it_carries_its_weight():
    cfg = builtin_config("quadruped")
    assert cfg.simulation.plant  # the built-in robot names its simulator
    summary, (z_lying, _), s = stand_up(cfg)
    assert summary["state"] == "done", summary["faults"]
    assert z_lying < 0.06                       # it started on the ground, on its trunk
    assert s["z"] > 0.2                         # and stands on its legs (standing height 0.23 m)
    assert np.abs(s["rp"]).max() < 3.0          # level, not tipped over
    assert s["fz"] == pytest.approx(s["mass"] * G, rel=0.02)  # its weight on the feet
    # the joints hold the standing pose, up to the sag of kp = 20 N m/rad under load
    pose = cfg.controller.params["pose"]
    assert max(abs(s["q"][s["names"].index(j)] - v) for j, v in pose.items()) < 0.12


def test_without_the_crouch_it_pushes_itself_over():
    # the negative control: straight from folded to standing, the feet sweep the trunk over
    cfg = builtin_config("quadruped")
    cfg = replace(cfg, startup=replace(cfg.startup, via=()))
    summary, _, s = stand_up(cfg)
    # it tips over during the ramp: the loop's fall detector ends the run there (safety.on_fall)
    assert [f["kind"] for f in summary["fault_details"]] == ["fall"], summary["faults"]
    assert not s or not (s["z"] > 0.2 and np.abs(s["rp"]).max() < 3.0)
