"""Threaded batch forms (``threads=``): same bits as one thread, cached workspaces."""

import os
import tracemalloc

import numpy as np
import pytest

from servoloop import core_cy
from servoloop.core_cy import errors
from tests.unit.core_cy.dynamics_cases import load, random_state

BATCH = {
    "rnea": core_cy.rnea_batch,
    "aba": core_cy.aba_batch,
    "regressor": core_cy.regressor_batch,
}


def _states(model, n, seed):
    rng = np.random.default_rng(seed)
    Q, V, A = (np.array(x) for x in zip(*[random_state(model, rng) for _ in range(n)], strict=True))
    return Q.reshape(n, model.nq), V.reshape(n, model.nv), A.reshape(n, model.nv)


@pytest.mark.parametrize("kernel", BATCH)
@pytest.mark.parametrize("name", ("ur5", "solo12"))
def test_threads_give_the_same_bits_as_one_thread(name, kernel):
    fn = BATCH[kernel]
    model = load(name)
    data = core_cy.Data(model)
    Q, V, A = _states(model, 61, seed=51)  # 61: chunks of unequal length
    expected = fn(model, Q, V, A, data=data)
    for threads in (2, 3, 4, 0):
        # start from NaN: every row must be written by some thread
        out = np.full_like(expected, np.nan)
        assert fn(model, Q, V, A, out=out, data=data, threads=threads) is out
        np.testing.assert_array_equal(out, expected, err_msg=f"threads={threads}")
    # and both equal the single-state kernel, state by state
    single = {"rnea": core_cy.rnea, "aba": core_cy.aba, "regressor": core_cy.regressor}[kernel]
    other = core_cy.Data(model)
    for k in (0, 30, 60):
        np.testing.assert_array_equal(expected[k], single(model, other, Q[k], V[k], A[k]))


@pytest.mark.parametrize("n", (0, 1, 2, 5))
def test_more_threads_than_states(n):
    model = load("solo12")
    Q, V, A = _states(model, max(n, 1), seed=52)
    Q, V, A = Q[:n], V[:n], A[:n]
    for fn in BATCH.values():
        one = fn(model, Q, V, A)
        many = fn(model, Q, V, A, threads=8)
        assert many.shape == one.shape
        np.testing.assert_array_equal(many, one)


def test_thread_workspaces_are_made_once_and_cached_on_data():
    model = load("solo12")
    data = core_cy.Data(model)
    Q, V, A = _states(model, 40, seed=53)
    out = np.empty((40, model.nv, 10 * model.nbodies + 4 * model.n_actuated))
    core_cy.regressor_batch(model, Q, V, A, out=out, data=data, threads=4)  # warm: makes 3
    one_data = model.nv * out.shape[2] * 8  # a Data holds at least its (nv, ncol) Y
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        for threads in (4, 3, 2, 4):
            core_cy.regressor_batch(model, Q, V, A, out=out, data=data, threads=threads)
        _, peak_reused = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        core_cy.regressor_batch(model, Q, V, A, out=out, data=core_cy.Data(model), threads=4)
        _, peak_fresh = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak_reused < one_data // 4, peak_reused
    assert peak_fresh > 3 * one_data, peak_fresh  # the check can see a workspace being made


def test_threads_zero_means_all_cores_and_bad_values_are_refused():
    model = load("ur5")
    Q, V, A = _states(model, 2 * (os.cpu_count() or 1) + 1, seed=54)
    np.testing.assert_array_equal(
        core_cy.rnea_batch(model, Q, V, A, threads=0), core_cy.rnea_batch(model, Q, V, A)
    )
    for bad in (-1, 257):
        with pytest.raises(ValueError, match="threads"):
            core_cy.rnea_batch(model, Q, V, A, threads=bad)
    for bad in (1.5, "2", None):
        with pytest.raises(TypeError, match="threads"):
            core_cy.aba_batch(model, Q, V, A, threads=bad)


@pytest.mark.parametrize("threads", (1, 3))
def test_aba_batch_names_the_first_singular_row_whatever_the_threads(threads):
    # a NaN angle makes the articulated inertia test fail on that row only;
    # with 3 threads the rows 37 and 80 fall in the second and third chunks
    model = load("ur5")
    Q, V, T = _states(model, 100, seed=55)
    Q[80, 2] = np.nan
    Q[37, 1] = np.nan
    with pytest.raises(errors.SingularInertiaError, match="row 37:"):
        core_cy.aba_batch(model, Q, V, T, threads=threads)
