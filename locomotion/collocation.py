"""Hermite-Simpson midpoint values of a cubic segment (seed 004, eq. 7).

A cubic y_p(t) on [0, delta] fixed by y, ydot at both ends has, at delta/2,

    y_c    = (y0 + y1)/2 + delta/8 (yd0 - yd1)
    ydot_c = 3/(2 delta) (y1 - y0) - (yd0 + yd1)/4
    yddot_c = (yd1 - yd0) / delta

(the digest re-derived all three; A3 checks them against a random cubic).
Works on numpy arrays and casadi expressions alike.
"""

from __future__ import annotations

__all__ = ["midpoint"]


def midpoint(y0, yd0, y1, yd1, delta):
    """(y_c, ydot_c, yddot_c) of the Hermite cubic through (y0, yd0) and (y1, yd1).

    Parameters
    ----------
    y0, yd0, y1, yd1 : position and velocity at the segment's ends, shape (n,)
    delta : segment duration [s]
    """
    y_c = 0.5 * (y0 + y1) + delta / 8.0 * (yd0 - yd1)
    yd_c = 1.5 / delta * (y1 - y0) - 0.25 * (yd0 + yd1)
    ydd_c = (yd1 - yd0) / delta
    return y_c, yd_c, ydd_c
