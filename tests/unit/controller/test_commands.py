"""The CLI: exit codes, run --lockstep --json, log export/plot/info, status without a daemon."""

import json

import pytest
import yaml

from servoloop.cli import main


def test_run_with_bad_config_exits_2(tmp_path, capsys):
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump({"servos": [{"id": 1, "model": "XM430-W350", "joint": "a"}], "lop": {}}))
    assert main(["run", "--config", str(p), "--duration", "0.1"]) == 2
    err = capsys.readouterr().err
    assert "'lop'" in err and str(p) in err


def test_run_unknown_controller_exits_2(capsys):
    assert main(["run", "--controller", "nope", "--lockstep", "--duration", "0.1"]) == 2
    assert "unknown controller 'nope'" in capsys.readouterr().err


@pytest.mark.hil
def test_run_lockstep_json_summary_then_log_tools(tmp_path, capsys):
    tel = tmp_path / "t.sltl"
    rc = main(["run", "--robot", "arm", "--lockstep", "--duration", "0.2", "--json", "--quiet",
               "--telemetry", str(tel), "--socket", "none"])
    out = capsys.readouterr().out.strip().splitlines()
    assert rc == 0
    summary = json.loads(out[-1])
    assert summary["state"] == "done" and summary["ticks"] == 200
    assert summary["rate_hz"] == pytest.approx(1000.0)
    assert set(summary["jitter_us"]) == {"p50", "p99", "max"}
    assert summary["missed"] == 0 and summary["bus_errors"] == {} and summary["faults"] == []
    assert main(["log", "export", str(tel), "--csv", str(tmp_path / "t.csv"),
                 "--mcap", str(tmp_path / "t.mcap")]) == 0
    assert (tmp_path / "t.csv").read_text().splitlines()[0].startswith("tick,t_s,")
    assert main(["log", "plot", str(tel), "--out", str(tmp_path / "t.png")]) == 0
    assert (tmp_path / "t.png").stat().st_size > 1000
    assert main(["log", "info", str(tel), "--json"]) == 0
    info = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert info["robot"] == "arm" and info["summary"]["state"] == "done"


def test_log_tools_on_a_non_telemetry_file_exit_2(tmp_path, capsys):
    p = tmp_path / "x.sltl"
    p.write_text("nope")
    assert main(["log", "export", str(p), "--csv", str(tmp_path / "o.csv")]) == 2
    assert main(["log", "plot", str(p), "--out", str(tmp_path / "o.png")]) == 2
    assert "bad magic" in capsys.readouterr().err
    assert main(["log", "export", str(p)]) == 2


def test_status_and_stop_without_daemon_exit_1(tmp_path, capsys):
    assert main(["status", "--socket", str(tmp_path / "none.sock")]) == 1
    assert main(["stop", "--socket", str(tmp_path / "none.sock")]) == 1
    assert "no daemon listening" in capsys.readouterr().err


def _run_args(*argv):
    import argparse

    from servoloop.controller.commands import _register_run

    sub = argparse.ArgumentParser().add_subparsers()
    _register_run(sub)
    return sub.choices["run"].parse_args(list(argv))


def test_a_controller_named_on_the_command_line_keeps_the_robots_standing_pose(tmp_path):
    """``--controller wbc`` on a config written for ``hold``: params are cleared, but the standing
    pose (hold's ``pose``) becomes wbc's ``posture``, not the ``startup.via`` crouch."""
    from servoloop.controller.commands import _load_cfg
    from servoloop.robots import robot_dir

    data = yaml.safe_load((robot_dir("quadruped") / "quadruped.yaml").read_text())
    data["model"]["urdf"] = str(robot_dir("quadruped") / "quadruped.urdf")
    data["startup"]["via"] = data["startup"]["via"][:1]          # the crouch only
    path = tmp_path / "q.yaml"
    path.write_text(yaml.safe_dump(data))
    pose = data["controller"]["params"]["pose"]
    for name, key in (("wbc", "posture"), ("trot", "posture"), ("gravity_comp", "pose"), ("hold", "pose")):
        cfg = _load_cfg(_run_args("--config", str(path), "--controller", name))
        assert cfg.controller.name == name
        if name == "hold":                                       # the config's own: kept whole
            assert cfg.controller.params["pose"] == pose
            continue
        assert cfg.controller.params == {key: pose}
    # a controller that takes no pose starts with no params
    assert _load_cfg(_run_args("--config", str(path), "--controller", "trajectory")).controller.params == {}


def test_run_param_sets_controller_params_read_as_yaml():
    from servoloop.controller.commands import _load_cfg

    cfg = _load_cfg(_run_args("--robot", "quadruped", "--controller", "trot", "--param", "speed_mps=0.1",
                              "--param", "mu=inf", "--param", "feet=[lf_foot_link, rh_foot_link]"))
    assert cfg.controller.name == "trot"
    given = {"speed_mps": 0.1, "mu": "inf", "feet": ["lf_foot_link", "rh_foot_link"]}
    plain = _load_cfg(_run_args("--robot", "quadruped", "--controller", "trot")).controller.params
    assert cfg.controller.params == {**plain, **given}       # the carried standing pose stays
    # on the config's own controller: merged over its params (the later --param wins)
    own = _load_cfg(_run_args("--robot", "quadruped"))
    cfg = _load_cfg(_run_args("--robot", "quadruped", "--param", "velocity={lf_knee: 1}",
                              "--param", "velocity={lf_knee: 2}"))
    assert cfg.controller.name == own.controller.name
    assert cfg.controller.params == {**(own.controller.params or {}), "velocity": {"lf_knee": 2}}


@pytest.mark.parametrize("item, says", [("speed_mps", "expected KEY=VALUE"), ("=1", "expected KEY=VALUE"),
                                        ("speed_mps=[1,", "VALUE is not YAML")])
def test_run_malformed_param_exits_2_naming_it(item, says, capsys):
    assert main(["run", "--lockstep", "--controller", "trot", "--param", item, "--duration", "0.1"]) == 2
    err = capsys.readouterr().err
    assert f"--param {item!r}" in err and says in err


def test_run_unknown_param_exits_2_naming_the_key(capsys):
    assert main(["run", "--lockstep", "--controller", "trot", "--param", "sped_mps=0.1", "--duration", "0.1",
                 "--socket", "none", "--telemetry", "none"]) == 2
    err = capsys.readouterr().err
    # the option is named, not the robot's YAML (the key is not in it)
    assert "--param sped_mps: controller 'trot' has no parameter 'sped_mps'" in err and "speed_mps" in err
    assert "quadruped.yaml" not in err
