"""``simulation.ground``: the floor of the contact simulator behind the built-in virtual bus.

The config section and its checks, the simulator settings it makes, and the
quadruped standing with ``wbc`` on a rigid floor at mu = inf (seconds,
lockstep through the virtual bus).
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import yaml

from servoloop.controller.config import GroundConfig, builtin_config, config_from_dict
from servoloop.controller.errors import ConfigError
from servoloop.controller.schema import config_schema
from servoloop.robots import robot_dir
from servoloop.virtual_bus.robot_plant import RobotPlant

PATH = robot_dir("quadruped") / "quadruped.yaml"


def load(ground):
    data = yaml.safe_load(PATH.read_text())
    data["simulation"]["ground"] = ground
    return config_from_dict(data, PATH)


def test_the_default_floor_is_compliant():
    cfg = builtin_config("quadruped")
    assert cfg.simulation.ground == GroundConfig()
    plant = RobotPlant.for_config(cfg)
    assert plant.sim.config.mode == "compliant"


def test_a_rigid_floor_with_infinite_friction_reaches_the_simulator():
    cfg = load({"contact": "rigid", "mu": float("inf"), "solver": "lemke"})
    assert cfg.simulation.ground == GroundConfig("rigid", math.inf, "lemke")
    sim = RobotPlant.for_config(cfg).sim
    assert sim.config.mode == "rigid"
    assert sim.config.rigid.mu == math.inf and sim.config.rigid.solver == "lemke"


def test_a_compliant_floor_takes_the_friction_coefficient():
    sim = RobotPlant.for_config(load({"mu": 0.3})).sim
    assert sim.config.mode == "compliant"
    assert sim.config.law.mu_static == pytest.approx(0.3)
    assert sim.config.law.mu_dynamic < sim.config.law.mu_static


@pytest.mark.parametrize("ground, match", [
    ({"contact": "rigd"}, r"simulation.ground.contact 'rigd': choose compliant or rigid"),
    ({"contact": "rigid", "solver": "dantzig"}, r"simulation.ground.solver 'dantzig': choose pgs or lemke"),
    ({"mu": -0.5}, r"simulation.ground.mu must be >= 0"),
    ({"mu": float("inf")}, r"simulation.ground.mu: .inf needs contact: rigid"),
    ({"friction": 0.5}, r"unknown key 'friction'.*known keys: contact, mu, solver"),
])
def test_a_bad_floor_is_refused_naming_the_key(ground, match):
    with pytest.raises(ConfigError, match=match):
        load(ground)


def test_the_schema_knows_the_floor():
    jsonschema = pytest.importorskip("jsonschema")
    schema = config_schema()
    ground = schema["properties"]["simulation"]["properties"]["ground"]
    assert set(ground["properties"]) == {"contact", "mu", "solver"}
    data = yaml.safe_load(PATH.read_text())
    data["simulation"]["ground"] = {"contact": "rigid", "mu": 1.0}
    jsonschema.validate(data, schema)
    data["simulation"]["ground"] = {"contact": "ice"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, schema)


@pytest.mark.hil
def test_the_quadruped_stands_with_wbc_on_a_rigid_floor():
    from servoloop.controller.config import ControllerConfig
    from servoloop.controller.daemon import Daemon
    from servoloop.controller.runtime import make_lockstep

    cfg = load({"contact": "rigid", "mu": float("inf")})
    cfg = replace(cfg, controller=ControllerConfig(name="wbc", params={}))
    lock = make_lockstep(cfg)
    try:
        sim = lock.virtual.engine.plant.sim
        assert sim.config.mode == "rigid"
        daemon = Daemon(cfg, lock.bus, lock.clock, telemetry_path=None, socket_path=None)
        s = daemon.run(cfg.startup.ramp_s + 3.0)
        q = sim.q.copy()
    finally:
        lock.close()
    assert s["state"] == "done" and not s["faults"], s["faults"]
    tilt = math.degrees(2 * math.asin(min(1.0, math.hypot(q[3], q[4]))))
    assert q[2] > 0.2 and tilt < 3.0, (q[:3], tilt)


def test_the_documented_floor_loads():
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[3] / "docs" / "own-robot.md").read_text()
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", doc, flags=re.S) if "ground:" in b)
    cfg = load(yaml.safe_load(block)["simulation"]["ground"])
    assert cfg.simulation.ground == GroundConfig("rigid", math.inf)
