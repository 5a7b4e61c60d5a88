"""Controllers: registry, hold, trajectory (minimum jerk), user-defined controllers."""

import numpy as np
import pytest

from servoloop.controller.controllers import (
    Command,
    Controller,
    ControllerContext,
    JointState,
    available,
    get_controller_class,
    make_controller,
    register,
)
from servoloop.controller.controllers.minimum_jerk import min_jerk_ds, min_jerk_s
from servoloop.controller.errors import ControllerParamError

JOINTS = ("a", "b", "c")


def ctx(tmp_path=None):
    from pathlib import Path

    return ControllerContext(JOINTS, np.array([-1.0, -2.0, -3.0]), np.array([1.0, 2.0, 3.0]), 0.001,
                             base_dir=Path(tmp_path) if tmp_path else Path.cwd())


def state(q):
    s = JointState.zeros(3)
    s.position[:] = q
    return s


def test_registry_lists_builtins_and_rejects_unknown():
    assert {"hold", "trajectory", "gravity_comp"} <= set(available())
    with pytest.raises(ControllerParamError, match="unknown controller 'nope'.*hold"):
        get_controller_class("nope")


class Sine(Controller):
    name = "sine"
    param_keys = ("amplitude",)

    def update(self, t, state, command):
        command.position[:] = self.params.get("amplitude", 0.1) * np.sin(t)


def test_user_controller_by_register_and_by_import_path():
    register("sine", Sine)
    c = make_controller("sine", ctx(), {"amplitude": 0.5})
    cmd = Command.zeros(3)
    c.update(np.pi / 2, state([0, 0, 0]), cmd)
    np.testing.assert_allclose(cmd.position, 0.5)
    assert get_controller_class(f"{__name__}:Sine") is Sine
    with pytest.raises(ControllerParamError, match="unknown parameter 'amp'"):
        make_controller("sine", ctx(), {"amp": 1})
    with pytest.raises(TypeError):
        register("bad", dict)


def test_hold_keeps_start_pose_clipped_to_limits():
    c = make_controller("hold", ctx())
    c.start(state([0.5, 2.5, -0.2]))
    cmd = Command.zeros(3)
    c.update(1.0, state([0, 0, 0]), cmd)
    np.testing.assert_allclose(cmd.position, [0.5, 2.0, -0.2])


def test_hold_pose_param_partial_and_limits():
    c = make_controller("hold", ctx(), {"pose": {"b": 1.5}})
    c.start(state([0.1, 0.2, 0.3]))
    cmd = Command.zeros(3)
    c.update(0.0, state([0, 0, 0]), cmd)
    np.testing.assert_allclose(cmd.position, [0.1, 1.5, 0.3])
    with pytest.raises(ControllerParamError, match="'b' = 2.5000 rad is outside its limits"):
        make_controller("hold", ctx(), {"pose": {"b": 2.5}})
    with pytest.raises(ControllerParamError, match="unknown joint 'z'"):
        make_controller("hold", ctx(), {"pose": {"z": 0.0}})


def test_hold_goal_checked_then_applied():
    c = make_controller("hold", ctx())
    c.start(state([0, 0, 0]))
    g = c.check_goal({"a": 0.7})
    c.apply_goal(g)
    cmd = Command.zeros(3)
    c.update(0.0, state([0, 0, 0]), cmd)
    np.testing.assert_allclose(cmd.position, [0.7, 0, 0])
    with pytest.raises(ControllerParamError):
        c.check_goal({"a": 7.0})
    with pytest.raises(ControllerParamError):
        c.check_goal([1.0, 2.0])
    with pytest.raises(ControllerParamError):
        c.check_goal({"a": float("nan")})


def test_min_jerk_profile():
    assert min_jerk_s(0.0) == 0.0 and min_jerk_s(1.0) == 1.0 and min_jerk_s(0.5) == pytest.approx(0.5)
    assert min_jerk_s(-1) == 0.0 and min_jerk_s(2) == 1.0
    # zero velocity at both ends, peak 1.875 at the middle (Flash & Hogan)
    assert min_jerk_ds(0.0) == 0.0 and min_jerk_ds(1.0) == 0.0
    assert min_jerk_ds(0.5) == pytest.approx(1.875)
    ts = np.linspace(0, 1, 101)
    s = np.array([min_jerk_s(t) for t in ts])
    assert np.all(np.diff(s) >= 0)
    # derivative matches a finite difference
    h = 1e-6
    for t in (0.1, 0.3, 0.77):
        assert (min_jerk_s(t + h) - min_jerk_s(t - h)) / (2 * h) == pytest.approx(min_jerk_ds(t), rel=1e-6)


