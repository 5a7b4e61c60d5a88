"""``servoloop bench inverse_dynamics``: contact inverse dynamics (seed 003) per call.

The built-in quadruped standing on its four feet, q_dd_des = 0, each
variant of :func:`core_cy.inverse_dynamics.solve`; the contact set is the
four feet duplicated 1, 2, 5 and 10 times (4 to 40 contacts, the paper's
scaling experiment, digest §9.18).  The anchor is one rigid step of our own
simulator from the same state (the same model evaluation plus one contact
LCP), timed interleaved in this process.  The paper's targets (C++, 2011
laptop) are LCP,inf over 40 contacts below 1 ms and the QP variants at
1 kHz up to about 30 contacts.
"""

from __future__ import annotations

import numpy as np

from servoloop.bench.common import Row, interleaved_times, report

__all__ = ["add_arguments", "run"]


def add_arguments(parser) -> None:
    parser.add_argument("--number", type=int, default=20, help="calls per timed block")
    parser.add_argument("--repeats", type=int, default=3, help="timed blocks (best is kept)")
    parser.add_argument("--copies", type=int, nargs="+", default=[1, 2, 5, 10],
                        help="how many times the four feet are duplicated")


def run(args) -> dict:
    from servoloop.core_cy import inverse_dynamics as ID
    from servoloop.core_cy.dynamics._dynamics import Data, Model
    from servoloop.core_cy.sim.model import ContactPoints, contact_points_from_urdf
    from servoloop.core_cy.sim.simulator import SimConfig, Simulator
    from servoloop.experiments.gaits import stand_goals
    from servoloop.robots import urdf_path

    urdf = str(urdf_path("quadruped"))
    model = Model.from_urdf(urdf, floating_base=True)
    data = Data(model)
    sim = Simulator.from_urdf(urdf, SimConfig(mode="rigid"))
    stand = stand_goals(urdf)
    sim.reset(stand)
    sim.step(stand, n_steps=1000)
    q0, v0 = sim.q.copy(), sim.v.copy()
    feet = contact_points_from_urdf(urdf)
    zero = np.zeros(model.nv)

    def anchor():
        sim.set_state(q0, v0)
        sim.step(stand)

    rows = []
    for copies in args.copies:
        pts = ContactPoints.concat([feet] * copies)
        for variant in ID.VARIANTS:
            def ours(pts=pts, variant=variant):
                ID.solve(model, data, q0, v0, zero, pts, 0.8, variant)

            ours()  # first call imports and warms the QP backend
            t_o, t_a = interleaved_times(ours, anchor, args.number, args.repeats)
            rows.append(Row(f"{variant} k={len(pts)}", "time_per_call", "s", t_o,
                            "sim_rigid_step", t_a))
    return report("inverse_dynamics", rows)
