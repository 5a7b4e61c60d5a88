"""``servoloop experiment seed003 --json``: the benchmark form with the paper's anchors."""

from __future__ import annotations

import json

import pytest

from servoloop.cli import main
from servoloop.experiments.seed003 import PAPER, case_name


def test_seed003_json_rows_name_case_metric_and_anchor(capsys):
    rc = main(["experiment", "seed003", "--seconds", "0.3", "--ground", "rigid", "--mu", "0.1",
               "--controller", "pid", "--controller", "id_lag1", "--json"])
    assert rc == 0
    rep = json.loads(capsys.readouterr().out)          # stdout is exactly one JSON object
    assert rep["benchmark"] == "seed003"
    rows = {(r["case"], r["metric"]): r for r in rep["rows"]}
    for c in ("pid", "id_lag1"):
        name = case_name("rigid", 0.1, c)
        for m in ("pos_err_rad", "vel_err_rad_s", "dtau_mean", "tau_mean", "fell"):
            r = rows[(name, m)]
            assert r["ours"] is not None and r["ours"] >= 0
            if m in ("pos_err_rad", "fell"):
                assert r["anchor"] == PAPER[("rigid", 0.1, c)][m]
    assert rows[("rigid mu=0.1 pid", "fell")]["ours"] == 0.0     # 0.3 s standing/trotting
    assert ("rigid mu=0.1 pid", "force_err_pct") not in rows      # PID predicts no force
    assert rows[("rigid mu=0.1 id_lag1", "force_err_pct")]["anchor"] is None


def test_paper_anchors_mark_the_papers_falls():
    assert PAPER[("rigid", 0.1, "lcp_inf")] == {"fell": 1.0}
    assert PAPER[("rigid", float("inf"), "lcp_inf")]["force_err_pct"] == 1.16
    assert PAPER[("compliant", 0.1, "qp_mu")]["pos_err_rad"] == 0.0217


def test_bad_seconds_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["experiment", "seed003", "--seconds", "-1"])
    assert exc.value.code == 2
    assert "--seconds must be > 0" in capsys.readouterr().err
