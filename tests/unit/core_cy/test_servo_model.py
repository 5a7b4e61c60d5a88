"""The one servo model: parameters, compiled law vs its NumPy reference, calibration loading."""

import math

import numpy as np
import pytest
import yaml

from servoloop.core_cy.actuator import ServoModel, ServoModelError, _actuator
from servoloop.core_cy.actuator.defaults import XM430_W350_FIGURES
from servoloop.core_cy.actuator.independent import COLUMNS, IndependentServos
from servoloop.core_cy.actuator.reference import servo_torque_reference, step_independent_reference
from servoloop.firmware_bridge.control_table import MODELS, get_table
from servoloop.virtual_bus.actuator import servo_model_for


def _law_inputs(rng, n):
    stall = rng.uniform(0.3, 10.0, n)
    return dict(
        drive=rng.integers(0, 3, n).astype(np.int8), on=rng.random(n) < 0.8,
        kp=rng.uniform(0, 50, n), kd=rng.uniform(0, 1, n), kv=rng.uniform(0, 5, n), stall=stall,
        emf=rng.uniform(0, 2, n), limit=np.where(rng.random(n) < 0.5, np.inf, rng.uniform(0, 12, n)),
        goal=rng.normal(0, 3, n), q=rng.normal(0, 3, n), qd=rng.normal(0, 8, n), command=rng.normal(0, 10, n))


def test_compiled_law_matches_the_reference_on_random_states():
    rng = np.random.default_rng(0)
    x = _law_inputs(rng, 20000)
    tau, slope = np.empty(20000), np.empty(20000)
    _actuator.servo_torque_batch(x["drive"], x["on"].astype(np.uint8), x["kp"], x["kd"], x["kv"],
                                 x["stall"], x["emf"], x["limit"], x["goal"], x["q"], x["qd"],
                                 x["command"], tau, slope)
    ref_tau, ref_slope = servo_torque_reference(**x)
    np.testing.assert_allclose(tau, ref_tau, rtol=0, atol=1e-12)
    np.testing.assert_allclose(slope, ref_slope, rtol=0, atol=0)
    # the envelope, torque on: inside the motor line (then the limit), always
    on, qd, lim = x["on"], x["qd"], x["limit"]
    hi = np.clip(x["stall"] - x["emf"] * qd, -lim, lim)
    lo = np.clip(-x["stall"] - x["emf"] * qd, -lim, lim)
    assert np.all(tau[on] <= hi[on] + 1e-12) and np.all(tau[on] >= lo[on] - 1e-12)
    assert np.all(tau[~on] == 0.0)


def test_compiled_independent_joints_match_the_reference():
    rng = np.random.default_rng(1)
    n = 64
    S = np.column_stack([rng.uniform(0, 30, n), rng.uniform(0, 0.8, n), rng.uniform(0, 5, n),
                         rng.uniform(0.5, 8, n), rng.uniform(0, 1.5, n), rng.uniform(0.3, 9, n),
                         rng.uniform(0, 0.2, n), rng.uniform(0, 0.05, n), rng.uniform(0, 0.1, n),
                         rng.uniform(1e-3, 1e-2, n), rng.uniform(0, 0.5, n), rng.normal(0, 1, n)])
    assert S.shape[1] == len(COLUMNS)
    goal, on = rng.normal(0, 2, n), rng.random(n) < 0.7
    drive, command = rng.integers(0, 3, n).astype(np.int8), rng.normal(0, 3, n)
    q0, qd0 = rng.normal(0, 1, n), rng.normal(0, 2, n)
    q, qd, tau = q0.copy(), qd0.copy(), np.zeros(n)
    _actuator.step_independent(np.ascontiguousarray(S), goal, on.astype(np.uint8), drive, command, 200,
                               5e-4, q, qd, tau)
    rq, rqd, rtau = step_independent_reference(S, goal, on, drive, command, 200, 5e-4, q0, qd0)
    np.testing.assert_allclose(q, rq, atol=1e-9)
    np.testing.assert_allclose(qd, rqd, atol=1e-9)
    np.testing.assert_allclose(tau, rtau, atol=1e-9)


@pytest.mark.parametrize("model", sorted(n for n, t in MODELS.items() if t.datasheet is not None))  # DYNAMIXEL-Y, PM42: no figures
def test_defaults_come_from_the_datasheet_and_their_no_load_speed_is_its_figure(model):
    s = servo_model_for(model)
    ds = MODELS[model].datasheet
    assert (s.stall_torque_nm, s.rated_voltage_v, s.supply_voltage_v) == (ds.stall_torque_nm, ds.voltage_v, ds.voltage_v)
    assert s.no_load_speed_at_supply_rad_s == pytest.approx(ds.no_load_speed_rad_s, rel=1e-12)
    # steady unloaded: the motor line at w0 balances the friction exactly
    w0 = s.no_load_speed_rad_s
    assert s.stall_torque_nm - s.back_emf_nm_s_per_rad * w0 == pytest.approx(
        s.coulomb_nm + s.viscous_nm_s_per_rad * w0)


