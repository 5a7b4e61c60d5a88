"""``servoloop init`` on a virtual bus, then the config it wrote runs the daemon on that bus."""

import json
import re
import subprocess
import sys

import jsonschema
import pytest
import yaml

from servoloop.controller.init_cli import feasible_rate_hz
from servoloop.controller.schema import config_schema
from servoloop.robots import NAMES, config_path

pytestmark = pytest.mark.hil


def servoloop(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "servoloop", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_init_writes_a_config_that_runs(virtual_bus, tmp_path):
    port = virtual_bus(servos="1:XM430-W350,2:XM430-W350,5:XL430-W250", baud=1_000_000)
    out = tmp_path / "robot.yaml"
    r = servoloop("init", "--port", port, "--baud", "1000000", "--protocol", "2", "--out", str(out))
    assert r.returncode == 0, r.stderr
    doc = yaml.safe_load(out.read_text())
    assert [(s["id"], s["model"], s["joint"]) for s in doc["servos"]] == [
        (1, "XM430-W350", "joint_1"), (2, "XM430-W350", "joint_2"), (5, "XL430-W250", "joint_5")]
    # limits are the servos' own Min/Max Position Limit registers (factory 0..4095 = -pi..pi)
    assert doc["servos"][0]["min"] == pytest.approx(-3.1416, abs=2e-3)
    assert doc["servos"][0]["max"] == pytest.approx(3.1400, abs=2e-3)
    jsonschema.validate(doc, config_schema())
    assert servoloop("config", "check", str(out)).returncode == 0
    assert servoloop("init", "--port", port, "--out", str(out)).returncode == 2      # no overwrite
    r = servoloop("run", "--config", str(out), "--port", port, "--duration", "1", "--json",
                  "--telemetry", "none", "--socket", "none")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["state"] in ("done", "stopped") or summary.get("stop_reason")


def test_init_finds_nothing_and_says_what_to_try(virtual_bus, tmp_path):
    port = virtual_bus(servos="1:XM430-W350", baud=57600)
    r = servoloop("init", "--port", port, "--baud", "1000000", "--protocol", "2",
                  "--out", str(tmp_path / "x.yaml"))
    assert r.returncode == 3 and "57600" in r.stderr      # the help names the factory rate


@pytest.mark.parametrize("name", NAMES)
def test_builtin_configs_validate_against_the_schema(name):
    jsonschema.validate(yaml.safe_load(config_path(name).read_text()), config_schema())


def test_schema_refuses_what_the_loader_refuses(tmp_path):
    bad = {"servos": [{"id": 1, "model": "XM430-W350", "joint": "a"}], "loop": {"rate": 100}}
    with pytest.raises(jsonschema.ValidationError, match="rate"):
        jsonschema.validate(bad, config_schema())
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    r = servoloop("config", "check", str(path))
    assert r.returncode == 2 and "rate" in r.stderr and "bad.yaml" in r.stderr


def test_feasible_rate_follows_the_wire():
    assert feasible_rate_hz(4_000_000, 12) == 1000
    assert feasible_rate_hz(57_600, 3) <= 50


def test_init_on_servos_found_at_several_rates_says_so_in_one_line_per_rate(virtual_bus, tmp_path):
    # `virtual-bus --servos` without --baud answers at any rate: a hexapod's 18 AX-12A
    # were listed once per servo and rate (90 entries), with no hint why
    port = virtual_bus(servos="1-18:AX-12A")
    r = servoloop("init", "--port", port, "--baud", "57600", "1000000", "--protocol", "1",
                  "--out", str(tmp_path / "robot.yaml"))
    assert r.returncode == 2
    # (a ping lost on a busy host splits a range: "id 1-6, 8-18")
    assert re.search(r"57600 bps / Protocol 1\.0: id 1-[0-9, -]+; 1000000 bps / Protocol 1\.0: id 1-", r.stderr)
    assert re.search(r"IDs 1-[0-9, -]+ answered at more than one rate", r.stderr) and "--baud" in r.stderr
    assert len(r.stderr) < 800                        # 36 entries took 1000 characters
    assert not (tmp_path / "robot.yaml").exists()
