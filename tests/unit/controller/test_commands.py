"""The CLI: exit codes, run --lockstep --json, log export/plot/info, status without a daemon."""

import json

import pytest
import yaml

from servoloop.cli import main


def test_run_with_bad_config_exits_2(tmp_path, capsys):
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump({"servos": [{"id": 1, "model": "XM430-W350", "joint": "a"}], "lop": {}}))
    assert main(["run", "--config", str(p), "--duration", "0.1"]) == 2
    err = capsys.readouterr().err
    assert "'lop'" in err and str(p) in err


def test_run_unknown_controller_exits_2(capsys):
    assert main(["run", "--controller", "nope", "--lockstep", "--duration", "0.1"]) == 2
    assert "unknown controller 'nope'" in capsys.readouterr().err


@pytest.mark.hil
def test_run_lockstep_json_summary_then_log_tools(tmp_path, capsys):
    tel = tmp_path / "t.sltl"
    rc = main(["run", "--robot", "arm", "--lockstep", "--duration", "0.2", "--json", "--quiet",
               "--telemetry", str(tel), "--socket", "none"])
    out = capsys.readouterr().out.strip().splitlines()
    assert rc == 0
    summary = json.loads(out[-1])
    assert summary["state"] == "done" and summary["ticks"] == 200
    assert summary["rate_hz"] == pytest.approx(1000.0)
    assert set(summary["jitter_us"]) == {"p50", "p99", "max"}
    assert summary["missed"] == 0 and summary["bus_errors"] == {} and summary["faults"] == []
    assert main(["log", "export", str(tel), "--csv", str(tmp_path / "t.csv"),
                 "--mcap", str(tmp_path / "t.mcap")]) == 0
    assert (tmp_path / "t.csv").read_text().splitlines()[0].startswith("tick,t_s,")
    assert main(["log", "plot", str(tel), "--out", str(tmp_path / "t.png")]) == 0
    assert (tmp_path / "t.png").stat().st_size > 1000
    assert main(["log", "info", str(tel), "--json"]) == 0
    info = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert info["robot"] == "arm" and info["summary"]["state"] == "done"


def test_log_tools_on_a_non_telemetry_file_exit_2(tmp_path, capsys):
    p = tmp_path / "x.sltl"
    p.write_text("nope")
    assert main(["log", "export", str(p), "--csv", str(tmp_path / "o.csv")]) == 2
    assert main(["log", "plot", str(p), "--out", str(tmp_path / "o.png")]) == 2
    assert "bad magic" in capsys.readouterr().err
    assert main(["log", "export", str(p)]) == 2


def test_status_and_stop_without_daemon_exit_1(tmp_path, capsys):
    assert main(["status", "--socket", str(tmp_path / "none.sock")]) == 1
    assert main(["stop", "--socket", str(tmp_path / "none.sock")]) == 1
    assert "no daemon listening" in capsys.readouterr().err
