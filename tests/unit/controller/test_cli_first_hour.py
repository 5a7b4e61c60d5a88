"""The user's first hour on the command line: log plot of any joint count, the rate that fits the
baud, advice on missed ticks, -v/-q, the jog keys, offsets written into a commented config."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import yaml

from servoloop.cli import build_parser, log_level, main
from servoloop.controller.config import builtin_config
from servoloop.controller.jog_cli import JogKeys, jog_state, parse_goal_args
from servoloop.controller.run_advice import (
    missed_ticks_advice,
    rate_fit_warning,
    wire_time_per_tick_s,
)
from servoloop.controller.telemetry import TelemetryRing, TelemetryWriter
from servoloop.controller.telemetry_format import read_telemetry
from servoloop.controller.yaml_edit import set_servo_fields


def telemetry(tmp_path, joints, rows=200, rate=100.0):
    ring = TelemetryRing(joints, 64)
    w = TelemetryWriter(tmp_path / "t.sltl", ring, {"robot": "r", "rate_hz": rate, "joint_names": joints},
                        flush_s=10.0)
    w.start()
    cols = ring.columns if hasattr(ring, "columns") else None
    for k in range(rows):
        r = ring.row()
        r[:] = 0.0
        r[0] = k
        r[1] = k / rate
        ring.commit()
        if k % 32 == 31:
            w.flush()
    w.close({"ticks": rows})
    del cols
    return tmp_path / "t.sltl"


def test_log_plot_pages_every_joint_and_takes_a_window(tmp_path, capsys):
    joints = [f"j{k}" for k in range(18)]       # the humanoid's count: past the old 12-joint cut
    path = telemetry(tmp_path, joints)
    out = tmp_path / "plot.png"
    assert main(["log", "plot", str(path), "--out", str(out)]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == [str(out), str(tmp_path / "plot-2.png")]
    for p in printed:
        assert open(p, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert main(["log", "plot", str(path), "--out", str(tmp_path / "w.png"), "--joints", "j3,j17",
                 "--from", "0.5", "--to", "1.0"]) == 0
    assert capsys.readouterr().out.split() == [str(tmp_path / "w.png")]
    assert main(["log", "plot", str(path), "--out", str(out), "--joints", "j3,knee"]) == 2
    err = capsys.readouterr().err
    assert "no joint 'knee'" in err and "j0, j1" in err and "Traceback" not in err
    assert main(["log", "plot", str(path), "--out", str(out), "--from", "50"]) == 2
    assert "no telemetry rows between 50.0 s" in capsys.readouterr().err
    tel = read_telemetry(path)
    assert tel.data.shape[0] == 200


def test_rate_that_cannot_fit_the_baud_is_named_with_the_rate_that_fits():
    cfg = builtin_config("arm").with_overrides(**{"bus.baud": 57600, "loop.rate_hz": 1000.0})
    msg = rate_fit_warning(cfg)
    t = wire_time_per_tick_s(cfg)
    assert "loop.rate_hz 1000 Hz" in msg and "bus.baud 57600 bps" in msg
    fits = int(msg.split("--rate ")[1].split(")")[0])
    assert fits <= 1.0 / t and fits >= 0.5 / t             # a rate that does fit, not a tiny one
    assert rate_fit_warning(cfg.with_overrides(**{"loop.rate_hz": float(fits)})) is None
    # the wire time scales with the baud (same bytes): 1 Mbps is 57600/1e6 of it
    fast = cfg.with_overrides(**{"bus.baud": 1_000_000})
    assert wire_time_per_tick_s(fast) == pytest.approx(t * 57600 / 1e6)
    assert rate_fit_warning(builtin_config("quadruped")) is None


def test_missed_tick_advice_only_when_many_were_missed():
    assert missed_ticks_advice({"missed": 2, "ticks": 1000, "rate_hz": 999.0}, 1000.0) is None
    msg = missed_ticks_advice({"missed": 2315, "ticks": 1876, "rate_hz": 447.6}, 1000.0)
    assert "2315 of 4191 ticks were missed (55 %)" in msg and "--rate 350" in msg and "sched_fifo" in msg


def test_missed_tick_advice_for_a_run_that_faulted_in_its_startup():
    """No run tick (a startup that ended in the late-ticks fault): the startup's ticks count,
    and the rate to try is under what the startup kept, not ``--rate 1``."""
    msg = missed_ticks_advice({"missed": 1953, "ticks": 0, "total_ticks": 1750, "rate_hz": 0.0}, 1000.0)
    assert "1953 of 3703 ticks were missed (53 %)" in msg and "--rate 370" in msg


def test_verbosity_flags_map_to_logging_levels():
    parser = build_parser()
    assert log_level(parser.parse_args(["status"])) == logging.WARNING
    assert log_level(parser.parse_args(["status"]), "debug") == logging.DEBUG
    assert log_level(parser.parse_args(["-v", "status"]), "error") == logging.INFO
    assert log_level(parser.parse_args(["status", "-vv"])) == logging.DEBUG
    assert log_level(parser.parse_args(["status", "-q"]), "info") == logging.ERROR
    # run's own --quiet (no status line) stays what it was
    args = parser.parse_args(["run", "--quiet"])
    assert args.quiet is True and log_level(args, "info") == logging.INFO


def test_paper_jargon_is_gone_from_help_texts():
    parser = build_parser()
    texts = [parser.format_help()]
    stack = [parser]
    while stack:
        p = stack.pop()
        for a in p._actions:
            if hasattr(a, "choices") and isinstance(a.choices, dict):
                for sp in a.choices.values():
                    texts.append(sp.format_help())
                    stack.append(sp)
    text = "\n".join(texts).lower()
    assert "seed 00" not in text and "paper method" not in text


def test_jog_keys_select_step_and_quit():
    keys = JogKeys(["a", "b", "c"], {"a": 0.0, "b": 1.0, "c": -0.5}, step=0.1)
    assert keys.key("+") == {"a": pytest.approx(0.1)}
    keys.accepted({"a": 0.1})
    assert keys.key("right") == {"a": pytest.approx(0.2)}       # not accepted: still steps from 0.1
    assert keys.key("down") is None and keys.joint == "b"
    assert keys.key("-") == {"b": pytest.approx(0.9)}
    assert keys.key("]") is None and keys.step == pytest.approx(0.2)
    assert keys.key("3") is None and keys.joint == "c"
    assert keys.key("left") == {"c": pytest.approx(-0.7)}
    assert keys.key("9") is None and keys.joint == "c"           # no 9th joint: stays
    assert keys.key("up") is None and keys.joint == "b"
    assert keys.key("\t") is None and keys.joint == "c"
    assert keys.key("x") is None and "unknown key 'x'" in keys.message
    assert "c: goal -0.5000 rad" in keys.line()
    assert keys.key("q") is False and keys.key("\x03") is False


def test_jog_starts_from_the_controllers_target():
    st = {"joints": {"a": 0.01, "b": 0.52}, "controller": {"name": "hold", "target": {"a": 0.0, "b": 0.5}}}
    keys = jog_state(st, 0.05)
    assert keys.target == {"a": 0.0, "b": 0.5} and keys.joints == ["a", "b"]


def test_jog_refuses_without_a_terminal(capsys, monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main(["jog", "--socket", "/nonexistent.sock"]) == 2
    assert "needs a terminal (stdin is not a tty)" in capsys.readouterr().err


def test_goal_arguments_are_checked_before_any_socket(capsys):
    assert parse_goal_args(["a=0.5", "b=-1e-1"]) == {"a": 0.5, "b": -0.1}
    assert main(["goal", "elbow", "--socket", "/nonexistent.sock"]) == 2
    assert "'elbow' is not JOINT=RAD" in capsys.readouterr().err
    assert main(["goal", "elbow=up", "--socket", "/nonexistent.sock"]) == 2
    assert main(["goal", "elbow=0.1", "--socket", "/nonexistent.sock"]) == 1
    assert "no daemon listening" in capsys.readouterr().err


def test_offsets_are_written_into_the_yaml_keeping_comments():
    text = ("# my robot\nrobot: r  # name\nservos:\n"
            "  - {id: 1, model: XM430-W350, joint: a, offset: 0.1}   # left\n"
            "  - {id: 2, model: XM430-W350, joint: b}  # right\n"
            "  - id: 3   # third\n    model: XM430-W350\n    joint: c\n")
    new = set_servo_fields(text, {0: {"offset": 0.25}, 1: {"offset": -0.125}, 2: {"offset": 1.5}})
    assert "# my robot" in new and "# left" in new and "# right" in new and "# third" in new
    data = yaml.safe_load(new)
    assert [s.get("offset") for s in data["servos"]] == [0.25, -0.125, 1.5]
    assert np.isclose(data["servos"][0]["offset"], 0.25)
