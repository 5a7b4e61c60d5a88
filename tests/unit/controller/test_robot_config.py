"""Config loading: typed defaults, YAML on top, errors that name the key, section and file."""

from pathlib import Path

import numpy as np
import pytest
import yaml

from servoloop.controller.config import RobotConfig, builtin_config, config_from_dict, load_config
from servoloop.controller.errors import ConfigError

SERVOS = [{"id": 1, "model": "XM430-W350", "joint": "a", "min": -1.0, "max": 1.0},
          {"id": 2, "model": "XM430-W350", "joint": "b", "direction": -1, "offset": 0.1}]


def write(tmp_path: Path, data, name="robot.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return p


def test_defaults_fill_missing_sections(tmp_path):
    cfg = load_config(write(tmp_path, {"servos": SERVOS}))
    assert isinstance(cfg, RobotConfig)
    assert cfg.loop.rate_hz == 1000.0
    assert cfg.bus.protocol == 2 and cfg.bus.port is None
    assert cfg.shutdown.mode == "torque_off"
    assert cfg.safety.comm_timeout_s == 0.5 and cfg.safety.comm_timeout_action == "torque_off"
    assert cfg.safety.bus_watchdog_s == 0.1 and cfg.safety.max_velocity is None
    assert cfg.servos[1].direction == -1 and cfg.servos[1].offset == 0.1
    assert cfg.joint_names == ("a", "b")
    assert cfg.source == str(tmp_path / "robot.yaml")


def test_unknown_top_level_key_names_key_and_file(tmp_path):
    p = write(tmp_path, {"servos": SERVOS, "lopo": {"rate_hz": 5}})
    with pytest.raises(ConfigError) as e:
        load_config(p)
    msg = str(e.value)
    assert "'lopo'" in msg and str(p) in msg
    assert e.value.key == "lopo"


def test_unknown_nested_key_names_section(tmp_path):
    p = write(tmp_path, {"servos": SERVOS, "loop": {"rate": 500}})
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert "'rate'" in str(e.value) and "'loop'" in str(e.value) and str(p) in str(e.value)
    assert e.value.key == "loop.rate"


def test_unknown_servo_key_names_index(tmp_path):
    bad = [dict(SERVOS[0], ofset=0.2)]
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, {"servos": bad}))
    assert "servos[0].ofset" in str(e.value)


@pytest.mark.parametrize("patch, key", [
    ({"loop": {"rate_hz": "fast"}}, "loop.rate_hz"),
    ({"loop": {"rate_hz": 0}}, "loop.rate_hz"),
    ({"bus": {"protocol": 3}}, "bus.protocol"),
    ({"shutdown": {"mode": "explode"}}, "shutdown.mode"),
    ({"safety": {"comm_warn_rate": 1.5}}, "safety.comm_warn_rate"),
    ({"safety": {"comm_timeout_s": 0}}, "safety.comm_timeout_s"),
    ({"safety": {"comm_timeout_action": "explode"}}, "safety.comm_timeout_action"),
    ({"safety": {"max_velocity": -1.0}}, "safety.max_velocity"),
    ({"logging": {"max_mb": 0}}, "logging.max_mb"),
    ({"bus": {"baud": True}}, "bus.baud"),
])
def test_bad_values_name_the_key(tmp_path, patch, key):
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, {"servos": SERVOS, **patch}))
    assert key in str(e.value)


