"""Statistics of whole-tick readings: probability, variance and the noise estimate, against sampling."""

import numpy as np
import pytest

from servoloop.calibration.encoder_reading import (
    fit_reading_noise,
    reading_log_probability,
    reading_variance,
)
from servoloop.calibration.simulation import expected_reading


def _readings(x, s, rng):
    return np.round(x + s * rng.standard_normal(x.shape))


@pytest.mark.parametrize("s", [0.1, 0.25, 0.6])
def test_probabilities_sum_to_one_and_match_sampling(s):
    rng = np.random.default_rng(1)
    for x in (3.0, 3.2, 3.5, -7.45):
        c = np.arange(np.floor(x) - 6, np.floor(x) + 7)
        p = np.exp(reading_log_probability(np.full(c.shape, x), c, s))
        assert p.sum() == pytest.approx(1.0, abs=1e-9)
        draws = _readings(np.full(200_000, x), s, rng)
        freq = np.array([np.mean(draws == k) for k in c])
        assert np.max(np.abs(freq - p)) < 4e-3
        # the mean of that distribution is the expected reading the fit compares with
        assert np.sum(p * c) == pytest.approx(float(expected_reading(np.array([x]), 1.0, s)[0]), abs=1e-6)


def test_far_readings_stay_finite():
    """A reading 40 sigmas off has a tiny probability, not log(0): one outlier must not make the
    likelihood -inf (both tails)."""
    lp = reading_log_probability(np.array([0.0, 0.0]), np.array([10.0, -10.0]), 0.25)
    assert np.all(np.isfinite(lp)) and np.all(lp < -700)


@pytest.mark.parametrize("s", [0.05, 0.25, 0.6])
def test_variance_matches_sampling(s):
    rng = np.random.default_rng(2)
    for x in (0.0, 0.25, 0.5, 11.8):
        draws = _readings(np.full(200_000, x), s, rng)
        assert reading_variance(np.array([x]), s)[0] == pytest.approx(np.var(draws), abs=4e-3)
    # a reading at a tick's centre with little noise says (almost) exactly where the joint is
    assert reading_variance(np.array([2.0]), 0.05)[0] < 1e-12
    assert reading_variance(np.array([2.5]), 0.05)[0] == pytest.approx(0.25, abs=1e-6)


@pytest.mark.parametrize("s", [0.15, 0.25, 0.5])
def test_noise_by_likelihood_recovers_the_drawn_noise(s):
    """Readings of a slow ramp and of rests at arbitrary fractions of a tick (what a square-wave
    run looks like): the maximum-likelihood noise is the one drawn, to 5 %."""
    rng = np.random.default_rng(3)
    x = np.concatenate([np.linspace(0.0, 20.0, 4000), np.repeat(rng.uniform(-20, 20, 16), 500)])
    c = _readings(x, s, rng)
    assert fit_reading_noise(x, c) == pytest.approx(s, rel=0.05)
