"""The servos' gearbox friction, damping and armature the controllers invert
(``controller.servo_friction``): from a calibration file (``servoloop run --calibration``), the
config's ``servos[].coulomb_friction`` / ``viscous_friction`` / ``position_damping`` /
``armature`` or the servo model's default; it reaches ``wbc`` / ``trot``'s compiled
``servo_command`` and the run says where it came from."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import yaml

from servoloop.controller.calibration_file import apply_calibration, load_calibration
from servoloop.controller.config import builtin_config, config_from_dict, load_config
from servoloop.controller.controllers import Command, ControllerContext, JointState, make_controller
from servoloop.controller.controllers.wbc import COULOMB_BAND
from servoloop.controller.errors import ConfigError
from servoloop.controller.servo_friction import (
    friction_summary,
    law_summary,
    print_friction,
    servo_friction,
)

#: the XM430-W350's default gearbox Coulomb friction in the servo model [N m]
DEFAULT_KC = 0.134


def report(tmp_path, params, name="xm.yaml", model="XM430-W350", gain=800):
    """A calibration YAML with ``params`` (the fields ``servoloop calibrate`` writes)."""
    doc = {"params": params, "fit": {"per_gain": [{"gain": gain}]},
           "data": {"servo": {"port": "/dev/x", "id": 1, "model": model, "protocol": 2}}}
    p = tmp_path / name
    p.write_text(yaml.safe_dump(doc))
    return p


def command(cfg, name="trot", params=None, velocity=(2.0, -2.0, 0.0), tau=0.3):
    """The compiled ``servo_command``'s effort and goal (less the measured position) for a
    torque ``tau`` on every joint, the first joints moving at ``velocity`` [rad/s]."""
    ctx = ControllerContext.from_config(cfg)
    ctrl = make_controller(name, ctx, params or {})
    state, cmd = JointState.zeros(ctx.n), Command.zeros(ctx.n)
    state.position[:] = ctrl._default_posture()
    state.velocity[:len(velocity)] = velocity
    ctrl._servo_command(np.full(ctx.n, tau), ctrl._tau, 1.0, state.position, state.velocity,
                        ctrl._advance, ctrl.posture, ctrl._impedance_u8, ctrl._own_offset,
                        ctrl._coulomb, COULOMB_BAND, cmd.effort, cmd.position, cmd.kp, cmd.kd)
    return cmd.effort.copy(), cmd.position - state.position


def test_calibrated_coulomb_friction_reaches_the_compiled_command(tmp_path):
    """A bench calibration's ``kc`` (0.27 N m, not the model's 0.134) is what ``trot`` adds to
    the torque it sends, on every XM430 of the quadruped."""
    path = report(tmp_path, {"kp": 20.0, "kd": 0.15, "kc": 0.27, "kp_by_gain": {"800": 20.0}})
    cfg = apply_calibration(builtin_config("quadruped"), load_calibration(path))
    assert {s.coulomb_friction for s in cfg.servos} == {0.27}
    effort, _ = command(cfg)
    assert np.allclose(effort[:3], [0.3 + 0.27, 0.3 - 0.27, 0.3])
    # without the file: the model's default
    effort, _ = command(builtin_config("quadruped"))
    assert np.allclose(effort[:3], [0.3 + DEFAULT_KC, 0.3 - DEFAULT_KC, 0.3])


def test_calibrated_viscous_friction_joins_the_damping_advance(tmp_path):
    """A fit's ``friction_viscous`` b (N m s/rad): the goal's advance becomes (k_d + b) / k_p,
    so the servo's gearbox does not take ``b dq`` from the torque asked for."""
    path = report(tmp_path, {"kp": 20.0, "kd": 0.15, "kc": 0.2, "friction_viscous": 0.05})
    cfg = apply_calibration(builtin_config("quadruped"), load_calibration(path))
    effort, offset = command(cfg)
    dq = np.array([2.0, -2.0, 0.0])
    # (a calibrated stiffness: the daemon's joint map adds effort / k_p to the goal, not wbc)
    assert np.allclose(effort[:3], [0.5, 0.1, 0.3])
    assert np.allclose(offset[:3], (0.15 + 0.05) / 20.0 * dq)
    # wbc without coulomb_compensation inverts the plain law: neither friction term
    effort, offset = command(cfg, "wbc")
    assert np.allclose(effort[:3], 0.3) and np.allclose(offset[:3], 0.15 / 20.0 * dq)