def test_the_fall_keys_load_and_bad_values_name_the_key_and_the_range(tmp_path):
    """``safety.on_fall`` and the fall thresholds (controller/fall.py): the defaults, a user's
    values, and each wrong value naming its key and what it may be."""
    cfg = load_config(write(tmp_path, {"servos": SERVOS}))
    assert (cfg.safety.on_fall, cfg.safety.fall_tilt_rad, cfg.safety.fall_rate_rad_s) == ("damp", 0.8, 2.0)
    cfg = load_config(write(tmp_path, {"servos": SERVOS, "safety": {
        "on_fall": "torque_off", "fall_tilt_rad": 0.6, "fall_rate_rad_s": None, "fall_dwell_s": 0.05,
        "fall_damp_s": 0.5}}))
    assert (cfg.safety.on_fall, cfg.safety.fall_rate_rad_s, cfg.safety.fall_damp_s) == ("torque_off", None, 0.5)
    for patch, key, said in (({"on_fall": "limp"}, "safety.on_fall", "('damp', 'torque_off', 'warn')"),
                             ({"fall_tilt_rad": 4.0}, "safety.fall_tilt_rad", "(0, pi)"),
                             ({"fall_rate_rad_s": 0}, "safety.fall_rate_rad_s", "> 0"),
                             ({"fall_dwell_s": -0.1}, "safety.fall_dwell_s", ">= 0"),
                             ({"fall_damp_s": -1}, "safety.fall_damp_s", ">= 0")):
        with pytest.raises(ConfigError) as e:
            load_config(write(tmp_path, {"servos": SERVOS, "safety": patch}))
        assert key in str(e.value) and said in str(e.value), str(e.value)


def test_duplicate_id_and_bad_limits(tmp_path):
    dup = [SERVOS[0], dict(SERVOS[1], id=1)]
    with pytest.raises(ConfigError, match="id 1 already used"):
        load_config(write(tmp_path, {"servos": dup}))
    inv = [dict(SERVOS[0], min=1.0, max=-1.0)]
    with pytest.raises(ConfigError, match="min 1.0 must be below max"):
        load_config(write(tmp_path, {"servos": inv}))
    with pytest.raises(ConfigError, match="direction must be 1 or -1"):
        load_config(write(tmp_path, {"servos": [dict(SERVOS[0], direction=2)]}))


def test_missing_servos_and_required_servo_fields(tmp_path):
    with pytest.raises(ConfigError, match="missing required key 'servos'"):
        load_config(write(tmp_path, {"robot": "x"}))
    with pytest.raises(ConfigError, match="servos\\[0\\].joint"):
        load_config(write(tmp_path, {"servos": [{"id": 1, "model": "XM430-W350"}]}))


def test_yaml_syntax_error_has_line(tmp_path):
    p = write(tmp_path, "servos:\n  - {id: 1\n")
    with pytest.raises(ConfigError, match="line"):
        load_config(p)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "nope.yaml")


def test_model_string_shorthand_and_relative_urdf(tmp_path):
    cfg = load_config(write(tmp_path, {"servos": SERVOS, "model": "arm.urdf"}))
    assert cfg.urdf_path() == tmp_path / "arm.urdf"
    cfg = config_from_dict({"servos": SERVOS, "model": "quadruped"})
    assert cfg.model.name == "quadruped"


def test_current_mode_needs_torque_constant(tmp_path):
    with pytest.raises(ConfigError, match="torque_constant"):
        load_config(write(tmp_path, {"servos": [dict(SERVOS[0], mode="current")]}))


def test_overrides_are_checked():
    cfg = config_from_dict({"servos": SERVOS})
    assert cfg.with_overrides(**{"loop.rate_hz": 250.0}).loop.rate_hz == 250.0
    with pytest.raises(ConfigError):
        cfg.with_overrides(**{"loop.rate_hz": -1.0})


@pytest.mark.parametrize("name", ["bench", "arm", "quadruped", "humanoid"])
def test_builtin_configs_load(name):
    cfg = builtin_config(name)
    assert cfg.robot == name and cfg.n >= 1
    assert cfg.urdf_path() is not None and cfg.urdf_path().exists()


def test_startup_via_poses_and_simulation_plant(tmp_path):
    cfg = load_config(write(tmp_path, {"servos": SERVOS, "startup": {"ramp_s": 2.0, "via": [{"a": 0.5}]},
                                       "simulation": {"plant": "servoloop.virtual_bus.robot_plant:make_plant"}}))
    assert cfg.startup.via == ({"a": 0.5},) and cfg.simulation.plant == "servoloop.virtual_bus.robot_plant:make_plant"
    with pytest.raises(ConfigError, match="startup.via"):
        load_config(write(tmp_path, {"servos": SERVOS, "startup": {"via": {"a": 0.5}}}, "bad.yaml"))
    with pytest.raises(ConfigError, match="simulation.engine"):
        load_config(write(tmp_path, {"servos": SERVOS, "simulation": {"engine": "x"}}, "bad2.yaml"))


