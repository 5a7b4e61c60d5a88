"""Safety: comm error window, consecutive errors, clamping, measured limits."""

import numpy as np

from servoloop.controller.loop_stats import JitterStats
from servoloop.controller.safety import CommMonitor, LimitChecker


def test_window_rate_fault_only_past_threshold():
    m = CommMonitor(window=200, rate=0.05, max_consecutive=100)
    pattern = [True] * 19 + [False]  # 5 % errors exactly: 10 in 200, allowed
    msgs = [m.record(ok) for _ in range(20) for ok in pattern]
    assert all(x is None for x in msgs) and m.errors_in_window == 10
    # one more error inside the window -> 11/200 > 5 %
    assert m.record(False) is not None


def test_window_must_be_full_before_judging_rate():
    m = CommMonitor(window=200, rate=0.05, max_consecutive=5)
    assert m.record(False) is None  # 1/1 is not "100 %" yet


def test_consecutive_errors_fault():
    m = CommMonitor(window=200, rate=1.0, max_consecutive=3)
    assert m.record(False) is None and m.record(False) is None
    assert "3 consecutive" in m.record(False)
    m2 = CommMonitor(window=200, rate=1.0, max_consecutive=3)
    m2.record(False), m2.record(False), m2.record(True)
    assert m2.record(False) is None


def test_clamp_and_nan():
    lc = LimitChecker(["a", "b"], [1, 2], [-1, -1], [1, 1], margin=0.1)
    out = np.zeros(2)
    lc.clamp(np.array([2.0, np.nan]), out)
    np.testing.assert_array_equal(out, [1.0, -1.0])


def test_measured_position_limits_name_joint():
    lc = LimitChecker(["a", "b"], [1, 2], [-1, -1], [1, 1], margin=0.1)
    assert lc.check_position(np.array([1.05, 0.0])) is None
    msg = lc.check_position(np.array([0.0, -1.2]))
    assert "'b'" in msg and "servo 2" in msg
    assert lc.check_position(np.array([np.nan, 0.0])) is None


def test_range_check():
    lc = LimitChecker(["a", "b"], [1, 2], [-1, -1], [1, 1], margin=0.1)
    assert lc.check_range(np.array([40.0, 60.0]), None, 70.0, "temperature", "degC", "k") is None
    msg = lc.check_range(np.array([40.0, 75.0]), None, 70.0, "temperature", "degC", "k")
    assert "servo 2" in msg and "75.0" in msg
    assert "below" in lc.check_range(np.array([9.0, 12.0]), 10.0, None, "v", "V", "k")


def test_jitter_percentiles():
    js = JitterStats(max_us=1000)
    for us in range(100):
        js.add(us * 1000 + 200)
    s = js.summary()
    assert s["p50"] == 49.5 and s["p99"] == 98.5 and s["max"] == 99.2
    js.add(5_000_000)  # overflow bin
    assert js.summary()["max"] == 5000.0
    assert np.isnan(JitterStats().summary()["p99"])


def test_widen_to_start_pose_then_restore():
    # a joint resting on its mechanical stop, outside the soft limits: it may stay
    # there (goal := present, no jump) until the startup ramp has brought it inside
    lc = LimitChecker(["a", "b"], [1, 2], [-1, -1], [1, 1], margin=0.1)
    start = np.array([1.25, 0.0])
    assert lc.check_position(start) is not None                 # past limit + margin ...
    assert lc.check_position(start, extra=0.3) is None          # ... but within the startup margin
    assert "startup" in lc.check_position(np.array([1.5, 0.0]), extra=0.3)
    lc.widen_to(start)
    out = np.zeros(2)
    np.testing.assert_array_equal(lc.clamp(start, out), start)  # no jump at torque on
    assert lc.check_position(start + [0.05, 0.0]) is None
    assert lc.check_position(start + [0.15, 0.0]) is not None   # further out: still a fault
    lc.restore()
    np.testing.assert_array_equal(lc.clamp(start, out), [1.0, 0.0])
    assert lc.check_position(start) is not None
