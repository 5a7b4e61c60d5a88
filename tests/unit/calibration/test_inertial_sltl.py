"""The ``.sltl`` reader of inertial identification: rows kept, torque scale, old headers."""

import numpy as np
import pytest

from servoloop.calibration.errors import RecordingFormatError
from servoloop.calibration.inertial.identify import load_joint_log
from servoloop.controller.lifecycle import State
from servoloop.controller.telemetry import TelemetryRing, TelemetryWriter

ARM = ["base_yaw", "shoulder_pitch", "elbow_pitch", "forearm_roll", "wrist_pitch", "wrist_roll"]


def write_log(path, header, n=50, compress=True):
    ring = TelemetryRing(ARM, 256)
    for k in range(n):
        r = ring.row()
        r[:] = np.nan
        r[ring.col["tick"]] = k
        r[ring.col["t_s"]] = k * 1e-3
        r[ring.col["state"]] = int(State.STARTUP if k < 10 else State.RUN)
        r[ring.col["read_ok"]] = 0.0 if k == 30 else 1.0
        r[ring.joint_slice["q"]] = 0.01 * k * np.arange(1, 7)
        r[ring.joint_slice["dq"]] = np.arange(1, 7)
        r[ring.joint_slice["current"]] = 0.5
        ring.commit()
    w = TelemetryWriter(path, ring, dict(header, joint_names=ARM), flush_s=10.0, compress=compress)
    w.start()
    w.close({"ticks": n})
    return path


def test_run_state_good_reads_and_torque_from_the_header(tmp_path):
    scale = [2.0, 2.0, 2.0, 1.0, 1.0, None]
    p = write_log(tmp_path / "a.sltl", {"effort_nm_per_unit": [2.0, 2.0, 2.0, 1.0, 1.0, 1.0]})
    t, q, v, tau = load_joint_log(p, ARM)
    assert t.size == 39  # 40 run rows less the failed read
    np.testing.assert_allclose(tau[0], [1.0, 1.0, 1.0, 0.5, 0.5, 0.5])
    np.testing.assert_allclose(v[0], np.arange(1, 7))
    p = write_log(tmp_path / "b.sltl", {"effort_nm_per_unit": scale})
    with pytest.raises(RecordingFormatError, match="wrist_roll.*no current or load"):
        load_joint_log(p, ARM)


def test_an_older_log_gets_the_torque_scale_from_its_servo_models(tmp_path):
    # written before effort_nm_per_unit: the built-in arm's servo models (by its robot name)
    p = write_log(tmp_path / "old.sltl", {"robot": "arm"}, compress=False)
    _, _, _, tau = load_joint_log(p, ARM)
    np.testing.assert_allclose(tau[0, :3], 0.5 * 4.1 / 2.3)   # XM430-W350
    np.testing.assert_allclose(tau[0, 3:], 0.5 * 1.5)  # XL430-W250: present_load, of stall torque
    p = write_log(tmp_path / "anon.sltl", {"robot": "mine"})
    with pytest.raises(RecordingFormatError, match="anon.sltl.*torque unknown"):
        load_joint_log(p, ARM)
    with pytest.raises(RecordingFormatError, match=r"\['elbow'\] of the model are not in the log"):
        load_joint_log(p, ["elbow"])
