"""``simulation.pushes``: the config section, its checks and its schema."""

from __future__ import annotations

import pytest
import yaml

from servoloop.controller.config import PushConfig, config_from_dict
from servoloop.controller.errors import ConfigError
from servoloop.controller.schema import config_schema
from servoloop.robots import robot_dir


def humanoid(pushes) -> dict:
    path = robot_dir("humanoid") / "humanoid.yaml"
    data = yaml.safe_load(path.read_text())
    data["simulation"]["pushes"] = pushes
    return data


def load(pushes):
    return config_from_dict(humanoid(pushes), robot_dir("humanoid") / "humanoid.yaml")


def test_pushes_are_read_with_their_link():
    cfg = load([{"t_s": 2.5, "impulse": [0.3, 0, 0]},
                {"t_s": 3, "impulse": [0, -0.2, 0], "link": "l_foot"}])
    assert cfg.simulation.pushes == (PushConfig(2.5, (0.3, 0.0, 0.0)),
                                     PushConfig(3.0, (0.0, -0.2, 0.0), "l_foot"))


@pytest.mark.parametrize("push, match", [
    ({"t_s": 1.0, "impulse": [0.3, 0.0]}, r"simulation.pushes\[0\].impulse must be \[x, y, z\] in N s"),
    ({"t_s": -1.0, "impulse": [0.3, 0.0, 0.0]}, r"simulation.pushes\[0\].t_s must be >= 0"),
    ({"t_s": 1.0, "impulse": [0.3, 0.0, 0.0], "link": "l_hand"},
     r"simulation.pushes\[0\].link 'l_hand' is not a link of humanoid.urdf"),
    ({"t_s": 1.0}, r"missing required key 'simulation.pushes\[0\].impulse'"),
    ({"t_s": 1.0, "impulse": [0.3, 0.0, 0.0], "at": 2}, r"unknown key 'at'.*known keys: impulse, link, t_s"),
])
def test_a_bad_push_is_refused_naming_the_key(push, match):
    with pytest.raises(ConfigError, match=match):
        load([push])


def test_a_fixed_base_robot_cannot_be_pushed():
    path = robot_dir("arm") / "arm.yaml"
    data = yaml.safe_load(path.read_text())
    data.setdefault("simulation", {})["pushes"] = [{"t_s": 1.0, "impulse": [0.1, 0.0, 0.0]}]
    with pytest.raises(ConfigError, match="simulation.pushes needs a floating-base robot"):
        config_from_dict(data, path)


def test_the_schema_knows_pushes_and_accepts_the_documented_form():
    jsonschema = pytest.importorskip("jsonschema")
    schema = config_schema()
    sim = schema["properties"]["simulation"]["properties"]
    push = sim["pushes"]["items"]
    assert set(push["properties"]) == {"t_s", "impulse", "link"}
    assert set(push["required"]) == {"t_s", "impulse"}
    jsonschema.validate(humanoid([{"t_s": 2.5, "impulse": [0.3, 0, 0], "link": "base_link"}]), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(humanoid([{"t_s": 2.5, "impulse": [0.3, 0, 0], "when": 1}]), schema)
