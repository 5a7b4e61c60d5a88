"""Safety: the comm-fault ladder, the goal slew limit, clamping, measured limits."""

import math
from dataclasses import replace

import numpy as np
import pytest

from servoloop.controller.comm_policy import CommPolicy
from servoloop.controller.config import SafetyConfig
from servoloop.controller.loop_stats import JitterStats
from servoloop.controller.safety import LimitChecker, SafetyStage
from servoloop.controller.slew import SlewLimiter

SAFETY = SafetyConfig()


def policy(events, **kw):
    return CommPolicy([1, 2, 3], ["a", "b", "c"], replace(SAFETY, **kw), 1000.0,
                      lambda kind, msg: events.append((kind, msg)))


def test_comm_ladder_warn_hold_recover_then_timeout_in_seconds():
    ev = []
    p = policy(ev, comm_timeout_s=0.5, comm_hold_s=0.05, comm_window_s=1.0, comm_warn_rate=0.01)
    ms = 1_000_000
    p.start(0)
    ok = np.zeros(3, dtype=bool)
    bad2 = np.array([False, True, False])
    t = 0
    for k in range(1000):  # 2 % of ticks lose servo 2: warn, never more
        t += ms
        assert p.record(k % 50 != 0, bad2 if k % 50 == 0 else ok, t) is None
    assert p.level_name == "warn" and [e[0] for e in ev] == ["comm_warn"]
    assert p.errors.tolist() == [0, 20, 0] and p.error_counts() == {2: 20}
    # 60 ms without servo 2: hold after 50 ms, then the bus comes back by itself
    for _ in range(60):
        t += ms
        assert p.record(False, bad2, t) is None
    assert p.level_name == "hold" and ev[-1][0] == "comm_hold"
    t += ms
    assert p.record(True, ok, t) is None
    assert p.level_name == "warn" and ev[-1][0] == "comm_recovered"
    # silent for comm_timeout_s: the fault names the servo, on the tick that reaches it
    t0 = t
    msg = None
    while msg is None:
        t += ms
        msg = p.record(False, bad2, t)
    assert t - t0 == 500 * ms and "servo 2 (b)" in msg and "comm_timeout_s" in msg
    assert p.level_name == "timeout" and p.timeout_index == 1


def test_comm_policy_counts_time_not_ticks():
    # a 120 ms host stall seen as 5 failed ticks far apart: time decides, so no hold at
    # 5 ticks and no timeout before 0.5 s of silence whatever the tick count
    ev = []
    p = policy(ev)
    p.start(0)
    bad = np.ones(3, dtype=bool)
    assert all(p.record(False, bad, k * 24_000_000) is None for k in range(1, 6))
    assert p.level_name == "hold"  # 120 ms > comm_hold_s
    assert p.record(False, bad, 500_000_000) is not None


def test_disabled_servo_does_not_count():
    ev = []
    p = policy(ev, comm_timeout_s=0.01, comm_hold_s=0.005)
    p.start(0)
    p.disable(2)
    only3 = np.array([False, False, True])
    assert all(p.record(False, only3, k * 1_000_000) is None for k in range(1, 100))
    assert p.level_name == "ok" and p.errors.sum() == 0


def test_slew_limit_bounds_every_step_and_continues_after_a_stall():
    vmax = np.array([2.0, 5.0])
    s = SlewLimiter(vmax, None, 1e-3)
    s.reset(np.zeros(2))
    out = np.zeros(2)
    prev = out.copy()
    for _ in range(400):
        s.limit(np.array([1.4, -1.4]), out)  # a set_goal 1.4 rad away
        assert np.all(np.abs(out - prev) <= vmax * 1e-3 + 1e-12)
        prev = out.copy()
    np.testing.assert_allclose(out, [0.8, -1.4])  # joint 0 still on its way at 2 rad/s
    # after a "stall" (no call for 50 ticks) the next goal is one step on, not 50
    s.limit(np.array([1.4, -1.4]), out)
    assert out[0] - prev[0] == pytest.approx(2e-3)
    # a joint reset to its present (servo reboot) ramps from there
    s.reset_joint(0, 0.3)
    s.limit(np.array([1.4, -1.4]), out)
    assert out[0] == pytest.approx(0.302)


def test_slew_acceleration_limit_ramps_speed_and_stops_at_target():
    s = SlewLimiter(np.array([4.0]), 100.0, 1e-3)
    s.reset(np.zeros(1))
    out = np.zeros(1)
    steps = []
    prev = 0.0
    for _ in range(2000):
        s.limit(np.array([1.0]), out)
        steps.append(out[0] - prev)
        prev = out[0]
    d = np.diff(np.r_[0.0, steps])
    assert np.abs(steps).max() <= 4e-3 + 1e-12 and np.abs(d).max() <= 100.0 * 1e-6 + 1e-12
    assert out[0] == pytest.approx(1.0, abs=1e-3)