def test_startup_via_with_an_unknown_joint_fails_before_torque_on():
    from servoloop.controller.daemon import Daemon
    from servoloop.controller.errors import ControllerError

    cfg = builtin_config("quadruped")
    from dataclasses import replace

    cfg = replace(cfg, startup=replace(cfg.startup, via=({"lf_ankle": 0.1},)))
    with pytest.raises(ControllerError, match="startup.via\\[0\\].*lf_ankle"):
        Daemon(cfg, bus=None, clock=None, telemetry_path=None, socket_path=None)


@pytest.mark.parametrize("old", ["comm_error_window", "comm_error_rate", "max_consecutive_comm_errors"])
def test_removed_comm_keys_name_their_replacement(tmp_path, old):
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, {"servos": SERVOS, "safety": {old: 5}}))
    msg = str(e.value)
    assert f"safety.{old}" in msg and "no longer supported" in msg and "comm_" in msg.split("use", 1)[1]


def test_unknown_servo_model_names_file_line_and_known_models(tmp_path):
    text = ("robot: r\n"
            "servos:\n"
            "  - {id: 1, model: XM430-W350, joint: a}\n"
            "  - id: 2\n"
            "    joint: b\n"
            "    model: XM999-BOGUS\n")
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_config(path)
    msg = str(e.value)
    assert str(path) in msg and "line 6" in msg and "XM999-BOGUS" in msg
    assert "XM430-W350" in msg.split("known models", 1)[1] and "servos[1].model" in msg


def test_unknown_servo_model_via_cli_is_rc2_without_traceback(tmp_path):
    import subprocess
    import sys

    # safe_dump sorts keys: servos: / - id / joint / model -> model on line 4
    path = write(tmp_path, {"servos": [{"id": 1, "model": "NOPE-1", "joint": "a"}]})
    r = subprocess.run([sys.executable, "-m", "servoloop", "run", "--config", str(path), "--quiet"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "NOPE-1" in r.stderr and "line 4" in r.stderr and "Traceback" not in r.stderr


def test_servo_max_velocity_override(tmp_path):
    from servoloop.controller.slew import joint_max_velocity
    from servoloop.firmware_bridge.control_table import get_table

    servos = [dict(SERVOS[0], max_velocity=2.0), SERVOS[1]]
    cfg = load_config(write(tmp_path, {"servos": servos}))
    v = joint_max_velocity(cfg.servos, cfg.safety)
    assert v[0] == 2.0 and v[1] == pytest.approx(get_table("XM430-W350").datasheet.no_load_speed_rad_s)
    cfg = load_config(write(tmp_path, {"servos": servos, "safety": {"max_velocity": 1.5}}))
    np.testing.assert_array_equal(joint_max_velocity(cfg.servos, cfg.safety), [2.0, 1.5])


def test_a_key_given_twice_is_refused_with_both_lines(tmp_path):
    """YAML keeps the last of two equal keys silently: a whole section would be lost."""
    p = tmp_path / "dup.yaml"
    p.write_text("robot: r\nsimulation: {held_s: 3.0}\nloop: {rate_hz: 100}\n"
                 "simulation:\n  plant: contact\n")
    with pytest.raises(ConfigError, match=r"line 4, column 1: key 'simulation' given twice \(first at line 2\)"):
        load_config(p)
    p.write_text("robot: r\nloop: {rate_hz: 100, rate_hz: 200}\n")           # in a flow mapping too
    with pytest.raises(ConfigError, match="key 'rate_hz' given twice"):
        load_config(p)


def test_the_documented_fall_settings_are_the_defaults(tmp_path):
    """docs/own-robot.md section 5c's ``safety:`` block loads and gives what a config without
    it gets: the page cannot drift from the code."""
    import re

    doc = (Path(__file__).resolve().parents[3] / "docs" / "own-robot.md").read_text()
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", doc, flags=re.S) if "on_fall:" in b)
    documented = load_config(write(tmp_path, {"servos": SERVOS, **yaml.safe_load(block)})).safety
    assert documented == load_config(write(tmp_path, {"servos": SERVOS}, "plain.yaml")).safety
