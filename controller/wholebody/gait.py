"""Seed 003's trot for the whole-body controller: contact schedule, swing splines, stance.

Gait (seed 003 §7): cycle 0.3 s, duty factor 75 %, step height 1.5 cm,
touchdown phases {0.25, 0.75, 0.75, 0.25} for {LF, RF, LH, RH}; a stance
foot stays where it touched down while the base reference moves at the
desired velocity ("stance from the desired base velocity"); a swing foot
follows a spline from where it lifted off to a touchdown point placed ahead
of its hip by half the stance travel (so the stance sweeps symmetrically
under the hip), replanned every tick as the base moves.  Swing: a cubic
(smoothstep) in the ground plane, ``16 h u^2 (1 - u)^2`` in height, both
with zero velocity at lift-off and touchdown.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["TrotGait", "touchdown_phase"]

_TOUCHDOWN = {"lf": 0.25, "rf": 0.75, "lh": 0.75, "rh": 0.25}


def touchdown_phase(link: str, index: int) -> float:
    """Touchdown phase of a foot from its link name (``lf_...``, ``rh_...``); otherwise
    diagonal pairs by index (0 and 3 at 0.25, 1 and 2 at 0.75)."""
    key = link.lower()[:2]
    if key in _TOUCHDOWN:
        return _TOUCHDOWN[key]
    return 0.25 if index % 4 in (0, 3) else 0.75


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
        s = u * u * (3.0 - 2.0 * u)
        ds = 6.0 * u * (1.0 - u) / T
        dds = (6.0 - 12.0 * u) / (T * T)
        d = np.asarray(target, dtype=float) - np.asarray(start, dtype=float)
        pos = start + s * d
        vel = ds * d
        acc = dds * d
        h = self.step_height
        pos[2] = ground_z + h * 16.0 * u * u * (1.0 - u) ** 2
        vel[2] = h * 16.0 * (2.0 * u - 6.0 * u * u + 4.0 * u ** 3) / T
        acc[2] = h * 16.0 * (2.0 - 12.0 * u + 12.0 * u * u) / (T * T)
        return pos, vel, acc
