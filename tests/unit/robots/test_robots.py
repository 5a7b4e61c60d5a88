"""Built-in robot descriptions: URDFs load, are physically consistent, and match their YAML configs."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import yaml

from servoloop import robots

pin = pytest.importorskip("pinocchio")

FLOATING = {"bench": False, "arm": False, "quadruped": True, "humanoid": True}

LEGS = ("lf", "lh", "rf", "rh")
# Expected joints, in Pinocchio's order (the order of servo ids in the YAML).
JOINTS = {
    "bench": ["pendulum"],
    "arm": [
        "base_yaw",
        "shoulder_pitch",
        "elbow_pitch",
        "forearm_roll",
        "wrist_pitch",
        "wrist_roll",
    ],
    "quadruped": [f"{leg}_{j}" for leg in LEGS for j in ("hip_abad", "hip_flex", "knee")],
    "humanoid": [
        f"{side}_{j}"
        for side in "lr"
        for j in (
            "hip_yaw",
            "hip_roll",
            "hip_pitch",
            "knee",
            "ankle_pitch",
            "ankle_roll",
            "shoulder_pitch",
            "shoulder_roll",
            "elbow",
        )
    ],
}
# Total mass of the moving bodies (for fixed-base robots the base link is excluded) [kg].
MASS_RANGE = {
    "bench": (0.489, 0.491),
    "arm": (0.3, 1.0),
    "quadruped": (2.2, 2.8),
    "humanoid": (1.4, 2.0),
}
# ROBOTIS e-Manual: stall torque [N m] and no-load speed [rev/min] at the rated voltage.
DATASHEET = {
    "XM430-W350": (4.1, 46.0),
    "XL430-W250": (1.5, 61.0),
    "XL330-M288": (0.52, 103.0),
    "AX-18A": (1.8, 97.0),
}
BUS = {
    "bench": (2, 4_000_000),
    "arm": (2, 4_000_000),
    "quadruped": (2, 4_000_000),
    "humanoid": ("mixed", 1_000_000),   # AX-18A on 1.0 and the OpenCR IMU board (ID 200) on 2.0
}
RATE = {"bench": 1000, "arm": 1000, "quadruped": 1000, "humanoid": 200}


def load_model(name: str):
    path = str(robots.urdf_path(name))
    if FLOATING[name]:
        return pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer())
    return pin.buildModelFromUrdf(path)


def actuated_names(model) -> list[str]:
    return [n for n in model.names[1:] if n != "root_joint"]


def standing_pose_of(cfg: dict) -> dict:
    """The standing pose of a config (YAML dict): hold's ``pose``, else the last startup.via."""
    return cfg["controller"].get("params", {}).get("pose") or cfg["startup"]["via"][-1]


def load_config(name: str) -> dict:
    with open(robots.config_path(name)) as f:
        return yaml.safe_load(f)


def urdf_tree(name: str) -> ET.Element:
    return ET.parse(robots.urdf_path(name)).getroot()


def inertia_matrix(el: ET.Element) -> np.ndarray:
    a = {k: float(v) for k, v in el.attrib.items()}
    return np.array(
        [
            [a["ixx"], a["ixy"], a["ixz"]],
            [a["ixy"], a["iyy"], a["iyz"]],
            [a["ixz"], a["iyz"], a["izz"]],
        ]
    )


def assert_consistent(inertia: np.ndarray, where: str) -> None:
    ev = np.linalg.eigvalsh(inertia)  # ascending
    assert ev[0] > 0, f"{where}: inertia not positive definite, eigenvalues {ev}"
    assert ev[0] + ev[1] >= ev[2] * (1 - 1e-9), f"{where}: triangle inequality fails, {ev}"


def joint_q(model, q: np.ndarray, values: dict[str, float]) -> np.ndarray:
    q = q.copy()
    for joint, value in values.items():
        q[model.joints[model.getJointId(joint)].idx_q] = value
    return q


