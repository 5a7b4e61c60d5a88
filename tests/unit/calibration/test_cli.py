"""``servoloop calibrate`` command lines: JSON shapes and exit codes."""

import json

import pytest

from servoloop.cli import main


def _run(capsys, argv):
    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_fit_json_shape(capsys, bam_logs):
    kp100 = [str(p) for p in bam_logs if "kp100" in p.name][:2]
    kp400 = [str(p) for p in bam_logs if "kp400" in p.name][:1]
    rc, out, _ = _run(capsys, ["calibrate", "fit", "--log", *kp100, "--holdout", *kp400, "--model", "m1",
                               "--evals", "200", "--method", "cmaes", "--json"])
    assert rc == 0
    res = json.loads(out)
    assert res["model"] == "m1" and "kt" in res["params"]
    assert [r["role"] for r in res["logs"]] == ["train", "train", "holdout"]
    for r in res["logs"]:
        assert r["mae_deg"] == pytest.approx(r["mae_rad"] * 57.29577951308232)


def test_fit_evaluate_published_and_writes_report(capsys, bam_logs, tmp_path):
    rc, out, _ = _run(capsys, ["calibrate", "fit", "--log", str(bam_logs[0]), "--model", "m3",
                               "--evaluate", "bam:m3", "--out", str(tmp_path / "p.yaml"),
                               "--report", str(tmp_path / "r.png")])
    assert rc == 0 and "MAE" in out
    assert (tmp_path / "p.yaml").read_text().startswith("model: m3")
    assert (tmp_path / "r.png").stat().st_size > 1000


def test_fit_bad_log_exit_2_names_file_and_sample(capsys, bam_dir, tmp_path):
    data = json.loads((bam_dir / "xl330_kp100_sin_sin.json").read_text())
    data["entries"][77]["position"] = None
    bad = tmp_path / "broken.json"
    bad.write_text(json.dumps(data))
    rc, _, err = _run(capsys, ["calibrate", "fit", "--log", str(bad)])
    assert rc == 2
    assert "broken.json, sample 77" in err


def test_fit_unknown_model_exit_2(capsys, bam_logs):
    rc, _, err = _run(capsys, ["calibrate", "fit", "--log", str(bam_logs[0]), "--model", "m9"])
    assert rc == 2 and "unknown model 'm9'" in err


def test_actuator_simulated_json(capsys, tmp_path):
    rc, out, _ = _run(capsys, ["calibrate", "actuator", "--id", "1", "--inertia", "4e-3",
                               "--simulate", "9.272,0.3069,0.03", "--cycles", "2",
                               "--out", str(tmp_path / "params.yaml"), "--json"])
    assert rc == 0
    res = json.loads(out)
    assert set(res) == {"params", "stderr", "fit", "paper", "warnings"}
    assert res["warnings"] == []          # a bare inertia: no armature to trade kp against
    assert res["params"]["kp"] == pytest.approx(9.272, rel=0.03)
    assert res["params"]["kd"] == pytest.approx(0.3069, rel=0.03)
    assert list((tmp_path / "params_raw").glob("*.npz"))


def test_actuator_needs_port_or_simulate(capsys, tmp_path):
    rc, _, err = _run(capsys, ["calibrate", "actuator", "--id", "1", "--load", "pendulum:0.2:0.1",
                               "--out", str(tmp_path / "p.yaml")])
    assert rc == 2 and "--port" in err
    rc, _, err = _run(capsys, ["calibrate", "actuator", "--id", "1", "--load", "pendulum:x:0.1",
                               "--out", str(tmp_path / "p.yaml"), "--simulate", "1,1,1"])
    assert rc == 2 and "MASS and LENGTH" in err


@pytest.mark.parametrize("value", ["-1e-3", "nan", "inf"])
def test_actuator_bad_armature_exit_2_before_any_run(capsys, tmp_path, value):
    rc, _, err = _run(capsys, ["calibrate", "actuator", "--id", "1", "--load", "pendulum:0.2:0.1",
                               f"--armature={value}", "--simulate", "1,0.1,0.01",
                               "--out", str(tmp_path / "p.yaml")])
    assert rc == 2 and "--armature must be a finite number >= 0 kg*m^2" in err
    assert not (tmp_path / "p_raw").exists()      # refused before the experiment


def test_actuator_light_load_is_a_clear_error_raw_kept(capsys, tmp_path):
    """A load 1000x too light: the step is over within a sample; exit 2, raw recording kept."""
    rc, _, err = _run(capsys, ["calibrate", "actuator", "--id", "1", "--inertia", "4e-6",
                               "--simulate", "9.272,0.3069,0.03", "--cycles", "1",
                               "--out", str(tmp_path / "params.yaml")])
    assert rc == 2
    assert "too light to excite" in err and "simulated_gain32" in err
    assert list((tmp_path / "params_raw").glob("*.npz"))
    assert not (tmp_path / "params.yaml").exists()
