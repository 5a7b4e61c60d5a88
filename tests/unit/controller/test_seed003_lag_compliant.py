"""Seed 003, ID(t-1) / ID(t-2) on compliant ground at mu = inf (issue 11).

The compliant simulator's step is linearly implicit in the contact's damper and in the
anchored tangential spring: ``(M + dt J^T D J) dv = dt (tau - h + J^T f)``.  What moved the
robot over a step is ``f - D J dv``, not the law's force at the step's start that it
reports as ``contact_forces``.  The lagged IDs were fed the reported one (about 10 N off on
a ~10 N load at each touchdown and lift-off) and fell within a second of trot; fed the
applied force (``seed003.LAG_FORCES = "applied"``) they trot."""

import math

import numpy as np
import pytest

from servoloop import core_cy
from servoloop.experiments import seed003
from servoloop.experiments.seed003 import Case, run_case
from servoloop.experiments.seed003_lag_loop import StandLoop, applied_forces, mode_summary


def _base_residual(robot, pts, q, v, v1, dt, forces):
    """|M_b dv / dt + h_b - (J^T f)_b| (6,): the base rows take no torque and no servo term."""
    data = core_cy.Data(robot.model)
    M = np.array(core_cy.crba(robot.model, data, q), dtype=float)
    h = np.array(core_cy.nonlinear_effects(robot.model, data, q, v), dtype=float)
    robot.kinematics(q)
    ext = np.zeros(robot.model.nv)
    for i in np.flatnonzero(forces.any(axis=1)):
        ext += robot.point_jacobian(q, int(pts.body[i]), pts.position[i], pts.radius[i]).T @ forces[i]
    return np.abs(M[:6] @ (v1 - v) / dt + h[:6] - ext[:6])


def test_applied_forces_are_what_moved_the_robot():
    loop = StandLoop("compliant", math.inf, settle=0, forces="recorded")
    plant, robot, pts = loop.plant, loop.robot, loop.pts
    worst_rec = worst_app = 0.0
    for k in range(120):                                   # a stand shaken by the joints
        q, v = plant.q.copy(), plant.v.copy()
        plant.step(20.0 * (loop.q_ref - q[7:]) - 0.15 * v[6:] + 0.6 * np.sin(0.3 * k))
        f = plant.contact_forces.copy()
        fa = applied_forces(robot, plant.sim.config, pts, q, v, plant.v, f)
        assert (fa.any(axis=1) == f.any(axis=1)).all()     # only loaded points change
        worst_rec = max(worst_rec, _base_residual(robot, pts, q, v, plant.v, plant.dt, f).max())
        worst_app = max(worst_app, _base_residual(robot, pts, q, v, plant.v, plant.dt, fa).max())
    assert worst_app < 1e-8                                # the step's own forces, to rounding
    assert worst_rec > 0.1                                 # the reported ones are not [N]


def test_applied_forces_leave_rigid_and_stick_slip_forces_as_they_are():
    from dataclasses import replace

    loop = StandLoop("compliant", math.inf, settle=0, forces="recorded")
    q, v, f = loop.plant.q, loop.plant.v, loop.plant.contact_forces
    rigid = seed003._sim_config("rigid", math.inf)
    assert applied_forces(loop.robot, rigid, loop.pts, q, v, v + 1.0, f) is f
    stick_slip = seed003._sim_config("compliant", 0.1)
    assert applied_forces(loop.robot, stick_slip, loop.pts, q, v, v + 1.0, f) is f
    assert applied_forces(loop.robot, None, loop.pts, q, v, v + 1.0, f) is f
    spring = seed003._sim_config("compliant", math.inf)
    moved = applied_forces(loop.robot, replace(spring), loop.pts, q, v, v + 1.0, f)
    assert np.abs(moved - f).max() > 1.0


def test_bad_forces_option_is_named():
    with pytest.raises(ValueError, match="forces"):
        StandLoop("compliant", math.inf, settle=0, forces="measured")


def test_diagonal_stance_only_tips():
    """Linearised in the trot's two-foot phase (lf + rh, the other two lifted 1.5 cm, 40
    ticks in): the one mode above 1 is the trunk tipping about the stance diagonal, real,
    ~exp(sqrt(g / h) dt) (h ~0.235 m: 1.0065), which every controller lives with for the
    phase's 75 ms; the load-swing modes (complex, ~140-170 ticks) decay."""
    loop = StandLoop("compliant", math.inf, settle=400, settle_with="id_lag1", lift=(1, 2),
                     lift_ticks=40, forces="applied")
    assert (loop.x0[2][0][[1, 2], 2] == 0.0).all() and (loop.x0[2][0][[0, 3], 2] > 5.0).all()
    A = loop.jacobian("id_lag1")
    m = mode_summary(A, loop.nv, loop.n_feet, list(loop.robot.model.actuated_joint_names))
    assert abs(m["eig"].imag) < 1e-9 and 1.003 < m["rho"] < 1.01
    w, V = np.linalg.eig(A)
    moving = np.linalg.norm(V[loop.nv:2 * loop.nv], axis=0) > 1e-6 * np.linalg.norm(V, axis=0)
    oscillating = moving & (np.abs(w.imag) > 1e-6)
    assert np.abs(w[oscillating]).max() < 0.999


@pytest.mark.parametrize("controller", ["id_lag1", "id_lag2"])
def test_lagged_ids_trot_on_compliant_ground_at_infinite_friction(monkeypatch, controller):
    case = Case("compliant", math.inf, controller)
    monkeypatch.setattr(seed003, "LAG_FORCES", "recorded")
    before = run_case(case, seconds=3.0)
    assert before["fell"] == 1.0                           # fed the step-start forces: falls
    monkeypatch.setattr(seed003, "LAG_FORCES", "applied")
    after = run_case(case, seconds=3.0)
    assert after["fell"] == 0.0 and after["distance_m"] > 0.4
    assert after["pos_err_rad"] < 0.02
    assert after["force_err_pct"] < 15.0


def test_bad_lag_forces_setting_is_named(monkeypatch):
    monkeypatch.setattr(seed003, "LAG_FORCES", "start")
    with pytest.raises(ValueError, match="LAG_FORCES"):
        run_case(Case("compliant", math.inf, "id_lag1"), seconds=0.01)
