"""The compiled window of the goal slew limit (``controller/_slew.pyx``) against the NumPy
expression it replaced (the oracle below), joint by joint and bit for bit: torque and plain
joints, failed readings (NaN), disabled servos, an unbounded window, the acceleration limit."""

import numpy as np
import pytest

from servoloop.controller._slew import window
from servoloop.controller.slew import SlewLimiter


def _oracle(s: SlewLimiter, goal, present, out):
    """The NumPy window of ``SlewLimiter`` before it was compiled (issue 11)."""
    n = goal.shape[0]
    lo, hi, r, err = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
    np.add(present, s._anchor_b, out=hi)
    np.fmin(s.last, hi, out=lo)
    np.subtract(present, s._anchor_b, out=hi)
    np.fmax(lo, hi, out=lo)
    np.subtract(goal, lo, out=err)
    np.clip(err, -s.max_step, s.max_step, out=err)
    np.add(lo, err, out=err)
    np.add(s.last, s.step, out=r)
    np.copyto(r, err, where=s.torque)
    np.subtract(present, s.max_offset, out=lo)
    np.fmin(lo, r, out=lo)
    np.add(present, s.max_offset, out=hi)
    np.fmax(hi, r, out=hi)
    if s.held.any():
        np.copyto(lo, s.last, where=s.held)
        np.copyto(hi, s.last, where=s.held)
    np.minimum(np.maximum(goal, lo, out=out), hi, out=out)
    np.subtract(out, s.last, out=r)
    np.clip(r, -s.max_step, s.max_step, out=r)
    np.copyto(s.step, r, where=s.torque)
    s.last[:] = out


def _pair(n, rng, accel):
    vmax = rng.uniform(1.0, 6.0, n)
    mask = rng.random(n) < 0.6
    b = rng.uniform(0.05, 0.4, n)
    b[rng.random(n) < 0.1] = np.inf                 # an unknown stall torque: no bound
    pair = []
    for _ in range(2):
        s = SlewLimiter(vmax.copy(), accel, 1e-3)
        s.set_torque_goals(mask, b)
        s.reset(np.full(n, 0.1))
        pair.append(s)
    return pair, mask


@pytest.mark.parametrize("accel", [None, 80.0])
def test_the_compiled_window_is_the_numpy_one_bit_for_bit(accel):
    rng = np.random.default_rng(11)
    n = 12
    (c, o), mask = _pair(n, rng, accel)
    q = np.zeros(n)
    cases = {"clipped": 0, "nan": 0, "held": 0}
    for k in range(3000):
        q += rng.normal(0.0, 4e-3, n)
        goal = q + rng.normal(0.0, 0.25, n)           # offsets inside and beyond the windows
        if k % 97 == 0:
            goal += rng.choice([-1.4, 1.4], n)         # a far goal
        present = q.copy()
        if k % 13 == 0:
            present[rng.integers(n)] = np.nan          # a failed reading
            cases["nan"] += 1
        if k % 500 == 250:
            i = int(rng.integers(n))
            c.held[i] = o.held[i] = True               # a servo disabled
            cases["held"] += 1
        a, b = np.zeros(n), np.zeros(n)
        c.limit(goal, a, present)
        # the oracle: the ramp part of limit() as it is, then the NumPy window
        saved = SlewLimiter._window
        try:
            SlewLimiter._window = lambda self, g, p, out: _oracle(self, g, p, out)
            o.limit(goal, b, present)
        finally:
            SlewLimiter._window = saved
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(c.last, o.last)
        np.testing.assert_array_equal(c.step, o.step)
        cases["clipped"] += int(np.any(a[mask] != goal[mask]))
    assert cases["clipped"] > 100 and cases["nan"] > 100 and cases["held"] == 6


def test_the_window_can_write_into_its_goal_and_names_a_wrong_size():
    s = SlewLimiter(np.full(3, 4.0), None, 1e-3)
    s.set_torque_goals(np.array([True, True, False]), np.full(3, 0.2))
    s.reset(np.zeros(3))
    goal = np.array([0.5, 0.1, 0.5])
    s.limit(goal, goal, np.zeros(3))                  # out is goal
    np.testing.assert_allclose(goal, [0.2, 0.1, 4e-3])
    with pytest.raises(ValueError, match="present has 2 joints, the goal 3"):
        window(np.zeros(3), np.zeros(2), s.last, s.step, s.max_step, s.max_offset,
               s._anchor_b, s.torque.view(np.uint8), s.held.view(np.uint8), np.zeros(3))
