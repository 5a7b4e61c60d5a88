"""Seed 003, rigid mu = inf, LCP,inf: the stance feet kept down and the no-slip ID's load split
(``experiments/seed003_distribute.py``), so a foot is unloaded before it lifts and the trot
does not fall (Alg. 2's one loaded foot lifted with the whole load and the robot fell at
0.48 s)."""

import math

import numpy as np
import pytest

from servoloop.experiments import seed003
from servoloop.experiments.seed003 import Case, run_case
from servoloop.experiments.seed003_distribute import distribute, liftoff_weights

SECONDS = 2.0           # the stand, then six lift-offs and touchdowns of the trot


def _paper_lcp_inf(monkeypatch):
    for flag in ("CONSISTENT_QDD", "DISTRIBUTE", "QP_ANSWERS_FAILED"):
        monkeypatch.setattr(seed003, flag, False)


def test_lcp_inf_trots_on_rigid_ground_at_mu_inf(monkeypatch):
    _paper_lcp_inf(monkeypatch)
    before = run_case(Case("rigid", math.inf, "lcp_inf"), SECONDS)
    assert before["fell"] == 1.0
    monkeypatch.undo()
    trace = []
    out = run_case(Case("rigid", math.inf, "lcp_inf"), SECONDS, trace=trace)
    assert out["fell"] == 0.0 and len(trace) == int(SECONDS * 1000)
    assert out["distance_m"] > 0.25                          # 0.2 m/s after a 0.3 s stand
    # the ID predicts what the simulator gives (the paper's LCP,inf: 1.16 %)
    assert out["force_err_pct"] < 2.0
    # and it tracks better than the paper's PID with the same gains (Table 3)
    pid = run_case(Case("rigid", math.inf, "pid"), SECONDS)
    assert out["pos_err_rad"] < pid["pos_err_rad"]


def test_feet_are_unloaded_before_they_lift(monkeypatch):
    def lift_loads(trace):
        """The simulator's normal force on each foot the tick before its planned lift-off,
        as a fraction of the total normal force then."""
        out = []
        for k in range(1, len(trace)):
            lifted = trace[k - 1]["stance"] & ~trace[k]["stance"]
            a = trace[k - 1]["actual"]
            out += [a[j] / max(a.sum(), 1e-9) for j in np.flatnonzero(lifted)]
        return np.array(out)

    trace = []
    run_case(Case("rigid", math.inf, "lcp_inf"), SECONDS, trace=trace)
    after = lift_loads(trace)
    assert after.size >= 8
    # the feet that stay carry the robot: at most a quarter of the load leaves with a foot
    assert after.max() < 0.25
    _paper_lcp_inf(monkeypatch)
    trace = []
    run_case(Case("rigid", math.inf, "lcp_inf"), 0.47, trace=trace)      # to its fall
    assert lift_loads(trace).max() > 0.9        # Alg. 2's loaded foot lifts with the load