def test_trajectory_interpolates_with_minimum_jerk():
    kf = [{"t": 1.0, "q": {"a": 0.5}}, {"t": 3.0, "q": {"a": -0.5, "b": 1.0}}]
    c = make_controller("trajectory", ctx(), {"keyframes": kf})
    c.start(state([0.1, 0.2, 0.3]))
    cmd = Command.zeros(3)
    c.update(0.0, state([0, 0, 0]), cmd)
    np.testing.assert_allclose(cmd.position, [0.1, 0.2, 0.3])
    c.update(0.5, state([0, 0, 0]), cmd)  # halfway through the first segment
    np.testing.assert_allclose(cmd.position, [0.3, 0.2, 0.3])
    c.update(1.0, state([0, 0, 0]), cmd)
    np.testing.assert_allclose(cmd.position, [0.5, 0.2, 0.3])
    c.update(1.5, state([0, 0, 0]), cmd)
    s = min_jerk_s(0.25)
    np.testing.assert_allclose(cmd.position, [0.5 - s, 0.2 + 0.8 * s, 0.3])
    c.update(10.0, state([0, 0, 0]), cmd)
    np.testing.assert_allclose(cmd.position, [-0.5, 1.0, 0.3])


def test_trajectory_loop_wraps():
    kf = [{"t": 0.0, "q": [0, 0, 0]}, {"t": 1.0, "q": [1, 1, 1]}]
    c = make_controller("trajectory", ctx(), {"keyframes": kf, "loop": True})
    c.start(state([0, 0, 0]))
    cmd = Command.zeros(3)
    c.update(1.5, state([0, 0, 0]), cmd)
    np.testing.assert_allclose(cmd.position, min_jerk_s(0.5) * np.ones(3))


def test_trajectory_from_yaml_and_csv(tmp_path):
    (tmp_path / "k.yaml").write_text("keyframes:\n  - {t: 0.5, q: {a: 0.2}}\n  - {t: 1.0, q: {c: 1.0}}\n")
    (tmp_path / "k.csv").write_text("t,a,c\n0.5,0.2,0.3\n1.0,0.2,1.0\n")
    for name in ("k.yaml", "k.csv"):
        c = make_controller("trajectory", ctx(tmp_path), {"file": name})
        c.start(state([0, 0, 0.3]))
        cmd = Command.zeros(3)
        c.update(1.0, state([0, 0, 0]), cmd)
        np.testing.assert_allclose(cmd.position, [0.2, 0.0, 1.0])


@pytest.mark.parametrize("params, match", [
    ({}, "needs keyframes or file"),
    ({"keyframes": []}, "non-empty"),
    ({"keyframes": [{"t": 1.0, "q": [0, 0, 0]}, {"t": 0.5, "q": [0, 0, 0]}]}, "increasing"),
    ({"keyframes": [{"t": 1.0, "q": {"a": 5.0}}]}, "outside its limits"),
    ({"keyframes": [{"t": 1.0, "pos": [0, 0, 0]}]}, "must be"),
    ({"file": "missing.csv"}, "missing.csv"),
    ({"keyframes": [{"t": 1, "q": [0, 0, 0]}], "loop": "yes"}, "loop"),
])
def test_trajectory_param_errors(tmp_path, params, match):
    with pytest.raises(ControllerParamError, match=match):
        make_controller("trajectory", ctx(tmp_path), params)


def test_trajectory_csv_errors_name_the_line(tmp_path):
    (tmp_path / "bad.csv").write_text("t,a\n0.5,0.2\n1.0,x\n")
    with pytest.raises(ControllerParamError, match="line 3"):
        make_controller("trajectory", ctx(tmp_path), {"file": "bad.csv"})


def test_trajectory_goal_makes_a_new_segment():
    c = make_controller("trajectory", ctx(), {"keyframes": [{"t": 0.5, "q": [0, 0, 0]}], "goal_duration": 2.0})
    c.start(state([0, 0, 0]))
    cmd = Command.zeros(3)
    c.update(1.0, state([0, 0, 0]), cmd)
    c.apply_goal(c.check_goal([0.4, 0.0, 0.0]))
    c.update(2.0, state([0, 0, 0]), cmd)
    np.testing.assert_allclose(cmd.position, [0.2, 0, 0])
    c.update(3.0, state([0, 0, 0]), cmd)
    np.testing.assert_allclose(cmd.position, [0.4, 0, 0])


def test_trajectory_new_keyframes_play_from_now_and_here():
    c = make_controller("trajectory", ctx(), {"keyframes": [{"t": 1.0, "q": [0.5, 0, 0]}]})
    c.start(state([0, 0, 0]))
    cmd = Command.zeros(3)
    c.update(2.0, state([0, 0, 0]), cmd)  # at the end: 0.5
    c.apply_params(c.check_params({"keyframes": [{"t": 1.0, "q": [-0.5, 0, 0]}]}))
    c.update(2.0, state([0, 0, 0]), cmd)
    np.testing.assert_allclose(cmd.position, [0.5, 0, 0])  # no jump
    c.update(2.5, state([0, 0, 0]), cmd)
    np.testing.assert_allclose(cmd.position, [0.0, 0, 0], atol=1e-12)
    c.update(3.0, state([0, 0, 0]), cmd)
    np.testing.assert_allclose(cmd.position, [-0.5, 0, 0])