def test_a_friction_sweep_sets_friction_only(tmp_path):
    """``calibrate friction``'s report (``coulomb``, ``viscous``; no stiffness): the friction
    reaches the servos, their ``position_stiffness`` and gain registers are left alone."""
    doc = {"params": {"coulomb": 0.21, "viscous": 0.03, "stribeck": 0.01, "stribeck_velocity": 0.2},
           "fit": {"rms_torque": 0.002, "points": 12}, "data": {"velocity": [0.1], "torque": [0.2]}}
    path = tmp_path / "friction.yaml"
    path.write_text(yaml.safe_dump(doc))
    base = builtin_config("quadruped")
    cfg = apply_calibration(base, load_calibration(path))
    s0, b0 = cfg.servos[0], base.servos[0]
    assert (s0.coulomb_friction, s0.viscous_friction) == (0.21, 0.03)
    assert s0.position_stiffness == b0.position_stiffness and s0.registers == b0.registers
    f = servo_friction(cfg)
    assert np.allclose(f.coulomb_nm, 0.21) and np.allclose(f.viscous_nm_s_per_rad, 0.03)


def test_friction_set_by_hand_in_the_config_reaches_the_command(tmp_path):
    cfg = builtin_config("quadruped")
    servos = [replace(s, coulomb_friction=0.2) if s.joint.startswith("lf") else s for s in cfg.servos]
    cfg = replace(cfg, servos=tuple(servos))
    lf = np.array([s.joint.startswith("lf") for s in cfg.servos])
    effort, _ = command(cfg, velocity=np.full(cfg.n, 2.0))
    assert np.allclose(effort[lf], 0.5) and np.allclose(effort[~lf], 0.3 + DEFAULT_KC)
    # a calibration without a viscous term leaves the config's, and says so
    servos = [replace(s, viscous_friction=0.01) for s in cfg.servos]
    path = report(tmp_path, {"kp": 20.0, "kd": 0.15, "kc": 0.25})
    cal = apply_calibration(replace(cfg, servos=tuple(servos)), load_calibration(path))
    assert {(s.coulomb_friction, s.viscous_friction) for s in cal.servos} == {(0.25, 0.01)}
    [entry] = friction_summary(cal)
    assert entry["coulomb_source"] == f"calibration {path}"
    assert entry["viscous_source"] == cfg.source         # the config file that set it


def test_the_summary_says_where_each_friction_came_from(tmp_path, capsys):
    cfg = builtin_config("quadruped")
    [entry] = friction_summary(cfg)
    assert entry["coulomb_nm"] == DEFAULT_KC and entry["viscous_nm_s_per_rad"] == 0.0
    assert entry["coulomb_source"] == entry["viscous_source"] == "XM430-W350 default"
    assert len(entry["joints"]) == cfg.n
    path = report(tmp_path, {"kp": 20.0, "kd": 0.15, "kc": 0.27})
    [entry] = friction_summary(apply_calibration(cfg, load_calibration(path)))
    assert entry["coulomb_nm"] == 0.27 and entry["coulomb_source"] == f"calibration {path}"
    # the bench's law has no viscous term: the default stays, and the summary says the file had none
    assert entry["viscous_source"] == f"XM430-W350 default; calibration {path} has none"
    print_friction({"friction": [entry]})            # the summary's and servoloop status's line
    assert capsys.readouterr().out == (
        f"  friction: Coulomb 0.27 N*m, viscous 0 N*m*s/rad (Coulomb: calibration {path}; viscous: "
        f"XM430-W350 default; calibration {path} has none) on 12 joints\n")


SERVO = {"id": 1, "model": "XM430-W350", "joint": "a"}


@pytest.mark.parametrize("extra, match", [
    ({"coulomb_friction": -0.1}, r"servos\[0\].*coulomb_friction must be a finite number >= 0 N\*m, got -0.1"),
    ({"viscous_friction": ".inf"}, r"viscous_friction must be a finite number >= 0 N\*m\*s/rad"),
    ({"coulomb_friction": "high"}, r"servos\[0\]\.coulomb_friction must be a number, got 'high'"),
    ({"coulomb_friction": 5.0}, r"coulomb_friction 5.0 N\*m is not below the XM430-W350's stall torque"),
    ({"friction_from": [["coulomb_friction", "x"]]}, r"unknown key 'friction_from'"),
    ({"coulomb": 0.1}, r"unknown key 'coulomb' .*coulomb_friction"),
])
def test_bad_friction_in_the_config_names_the_key_and_the_line(tmp_path, extra, match):
    p = tmp_path / "robot.yaml"
    text = yaml.safe_dump({"servos": [dict(SERVO, **extra)]}, sort_keys=False)
    p.write_text(text.replace("'.inf'", ".inf"))
    with pytest.raises(ConfigError, match=match) as e:
        load_config(p)
    assert str(p) in str(e.value) and "line " in str(e.value)


def test_friction_keys_load_from_yaml():
    cfg = config_from_dict({"servos": [dict(SERVO, coulomb_friction=0.1, viscous_friction=0.02)]})
    assert (cfg.servos[0].coulomb_friction, cfg.servos[0].viscous_friction) == (0.1, 0.02)
    [entry] = friction_summary(cfg)
    assert entry["coulomb_source"] == entry["viscous_source"] == "the robot config"


