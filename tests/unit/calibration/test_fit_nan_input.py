"""``servoloop calibrate fit`` never takes a NaN/inf input and never writes a NaN fit."""

import json
import math

import pytest

from servoloop.calibration.offline import OfflineFit
from servoloop.cli import main


def _run(capsys, argv):
    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def _log_with(bam_dir, tmp_path, **changes):
    data = json.loads((bam_dir / "xl330_kp100_sin_sin.json").read_text())
    data.update(changes)
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(data))          # json writes NaN / Infinity, and reads them back
    return path


@pytest.mark.parametrize("key,value", [("kp", math.nan), ("kp", math.inf), ("vin", -math.inf),
                                       ("mass", math.nan)])
def test_nan_in_the_bench_scalars_exit_2_names_key_and_writes_nothing(capsys, bam_dir, tmp_path, key, value):
    log = _log_with(bam_dir, tmp_path, **{key: value})
    out = tmp_path / "params.yaml"
    rc, _, err = _run(capsys, ["calibrate", "fit", "--log", str(log), "--model", "m1", "--evals", "50",
                               "--out", str(out)])
    assert rc == 2
    assert "bench.json" in err and f"{key} is not finite" in err
    assert "Traceback" not in err and not out.exists()


def test_nan_in_a_sample_exit_2(capsys, bam_dir, tmp_path):
    data = json.loads((bam_dir / "xl330_kp100_sin_sin.json").read_text())
    data["entries"][12]["goal_position"] = math.inf
    log = tmp_path / "bench.json"
    log.write_text(json.dumps(data))
    rc, _, err = _run(capsys, ["calibrate", "fit", "--log", str(log), "--model", "m1"])
    assert rc == 2 and "bench.json, sample 12" in err and "goal is not finite" in err


def test_nan_in_evaluated_parameters_exit_2(capsys, bam_logs, tmp_path):
    params = tmp_path / "p.yaml"
    params.write_text("params: {kt: .nan, r: 2.0}\n")
    out = tmp_path / "out.yaml"
    rc, _, err = _run(capsys, ["calibrate", "fit", "--log", str(bam_logs[0]), "--model", "m1",
                               "--evaluate", str(params), "--out", str(out)])
    assert rc == 2 and "parameter kt is nan" in err and not out.exists()


@pytest.mark.parametrize("dt", ["nan", "inf", "0"])
def test_bad_resampling_step_exit_2(capsys, bam_logs, dt):
    rc, _, err = _run(capsys, ["calibrate", "fit", "--log", str(bam_logs[0]), "--dt", dt])
    assert rc == 2 and "--dt" in err


def test_a_fit_that_comes_out_nan_exit_1_writes_nothing(capsys, bam_logs, tmp_path, monkeypatch):
    import servoloop.calibration.offline as offline

    def nan_fit(name, train, holdout, **kw):
        return OfflineFit(name, {"kt": math.nan, "r": 2.0}, {}, [], 10)

    monkeypatch.setattr(offline, "fit_logs", nan_fit)
    out = tmp_path / "out.yaml"
    rc, _, err = _run(capsys, ["calibrate", "fit", "--log", str(bam_logs[0]), "--model", "m1",
                               "--out", str(out)])
    assert rc == 1 and "parameter kt came out nan" in err and not out.exists()
