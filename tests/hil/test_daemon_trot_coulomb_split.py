"""The default ``trot`` (``lcp_coulomb``, mu 0.8) in the daemon on a grippy floor (issue 11), lockstep
through the virtual bus: the quadruped on rigid ground at mu = inf (rubber feet on a high-friction floor).

The Coulomb LCP's answer is undistributed as Alg. 2's: a stance foot under 2 % of the load on every
four-foot tick, and at a lift-off the lifting foot carried up to 83 % of it; on this ground ``trot``
fell (tilt 57 deg, base at 0.12 m within 5 s, > 10 deg after 1.8 s).  Step 4 of the balance tick
now shares the answer's sticking contacts among the stance feet inside the ID's cone
(``controller/wholebody/force_split.py``) and ``trot`` unloads a foot before it lifts.
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

MU = 0.8        # the ID's default


def run_trot(run_s: float):
    """The daemon's default ``trot`` at 0.1 m/s on rigid mu = inf ground; per tick: (base x, z [m],
    tilt [deg]), the ID's forces (k, 3) [N] of the tick and the core."""
    cfg = builtin_config("quadruped")
    cfg = replace(cfg, controller=ControllerConfig(name="trot", params={"speed_mps": 0.1}),
                  simulation=replace(cfg.simulation, ground=GroundConfig(contact="rigid", mu=math.inf)))
    lock = make_lockstep(cfg)
    rows, forces = [], []
    try:
        sim = lock.virtual.engine.plant.sim
        daemon = Daemon(cfg, lock.bus, lock.clock, telemetry_path=None, socket_path=None)
        core = daemon.controller.core
        step = core.step

        def recorded(q, v, tg):
            tau = step(q, v, tg)
            tilt = math.degrees(2 * math.asin(min(1.0, math.hypot(sim.q[3], sim.q[4]))))
            rows.append((float(sim.q[0]), float(sim.q[2]), tilt))
            forces.append(np.array(core.forces))
            return tau

        core.step = recorded
        summary = daemon.run(run_s)
    finally:
        lock.close()
    return summary, np.array(rows), forces, core


def test_default_trot_on_a_grippy_floor_stays_up_with_its_forces_in_the_cone():
    summary, s, forces, core = run_trot(3.0)
    assert summary["state"] == "done", summary["faults"]
    assert core.variant == "lcp_coulomb" and core.mu == MU and core.coulomb_split
    x, z, tilt = s.T
    # before: > 10 deg after 1.8 s, down at 57 deg (z 0.12 m) within 5 s
    assert z.min() > 0.2 and tilt.max() < 8.0, (z.min(), tilt.max())
    assert x[-1] - x[0] > 0.1                            # trotting forward
    assert core.splits > 1000
    # every shared force pushes and stays inside the ID's friction cone
    f = np.vstack(forces)
    assert f[:, 2].min() >= -1e-9
    ft = np.hypot(f[:, 0], f[:, 1])
    assert np.all(ft <= MU * f[:, 2] * (1 + 1e-6) + 1e-9)