def test_the_config_schema_offers_the_friction_keys_only():
    from servoloop.controller.schema import config_schema

    servo = config_schema()["properties"]["servos"]["items"]["properties"]
    assert servo["coulomb_friction"]["anyOf"] == [{"type": "number"}, {"type": "null"}]
    assert "viscous_friction" in servo and "friction_from" not in servo     # set by --calibration


def test_a_friction_sweep_file_applies_to_the_servos_of_its_model_only(tmp_path, capsys):
    """``servoloop calibrate friction --model M --out F``: the report names its model, so
    ``--calibration F`` gives its friction to the M servos, not to the others of the robot."""
    import json

    from servoloop.calibration.cli import main as calibrate

    v = np.array([0.1, 0.2, 0.4, 0.8, 1.6, 3.2])
    v = np.concatenate([v, -v])
    log = tmp_path / "sweep.json"
    log.write_text(json.dumps({"velocity": v.tolist(), "torque": (0.2 * np.sign(v) + 0.03 * v).tolist()}))
    out = tmp_path / "friction.yaml"
    assert calibrate(["calibrate", "friction", "--log", str(log), "--model", "XM430-W350",
                      "--out", str(out)]) == 0
    capsys.readouterr()
    cal = load_calibration(out)
    assert cal.model == "XM430-W350"
    cfg = config_from_dict({"servos": [SERVO, {"id": 2, "model": "XL330-M288", "joint": "b"}]})
    xm, xl = apply_calibration(cfg, cal).servos
    assert xm.coulomb_friction == pytest.approx(0.2, abs=1e-3)
    assert xm.viscous_friction == pytest.approx(0.03, abs=1e-3)
    assert (xl.coulomb_friction, xl.viscous_friction) == (None, None)


def test_a_voltage_model_fit_still_pins_its_gain_and_gives_its_friction(tmp_path):
    """``calibrate fit --model m1`` (a motor, no kp): the position loop is modelled at the
    logs' gain, which stays pinned; its ``friction_base`` / ``friction_viscous`` reach the servos."""
    doc = {"model": "m1", "params": {"kt": 1.6, "R": 4.0, "armature": 0.01, "q_offset": 0.0,
                                     "friction_base": 0.09, "friction_viscous": 0.012},
           "fit": {"logs": [{"kp_fw": 640}]}, "data": {"servo": {"model": "XM430-W350"}}}
    path = tmp_path / "m1.yaml"
    path.write_text(yaml.safe_dump(doc))
    cfg = apply_calibration(builtin_config("quadruped"), load_calibration(path))
    s = cfg.servos[0]
    assert s.registers["position_p_gain"] == 640 and s.position_stiffness is not None
    assert (s.coulomb_friction, s.viscous_friction) == (0.09, 0.012)


def test_a_servo_without_datasheet_figures_has_no_default_friction():
    """A Dynamixel-P / Y servo has no figures for a default model: nothing is compensated and
    the summary says how to give it (before, the daemon could not start on such a robot)."""
    cfg = config_from_dict({"servos": [{"id": 1, "model": "PM42-010-S260-R", "joint": "a"},
                                       {"id": 2, "model": "PM42-010-S260-R", "joint": "b",
                                        "coulomb_friction": 0.5}]})
    a, b = friction_summary(cfg)
    assert a["coulomb_nm"] == 0.0 and a["joints"] == ["a"]
    assert a["coulomb_source"] == ("none: PM42-010-S260-R has no datasheet figures; "
                                   "set servos[].coulomb_friction")
    assert b["coulomb_nm"] == 0.5 and b["coulomb_source"] == "the robot config"


# -- the rest of the servo law: damping k_d and the rotor's armature ----------------------------

#: the XM430-W350 model's default damping [N m s/rad] and armature [kg m^2]
DEFAULT_KD, DEFAULT_ARMATURE = 0.15, 0.0012


def test_calibrated_damping_is_the_damping_advance(tmp_path):
    """A bench calibration's ``kd`` (0.6 N m s/rad, not the model's 0.15) is the goal's damping
    advance ``k_d / k_p dq`` of ``wbc`` and ``trot``, on every XM430 of the quadruped."""
    path = report(tmp_path, {"kp": 20.0, "kd": 0.6, "kc": 0.2, "kp_by_gain": {"800": 20.0}})
    cfg = apply_calibration(builtin_config("quadruped"), load_calibration(path))
    assert {s.position_damping for s in cfg.servos} == {0.6}
    dq = np.array([2.0, -2.0, 0.0])
    for name in ("wbc", "trot"):
        _, offset = command(cfg, name)
        assert np.allclose(offset[:3], 0.6 / 20.0 * dq), name
    # without the file: the model's default (and, no calibrated stiffness, the controller
    # offsets tau / k_p itself: 0.3 / 20)
    _, offset = command(builtin_config("quadruped"), "wbc")
    assert np.allclose(offset[:3], DEFAULT_KD / 20.0 * dq + 0.3 / 20.0)


