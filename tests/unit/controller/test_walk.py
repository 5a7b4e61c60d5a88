"""``walk`` on the built-in humanoid, in process on the contact simulator (10 steps, seconds
of simulated time), and its planner's pieces: the LIP plan, footholds, the ROM adapter."""

from __future__ import annotations

import math

import numpy as np
import pytest

from servoloop.controller.config import builtin_config
from servoloop.controller.controllers import ControllerContext, make_controller
from servoloop.controller.errors import ControllerParamError
from servoloop.controller.wholebody.lip import G, WalkTiming, footholds, lip_com, zmp_reference


def _check_walk(r, steps=10, step=0.12 * 0.32):
    assert r["steps_done"] == steps
    assert not r["fell"]
    assert r["max_tilt_deg"] < 15.0
    assert r["min_height_m"] > 0.9 * r["height_m"]
    # it went where the footholds are: (steps - 1) steps of speed * step_s
    assert r["distance_m"] == pytest.approx((steps - 1) * step, rel=0.2)
    assert abs(r["lateral_drift_m"]) < 0.03
    assert r["torque_cost_per_m"] > 0 and math.isfinite(r["torque_cost_per_m"])


def test_walk_lip_ten_steps_then_stands():
    from servoloop.experiments.walk_humanoid import run_walk

    r = run_walk({})                       # default params on the built-in humanoid
    _check_walk(r)
    log = np.array(r["run"].log)
    last = log[log[:, 0] > log[-1, 0] - 0.5]
    assert np.ptp(last[:, 1]) < 0.005      # standing still at the end
    assert r["run"].ctrl.status()["walking"] is False
    # the leg odometry over the planned stance feet followed the true base over the walk
    odo, true = r["run"].ctrl.odometry.base.position, r["run"].plant.q[:3]
    assert np.abs(odo - true).max() < 0.02


def test_a9_experiment_walks_ten_steps_with_lip_and_learned_rom(capsys):
    # servoloop experiment walk_a9: both walks, 10 steps each, in the benchmark JSON form
    pytest.importorskip("casadi")
    import json

    from servoloop.cli import main

    assert main(["experiment", "walk_a9", "--steps", "10", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["benchmark"] == "walk_a9"
    rows = {(r["case"], r["metric"]): r for r in rep["rows"]}
    for model in ("lip", "builtin:five_link_4d"):
        case = f"humanoid v=0.12 steps=10 {model}"
        assert rows[(case, "steps_done")]["ours"] == 10            # no fall before the 10th
        assert rows[(case, "distance_m")]["ours"] == pytest.approx(9 * 0.12 * 0.32, rel=0.2)
        assert rows[(case, "max_tilt_deg")]["ours"] < 15.0
        r = rows[(case, "torque_cost_per_m")]
        assert r["anchor_name"] == "lip" and r["ours"] > 0
        assert r["ratio"] == pytest.approx(r["ours"] / r["anchor"])


def test_a9_experiment_refuses_bad_arguments():
    from servoloop.cli import main

    with pytest.raises(SystemExit, match="--speed 5.0: must lie in"):
        main(["experiment", "walk_a9", "--speed", "5", "--json"])
    with pytest.raises(SystemExit, match="--steps 2: must lie in 5..200"):
        main(["experiment", "walk_a9", "--steps", "2", "--json"])


def test_lip_plan_obeys_the_pendulum_and_starts_and_ends_at_rest():
    tm = WalkTiming(steps=6, step_s=0.32, ds=0.2)
    t, p = zmp_reference(tm, 0.04, 0.037)
    c, v, a = lip_com(t, p, 0.2)
    inner = slice(1, -1)
    # p = c - (z/g) c'' at every inner sample (the discrete LIP)
    assert np.abs(c[inner] - 0.2 / G * a[inner] - p[inner]).max() < 1e-9
    assert np.abs(v[:3]).max() < 1e-3 and np.abs(v[-3:]).max() < 1e-3
    assert c[-1, 0] == pytest.approx(5 * 0.04)            # (steps - 1) steps forward
    # the CoM sways toward the stance foot but stays between the feet
    assert 0.005 < np.abs(c[:, 1]).max() < 0.037


def test_footholds_alternate_and_end_side_by_side():
    tm = WalkTiming(steps=4)
    stance, st, lift, land = footholds(tm, 0.05, 0.04)
    assert stance.tolist() == [1, 0, 1, 0]                 # right stance first: left swings
    assert land[:, 0].tolist() == pytest.approx([0.05, 0.10, 0.15, 0.15])
    assert np.all(np.sign(land[:, 1]) == -np.sign(st[:, 1]))
    assert lift[2, 0] == pytest.approx(0.05) and lift[3, 0] == pytest.approx(0.10)


def test_rom_step_is_froude_scaled_to_the_leg():
    pytest.importorskip("casadi")
    from servoloop.locomotion.humanoid_rom import froude_scale, rom_step

    leg = 0.182
    s = froude_scale(leg)
    st = rom_step("builtin:five_link_4d", 0.12, leg)
    assert st.duration == pytest.approx(0.746 * math.sqrt(s))
    assert st.five_link_speed == pytest.approx(0.12 / math.sqrt(s))
    # the CoM crosses the stance foot; its travel is about one step (speed * duration)
    assert st.com[0, 0] < 0 < st.com[-1, 0]
    assert st.com[-1, 0] - st.com[0, 0] == pytest.approx(0.12 * st.duration, rel=0.15)
    assert 0.7 * leg < st.com[:, 1].mean() < leg          # CoM height ~0.8-0.9 legs


@pytest.mark.parametrize("params, match", [
    ({"speed_mps": 2.0}, r"walk.speed_mps = 2.0 is outside"),
    ({"steps": 2.5}, "walk.steps must be a whole number"),
    ({"model": "no/such/file.json"}, "walk.model"),
    ({"model": 3}, "walk.model"),
])
def test_bad_walk_params_name_the_key(params, match):
    ctx = ControllerContext.from_config(builtin_config("humanoid"))
    with pytest.raises(ControllerParamError, match=match):
        make_controller("walk", ctx, params)


def test_walk_plan_params_are_config_only_and_quadruped_is_refused():
    ctx = ControllerContext.from_config(builtin_config("humanoid"))
    ctrl = make_controller("walk", ctx, {})
    with pytest.raises(ControllerParamError, match="only be set in the config"):
        ctrl.check_params({"speed_mps": 0.1})
    with pytest.raises(ControllerParamError, match="walk takes no goal"):
        ctrl.apply_goal({"x": 0.1})
    ctx = ControllerContext.from_config(builtin_config("quadruped"))
    with pytest.raises(ControllerParamError, match="2 feet"):
        make_controller("walk", ctx, {})
