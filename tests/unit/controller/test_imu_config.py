"""The config's ``imu:`` section: checked like the rest, errors naming the key and the file."""

import pytest

from servoloop.controller.config import builtin_config, load_config
from servoloop.controller.errors import ConfigError
from servoloop.controller.schema import config_schema

BASE = """robot: q
model: {{name: quadruped, floating_base: {floating}}}
bus: {{protocol: {protocol}}}
servos:
  - {{id: 1, model: {model}, joint: lf_hip_abad}}
imu: {imu}
"""


def _load(tmp_path, imu, protocol=2, model="XM430-W350", floating="true"):
    p = tmp_path / "robot.yaml"
    p.write_text(BASE.format(imu=imu, protocol=protocol, model=model, floating=floating))
    return p, lambda: load_config(p)


@pytest.mark.parametrize("imu,match", [
    ("{id: 200, modle: OpenCR}", r"line 6: unknown key 'modle' in section 'imu' \(at imu\.modle\); known keys: "),
    ("{model: BNO055}", r"imu\.model: no IMU board 'BNO055'; known: OpenCR"),
    ("{id: 1}", r"imu\.id 1 is also the id of servos\[0\] \(joint 'lf_hip_abad'\)"),
    ("{rotation_rpy: [0, 0]}", r"imu\.rotation_rpy must be 3 finite numbers"),
    ("{gyro_noise: -1}", r"imu\.gyro_noise must be >= 0"),
    ("{id: 300}", r"imu\.id must be 0\.\.252"),
])
def test_bad_imu_values_name_the_key_and_the_file(tmp_path, imu, match):
    path, load = _load(tmp_path, imu)
    with pytest.raises(ConfigError, match=match) as e:
        load()
    assert str(path) in str(e.value)


def test_a_protocol2_board_on_a_protocol1_bus_asks_for_mixed(tmp_path):
    _, load = _load(tmp_path, "{id: 200}", protocol=1, model="AX-18A")
    with pytest.raises(ConfigError, match="OpenCR speaks Protocol 2.0.*bus.protocol: mixed"):
        load()
    _, load = _load(tmp_path, "{id: 200}", protocol="mixed", model="AX-18A")
    assert load().imu.id == 200


def test_an_imu_needs_a_floating_base(tmp_path):
    _, load = _load(tmp_path, "{id: 200}", floating="false")
    with pytest.raises(ConfigError, match="floating-base model"):
        load()


def test_built_in_legged_robots_carry_the_op3_board_and_the_schema_knows_the_section():
    for name in ("quadruped", "humanoid"):
        imu = builtin_config(name).imu
        assert (imu.id, imu.model) == (200, "OpenCR")
    assert builtin_config("humanoid").bus.protocol == "mixed"
    assert builtin_config("arm").imu is None
    props = config_schema()["properties"]["imu"]["anyOf"][0]
    assert props["additionalProperties"] is False and props["properties"]["id"]["default"] == 200


def test_the_own_robot_doc_imu_example_loads(tmp_path):
    import re
    from pathlib import Path

    import yaml

    from servoloop.robots import robot_dir

    doc = (Path(__file__).resolve().parents[3] / "docs" / "own-robot.md").read_text()
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", doc, flags=re.S) if "imu:" in b)
    example = yaml.safe_load(block)
    cfg = yaml.safe_load((robot_dir("quadruped") / "quadruped.yaml").read_text())
    cfg["imu"] = example["imu"]
    cfg["model"]["urdf"] = str(robot_dir("quadruped") / "quadruped.urdf")
    (tmp_path / "q.yaml").write_text(yaml.safe_dump(cfg))
    imu = load_config(tmp_path / "q.yaml").imu
    assert imu.gyro_noise == 0.005 and imu.rotation_rpy[2] == pytest.approx(3.14159)