def test_damping_and_armature_set_by_hand_reach_the_controller():
    cfg = builtin_config("quadruped")
    servos = [replace(s, position_damping=0.4, armature=0.003) if s.joint.startswith("lf") else s
              for s in cfg.servos]
    cfg = replace(cfg, servos=tuple(servos))
    lf = np.array([s.joint.startswith("lf") for s in cfg.servos])
    _, offset = command(cfg, "wbc", velocity=np.full(cfg.n, 2.0))
    offset -= 0.3 / 20.0            # tau / k_p (no calibrated stiffness: the controller's own)
    assert np.allclose(offset[lf], 0.4 / 20.0 * 2.0) and np.allclose(offset[~lf], DEFAULT_KD / 20.0 * 2.0)
    # the rotors' inertia is the contact inverse dynamics' (its joint-space mass matrix)
    ctrl = make_controller("wbc", ControllerContext.from_config(cfg), {})
    assert np.allclose(ctrl.robot.armature[lf], 0.003) and np.allclose(ctrl.robot.armature[~lf], DEFAULT_ARMATURE)
    cal_f = servo_friction(cfg)
    assert cal_f.sources[0][2:] == (cfg.source, cfg.source)
    assert cal_f.sources[-1][2:] == ("XM430-W350 default", "XM430-W350 default")


def test_a_fit_armature_reaches_the_servos_and_the_summary_says_where(tmp_path, capsys):
    """``calibrate fit`` identifies the armature (and, the ``pd`` law, kd): both reach the servos
    and the summary's ``servo_law`` line; a report without them leaves the default and says so."""
    path = report(tmp_path, {"kp_scale": 0.025, "kd": 0.2, "kc": 0.1, "armature": 0.004})
    cfg = apply_calibration(builtin_config("quadruped"), load_calibration(path))
    assert {(s.position_damping, s.armature) for s in cfg.servos} == {(0.2, 0.004)}
    [entry] = law_summary(cfg)
    assert (entry["kd_nm_s_per_rad"], entry["armature_kg_m2"]) == (0.2, 0.004)
    assert entry["kd_source"] == entry["armature_source"] == f"calibration {path}"
    path = report(tmp_path, {"kp": 20.0, "kd": 0.3, "kc": 0.1}, name="bench.yaml")
    [entry] = law_summary(apply_calibration(builtin_config("quadruped"), load_calibration(path)))
    assert entry["armature_kg_m2"] == DEFAULT_ARMATURE
    assert entry["armature_source"] == f"XM430-W350 default; calibration {path} has none"
    print_friction({"servo_law": [entry]})            # the summary's and servoloop status's line
    assert capsys.readouterr().out == (
        f"  servo law: damping 0.3 N*m*s/rad, armature 0.0012 kg*m^2 (damping: calibration {path}; "
        f"armature: XM430-W350 default; calibration {path} has none) on 12 joints\n")


@pytest.mark.parametrize("extra, match", [
    ({"position_damping": -0.1}, r"servos\[0\].*position_damping must be a finite number >= 0 N\*m\*s/rad"),
    ({"armature": ".nan"}, r"armature must be a finite number >= 0 kg\*m\^2"),
    ({"position_damping": "soft"}, r"servos\[0\]\.position_damping must be a number, got 'soft'"),
])
def test_bad_damping_or_armature_in_the_config_names_the_key_and_the_line(tmp_path, extra, match):
    p = tmp_path / "robot.yaml"
    text = yaml.safe_dump({"servos": [dict(SERVO, **extra)]}, sort_keys=False)
    p.write_text(text.replace("'.nan'", ".nan"))
    with pytest.raises(ConfigError, match=match) as e:
        load_config(p)
    assert str(p) in str(e.value) and "line " in str(e.value)


def test_a_friction_sweep_leaves_the_damping_alone(tmp_path):
    doc = {"params": {"coulomb": 0.21, "viscous": 0.03}, "fit": {"points": 12}}
    path = tmp_path / "friction.yaml"
    path.write_text(yaml.safe_dump(doc))
    cfg = builtin_config("quadruped")
    cfg = replace(cfg, servos=tuple(replace(s, position_damping=0.25) for s in cfg.servos))
    cal = apply_calibration(cfg, load_calibration(path))
    assert {(s.position_damping, s.armature) for s in cal.servos} == {(0.25, None)}
    [entry] = law_summary(cal)
    assert entry["kd_source"] == cfg.source
