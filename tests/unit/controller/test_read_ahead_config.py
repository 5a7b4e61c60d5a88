"""``loop.read_ahead`` (config, schema, CLI): refused, naming the key and why, for a robot whose
tick read is more than one bus transaction; accepted where it is one."""

from __future__ import annotations

import pytest

from servoloop.cli import main
from servoloop.controller.config import builtin_config
from servoloop.controller.errors import ConfigError
from servoloop.controller.schema import config_schema


def test_default_is_off_and_the_schema_has_the_key():
    assert builtin_config("quadruped").loop.read_ahead is False
    prop = config_schema()["properties"]["loop"]["properties"]["read_ahead"]
    assert prop["type"] == "boolean" and "one transaction" in prop["description"]


@pytest.mark.parametrize("robot", ["quadruped", "arm"])
def test_one_transaction_robots_accept_it(robot):
    # the quadruped: servos + IMU in one bulk read; the arm: two models in one bulk read
    assert builtin_config(robot).with_overrides(**{"loop.read_ahead": True}).loop.read_ahead


def test_the_mixed_protocol_humanoid_is_refused_with_the_key_and_why():
    cfg = builtin_config("humanoid")
    with pytest.raises(ConfigError) as exc:
        cfg.with_overrides(**{"loop.read_ahead": True})
    assert exc.value.key == "loop.read_ahead"
    msg = str(exc.value)
    assert "one bus transaction" in msg and "Protocol 1.0" in msg
    assert f"IMU board (id {cfg.imu.id})" in msg


def test_several_servos_on_protocol_1_are_refused():
    cfg = builtin_config("arm").with_overrides(**{"bus.protocol": 1})   # X servos speak 1.0 too
    with pytest.raises(ConfigError, match=r"servos \[1, 2, 3, 4, 5, 6\] speak Protocol 1.0") as exc:
        cfg.with_overrides(**{"loop.read_ahead": True})
    assert exc.value.key == "loop.read_ahead"


def test_the_cli_flag_reports_the_config_error_without_a_traceback(capsys):
    rc = main(["run", "--robot", "humanoid", "--read-ahead", "--lockstep", "--duration", "0.1",
               "--quiet", "--telemetry", "none", "--socket", "none"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "loop.read_ahead" in err and "Traceback" not in err


def test_a_config_made_in_code_is_checked_when_the_daemon_is_made():
    from dataclasses import replace

    from servoloop.controller.daemon import Daemon

    cfg = builtin_config("humanoid")
    cfg = replace(cfg, loop=replace(cfg.loop, read_ahead=True))     # no loader check on this path
    with pytest.raises(ConfigError, match="loop.read_ahead"):
        Daemon(cfg, bus=None, telemetry_path=None, socket_path=None)
