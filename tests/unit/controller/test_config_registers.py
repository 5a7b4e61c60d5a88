"""Registers in the config (``servos[].registers``, ``register_defaults``): checked at load, with
errors naming the file, the line and the known registers; and calibration files loaded."""

from pathlib import Path

import pytest
import yaml

from servoloop.controller.calibration_file import apply_calibration, load_calibration
from servoloop.controller.config import load_config
from servoloop.controller.config_checks import register_plan
from servoloop.controller.errors import ConfigError

SERVOS = [{"id": 1, "model": "XM430-W350", "joint": "a"},
          {"id": 2, "model": "XL330-M288", "joint": "b"}]


def write(tmp_path: Path, data, name="robot.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def servos(**regs_of):
    out = [dict(s) for s in SERVOS]
    for i, regs in regs_of.items():
        out[int(i[1:])]["registers"] = regs
    return out


def test_registers_si_or_raw_per_the_tables_unit(tmp_path):
    cfg = load_config(write(tmp_path, {
        "servos": servos(s0={"position_p_gain": 640, "profile_velocity": 0.0, "current_limit": 1.0}),
        "register_defaults": {"XM430-W350": {"position_p_gain": 900, "position_d_gain": 100},
                              "xl330-m288": {"profile_acceleration": 0}}}))
    plan = {(sid, name): raw for sid, name, raw, _v in register_plan(cfg)}
    # the servo's own value wins over its model's default; the default fills the rest
    assert plan[(1, "position_p_gain")] == 640 and plan[(1, "position_d_gain")] == 100
    # SI: 1.0 A on an XM430 (2.69 mA per unit) is raw 372
    assert plan[(1, "current_limit")] == round(1.0 / 0.00269)
    assert plan[(1, "profile_velocity")] == 0
    assert plan[(2, "profile_acceleration")] == 0 and (2, "position_p_gain") not in plan


@pytest.mark.parametrize("regs, match", [
    ({"position_p_gainn": 800}, r"no register 'position_p_gainn'; writable registers: .*position_p_gain"),
    ({"position_p_gain": 20000}, r"outside XM430-W350's range 0..16383"),
    ({"current_limit": 9.0}, r"'current_limit' = 9.0 is outside XM430-W350's range 0..3.2\d* A"),
    ({"position_p_gain": 800.5}, r"has no unit: give its raw integer"),
    ({"position_p_gain": "high"}, r"needs a number"),
    ({"present_position": 0.0}, r"read-only"),
    ({"operating_mode": 3}, r"set servos\[\]\.mode instead"),
    ({"goal_position": 0.0}, r"the daemon writes goals"),
])
def test_bad_registers_name_the_place_and_what_is_known(tmp_path, regs, match):
    p = write(tmp_path, {"servos": servos(s0=regs)})
    with pytest.raises(ConfigError, match=match) as e:
        load_config(p)
    name = next(iter(regs))
    line = next(k for k, text in enumerate(p.read_text().splitlines(), 1) if f"{name}:" in text)
    assert str(p) in str(e.value) and f"line {line}:" in str(e.value)   # servos[0].registers.NAME


def test_register_defaults_name_unknown_models(tmp_path):
    p = write(tmp_path, {"servos": SERVOS, "register_defaults": {"XM999": {"position_p_gain": 1}}})
    with pytest.raises(ConfigError, match=r"register_defaults: unknown servo model 'XM999'; known models: .*XM430-W350"):
        load_config(p)
    p = write(tmp_path, {"servos": SERVOS, "register_defaults": {"XL330-M288": {"kp": 1}}})
    with pytest.raises(ConfigError, match=r"XL330-M288 has no register 'kp'"):
        load_config(p)


def bench_report(tmp_path, model="XM430-W350", gain=640):
    """A calibration result as `servoloop calibrate actuator --out` writes it (the fields read)."""
    report = {"params": {"kp": 5.5, "kd": 0.2, "kc": 0.03, "kp_by_gain": {str(gain): 5.5, "1280": 11.0}},
              "fit": {"per_gain": [{"gain": gain}, {"gain": 1280}]},
              "data": {"servo": {"port": "/dev/x", "id": 1, "model": model, "protocol": 2}}}
    p = tmp_path / "servo.yaml"
    p.write_text(yaml.safe_dump(report))
    return p


def test_calibration_sets_stiffness_and_pins_the_gain_on_its_model_only(tmp_path):
    cfg = load_config(write(tmp_path, {"servos": SERVOS}))
    out = apply_calibration(cfg, load_calibration(bench_report(tmp_path)))
    xm, xl = out.servos
    assert xm.position_stiffness == 5.5 and xm.registers == {"position_p_gain": 640}
    assert xl.position_stiffness is None and xl.registers == {}
    assert (1, "position_p_gain", 640, 640) in register_plan(out)


def test_calibration_errors_name_the_file(tmp_path):
    cfg = load_config(write(tmp_path, {"servos": [SERVOS[1]]}))
    with pytest.raises(ConfigError, match=r"servo.yaml: calibration made on XM430-W350, but the config has no "
                                          r"such servo \(its models: XL330-M288\)"):
        apply_calibration(cfg, load_calibration(bench_report(tmp_path)))
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: 1\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: not a `servoloop calibrate` result"):
        load_calibration(bad)
    with pytest.raises(ConfigError, match=r"missing.yaml: cannot read"):
        load_calibration(tmp_path / "missing.yaml")
