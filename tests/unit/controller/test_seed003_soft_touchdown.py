"""Issue 11: soft touchdowns in the trot's swing profile, and the lagged IDs' force lag.

The swing's height ends in a slow final descent and its in-plane motion is minimum jerk,
so a foot that lands a few ms early (it runs ~0.3 mm ahead of its reference on the way
down) meets the ground at a few cm/s instead of 0.3 m/s; checked on the closed-loop trot
over seconds of simulated time at a true mu = inf on rigid ground."""

import math

import numpy as np

from servoloop.controller.wholebody.gait import (
    LAND_DEPTH,
    LAND_FRACTION,
    TrotGait,
    swing_height,
    swing_plane,
)
from servoloop.experiments.seed003 import Case, run_case

T = TrotGait().swing_time


def test_swing_height_starts_still_is_smooth_and_lands_at_the_slow_descent_speed():
    h = 0.015
    us = np.linspace(0.0, 1.0, 20001)
    z, dz, ddz = np.array([swing_height(u, h, T) for u in us]).T
    # lift-off: from rest, with an upward acceleration (a decisive lift, no dragging foot)
    assert z[0] == 0.0 and dz[0] == 0.0 and ddz[0] > 20.0
    assert z[-1] == 0.0 and ddz[-1] == 0.0                          # touchdown: on the ground
    v_land = LAND_DEPTH / (LAND_FRACTION * T)
    assert math.isclose(dz[-1], -v_land) and v_land < 0.1           # m/s, the slow descent
    assert abs(z.max() - h) < 0.1 * h and z.min() >= 0.0            # apex ~ step height
    # its rate and acceleration are the derivatives of its height (no jump anywhere)
    du = us[1] - us[0]
    assert np.max(np.abs(np.gradient(z, du) / T - dz)) < 1e-3
    assert np.max(np.abs(np.gradient(dz, du) / T - ddz)) < 0.5      # m/s^2, out of ~100
    assert np.max(np.abs(np.diff(ddz))) < 0.5
    # the last LAND_FRACTION: below LAND_DEPTH, at the landing speed
    tail = us >= 1.0 - LAND_FRACTION
    assert np.all(z[tail] <= LAND_DEPTH + 1e-12) and np.allclose(dz[tail], -v_land)
    # no step height: no lift (the descent is at most half of it)
    assert swing_height(0.5, 0.0, T) == (0.0, 0.0, 0.0)


def test_swing_plane_arrives_with_zero_velocity_and_acceleration():
    s = np.array([swing_plane(u, T) for u in np.linspace(0.0, 1.0, 1001)])
    assert tuple(s[0]) == (0.0, 0.0, 0.0) and tuple(s[-1]) == (1.0, 0.0, 0.0)
    assert np.all(np.diff(s[:, 0]) >= 0.0)                          # monotone
    # 3 % of the swing (2 ms) before touchdown: 2.5 % of the stride per swing time (the
    # smoothstep: 17.5 %)
    assert s[970, 1] * T < 0.03


def _touchdowns(trace, dt=1e-3):
    """(vertical, horizontal) foot speeds [m/s] on the tick a swing foot first loads."""
    out = []
    for k in range(1, len(trace)):
        a, a0 = trace[k]["actual"], trace[k - 1]["actual"]
        for j in range(len(a)):
            if a[j] > 0.0 and a0[j] == 0.0 and not trace[k - 1]["stance"][j]:
                dp = (trace[k]["feet"][j] - trace[k - 1]["feet"][j]) / dt
                out.append((abs(dp[2]), float(np.hypot(dp[0], dp[1]))))
    return np.array(out)


def test_feet_land_softly_in_the_closed_loop_trot_at_infinite_friction():
    trace = []
    out = run_case(Case("rigid", math.inf, "lcp_mu"), 2.0, trace=trace)
    assert out["fell"] == 0.0 and out["distance_m"] > 0.25
    td = _touchdowns(trace)
    # late swing only (a foot scuffing right after lift-off is no touchdown)
    assert len(td) >= 15
    vz, vxy = np.median(td[:, 0]), np.median(td[:, 1])
    # before (16 h u^2 (1 - u)^2 and an in-plane smoothstep): 0.30 and 0.26 m/s
    assert vz < 0.1 and vxy < 0.1
    assert out["force_err_pct"] < 1.8          # was 2.04 % over these 2 s


def test_id_lag1_feeds_back_the_previous_steps_contact_forces():
    for name, lag in (("id_lag1", 1), ("id_lag2", 2)):
        trace = []
        run_case(Case("rigid", 0.1, name), 0.6, trace=trace)
        pred = np.array([t["pred"] for t in trace])
        actual = np.array([t["actual"] for t in trace])
        assert actual.sum() > 0.0
        # the ID's contact forces on tick k are the simulator's of step k - lag
        assert np.allclose(pred[lag:], actual[:-lag], atol=1e-9)
        assert not np.allclose(pred[lag + 1:], actual[:-lag - 1], atol=1e-3)


def test_feet_land_softly_on_compliant_ground_too():
    # the planner's touchdown at the surface (SURFACE_TOUCHDOWN), not at the standing feet's
    # height 1 mm down in the springs: before, feet met the surface 16 ms early, where the
    # slow descent begins, at 0.14 m/s down and 0.95 m/s sideways
    trace = []
    out = run_case(Case("compliant", 0.1, "lcp_mu"), 2.0, trace=trace)
    assert out["fell"] == 0.0 and out["distance_m"] > 0.25
    td = _touchdowns(trace)
    assert len(td) >= 15
    assert np.median(td[:, 0]) < 0.1 and np.median(td[:, 1]) < 0.1
