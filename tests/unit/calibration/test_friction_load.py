"""``calibrate friction`` on servos without current sensing: Present Load / Present PWM.

End to end against the in-process virtual bus in simulated time (real protocol
bytes, the emulated servo's velocity loop, motor line and gearbox friction
integrated at 0.5 ms): AX-18A in wheel mode (Protocol 1.0, Moving Speed with
the direction bit, Present Load) and XL430-W250 in velocity mode (Protocol 2.0,
Present PWM).  The emulator reports the PWM duty ``(tau_m + k_e v) / tau_s``
of its motor line, so a sweep that forgot the back-EMF share would read a
"viscous" friction of k_e (0.17-0.23 N m s/rad) where the servo has none.

Tolerances (stated in calibration/friction.py): Coulomb within half a velocity
LSB times the motor slope tau_s / w0 plus one duty LSB times tau_s (readings
are averaged but not dithered: the emulated registers are exact, so the
quantisation does not average out); viscous within 5 % of tau_s / w0.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from servoloop.calibration.errors import ExperimentError, FitError
from servoloop.calibration.friction import fit_friction_curve, load_friction_torque, sweep_velocity
from servoloop.cli import main
from servoloop.firmware_bridge.bus import Bus, ServoSpec
from servoloop.firmware_bridge.control_table import get_table
from servoloop.virtual_bus import InProcessVirtualBus
from servoloop.virtual_bus.actuator import servo_model_for

DT_S = 0.002          # simulated time per reading


def _sweep(model, protocol, overrides=None, fractions=(0.05, 0.1, 0.2, 0.35, 0.5, 0.65)):
    """Sweep at these fractions of the no-load speed; -> (sweep dict, emulated ServoModel, before, after)."""
    vb = InProcessVirtualBus({1: model}, protocol=protocol, actuators={1: overrides} if overrides else None)
    truth = vb.engine.plant.params[0].servo
    names = ("torque_enable", "moving_speed", "cw_angle_limit", "ccw_angle_limit", "goal_position",
             "operating_mode", "goal_velocity")
    try:
        bus = Bus(vb.port, 1_000_000, protocol, [ServoSpec(id=1, model=model)], on_after_write=lambda: vb.pump())
        with bus:
            bus.connect()
            regs = bus.table(1).registers
            before = {n: bus.read_raw(1, n) for n in names if n in regs}
            w0 = truth.no_load_speed_rad_s
            sweep = sweep_velocity(bus, 1, [w0 * f for f in fractions], settle_s=0.3, hold_s=0.5,
                                   clock=lambda: vb.time_s, tick=lambda: vb.advance(DT_S), progress=False)
            after = {n: bus.read_raw(1, n) for n in before}
    finally:
        vb.close()
    return sweep, truth, before, after


def _tolerances(model, truth):
    t = get_table(model)
    slope = truth.stall_torque_nm / truth.no_load_speed_rad_s
    duty_lsb = (t.registers.get("present_pwm") or t.registers["present_load"]).scale
    v_lsb = t.registers["present_velocity"].scale
    return 0.5 * v_lsb * slope + duty_lsb * truth.stall_torque_nm, 0.05 * slope


CASES = [("AX-18A", 1, None), ("AX-18A", 1, {"kc": 0.08}), ("XL430-W250", 2, None),
         ("XL430-W250", 2, {"kc": 0.06})]


@pytest.mark.parametrize("model, protocol, overrides", CASES,
                         ids=["AX-18A", "AX-18A-kc0.08", "XL430-W250", "XL430-W250-kc0.06"])
def test_load_path_recovers_emulated_friction(model, protocol, overrides):
    sweep, truth, before, after = _sweep(model, protocol, overrides)
    assert after == before                                       # servo left as found
    assert sweep["source"] == ("present_load" if protocol == 1 else "present_pwm")
    v = sweep["velocity"]
    assert (v > 0).sum() == (v < 0).sum() == 6                   # both directions turned (direction bit)
    curve = fit_friction_curve(v, sweep["torque"], stribeck=False)
    tol_fc, tol_fv = _tolerances(model, truth)
    assert curve.fc == pytest.approx(truth.coulomb_nm, abs=tol_fc)
    assert curve.fv == pytest.approx(truth.viscous_nm_s_per_rad, abs=tol_fv)
    # without the back-EMF correction the duty would claim a viscous friction of ~k_e
    raw = fit_friction_curve(v, sweep["duty"] * sweep["stall_torque_nm"], stribeck=False)
    assert raw.fv > 0.8 * truth.back_emf_nm_s_per_rad


def test_unit_slower_than_its_datasheet_reads_as_viscous():
    """The stated limit: fv is the excess slope over the datasheet motor line.  An emulated
    AX-18A 10 % slower than its datasheet (no viscous friction) reads fv ~ (tau_s - fc)(1/w0' - 1/w0)."""
    w0 = servo_model_for("AX-18A").no_load_speed_rad_s
    sweep, truth, _, _ = _sweep("AX-18A", 1, {"no_load_speed_rad_s": 0.9 * w0}, fractions=(0.05, 0.1, 0.2, 0.35, 0.5, 0.6))
    curve = fit_friction_curve(sweep["velocity"], sweep["torque"], stribeck=False)
    expect = (truth.stall_torque_nm - truth.coulomb_nm) * (1 / (0.9 * w0) - 1 / w0)
    tol_fc, tol_fv = _tolerances("AX-18A", truth)
    assert curve.fv == pytest.approx(expect, abs=tol_fv)
    assert curve.fc == pytest.approx(truth.coulomb_nm, abs=tol_fc)


def test_load_friction_torque_removes_back_emf():
    """Synthetic duties on an exact motor line (no bus): the linear model returns fc and fv."""
    stall, w0, fc, fv = 1.8, 10.0, 0.04, 0.01
    k_e = (stall - fc) / w0
    v = np.array([0.5, 1.0, 2.0, 4.0, -0.5, -1.0, -2.0, -4.0])
    duty = (fc * np.sign(v) + fv * v + k_e * v) / stall
    tau, fc_fit, fv_fit = load_friction_torque(v, duty, stall, stall, w0)
    assert (fc_fit, fv_fit) == pytest.approx((fc, fv), abs=1e-12)
    np.testing.assert_allclose(tau, fc * np.sign(v) + fv * v, atol=1e-12)
    # at half the supply voltage the same duty is half the torque
    tau_half, fc_half, _ = load_friction_torque(v, 2 * duty, stall / 2, stall, w0)
    assert fc_half == pytest.approx(fc, abs=1e-12)
    # saturated readings carry no friction information
    with pytest.raises(FitError, match="unsaturated"):
        load_friction_torque([1.0, -1.0], [0.99, -0.99], stall, stall, w0)


def test_no_datasheet_no_load_path():
    class Table:
        name, source, datasheet = "FAKE", "test", None
        registers = {"moving_speed": 0, "cw_angle_limit": 0, "present_load": 0}

    class FakeBus:
        def table(self, sid):
            return Table()

    with pytest.raises(ExperimentError, match="FAKE.*no-load speed"):
        sweep_velocity(FakeBus(), 1, [1.0])


def test_cli_on_a_saved_load_sweep(tmp_path, capsys):
    """A saved Load sweep (as the hardware run writes it) refits without a Stribeck term."""
    sweep, truth, _, _ = _sweep("AX-18A", 1)
    log = tmp_path / "sweep.json"
    log.write_text(json.dumps({k: v.tolist() if hasattr(v, "tolist") else v for k, v in sweep.items()}))
    assert main(["calibrate", "friction", "--log", str(log), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["params"]["stribeck"] == 0.0 and res["fit"]["source"] == "present_load"
    assert res["params"]["coulomb"] == pytest.approx(truth.coulomb_nm, abs=_tolerances("AX-18A", truth)[0])
    assert math.isfinite(res["stderr"]["coulomb"])


def test_bad_velocities_named(capsys):
    rc = main(["calibrate", "friction", "--port", "/dev/null", "--id", "1", "--model", "XL430-W250",
               "--velocities", "1,-2"])
    assert rc == 2
    assert "--velocities '1,-2'" in capsys.readouterr().err


@pytest.mark.hil
def test_cli_on_a_virtual_bus_process(tmp_path):
    """The whole command in real time on a pty served by ``servoloop virtual-bus`` (XL430, Present PWM).

    Real time on a shared machine: lost replies are tolerated by the sweep, and the
    Coulomb check is twice the lockstep tolerance."""
    import subprocess
    import sys
    from pathlib import Path

    from tests.hil.conftest import _start, _stop

    root = Path(__file__).resolve().parents[3]
    truth = servo_model_for("XL430-W250")
    proc, port = _start(servos="1:XL430-W250", protocol=2)
    try:
        out = tmp_path / "friction.yaml"
        cmd = [sys.executable, "-m", "servoloop.cli", "calibrate", "friction", "--port", port, "--id", "1",
               "--model", "XL430-W250", "--velocities", "0.5,1,2,3", "--settle", "0.3", "--hold", "0.4",
               "--out", str(out), "--json"]
        run = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=120)
    finally:
        _stop(proc)
    assert run.returncode == 0, run.stderr
    res = json.loads(run.stdout)
    assert res["fit"]["source"] == "present_pwm" and res["fit"]["points"] == 8
    assert res["params"]["coulomb"] == pytest.approx(truth.coulomb_nm, abs=2 * _tolerances("XL430-W250", truth)[0])
    assert out.exists() and (tmp_path / "friction_sweep.json").exists()