@pytest.mark.parametrize("name", robots.NAMES)
def test_urdf_loads_with_the_stated_joints(name):
    model = load_model(name)
    assert actuated_names(model) == JOINTS[name]
    n = len(JOINTS[name])
    assert model.nv == n + (6 if FLOATING[name] else 0)
    assert model.nq == n + (7 if FLOATING[name] else 0)


@pytest.mark.parametrize("name", robots.NAMES)
def test_total_mass_in_range(name):
    lo, hi = MASS_RANGE[name]
    assert lo <= pin.computeTotalMass(load_model(name)) <= hi


@pytest.mark.parametrize("name", robots.NAMES)
def test_every_inertial_is_physically_consistent(name):
    root = urdf_tree(name)
    for link in root.iter("link"):
        inertial = link.find("inertial")
        if inertial is None:
            continue
        where = f"{robots.urdf_path(name).name}, link {link.get('name')}"
        assert float(inertial.find("mass").get("value")) > 0, where
        assert_consistent(inertia_matrix(inertial.find("inertia")), where)
    model = load_model(name)  # after Pinocchio merges the fixed links into their parents
    for i, inertia in enumerate(model.inertias[1:], start=1):
        assert inertia.mass > 0
        assert_consistent(inertia.inertia, f"{name}: Pinocchio body of joint {model.names[i]}")


@pytest.mark.parametrize("name", robots.NAMES)
def test_every_link_has_an_inertial_and_no_meshes(name):
    root = urdf_tree(name)
    missing = [link.get("name") for link in root.iter("link") if link.find("inertial") is None]
    assert missing == []
    assert list(root.iter("mesh")) == []


@pytest.mark.parametrize("name", robots.NAMES)
def test_joint_limits_match_the_servo_datasheet(name):
    models = {s["joint"]: s["model"] for s in load_config(name)["servos"]}
    for joint in urdf_tree(name).iter("joint"):
        if joint.get("type") == "fixed":
            continue
        limit = joint.find("limit")
        effort, rpm = DATASHEET[models[joint.get("name")]]
        where = f"{name}: joint {joint.get('name')}"
        assert float(limit.get("effort")) == pytest.approx(effort), where
        assert float(limit.get("velocity")) == pytest.approx(rpm * 2 * math.pi / 60, rel=1e-4), (
            where
        )
        lower, upper = float(limit.get("lower")), float(limit.get("upper"))
        assert lower < upper, where
        # X series: 0..360 deg in position mode; AX-18A: 0..300 deg, i.e. +-150 deg about centre
        reach = math.radians(150) if models[joint.get("name")] == "AX-18A" else math.pi
        assert -reach - 1e-6 <= lower and upper <= reach + 1e-6, where


@pytest.mark.parametrize("name", robots.NAMES)
def test_config_follows_the_contract_and_the_urdf(name):
    cfg = load_config(name)
    assert {"robot", "model", "bus", "servos", "loop", "controller"} <= set(cfg)
    # the daemon's loader is the schema: it rejects unknown keys, naming them
    from servoloop.controller.config import load_config as load_daemon_config

    assert load_daemon_config(robots.config_path(name)).robot == name
    assert cfg["robot"] == name
    assert (robots.config_path(name).parent / cfg["model"]["urdf"]) == robots.urdf_path(name)
    assert cfg["model"]["floating_base"] is FLOATING[name]
    assert cfg["bus"]["port"] is None
    assert (cfg["bus"]["protocol"], cfg["bus"]["baud"]) == BUS[name]
    assert cfg["loop"]["rate_hz"] == RATE[name]
    # the humanoid balances with wbc by default (issue 11); the others hold their pose
    assert cfg["controller"]["name"] == ("wbc" if name == "humanoid" else "hold")

    model = load_model(name)
    servos = cfg["servos"]
    assert [s["id"] for s in servos] == list(range(1, len(servos) + 1))  # unique, 1..n
    assert [s["joint"] for s in servos] == actuated_names(model)  # Pinocchio's order
    for s in servos:
        assert set(s) == {"id", "model", "joint", "offset", "direction", "min", "max"}
        assert s["model"] in DATASHEET
        assert s["offset"] == 0.0 and s["direction"] == 1
        iq = model.joints[model.getJointId(s["joint"])].idx_q
        lower, upper = model.lowerPositionLimit[iq], model.upperPositionLimit[iq]
        assert lower <= s["min"] < s["max"] <= upper, f"{name}: servo {s['id']} ({s['joint']})"


