"""``servoloop calibrate inertial`` reads the daemon's own telemetry (``.sltl``).

The arm runs a keyframe trajectory in lockstep against the contact
simulator behind the virtual bus (rigid-body dynamics of arm.urdf); its
telemetry is the joint log.  The torque the reader makes of the
``current`` columns (present current x the datasheet's N*m/A) must be
what the URDF's dynamics need: with the inertia fixed to the URDF's and
only friction / armature fitted, the residual is a small part of the torque.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import yaml

from servoloop import robots
from servoloop.calibration.inertial.identify import load_joint_log
from servoloop.controller.config import builtin_config
from servoloop.controller.telemetry_format import read_telemetry

pytestmark = pytest.mark.hil
RUN_S = 8.0


def _cli(*args, check=True):
    r = subprocess.run([sys.executable, "-m", "servoloop.cli", *args], capture_output=True, text=True,
                       timeout=600)
    if check and r.returncode != 0:
        raise AssertionError(f"servoloop {' '.join(args)}: exit {r.returncode}\n{r.stderr}")
    return r


@pytest.fixture(scope="module")
def arm_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("arm")
    with open(robots.config_path("arm")) as f:
        cfg = yaml.safe_load(f)
    cfg["model"]["urdf"] = str(robots.urdf_path("arm"))
    cfg["simulation"] = {"plant": "contact"}
    frames = [(0.6, [0.6, 0.5, -0.8, 0.9, 0.7, -0.9]), (1.3, [-0.5, -0.4, 0.6, -0.8, -0.6, 0.8]),
              (1.9, [0.3, 0.8, 0.2, 0.4, 0.9, 0.2]), (2.6, [-0.7, 0.1, -0.9, -0.3, -0.5, -0.6]),
              (3.2, [0.0] * 6)]
    cfg["controller"] = {"name": "trajectory", "params": {
        "loop": True, "keyframes": [{"t": t, "q": q} for t, q in frames]}}
    path = d / "arm_id.yaml"
    path.write_text(yaml.safe_dump(cfg))
    tel = d / "arm.sltl"
    _cli("run", "--config", str(path), "--lockstep", "--duration", str(RUN_S), "--telemetry", str(tel),
         "--socket", "none", "--quiet")
    return tel


def test_sltl_loads_as_a_joint_log(arm_run):
    joints = list(builtin_config("arm").joint_names)
    t, q, v, tau = load_joint_log(arm_run, joints[::-1])  # the model's order, not the log's
    tel = read_telemetry(arm_run)
    run = tel.column("state") == 3
    assert t.size == int(run.sum()) >= RUN_S * 1000 - 1
    np.testing.assert_allclose(np.diff(t), 1e-3, rtol=1e-9)  # uniform loop time
    np.testing.assert_array_equal(q[:, 0], tel.column("q.wrist_roll")[run])
    np.testing.assert_array_equal(v[:, -1], tel.column("dq.base_yaw")[run])
    # torque = current x N*m/A of the servo's datasheet (stall torque / stall current)
    kt = tel.header["effort_nm_per_unit"]
    assert kt[0] == pytest.approx(4.1 / 2.3) and tel.header["servo_models"][0] == "XM430-W350"
    np.testing.assert_allclose(tau[:, -1], tel.column("current.base_yaw")[run] * kt[0])
    assert np.ptp(q, axis=0).min() > 0.5 and np.abs(tau).max() > 0.05  # it moved, it pushed


def test_calibrate_inertial_reads_the_run_telemetry(arm_run, tmp_path):
    r = _cli("calibrate", "inertial", "--log", str(arm_run), "--urdf", str(robots.urdf_path("arm")),
             "--method", "friction", "--json", "--out", str(tmp_path / "rep.yaml"))
    rep = json.loads(r.stdout.strip().splitlines()[-1])
    joints = list(builtin_config("arm").joint_names)
    _, _, _, tau = load_joint_log(arm_run, joints)
    tau_rms = np.sqrt(np.mean(tau**2, axis=0))
    rms = np.array([rep["rms_torque_per_joint"][j] for j in joints])
    # the URDF's dynamics explain the logged torque of the loaded joints to within 10 %
    loaded = tau_rms > 0.05
    assert loaded.sum() >= 2
    assert np.all(rms[loaded] < 0.1 * tau_rms[loaded]), (rms, tau_rms)
    assert (tmp_path / "rep.yaml").exists()


def test_a_damaged_log_is_refused_by_name(tmp_path):
    bad = tmp_path / "x.sltl"
    bad.write_bytes(b"SLTL\x01\nnot chunks")
    r = _cli("calibrate", "inertial", "--log", str(bad), "--urdf", str(robots.urdf_path("arm")),
             check=False)
    assert r.returncode == 2 and str(bad) in r.stderr and "Traceback" not in r.stderr
