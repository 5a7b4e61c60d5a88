"""M3: stratified sampling, the outer step, and identical results in-process, in processes, on Ray."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("casadi")

from servoloop.locomotion.features import ROM_SPECS, theta0  # noqa: E402
from servoloop.locomotion.learning import (  # noqa: E402
    INCLINE_RANGE,
    SPEED_RANGE,
    held_out_tasks,
    learn,
    project,
    sample_tasks,
)
from servoloop.locomotion.runner import ProcessRunner, SerialRunner  # noqa: E402


def test_stratified_sampling_puts_one_task_in_each_cell():
    tasks = sample_tasks(np.random.default_rng(0), 3)
    assert len(tasks) == 9
    se, ie = np.linspace(*SPEED_RANGE, 4), np.linspace(*INCLINE_RANGE, 4)
    cells = {(int(np.searchsorted(se, t.speed) - 1), int(np.searchsorted(ie, t.incline) - 1)) for t in tasks}
    assert cells == {(i, j) for i in range(3) for j in range(3)}
    again = sample_tasks(np.random.default_rng(0), 3)
    assert again == tasks and sample_tasks(np.random.default_rng(1), 3) != tasks
    held = held_out_tasks(4)
    assert len(held) == 16 and not set(held) & set(tasks)


def test_projection_keeps_the_embedding_rows_at_unit_norm():
    spec = ROM_SPECS["4d"]
    th = project(spec, theta0(spec) + np.random.default_rng(0).normal(size=spec.n_theta))
    te, _ = spec.split(th)
    np.testing.assert_allclose(np.linalg.norm(te, axis=1), 1.0)


@pytest.fixture(scope="module")
def serial_run_and_checkpoints():
    seen = []
    res = learn("4d", 1, SerialRunner(), seed=3, step=1e-2, grid=2,
                on_iteration=lambda r, th, it: seen.append((it, th.copy(), list(r.costs))))
    return res, seen


@pytest.fixture(scope="module")
def serial_run(serial_run_and_checkpoints):
    return serial_run_and_checkpoints[0]


def test_checkpoints_are_the_shorter_runs(serial_run_and_checkpoints):
    """What on_iteration sees after iteration k is what a k-iteration run returns."""
    res, seen = serial_run_and_checkpoints
    assert [it for it, _, _ in seen] == [0, 1]
    np.testing.assert_array_equal(seen[0][1], res.theta0)
    np.testing.assert_array_equal(seen[1][1], res.theta)
    assert seen[1][2] == res.costs
    zero = learn("4d", 0, SerialRunner(), seed=3, step=1e-2, grid=2)
    np.testing.assert_array_equal(zero.theta, seen[0][1])
    assert zero.costs == seen[0][2]


def test_one_outer_iteration_lowers_the_batch_cost(serial_run):
    res = serial_run
    assert len(res.costs) == 2 and res.failures == [0, 0]
    assert res.accepted == [True]          # the line search found a step that lowers the batch's cost
    assert not np.array_equal(res.theta, res.theta0)
    assert all(c > 1.0 for c in res.costs)  # J_full is a lower bound


def test_processes_give_the_same_result_as_in_process(serial_run):
    runner = ProcessRunner(2)
    try:
        res = learn("4d", 1, runner, seed=3, step=1e-2, grid=2)
    finally:
        runner.close()
    np.testing.assert_array_equal(res.theta, serial_run.theta)
    # the costs measured after the step agree to the last digits only (seen at 21 knots:
    # 8.712130046652439 vs ...41), probably because each process's solvers carry their own
    # history of solves (not confirmed); theta, from the same solves' gradients, is equal
    np.testing.assert_allclose(res.costs, serial_run.costs, rtol=1e-12, atol=0)


def test_ray_gives_the_same_result_as_in_process(serial_run):
    pytest.importorskip("ray")
    from servoloop.locomotion.runner import RayRunner

    runner = RayRunner("local")
    try:
        res = learn("4d", 1, runner, seed=3, step=1e-2, grid=2)
    finally:
        runner.close()
    np.testing.assert_array_equal(res.theta, serial_run.theta)
    np.testing.assert_allclose(res.costs, serial_run.costs, rtol=1e-12, atol=0)
