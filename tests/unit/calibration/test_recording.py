"""Loading, checking, resampling and saving bench recordings."""

import copy
import json

import numpy as np
import pytest

from servoloop.calibration.errors import (
    RecordingFormatError,
    RecordingGapError,
    RecordingNaNError,
    RecordingTimeError,
    RecordingTooShortError,
    RecordingUnexcitedError,
)
from servoloop.calibration.recording import load_recording, resample, save_recording


def _bam_process(data, dt=0.005):
    """BAM's process.py, transcribed (the reference for our resampling)."""
    out = []
    duration = data["entries"][-1]["timestamp"]
    frame = 0
    for t in np.arange(0.0, duration, dt):
        while t > data["entries"][frame + 1]["timestamp"]:
            frame += 1
        e1, e2 = data["entries"][frame], data["entries"][frame + 1]
        new = {}
        for key in e1:
            if key == "timestamp":
                continue
            new[key] = e1[key] + (e2[key] - e1[key]) * (t - e1["timestamp"]) / (e2["timestamp"] - e1["timestamp"])
        new["torque_enable"] = new["torque_enable"] > 0.5
        out.append(new)
    return out


def test_bam_log_loads_and_resamples_like_bam(bam_dir):
    path = bam_dir / "xl330_kp400_lift_and_drop.json"
    data = json.loads(path.read_text())
    rec = load_recording(path)
    assert rec.kp_fw == 400 and rec.mass == 0.49 and rec.length == 0.1 and rec.n == len(data["entries"])
    r = resample(rec)
    ref = _bam_process(data)
    assert r.n == len(ref) and r.dt == 0.005
    np.testing.assert_allclose(r.position, [e["position"] for e in ref], atol=1e-12)
    np.testing.assert_allclose(r.goal, [e["goal_position"] for e in ref], atol=1e-12)
    np.testing.assert_allclose(r.input_volts, [e["input_volts"] for e in ref], atol=1e-12)
    assert np.array_equal(r.torque_enable, [e["torque_enable"] for e in ref])
    assert not r.torque_enable.all()  # this run drops the pendulum


def _write(tmp_path, data, name="log.json"):
    p = tmp_path / name
    p.write_text(json.dumps(data))
    return p


@pytest.fixture
def bam_data(bam_dir):
    return json.loads((bam_dir / "xl330_kp100_sin_sin.json").read_text())


def test_gap_names_file_and_sample(tmp_path, bam_data):
    d = copy.deepcopy(bam_data)
    for e in d["entries"][500:]:
        e["timestamp"] += 0.1
    with pytest.raises(RecordingGapError, match=r"log\.json, sample 500: gap of 10[0-9]\.\d ms"):
        load_recording(_write(tmp_path, d))


def test_nan_names_file_sample_and_channel(tmp_path, bam_data):
    d = copy.deepcopy(bam_data)
    d["entries"][321]["position"] = float("nan")
    with pytest.raises(RecordingNaNError, match=r"log\.json, sample 321: position is not finite"):
        load_recording(_write(tmp_path, d))


def test_non_monotonic_time(tmp_path, bam_data):
    d = copy.deepcopy(bam_data)
    d["entries"][42]["timestamp"] = d["entries"][41]["timestamp"]
    with pytest.raises(RecordingTimeError, match=r"sample 42: time does not increase"):
        load_recording(_write(tmp_path, d))


def test_too_short(tmp_path, bam_data):
    d = copy.deepcopy(bam_data)
    d["entries"] = d["entries"][:20]
    with pytest.raises(RecordingTooShortError, match="20 samples"):
        load_recording(_write(tmp_path, d))


def test_light_load_is_unexcited(tmp_path, bam_data):
    """A servo that tracks its goal within a tick everywhere: nothing to identify."""
    d = copy.deepcopy(bam_data)
    for e in d["entries"]:
        e["position"] = e["goal_position"] + 0.001
    with pytest.raises(RecordingUnexcitedError, match="too light to excite"):
        load_recording(_write(tmp_path, d))


def test_missing_key_and_missing_load(tmp_path, bam_data):
    d = copy.deepcopy(bam_data)
    del d["entries"][7]["goal_position"]
    with pytest.raises(RecordingFormatError, match=r"sample 7: missing key 'goal_position'"):
        load_recording(_write(tmp_path, d))
    d = copy.deepcopy(bam_data)
    d["mass"] = 0.0
    with pytest.raises(RecordingFormatError, match="no load"):
        load_recording(_write(tmp_path, d))
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(RecordingFormatError, match=r"bad\.json: not valid JSON"):
        load_recording(bad)


@pytest.mark.parametrize("suffix", [".json", ".npz"])
def test_our_format_round_trip(tmp_path, bam_dir, suffix):
    rec = load_recording(bam_dir / "xl330_kp400_sin_sin.json")
    rec.servo_model, rec.servo_id = "XL330-M288-T", 3
    out = save_recording(rec, tmp_path / f"ours{suffix}")
    assert not list(tmp_path.glob("*.tmp"))          # atomic: no leftovers
    back = load_recording(out)
    for key in ("t", "position", "goal", "speed", "input_volts"):
        np.testing.assert_array_equal(getattr(back, key), getattr(rec, key))
    assert np.array_equal(back.torque_enable, rec.torque_enable)
    assert (back.kp_fw, back.mass, back.length, back.servo_model, back.servo_id) == (400, 0.49, 0.1, "XL330-M288-T", 3)
