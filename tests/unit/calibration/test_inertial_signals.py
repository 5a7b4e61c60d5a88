"""Signal processing before identification (digest section 8.11)."""

import numpy as np
import pytest

from servoloop.calibration.errors import FitError
from servoloop.calibration.inertial import (
    FilterSettings,
    central_difference,
    decimate,
    lowpass,
    prepare_samples,
    random_fourier,
)


@pytest.mark.parametrize("degree", [0, 1, 2, 3, 4])
def test_central_difference_is_exact_on_polynomials_up_to_degree_4(degree):
    rng = np.random.default_rng(degree)
    coeffs = rng.normal(size=degree + 1)
    dt = 0.01
    t = np.arange(50) * dt
    x = np.polyval(coeffs, t)
    dx = np.polyval(np.polyder(coeffs), t) if degree else np.zeros_like(t)
    d = central_difference(x, dt)
    # every point, the one-sided ends included
    assert np.max(np.abs(d - dx)) <= 1e-9 * max(1.0, np.max(np.abs(dx)))


def test_central_difference_is_not_exact_on_degree_5():
    # the check above can fail: a quintic leaves an O(dt^4) error
    dt = 0.01
    t = np.arange(50) * dt
    d = central_difference(t**5, dt)
    assert np.max(np.abs(d - 5 * t**4)) > 1e-9


def test_central_difference_works_along_any_axis():
    t = np.arange(30) * 0.1
    x = np.stack([t**2, t**3], axis=0)  # (2, 30)
    d = central_difference(x, 0.1, axis=1)
    assert np.allclose(d, np.stack([2 * t, 3 * t**2]), atol=1e-10)


def test_zero_phase_filter_has_no_lag_on_an_in_band_sinusoid():
    fs, f = 1000.0, 2.0
    t = np.arange(0, 5, 1 / fs)
    x = np.sin(2 * np.pi * f * t)
    y = lowpass(x, 15.0, fs)
    inner = slice(500, -500)
    lags = np.arange(-20, 21)
    xc = [np.dot(np.roll(y, -k)[inner], x[inner]) for k in lags]
    assert lags[int(np.argmax(xc))] == 0
    assert np.max(np.abs(y[inner] - x[inner])) < 1e-3  # in band: unit gain
    # and out of band it attenuates
    z = lowpass(np.sin(2 * np.pi * 100 * t), 15.0, fs)
    assert np.max(np.abs(z[inner])) < 1e-4


def test_lowpass_rejects_a_cutoff_above_nyquist():
    with pytest.raises(FitError, match="cutoff"):
        lowpass(np.zeros(100), 600.0, 1000.0)


def test_decimation_by_10():
    x = np.arange(1001.0).reshape(-1, 1) * np.ones((1, 3))
    y = decimate(x, 10)
    assert y.shape == (101, 3)
    assert np.array_equal(y[:, 0], np.arange(0, 1001, 10.0))


def test_acceleration_pipeline_error_below_1_percent():
    fs = 1000.0
    rng = np.random.default_rng(7)
    traj = random_fourier(rng, -np.ones(2), np.ones(2), n_harmonics=5, period_s=10.0)
    t = np.arange(0, 10, 1 / fs)
    q, v, a = traj(t)
    tau = 0.3 * a + 0.1 * v
    s = FilterSettings()
    Q, V, A, T = prepare_samples(t, q, tau, v, s)
    keep = slice(s.trim, len(t) - s.trim, s.decimation)
    assert Q.shape == A.shape == (len(range(*keep.indices(len(t)))), 2)
    assert np.array_equal(Q, q[keep])
    err = np.sqrt(np.mean((A - a[keep]) ** 2)) / np.sqrt(np.mean(a[keep] ** 2))
    assert err < 0.01
    assert np.max(np.abs(V - v[keep])) < 0.01 * np.max(np.abs(v))
    # without a logged velocity, q is differentiated first
    _, V2, A2, _ = prepare_samples(t, q, tau, None, s)
    assert np.sqrt(np.mean((A2 - a[keep]) ** 2)) / np.sqrt(np.mean(a[keep] ** 2)) < 0.01


def test_pipeline_rejects_non_uniform_time_and_aliasing_cutoffs():
    t = np.arange(0, 1, 1e-3)
    q = np.zeros((t.size, 1))
    t_bad = t.copy()
    t_bad[500:] += 0.01
    with pytest.raises(FitError, match="uniformly"):
        prepare_samples(t_bad, q, q)
    with pytest.raises(FitError, match="Nyquist"):
        prepare_samples(t, q, q, settings=FilterSettings(decimation=40))
