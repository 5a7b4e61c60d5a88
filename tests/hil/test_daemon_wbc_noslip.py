"""``wbc`` / ``trot`` with ``variant: lcp_noslip`` in the daemon, lockstep through the virtual bus,
the quadruped on rigid ground at mu = inf (the no-slip model's own ground).

Alg. 2's answer is undistributed: with the stance feet stuck the forces giving the base
wrench form a family and it returns an end of it, a stance foot at zero (measured before
the split: on every four-foot tick of ``wbc``), and at a planned lift-off the lifting foot
may carry all of the load; ``trot`` fell within its first seconds (tilt 53 deg).  The
split (``controller/wholebody/force_split.py``) shares the load among the stance feet and
unloads a foot over its last 30 ms before lift-off.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from servoloop.controller.config import ControllerConfig, builtin_config
from servoloop.controller.daemon import Daemon
from servoloop.controller.runtime import make_lockstep
from servoloop.controller.simulation_config import GroundConfig

pytestmark = pytest.mark.hil


def run_noslip(name: str, run_s: float, **params):
    """The daemon running ``name`` with lcp_noslip on rigid mu = inf ground; per tick of the
    run: (base x, z [m], tilt [deg], stance (4,), the ID's normal force per foot (4,) [N])."""
    cfg = builtin_config("quadruped")
    cfg = replace(cfg, controller=ControllerConfig(name=name, params={"variant": "lcp_noslip",
                                                                      "mu": "inf", **params}),
                  simulation=replace(cfg.simulation, ground=GroundConfig(contact="rigid", mu=math.inf)))
    lock = make_lockstep(cfg)
    rows = []
    try:
        sim = lock.virtual.engine.plant.sim
        daemon = Daemon(cfg, lock.bus, lock.clock, telemetry_path=None, socket_path=None)
        core = daemon.controller.core
        npts = [len(f.points) for f in daemon.controller.robot.feet]
        step = core.step

        def recorded(q, v, tg):
            tau = step(q, v, tg)
            fz, j = np.zeros(len(npts)), 0
            for i, on in enumerate(tg.stance):
                if on:
                    fz[i] = core.forces[j:j + npts[i], 2].sum()
                    j += npts[i]
            tilt = math.degrees(2 * math.asin(min(1.0, math.hypot(sim.q[3], sim.q[4]))))
            rows.append((float(sim.q[0]), float(sim.q[2]), tilt, *tg.stance, *fz))
            return tau

        core.step = recorded
        summary = daemon.run(run_s)
        status = daemon.controller.status()
        weight = sim.model.total_mass * 9.81
    finally:
        lock.close()
    r = np.array(rows)
    return summary, status, r[:, :3], r[:, 3:7].astype(bool), r[:, 7:11], weight, core


def test_wbc_noslip_shares_the_load_among_the_four_feet():
    summary, status, s, stance, fz, weight, core = run_noslip("wbc", 2.0)
    assert summary["state"] == "done", summary["faults"]
    assert stance.all() and len(fz) > 1900
    assert s[:, 1].min() > 0.2 and s[:, 2].max() < 3.0             # standing, level
    last = fz[-1000:]
    assert np.abs(last.sum(axis=1) / weight - 1.0).max() < 0.1      # it carries the weight
    share = last / last.sum(axis=1, keepdims=True)
    # every foot loaded on every tick (before: one at zero on every tick)
    assert share.min() > 0.1, share.min()
    assert core.splits > 1000 and status["id_fallbacks"] == core.fallbacks


def test_trot_noslip_on_rigid_ground_unloads_lifting_feet_and_stays_up():
    summary, _, s, stance, fz, weight, core = run_noslip("trot", 3.0, speed_mps=0.1)
    assert summary["state"] == "done", summary["faults"]
    x, z, tilt = s.T
    # before: 10.5 deg within these 3 s, down at 53 deg (z 0.12 m) within 5 s
    assert z.min() > 0.2 and tilt.max() < 5.0
    assert x[-1] - x[0] > 0.1                          # trotting forward
    # the ID's load on a foot at its last tick before a planned lift-off (before: 27 % on
    # average, 53 % at most in these 3 s; all of it at times over 5 s)
    lift = np.argwhere(stance[:-1] & ~stance[1:])
    assert len(lift) > 30
    carried = np.array([fz[k, i] / fz[k].sum() for k, i in lift])
    assert carried.max() < 0.25 and carried.mean() < 0.1, (carried.mean(), carried.max())
    assert core.splits > 1000
