"""``servoloop rom``: bad input gives one clear line and exit code 2; evaluate's JSON form.

The full held-out 4 x 4 grid (A7) takes minutes: its command and figures are in BENCHMARKS.md.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("casadi")

from servoloop.cli import main  # noqa: E402


@pytest.mark.parametrize(("argv", "message"), [
    (["rom", "evaluate", "--model", "no/such/model.json"], "model file 'no/such/model.json': not found"),
    (["rom", "evaluate", "--model", "builtin:nope"], "no such built-in model"),
    (["rom", "evaluate", "--model", "builtin:five_link_2d", "--speeds", "0.3,fast"],
     "--speeds: 'fast' is not a number"),
    (["rom", "evaluate", "--model", "builtin:five_link_2d", "--speeds", "5"], "task speed 5.0 m/s"),
    (["rom", "evaluate", "--model", "builtin:five_link_4d", "--inclines", "nan"], "--inclines: 'nan' is not finite"),
    (["rom", "evaluate", "--model", "builtin:five_link_4d", "--speeds", "9",   # a negative list
      "--inclines", "-0.08,0,0.08"], "task speed 9.0 m/s"),
    (["rom", "learn", "--model", "2d", "--iterations", "-1", "--out", "x.json"], "--iterations -1"),
    (["rom", "plan", "--strides", "11"], "--strides 11: must lie in 1..10"),
    (["rom", "check", "--roms", "2d,3d"], "--roms: '3d' is not a ROM"),
    (["rom", "curve", "--models", "builtin:five_link_2d,nope.json", "--plot", "x.png"],
     "model file 'nope.json': not found"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert err.startswith("servoloop rom ")


def test_a_model_file_that_is_not_one(tmp_path, capsys):
    bad = tmp_path / "m.json"
    bad.write_text(json.dumps({"format": "servoloop-rom/1", "model": "4d", "theta": [1, 2]}))
    assert main(["rom", "evaluate", "--model", str(bad)]) == 2
    assert "'theta' must hold 464 finite numbers" in capsys.readouterr().err


def test_evaluate_prints_the_benchmark_form(capsys):
    assert main(["rom", "evaluate", "--model", "builtin:five_link_4d", "--speeds", "0.4",
                 "--inclines", "0", "--workers", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    (row,) = out["rows"]
    assert row["case"] == "v=0.4 incline=0" and row["metric"] == "cost_ratio"
    assert row["anchor_name"] == "lip" and row["feasible"] is True
    assert row["ours"] >= 1.0 and row["anchor"] >= 1.0          # J_full bounds both
    assert row["ratio"] == pytest.approx(row["ours"] / row["anchor"])
    assert row["ratio"] < 0.95           # A7 on one held-out task: the shipped model beats the LIP


def test_curve_plots_the_stored_learning_curves(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "curve.png"
    assert main(["rom", "curve", "--plot", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
    empty = tmp_path / "m.json"
    from servoloop.locomotion.features import ROM_SPECS, theta0

    model = {"format": "servoloop-rom/1", "model": "2d", "theta": list(theta0(ROM_SPECS["2d"])), "costs": []}
    empty.write_text(json.dumps(model))
    assert main(["rom", "curve", "--models", str(empty), "--plot", str(out)]) == 2
    assert "holds no learning curve" in capsys.readouterr().err
