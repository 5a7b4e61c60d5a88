"""Seed 003's closed-loop trot over seconds of simulated time: the Coulomb-LCP ID and the
two-stage QP predict
the rigid simulator's normal forces (the paper's setup: Lemke on the same pyramid LCP,
ideal joints), and true mu = inf on rigid ground does not make it fall."""

import math

import pytest

from servoloop.experiments.seed003 import Case, _sim_config, run_case


def test_rigid_cases_use_the_papers_simulator_and_a_true_infinite_friction():
    cfg = _sim_config("rigid", math.inf)
    assert cfg.rigid.solver == "lemke" and math.isinf(cfg.rigid.mu)
    servo = cfg.servos(1)[0]
    assert servo.coulomb_nm == 0.0 and servo.stall_torque_at_supply_nm >= 1e3
    assert _sim_config("rigid", 0.1, "xm430").servos(1)[0].stall_torque_at_supply_nm < 5.0
    with pytest.raises(ValueError, match="actuators"):
        _sim_config("rigid", 0.1, "maxon")


def test_lcp_mu_predicts_the_rigid_simulators_normal_forces_within_2_percent():
    trace = []
    out = run_case(Case("rigid", 0.1, "lcp_mu"), 2.0, trace=trace)
    assert out["fell"] == 0.0 and out["id_failures"] == 0.0
    assert out["distance_m"] > 0.25                       # it trots (0.2 m/s after 0.3 s)
    assert out["force_err_pct"] < 2.0
    # the feet take off and land: the prediction is checked through the gait, not a stand
    stance_counts = {int(t["stance"].sum()) for t in trace}
    assert {2, 4} <= stance_counts


def test_trot_at_true_infinite_friction_on_rigid_ground_does_not_fall():
    out = run_case(Case("rigid", math.inf, "lcp_mu"), 2.0)
    assert out["fell"] == 0.0
    assert out["distance_m"] > 0.25
    assert out["force_err_pct"] < 10.0


def test_qp_mu_predicts_the_rigid_simulators_normal_forces_within_12_percent():
    # the goal (the paper: 12.5 %); measured 1.6 % over 2 s.  Before Stage I
    # kept normal complementarity and Stage II stayed on Stage I's optimal face it was
    # 40 % (the loaded feet differed from the simulator's on 70 % of the ticks)
    trace = []
    out = run_case(Case("rigid", 0.1, "qp_mu"), 2.0, trace=trace)
    assert out["fell"] == 0.0 and out["id_failures"] == 0.0
    assert out["distance_m"] > 0.25
    assert out["force_err_pct"] < 12.0
    assert {2, 4} <= {int(t["stance"].sum()) for t in trace}
    # per tick, the feet the QP loads are the feet the simulator loads on nearly every tick
    # (touchdown and lift-off ticks excepted)
    ticks = [t for t in trace if t["pred"] is not None]
    differ = sum(bool(((t["pred"] > 1e-3) != (t["actual"] > 1e-3)).any()) for t in ticks)
    assert differ < 0.1 * len(ticks)


def test_qp_mu_at_true_infinite_friction_on_rigid_ground_does_not_fall():
    out = run_case(Case("rigid", math.inf, "qp_mu"), 2.0)
    assert out["fell"] == 0.0 and out["id_failures"] == 0.0
    assert out["distance_m"] > 0.25
    assert out["force_err_pct"] < 12.0


def test_compliant_infinite_friction_is_the_anchored_spring_and_holds_a_trot():
    # the stick-slip law needs a finite mu (at 2 it shook a still stand and every controller
    # fell within 10 s); compliant "inf" is a true inf: the tangential spring-damper anchored
    # at touchdown (ContactLaw.tangent_stiffness)
    cfg = _sim_config("compliant", math.inf)
    assert math.isinf(cfg.law.mu_static) and cfg.law.tangent_stiffness > 0.0
    assert _sim_config("compliant", 0.1).law.tangent_stiffness == 0.0     # finite mu: as before
    out = run_case(Case("compliant", math.inf, "lcp_mu"), 2.0)
    assert out["fell"] == 0.0 and out["id_failures"] == 0.0
    assert out["distance_m"] > 0.25