@pytest.mark.parametrize("name", ["quadruped", "humanoid"])
def test_standing_pose_is_inside_the_servo_limits(name):
    cfg = load_config(name)
    pose = standing_pose_of(cfg)
    limits = {s["joint"]: (s["min"], s["max"]) for s in cfg["servos"]}
    assert set(pose) == set(limits)
    for joint, value in pose.items():
        assert limits[joint][0] <= value <= limits[joint][1], joint


def test_quadruped_standing_pose_puts_the_feet_level_below_the_hips():
    model = load_model("quadruped")
    data = model.createData()
    pose = load_config("quadruped")["controller"]["params"]["pose"]
    q = joint_q(model, pin.neutral(model), pose)
    pin.framesForwardKinematics(model, data, q)
    feet = {leg: data.oMf[model.getFrameId(f"{leg}_foot")].translation for leg in LEGS}
    hips = {leg: data.oMi[model.getJointId(f"{leg}_hip_flex")].translation for leg in LEGS}
    heights = np.array([p[2] for p in feet.values()])
    assert np.ptp(heights) < 1e-3
    assert np.all(heights < -0.15)  # base frame at the origin: feet well below it
    for leg in LEGS:
        assert abs(feet[leg][0] - hips[leg][0]) < 0.02, leg  # under the hip, not splayed
    # knees bent: the pose is not the straight-leg zero
    assert all(abs(pose[f"{leg}_knee"]) > 0.3 for leg in LEGS)


def test_quadruped_feet_have_sphere_collisions():
    root = urdf_tree("quadruped")
    links = {link.get("name"): link for link in root.iter("link")}
    fixed = {
        j.get("name"): j.find("child").get("link")
        for j in root.iter("joint")
        if j.get("type") == "fixed"
    }
    for leg in LEGS:
        sphere = links[fixed[f"{leg}_foot"]].find("collision/geometry/sphere")
        assert sphere is not None and 0.01 <= float(sphere.get("radius")) <= 0.02


def test_humanoid_standing_pose_puts_the_soles_flat_and_level():
    model = load_model("humanoid")
    data = model.createData()
    pose = standing_pose_of(load_config("humanoid"))
    pin.framesForwardKinematics(model, data, joint_q(model, pin.neutral(model), pose))
    feet = [data.oMf[model.getFrameId(f"{side}_foot")] for side in "lr"]
    assert abs(feet[0].translation[2] - feet[1].translation[2]) < 1e-3
    for foot in feet:
        assert np.allclose(foot.rotation, np.eye(3), atol=1e-6)
        assert abs(foot.translation[0]) < 0.02
    root = urdf_tree("humanoid")
    for side in "lr":
        link = next(lk for lk in root.iter("link") if lk.get("name") == f"{side}_foot")
        assert link.find("collision/geometry/box") is not None


def test_bench_gravity_torque_is_the_bam_load():
    # 0.49 kg at 0.1 m on a horizontal shaft: |tau_g| = m g l at 90 degrees, 0 hanging down.
    model = load_model("bench")
    data = model.createData()
    down = pin.computeGeneralizedGravity(model, data, np.array([0.0]))
    side = pin.computeGeneralizedGravity(model, data, np.array([math.pi / 2]))
    assert abs(down[0]) < 1e-12
    assert abs(side[0]) == pytest.approx(0.49 * 9.81 * 0.1, rel=1e-3)


def test_arm_reach_is_about_forty_centimetres():
    model = load_model("arm")
    data = model.createData()
    pin.framesForwardKinematics(model, data, pin.neutral(model))
    shoulder = data.oMi[model.getJointId("shoulder_pitch")].translation
    flange = data.oMf[model.getFrameId("flange_link")].translation
    flange_face = 0.03  # flange face above the flange_link origin, see arm.urdf
    assert 0.35 <= np.linalg.norm(flange - shoulder) + flange_face <= 0.45
