"""A4 (full-order step) and A5 (ROM-constrained step at the LIP) on a reduced task grid.

The full 3 x 3 grid runs in ``servoloop rom evaluate`` (see BENCHMARKS.md).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("casadi")

from servoloop.locomotion.checks import REINTEGRATION_TOL, periodicity_error, reintegration_defect  # noqa: E402
from servoloop.locomotion.features import ROM_SPECS, theta0  # noqa: E402
from servoloop.locomotion.five_link import SWAP, TOTAL_MASS, five_link  # noqa: E402
from servoloop.locomotion.task import Task  # noqa: E402
from servoloop.locomotion.trajopt import N_KNOTS, problem  # noqa: E402

TASKS = [Task(0.27, -0.08), Task(0.54, 0.08)]     # the grid's opposite corners


@pytest.fixture(scope="module")
def full_solutions():
    return {t: problem("full").solve(t) for t in TASKS}


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.case)
def test_full_order_step_converges_periodic_and_on_the_slope(task, full_solutions):
    sol = full_solutions[task]
    assert sol.success and sol.violation < 1e-6
    m, P = five_link(), problem("full")
    x = P.unpack(sol.w)
    q, v = x["q"], x["v"]
    # periodicity with mirroring: the start is the relabelled post-impact end
    np.testing.assert_allclose(q[0], q[-1][SWAP], atol=1e-6)
    v_plus, impulse = (np.array(z).ravel() for z in m.impact(q[-1], v[-1]))
    np.testing.assert_allclose(v[0], v_plus, atol=1e-6)
    assert periodicity_error(P, sol) < 1e-6
    foot = np.array(m.swing_foot(q[-1])).ravel()
    np.testing.assert_allclose(foot, task.stride * np.array([np.cos(task.incline), np.sin(task.incline)]),
                               atol=1e-6)
    normal = np.array([-np.sin(task.incline), np.cos(task.incline)])
    assert impulse @ normal > 0                       # A2: the touchdown impulse pushes
    assert sol.cost > 0


@pytest.mark.parametrize("task", [Task(0.27, -0.08), Task(0.54, 0.0)], ids=["slow_down", "fast_flat"])
def test_collocation_matches_a_reintegration(task):
    """A4: each interval re-integrated with the (linear) torque ends within 1e-3 rad of the next
    knot.  0.54 m/s on the flat is the grid's worst task (8.4e-4 rad at 21 knots; 5.5e-3 at 13);
    ``servoloop bench rom`` runs all 9 tasks of the grid."""
    P = problem("full")
    sol = P.solve(task)
    assert sol.success
    assert reintegration_defect(P, sol) < REINTEGRATION_TOL == 1e-3


def _centroidal_momentum(m, q, v):
    com, vcom = np.array(m.com(q)).ravel(), np.array(m.com_vel(q, v)).ravel()
    return float(m.momentum(q, v)) - TOTAL_MASS * (com[1] * vcom[0] - com[0] * vcom[1])


@pytest.mark.parametrize("kind", ["2d", "4d"])
def test_rom_constrained_step_at_the_lip(kind, full_solutions):
    spec = ROM_SPECS[kind]
    P, m = problem(kind), five_link()
    th = theta0(spec)
    # the 2D LIP's cold solve from the full-order gait is the slow one (~10 s): one task
    for task in TASKS if kind == "4d" else TASKS[:1]:
        full = full_solutions[task]
        sol = P.solve(task, th, w0=P.pack(problem("full").unpack(full.w)))
        assert sol.success and sol.violation < 1e-6
        assert sol.cost >= full.cost * (1 - 1e-6)                # J_full is the lower bound
        x = P.unpack(sol.w)
        y = np.array([np.array(P.embedding(x["q"][i], x["v"][i], th)[0]).ravel() for i in range(N_KNOTS)])
        np.testing.assert_allclose(y[:, :2], [np.array(m.com(q)).ravel() for q in x["q"]], atol=1e-9)
        # ROM residual at the midpoints: the NLP's constraints, evaluated independently
        ge, _ = P.constraints(sol.w, P.params(task, th))
        assert np.abs(np.array(ge)).max() < 1e-6
        if kind == "2d":   # LIP + zdd = 0 on a point foot: centroidal angular momentum ~ constant
            L = [_centroidal_momentum(m, x["q"][i], x["v"][i]) for i in range(N_KNOTS)]
            swing = np.ptp([float(m.momentum(q, v)) for q, v in zip(x["q"], x["v"], strict=True)])
            assert np.ptp(L) < 0.05 * max(swing, 1.0)