def test_distribute_keeps_the_base_wrench_and_pushes_only():
    rng = np.random.default_rng(3)
    # four coplanar contacts 0.2 m below a 6-DOF base, two joints per leg (nv = 6 + 8);
    # feet 0 and 3, 1 and 2 are the diagonals
    J_list = []
    for i in range(4):
        J = np.zeros((3, 14))
        p = np.array([0.1 * (-1) ** i, 0.08 * (-1) ** (i // 2), -0.2])
        J[:, :3] = np.eye(3)
        J[:, 3:6] = -np.array([[0, -p[2], p[1]], [p[2], 0, -p[0]], [-p[1], p[0], 0]])
        J[:, 6 + 2 * i:8 + 2 * i] = rng.normal(size=(3, 2))
        J_list.append(J)
    A = np.hstack([J[:, :6].T for J in J_list])          # forces -> base wrench
    # a centred 24 N load carried the way a vertex answer carries it: on one diagonal
    # (the normal forces' one free direction is the twist +-+- across the diagonals), with
    # a squeeze along that diagonal on top (an internal force: zero net force and moment)
    forces = np.array([[0.0, 0.0, 0.0], [-0.5, 0.4, 12.0], [0.5, -0.4, 12.0], [0.0, 0.0, 0.0]])
    assert np.allclose(A @ forces.reshape(-1), A @ np.tile([0.0, 0.0, 6.0], 4))
    for w in (np.ones(4), np.array([1.0, 1e4, 1e4, 1.0])):
        new, delta = distribute(J_list, forces, w)
        assert np.allclose(A @ new.reshape(-1), A @ forces.reshape(-1), atol=1e-9)
        assert np.allclose(new - forces, delta)
        assert new[:, 2].min() >= -1e-12
    # equal weights: the least-norm split, no internal force
    new, _ = distribute(J_list, forces, np.ones(4))
    assert np.allclose(new, [[0.0, 0.0, 6.0]] * 4, atol=1e-9)
    # feet 1 and 2 about to lift: the load moves to the diagonal 0-3
    new, _ = distribute(J_list, forces, np.array([1.0, 1e4, 1e4, 1.0]))
    assert new[[1, 2], 2].max() < 1e-2 * new[[0, 3], 2].min()
    assert new[:, 2].sum() == pytest.approx(24.0)
    # a contact whose row is open keeps no force (feet 1 and 2 take it all then)
    new, _ = distribute(J_list, np.tile([0.0, 0.0, 6.0], (4, 1)), np.ones(4),
                        open_rows=np.array([True, False, False, False]))
    assert np.allclose(new[0], 0.0) and new[:, 2].sum() == pytest.approx(24.0)
    assert np.allclose(A @ new.reshape(-1), A @ np.tile([0.0, 0.0, 6.0], 4), atol=1e-9)


def test_liftoff_weights_rise_over_the_last_part_of_stance():
    from servoloop.controller.wholebody.gait import TrotGait

    # the quadruped's: feet 0 and 3 swing over phase [0, 0.25), feet 1 and 2 over [0.5, 0.75)
    gait = TrotGait(touchdown=np.array([0.25, 0.75, 0.75, 0.25]))
    every = np.ones(4, dtype=bool)
    assert np.all(liftoff_weights(gait, -0.1, every, 1e-3) == 1.0)      # the stand
    # the trot's first lift-off (gait time 0) is ramped from the stand before it
    w = liftoff_weights(gait, -0.0005, every, 1e-3)
    assert w[0] == w[3] > 100.0 and w[1] == w[2] == 1.0
    # feet 1 and 2 lift at 0.15 s: 1 over 30 ms before, rising to (30 ms / 1 ms)^2
    assert np.all(liftoff_weights(gait, 0.1, gait.stance(0.1), 1e-3) == 1.0)
    w_mid = liftoff_weights(gait, 0.135, gait.stance(0.135), 1e-3)
    w_near = liftoff_weights(gait, 0.1495, gait.stance(0.1495), 1e-3)
    assert 1.0 < w_mid[1] == w_mid[2] < w_near[1] == w_near[2] == 900.0
    assert w_near[0] == w_near[3] == 1.0
    # a foot already in swing is no contact: its weight is not raised
    assert np.all(liftoff_weights(gait, 0.1495, np.array([True, False, False, True]), 1e-3) == 1.0)


def test_qp_inf_trots_on_rigid_ground_at_mu_inf_with_the_stance_qp(monkeypatch):
    seconds = 4.5          # without the stance QP it fell at 4.0 s (1.0 m)
    monkeypatch.setattr(seed003, "STANCE_QP_FOR", ("lcp_inf",))
    before = run_case(Case("rigid", math.inf, "qp_inf"), seconds)
    assert before["fell"] == 1.0
    monkeypatch.undo()
    out = run_case(Case("rigid", math.inf, "qp_inf"), seconds)
    assert out["fell"] == 0.0 and out["force_err_pct"] < 2.0
    # at mu 0.1 the feet slip: the stance QP (feet stuck) stays off there
    monkeypatch.setattr(seed003, "NoSlipSplit", None)   # would raise if it were made
    run_case(Case("rigid", 0.1, "qp_inf"), 0.05)
