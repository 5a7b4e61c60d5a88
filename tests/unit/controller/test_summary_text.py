"""The run summary and the status as text: what the wire gate did is said, and only then."""

from servoloop.controller.summary_text import print_status, print_summary


def _summary(**extra):
    s = {"robot": "arm", "state": "done", "ticks": 1000, "rate_hz": 1000.0, "controller": "hold",
         "stop_reason": "duration", "jitter_us": {"p50": 1.0, "p99": 2.0, "max": 3.0}, "missed": 3,
         "missed_by_cause": {"compute": 1, "bus": 2, "wakeup": 0}, "bus_errors": {}, "warnings": [],
         "faults": [], "stale_reads": 7}
    s.update(extra)
    return s


def test_the_summary_says_what_the_wire_gate_did(capsys):
    print_summary(_summary(wire_gate={"waits": 3, "wait_us": 602.4, "skipped": 4, "wire_us": 1985.0}))
    out = capsys.readouterr().out
    assert "missed 3 (compute 1, bus 2, wakeup 0)" in out
    assert "stale reads 7; wire gate: 3 writes waited (602 us in all), 4 skipped" in out


def test_a_gate_that_never_acted_is_not_mentioned(capsys):
    print_summary(_summary(wire_gate={"waits": 0, "wait_us": 0.0, "skipped": 0, "wire_us": 1985.0}))
    assert "wire gate" not in capsys.readouterr().out


def test_the_status_text_tells_the_move_since_the_run_began(capsys):
    st = {"robot": "quadruped", "state": "run", "t_s": 3.0, "tick": 3000, "rate_hz": 999.0,
          "jitter_us": {"p50": 1, "p99": 2, "max": 3}, "missed": 0, "bus_errors": {},
          "controller": "wbc", "faults": [],
          "estimate": {"base_position_in_world": [0.10, 0.0, 0.24], "base_rpy": [0.0, 0.0, 0.02],
                       "contact": {"lf": True}, "valid": True,
                       "at_run_start": {"base_position_in_world": [0.09, 0.0, 0.24], "base_rpy": [0, 0, 0.01]}}}
    print_status(st)
    out = capsys.readouterr().out
    assert "since the run began: xyz +0.010 +0.000 +0.000 m  yaw +0.010 rad" in out