def test_to_dict_from_dict_round_trip_and_errors_name_the_field():
    s = servo_model_for("XM430-W350")
    assert ServoModel.from_dict(s.to_dict()) == s or math.isnan(s.velocity_gain_nm_s_per_rad)
    d = s.to_dict()
    d["no_load_speed_rad_s"] = None
    assert ServoModel.from_dict(d).back_emf_nm_s_per_rad == 0.0
    with pytest.raises(ServoModelError, match="cfg.yaml: unknown servo parameter 'kq'"):
        ServoModel.from_dict({"kq": 1}, where="cfg.yaml")
    with pytest.raises(ServoModelError, match="missing servo parameter"):
        ServoModel.from_dict({"kp": 1.0})
    with pytest.raises(ServoModelError, match="kd must be a number"):
        s.with_overrides({"kd": "fast"})
    with pytest.raises(ServoModelError, match="supply_voltage_v must be > 0"):
        s.with_overrides({"supply_voltage_v": 0.0})
    assert s.with_overrides({"kp": 3.0}).kp_nm_per_rad == 3.0


def test_calibration_reports_load_straight_into_the_model(tmp_path):
    base = servo_model_for("AX-18A")
    bench = {"params": {"kp": 8.0, "kd": 0.25, "kc": 0.04, "torque_limit": 1.5, "command_delay": 0.01}}
    path = tmp_path / "servo.yaml"
    path.write_text(yaml.safe_dump(bench))
    s = ServoModel.from_calibration(path, base)
    assert (s.kp_nm_per_rad, s.kd_nm_s_per_rad, s.coulomb_nm) == (8.0, 0.25, 0.04)
    assert s.stall_torque_at_supply_nm == pytest.approx(1.5)
    assert s.back_emf_nm_s_per_rad == pytest.approx(base.back_emf_nm_s_per_rad)   # the motor line slope stays
    # a voltage-drive fit (calibrate fit, BAM's m1): kt and R give the motor line
    fit = {"model": "m1", "params": {"kt": 0.37, "R": 3.5, "armature": 0.002, "friction_base": 0.018,
                                     "friction_viscous": 0.0059, "q_offset": 0.001}}
    xl = ServoModel.from_calibration(fit, servo_model_for("XL330-M288"))
    assert xl.stall_torque_nm == pytest.approx(0.37 * 5.0 / 3.5)
    assert xl.back_emf_nm_s_per_rad == pytest.approx(0.37 * 0.37 / 3.5)
    assert (xl.armature_kg_m2, xl.coulomb_nm, xl.viscous_nm_s_per_rad) == (0.002, 0.018, 0.0059)
    with pytest.raises(ServoModelError, match="kp_scale needs the firmware gain"):
        ServoModel.from_calibration({"params": {"kp_scale": 0.02}}, base)
    assert ServoModel.from_calibration({"params": {"kp_scale": 0.02}}, base, kp_fw=400).kp_nm_per_rad == 8.0
    with pytest.raises(ServoModelError, match="missing.yaml: cannot read"):
        ServoModel.from_calibration(tmp_path / "missing.yaml", base)


def test_independent_servos_check_their_inputs():
    s = servo_model_for("XM430-W350")
    with pytest.raises(ValueError, match="inertia_kg_m2"):
        IndependentServos([s], [0.0])
    j = IndependentServos([s], [0.01])
    with pytest.raises(ValueError, match="h must be > 0"):
        j.step(1, 0.0, [0.0], [True])


def test_bench_kernel_on_a_servo_model_reaches_its_no_load_speed():
    from servoloop.calibration.models import servo_model_vector
    from servoloop.core_cy.actuator import simulate

    s = servo_model_for("MX-64")
    n = 3000
    q, qd, _ = simulate(servo_model_vector(s), np.full(n, 50.0), np.ones(n, bool), s.supply_voltage_v,
                        1e-3, 0.0, 0.0, 0.01, 0.0)
    assert qd.max() <= s.no_load_speed_rad_s * (1 + 1e-9)
    assert qd[-1] == pytest.approx(s.no_load_speed_rad_s, rel=1e-3)


def test_the_simulators_default_figures_are_the_xm430_tables():
    ds = get_table("XM430-W350").datasheet
    assert (XM430_W350_FIGURES.stall_torque_nm, XM430_W350_FIGURES.no_load_speed_rpm,
            XM430_W350_FIGURES.voltage_v) == (ds.stall_torque_nm, ds.no_load_speed_rpm, ds.voltage_v)


def test_xm540_w270_simulator_armature_is_the_xm430_rotor_scaled_by_rotor_torque():
    # The XM430-W350's armature is identified (ToddlerBot); the XM540-W270's had none (0:
    # its legs swung like weightless rotors).  Its derivation: J_rotor N^2, the rotor inertia
    # per unit of rotor-side stall torque (stall / N) the XM430's.  The figures come from
    # the control tables' datasheet blocks (e-Manual), not from the simulator module.
    from servoloop.core_cy.sim.model import simulator_servo_model

    rotor_per_torque = {}
    for name in ("XM430-W350", "XM540-W270"):
        ds = get_table(name).datasheet
        arm = simulator_servo_model(ds, name).armature_kg_m2
        assert arm > 0.0, name
        rotor_per_torque[name] = (arm / ds.gear_ratio ** 2) / (ds.stall_torque_nm / ds.gear_ratio)
    assert rotor_per_torque["XM540-W270"] == pytest.approx(rotor_per_torque["XM430-W350"], rel=1e-12)
    # 0.0012 kg m^2 x (272.5 / 353.5) x (10.6 / 4.1): twice the XM430's, not a copy of it
    xm540 = simulator_servo_model(get_table("XM540-W270").datasheet, "XM540-W270").armature_kg_m2
    assert xm540 == pytest.approx(0.0012 * (272.5 / 353.5) * (10.6 / 4.1), rel=1e-12)