def _torque_slew(max_acceleration=None):
    """Joint 0 takes torque-carrying goals (window 0.2 rad about the measured position), joint 1
    not; both 4 rad/s."""
    s = SlewLimiter(np.array([4.0, 4.0]), max_acceleration, 1e-3)
    s.set_torque_goals(np.array([True, False]), np.array([0.2, 0.2]))
    s.reset(np.zeros(2))
    return s


def test_a_torque_goal_within_its_offset_bound_passes_however_fast_it_moves():
    # issue 11: a swing joint's goal q + tau / k_p swings with the torque at 8-13 rad/s; the
    # speed limit clipped the torque.  Within 0.2 rad of the measured position it passes
    s = _torque_slew()
    out = np.zeros(2)
    q = 0.0
    for k in range(200):
        q += 3e-3                                     # the joint turns at 3 rad/s
        offset = 0.15 * math.sin(2 * math.pi * k / 40)    # torque swinging at 25 Hz
        goal = np.array([q + offset, q + offset])
        s.limit(goal, out, np.array([q, q]))
        assert out[0] == goal[0]                       # the torque delivered, all of it
        assert abs(out[1] - s.last[1]) <= 4e-3 + 1e-12  # the unmarked joint: the ramp
    assert s.last[0] == out[0]


def test_a_torque_goal_far_from_the_joint_is_bounded_then_ramps():
    # a base goal 1.4 rad of joint away: at most the offset bound (stall torque) and one ramp
    # step from the measured position, however long the joint stays behind
    s = _torque_slew()
    out = np.zeros(2)
    present = np.zeros(2)
    s.limit(np.array([1.4, 1.4]), out, present)
    assert out[0] == pytest.approx(0.2) and out[1] == pytest.approx(4e-3)
    for _ in range(50):                                # the joint stuck at 0
        s.limit(np.array([1.4, 1.4]), out, present)
        assert out[0] <= 0.2 + 4e-3 + 1e-12           # the goal does not run away from it
    assert out[1] == pytest.approx(51 * 4e-3)          # (the unmarked joint's ramp does)
    q = 0.0
    for _ in range(100):                               # the joint follows at 3 rad/s
        q += 3e-3
        s.limit(np.array([1.4, 1.4]), out, np.array([q, 0.0]))
        assert 0.2 - 1e-12 <= out[0] - q <= 0.2 + 4e-3 + 1e-12     # riding b ahead of it
    # within the bound of a joint that has followed: the asked goal again
    s.limit(np.array([q + 0.1, 0.0]), out, np.array([q, 0.0]))
    assert out[0] == pytest.approx(q + 0.1)


def test_a_torque_goal_after_a_reboot_or_a_failed_read_keeps_to_the_ramp():
    s = _torque_slew()
    out = np.zeros(2)
    s.reset_joint(0, 0.5)                              # rebooted: holds 0.5 rad
    s.limit(np.array([-1.0, 0.0]), out, np.array([0.5, 0.0]))
    assert out[0] == pytest.approx(0.3)                # 0.2 rad (stall torque) from it
    s.limit(np.array([-1.0, 0.0]), out, np.array([np.nan, 0.0]))   # no reading: the ramp
    assert out[0] == pytest.approx(0.3 - 4e-3)
    s.held[0] = True                                   # a disabled servo holds its goal
    s.limit(np.array([0.0, 0.0]), out, np.array([0.0, 0.0]))
    assert out[0] == pytest.approx(0.3 - 4e-3)


def test_unmarked_joints_and_no_measured_position_keep_the_ramp_bit_for_bit():
    plain, marked = SlewLimiter(np.array([4.0, 3.0]), 50.0, 1e-3), _torque_slew(50.0)
    marked.max_velocity[:] = plain.max_velocity
    marked.max_step[:] = plain.max_step
    plain.reset(np.zeros(2))
    a, b = np.zeros(2), np.zeros(2)
    rng = np.random.default_rng(3)
    for k in range(300):
        goal = rng.normal(0.0, 1.0, 2)
        plain.limit(goal, a)
        # joint 1 unmarked; joint 0 marked but given no measured position (not running)
        marked.limit(goal, b, None if k % 2 else np.array([np.nan, 0.3]))
        assert a[1] == b[1]
    with pytest.raises(ValueError, match="max_offset"):
        marked.set_torque_goals(np.array([True, False]), np.array([-1.0, 0.0]))


def test_safety_stage_nan_goal_holds_the_written_goal():
    st = SafetyStage(SAFETY, ["a", "b"], [1, 2], [-1, -1], [1, 1], np.array([1.0, 1.0]), 1000.0)
    st.slew.reset(np.array([0.5, 0.2]))
    out = np.zeros(2)
    st.clamp(np.array([np.nan, 0.2]), out)
    np.testing.assert_array_equal(out, [0.5, 0.2])


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
