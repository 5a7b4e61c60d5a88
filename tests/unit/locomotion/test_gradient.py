"""A6: the envelope gradient of J(theta) (IPOPT's parameter multipliers) against central differences."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("casadi")

from servoloop.locomotion.features import ROM_SPECS, theta0  # noqa: E402
from servoloop.locomotion.task import Task  # noqa: E402
from servoloop.locomotion.trajopt import problem  # noqa: E402

TASKS = [Task(0.3, 0.05), Task(0.45, -0.04), Task(0.5, 0.02)]


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.case)
def test_envelope_gradient_matches_central_differences(task):
    P, F = problem("4d"), problem("full")
    th = theta0(ROM_SPECS["4d"])
    sol = P.solve(task, th, w0=P.pack(F.unpack(F.solve(task).w)))
    assert sol.success
    rng = np.random.default_rng(hash(task.case) % 2**32)
    eps = 1e-7
    for _ in range(2 if task != TASKS[0] else 5):
        d = rng.normal(size=th.size)
        d /= np.linalg.norm(d)
        plus = P.solve(task, th + eps * d, w0=sol.w, lam=(sol.lam_g, sol.lam_x))
        minus = P.solve(task, th - eps * d, w0=sol.w, lam=(sol.lam_g, sol.lam_x))
        assert plus.success and minus.success
        fd = (plus.cost - minus.cost) / (2 * eps)
        assert fd == pytest.approx(sol.grad @ d, rel=1e-3, abs=1e-3 * np.linalg.norm(sol.grad) * 1e-3)


def test_gradient_points_downhill_for_a_small_step():
    P, F = problem("4d"), problem("full")
    task = Task(0.4, 0.0)
    th = theta0(ROM_SPECS["4d"])
    sol = P.solve(task, th, w0=P.pack(F.unpack(F.solve(task).w)))
    sol = P.solve(task, th, w0=sol.w, lam=(sol.lam_g, sol.lam_x))    # re-solved, as learn() does
    # from the solution's own primal-dual point: the same local optimum, moved.  J is steep and
    # curved (|grad| ~1.5e5): a 1e-6 step falls by the first-order amount to 0.2 %, a 1e-5 step
    # here already climbs again (+6.3)
    step = P.solve(task, th - 1e-6 * sol.grad / np.linalg.norm(sol.grad), w0=sol.w,
                   lam=(sol.lam_g, sol.lam_x))
    assert step.success and step.cost < sol.cost
    assert sol.cost - step.cost == pytest.approx(1e-6 * np.linalg.norm(sol.grad), rel=1e-2)


@pytest.mark.parametrize("task", TASKS[:2], ids=lambda t: t.case)
def test_paper_sensitivity_q_transpose_b_equals_g_transpose_nu(task):
    """The paper's gradient (eqs. 9-11: Q^T b from the KKT system of the active set) equals
    the envelope gradient G^T nu the learning uses (IPOPT's multipliers), digest A6: 1e-6."""
    from servoloop.locomotion.sensitivity import kkt_gradient

    P, F = problem("4d"), problem("full")
    th = theta0(ROM_SPECS["4d"])
    sol = P.solve(task, th, w0=P.pack(F.unpack(F.solve(task).w)))
    assert sol.success
    r = kkt_gradient(P, sol, th)
    scale = np.linalg.norm(sol.grad)
    assert scale > 0
    # the kept active rows carry the solution's multipliers: b + F^T nu = 0, w~ = 0 at theta~ = 0
    assert r["stationarity"] < 1e-6 * scale and r["primal_step"] < 1e-6
    assert np.linalg.norm(r["grad"] - sol.grad) < 1e-6 * scale          # Q^T b = G^T nu(IPOPT)
    assert np.linalg.norm(r["g_nu"] - sol.grad) < 1e-6 * scale          # nu(KKT) = nu(IPOPT) on G


def test_paper_sensitivity_refuses_the_full_order_problem():
    from servoloop.locomotion.sensitivity import kkt_gradient

    F = problem("full")
    with pytest.raises(ValueError, match="full-order"):
        kkt_gradient(F, F.solve(TASKS[0]), np.zeros(3))
