"""Seed 003's trot for the whole-body controller: contact schedule, swing splines, stance.

Gait (seed 003 §7): cycle 0.3 s, duty factor 75 %, step height 1.5 cm,
touchdown phases {0.25, 0.75, 0.75, 0.25} for {LF, RF, LH, RH}; a stance
foot stays where it touched down while the base reference moves at the
desired velocity ("stance from the desired base velocity"); a swing foot
follows a spline from where it lifted off to a touchdown point placed ahead
of its hip by half the stance travel (so the stance sweeps symmetrically
under the hip), replanned every tick as the base moves.  Swing: a cubic
(:func:`swing_plane`, minimum jerk) in the ground plane, and in height
:func:`swing_height`, an arc that ends in a slow final descent: a soft
touchdown even when the foot lands a few ms early.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["LAND_DEPTH", "LAND_FRACTION", "TrotGait", "swing_height", "touchdown_phase"]

#: the swing's slow final descent: the last LAND_FRACTION of the swing comes down the last
#: LAND_DEPTH [m] (at most half the step height) at a constant speed (1 mm in 15 ms of
#: seed 003's 75 ms swing: 0.067 m/s), see :func:`swing_height`
LAND_DEPTH = 0.001
LAND_FRACTION = 0.2
#: the share of the lift-off-accelerating arc in the swing's rise (see :func:`swing_height`)
LIFT_MIX = 0.4
#: the arc's x^2 (1 - x)^3 scaled to an apex of 1 (at x = 0.4)
_BUMP = 3125.0 / 108.0

_TOUCHDOWN = {"lf": 0.25, "rf": 0.75, "lh": 0.75, "rh": 0.25}


def touchdown_phase(link: str, index: int) -> float:
    """Touchdown phase of a foot from its link name (``lf_...``, ``rh_...``); otherwise
    diagonal pairs by index (0 and 3 at 0.25, 1 and 2 at 0.75)."""
    key = link.lower()[:2]
    if key in _TOUCHDOWN:
        return _TOUCHDOWN[key]
    return 0.25 if index % 4 in (0, 3) else 0.75


def swing_height(u: float, h: float, T: float):
    """Swing foot height above the ground [m], its rate [m/s] and acceleration [m/s^2] at
    swing progress ``u`` in [0, 1], step height ``h`` [m], swing time ``T`` [s].

    An arc (``(h - d/2)`` times LIFT_MIX of ``B x^2 (1 - x)^3`` and the rest of
    ``64 x^3 (1 - x)^3``, both of unit apex, ``B`` = 3125/108, plus a quintic blend;
    ``x = u / u_a``) lifts the foot from rest and brings it to ``d`` (LAND_DEPTH, at most
    h / 2) at ``u_a = 1 - LAND_FRACTION``, moving at the landing speed ``d / (F T)`` with
    zero acceleration; from there it comes down at that speed to the ground at ``u = 1``,
    with zero acceleration.  Apex ~h at u ~ 0.38.

    Why the slow descent: the foot runs ~0.3 mm ahead of its reference on the way down and
    a rigid contact closes a tick before the gap does, so feet land 2-7 ms early; a profile
    that ends with zero velocity and acceleration but in (1 - u)^3 (``64 h u^3 (1 - u)^3``)
    still landed at 0.28 m/s, the former ``16 h u^2 (1 - u)^2`` at 0.30 m/s; this one at
    its descent's 0.06 m/s (issue 11: at mu = inf a landing foot stops within a tick).
    Why the lift-off keeps an upward acceleration (93 m/s^2 at seed 003's gait; the former
    profile's 85): with none (the u^3 arc alone) the daemon's trot through the virtual bus
    dragged its lifting feet and fell (tests/hil/test_daemon_wbc.py).
    """
    d = min(LAND_DEPTH, 0.5 * h)
    F = LAND_FRACTION
    ua = 1.0 - F
    if u >= ua:
        return d * (1.0 - u) / F, -d / (F * T), 0.0
    # r(x): 0 with zero slope and curvature at x = 0, 1 at x = 1 with the descent's slope
    # g = -u_a / F (in x) and zero curvature: r = a x^3 + b x^4 + c x^5
    g = -ua / F
    a, b, c = 10.0 - 4.0 * g, 7.0 * g - 15.0, 6.0 - 3.0 * g
    x = u / ua
    y = 1.0 - x
    A = h - 0.5 * d
    # the arc: LIFT_MIX of x^2 (1 - x)^3 (upward acceleration at lift-off) and the rest
    # x^3 (1 - x)^3 (none), each scaled to a unit apex
    p2, p3 = A * LIFT_MIX * _BUMP, A * (1.0 - LIFT_MIX) * 64.0
    xy = x * y
    z = p2 * x * xy * y * y + p3 * xy ** 3 + d * x ** 3 * (a + x * (b + x * c))
    dz = (p2 * xy * y * (2.0 - 5.0 * x) + p3 * 3.0 * xy * xy * (1.0 - 2.0 * x)
          + d * x * x * (3.0 * a + x * (4.0 * b + x * 5.0 * c)))
    ddz = (p2 * y * (2.0 + x * (-16.0 + x * 20.0)) + p3 * 6.0 * xy * (1.0 - 5.0 * xy)
           + d * x * (6.0 * a + x * (12.0 * b + x * 20.0 * c)))
    return z, dz / (ua * T), ddz / (ua * T) ** 2


def swing_plane(u: float, T: float):
    """Fraction of the way from lift-off to touchdown point covered in the ground plane at
    swing progress ``u``, its rate [1/s] and second derivative [1/s^2], swing time ``T`` [s].

    The minimum-jerk quintic ``10 u^3 - 15 u^4 + 6 u^5``: zero velocity and acceleration at
    touchdown, so a foot that lands a few ms early has almost no horizontal speed of its
    own (seed 003, rigid mu = inf, lcp_mu: 0.02 m/s; the former smoothstep ``3 u^2 - 2 u^3``,
    whose acceleration stays 6 / T^2 to the end, 0.26 m/s, and at mu = inf the ground
    stops that within a tick).
    """
    s = u * u * u * (10.0 + u * (-15.0 + u * 6.0))
    ds = 30.0 * u * u * (1.0 - u) * (1.0 - u) / T
    dds = 60.0 * u * (1.0 - u) * (1.0 - 2.0 * u) / (T * T)
    return s, ds, dds


@dataclass
class TrotGait:
    """Contact schedule and foot references of a trot.

    Attributes
    ----------
    period : s, one cycle
    duty : fraction of the cycle a foot is in stance
    step_height : m, swing apex above the ground
    touchdown : (feet,) phase in [0, 1) at which each foot lands
    """

    period: float = 0.3
    duty: float = 0.75
    step_height: float = 0.015
    touchdown: np.ndarray = None

    def __post_init__(self) -> None:
        if not 0.0 < self.duty < 1.0:
            raise ValueError(f"trot duty must be in (0, 1), got {self.duty}")
        if not self.period > 0:
            raise ValueError(f"trot period must be > 0 s, got {self.period}")

    @property
    def swing_time(self) -> float:
        return (1.0 - self.duty) * self.period

    @property
    def stance_time(self) -> float:
        return self.duty * self.period

    def swing_progress(self, t: float) -> np.ndarray:
        """Per foot: swing progress u in [0, 1), or -1 in stance, at gait time ``t`` [s]."""
        phase = np.mod(t / self.period, 1.0)
        # the swing ends at the touchdown phase and lasts (1 - duty) of the cycle
        since_liftoff = np.mod(phase - (self.touchdown - (1.0 - self.duty)), 1.0)
        u = since_liftoff / (1.0 - self.duty)
        return np.where(u < 1.0, u, -1.0)

    def stance(self, t: float) -> np.ndarray:
        """(feet,) bool: which feet are on the ground at gait time ``t``."""
        return self.swing_progress(t) < 0.0

    def swing_reference(self, u: float, start, target, ground_z: float):
        """Swing foot position, velocity, acceleration (3,) each at progress ``u``.

        start, target : (3,) world lift-off and touchdown points [m]
        """
        T = self.swing_time
        s, ds, dds = swing_plane(u, T)
        d = np.asarray(target, dtype=float) - np.asarray(start, dtype=float)
        pos = start + s * d
        vel = ds * d
        acc = dds * d
        pos[2], vel[2], acc[2] = swing_height(u, self.step_height, T)
        pos[2] += ground_z
        return pos, vel, acc
