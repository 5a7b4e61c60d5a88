"""Seed 003, rigid mu = inf, LCP,inf: a tick whose no-slip ID finds no consistent set of
stuck feet gets the §4.5 nearest feasible answer, not the previous tick's torques."""

import math

import numpy as np
import pytest

from servoloop.experiments import seed003
from servoloop.experiments.seed003 import Case, run_case
from servoloop.experiments.seed003_fallback import ContactFallback


class _Checked(ContactFallback):
    """The experiment's fallback, checking every answer against the contacts' physics."""

    answers: list = []

    def torques(self, M, h, q, v, qdd, stance):
        tau, f_n = super().torques(M, h, q, v, qdd, stance)
        N, S, T, gap = self.rows(q, stance)
        res = self.last
        Ma = M.copy()
        Ma[6:, 6:] += np.diag(self.robot.armature)
        f = res.contact_forces
        gen = Ma @ res.qdd + h - (S.T @ f[:, 0] + T.T @ f[:, 1] + N.T @ f[:, 2])
        v_next = v + self.dt * res.qdd
        loaded = f[:, 2] > 1e-6
        _Checked.answers.append({
            "scale": max(float(np.abs(f).max()), 1.0),
            "base_residual": float(np.abs(gen[:6]).max()),
            "tau_residual": float(np.abs(gen[6:][self.robot.idx] - tau).max()),
            "min_fn": float(f_n.min()) if f_n.size else 0.0,
            "slip": float(np.abs(np.concatenate([S[loaded] @ v_next, T[loaded] @ v_next])).max()
                          if loaded.any() else 0.0),
            # the joint acceleration it realises is the desired one's nearest, not another
            "qdd_joint": res.qdd[6:].copy(), "qdd_des": qdd[6:].copy()})
        return tau, f_n


def test_failed_no_slip_ticks_get_consistent_torques_not_stale_ones(monkeypatch):
    seconds = 1.0      # the stand and the first touchdowns (it falls at ~0.5 s either way)
    # the paper's LCP,inf (without the stance QP and split of test_seed003_noslip_split.py)
    for flag in ("CONSISTENT_QDD", "DISTRIBUTE", "QP_ANSWERS_FAILED"):
        monkeypatch.setattr(seed003, flag, False)
    # before: FAILED_TICK = "hold" kept the previous torques on every such tick
    monkeypatch.setattr(seed003, "FAILED_TICK", "hold")
    held = run_case(Case("rigid", math.inf, "lcp_inf"), seconds)
    assert held["id_failures"] > 0 and held["id_fallbacks"] == 0
    # after: each of those ticks is answered by the nearest feasible solve
    monkeypatch.setattr(seed003, "FAILED_TICK", "fallback")
    monkeypatch.setattr(seed003, "ContactFallback", _Checked)
    _Checked.answers = []
    out = run_case(Case("rigid", math.inf, "lcp_inf"), seconds)
    assert out["id_failures"] == 0.0
    assert out["id_fallbacks"] == len(_Checked.answers) > 0
    for a in _Checked.answers:
        # torques and forces that the dynamics and the stuck contacts agree with
        assert a["base_residual"] < 1e-6 * a["scale"]
        assert a["tau_residual"] < 1e-6 * a["scale"]
        assert a["min_fn"] >= -1e-9 * a["scale"]
        assert a["slip"] < 1e-6


def test_fallback_rows_are_the_contacts_on_the_ground():
    from servoloop.controller.wholebody.robot import WholeBodyRobot
    from servoloop.experiments.closed_loop import builtin_urdf
    from servoloop.experiments.gaits import stand_goals

    urdf = builtin_urdf("quadruped")
    robot = WholeBodyRobot.from_urdf(urdf)
    q = robot.model.neutral().copy()
    q[7:] = stand_goals(urdf, joint_names=list(robot.model.actuated_joint_names))
    fb = ContactFallback(robot, 1e-3, "lcp_noslip", math.inf)
    stance = np.ones(len(robot.feet), dtype=bool)
    N, S, T, gap = fb.rows(q, stance)
    # lifting the base 1 cm moves every foot's gap by 1 cm and its normal row reads it
    q2 = q.copy()
    q2[2] += 0.01
    assert np.allclose(fb.rows(q2, stance)[3] - gap, 0.01)
    v = np.zeros(robot.model.nv)
    v[2] = 0.3                   # base straight up (level base: local z is world z)
    assert np.allclose(N @ v, 0.3) and np.allclose(S @ v, 0.0) and np.allclose(T @ v, 0.0)
    # the stance plane passes through the highest stance foot
    gap_st = ContactFallback(robot, 1e-3, "lcp_noslip", math.inf, plane="stance").rows(q, stance)[3]
    assert np.allclose(gap_st - gap, gap_st[0] - gap[0])
    assert np.abs(gap_st).min() == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="ContactFallback.plane"):
        ContactFallback(robot, 1e-3, "lcp_noslip", math.inf, plane="tilted")
