"""A3: the Hermite-Simpson midpoint values equal a random cubic's exact ones."""

from __future__ import annotations

import numpy as np

from servoloop.locomotion.collocation import midpoint


def test_midpoint_of_a_random_cubic_is_exact():
    rng = np.random.default_rng(0)
    for _ in range(20):
        c = rng.normal(size=(4, 3))          # y(t) = c0 + c1 t + c2 t^2 + c3 t^3, 3 outputs
        delta = rng.uniform(0.01, 0.3)

        def y(t, c=c):
            return c[0] + c[1] * t + c[2] * t**2 + c[3] * t**3

        def yd(t, c=c):
            return c[1] + 2 * c[2] * t + 3 * c[3] * t**2

        def ydd(t, c=c):
            return 2 * c[2] + 6 * c[3] * t

        yc, ydc, yddc = midpoint(y(0), yd(0), y(delta), yd(delta), delta)
        h = delta / 2
        np.testing.assert_allclose(yc, y(h), rtol=0, atol=1e-13)
        np.testing.assert_allclose(ydc, yd(h), rtol=0, atol=1e-12)
        np.testing.assert_allclose(yddc, ydd(h), rtol=0, atol=1e-10)
