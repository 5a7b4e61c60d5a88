"""A8: the section 5.1 planner with the learned 4D model, 2 m in 4 strides, then IK."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("casadi")

from servoloop.locomotion.errors import RomInputError  # noqa: E402
from servoloop.locomotion.five_link import HIP_LIMITS, KNEE_LIMITS  # noqa: E402
from servoloop.locomotion.model_file import load_model  # noqa: E402
from servoloop.locomotion.planner import KNOTS_PER_STRIDE, plan  # noqa: E402


@pytest.fixture(scope="module")
def two_metres():
    return plan(load_model("builtin:five_link_4d"), 2.0, 4)


def test_two_metres_in_four_strides_converges(two_metres):
    r = two_metres
    assert r["success"]
    assert sum(r["steps"]) == pytest.approx(2.0, abs=1e-6)
    assert r["y"].shape == (4, KNOTS_PER_STRIDE, 4)
    assert r["time_per_step_s"] == pytest.approx(r["solve_time_s"] / 4)


def test_ik_reproduces_the_plan_within_the_joint_limits(two_metres):
    q = two_metres["q"]
    assert two_metres["ik_error"] < 1e-6
    assert np.all(q[..., 1:3] >= HIP_LIMITS[0] - 1e-9) and np.all(q[..., 1:3] <= HIP_LIMITS[1] + 1e-9)
    assert np.all(q[..., 3:] >= KNEE_LIMITS[0] - 1e-9) and np.all(q[..., 3:] <= KNEE_LIMITS[1] + 1e-9)


def test_plan_rejects_what_it_cannot_do():
    with pytest.raises(RomInputError, match="needs a 4d model"):
        plan(load_model("builtin:five_link_2d"), 1.0, 3)
    with pytest.raises(RomInputError, match="each step must be"):
        plan(load_model("builtin:five_link_4d"), 6.0, 2)
