"""Footsteps and the linear-inverted-pendulum (LIP) CoM plan of a biped walk.

The walk, in a walk frame (x forward along the heading the robot had when
the run began, y to the left, origin midway between the feet):

- ``pre_s`` of standing (the LIP plan anticipates the shift: long enough that the
  CoM starts at rest), then ``shift_s`` while the zero-moment point (ZMP)
  moves from between the feet onto the first stance foot (the right one: the
  left foot swings first);
- ``steps`` steps of ``step_s`` each: single support for ``(1 - ds) step_s``
  (the swing foot moves from its foothold to the next), then double support
  for ``ds step_s`` (the ZMP moves onto the foot that just landed);
- the last step brings the swing foot beside the stance foot; the ZMP moves
  back between the feet and the robot stands.

Footholds: step ``k`` lands at ``x = (k + 1) L`` (``L = speed step_s``),
the last one at ``(steps - 1) L``, beside the other foot; ``y = +-w`` (the
standing feet's half spacing).

CoM (LIP, constant height ``z_c``): ``p = c - (z_c / g) c''`` with ``p`` the
ZMP reference, solved as a boundary-value problem over the whole walk (the
CoM at rest between the feet at both ends): the exact discrete LIP motion
for that ZMP (a preview of the whole walk, as Kajita's preview control with
an infinite horizon).  Central second differences make it one tridiagonal
solve (``h`` = 5 ms: about 1000 unknowns for 10 steps).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["G", "WalkTiming", "footholds", "zmp_reference", "lip_com"]

G = 9.81  #: gravity [m/s^2]


@dataclass(frozen=True)
class WalkTiming:
    """Timing of a walk [s]; ``ds`` is the double-support fraction of a step."""

    steps: int = 10
    step_s: float = 0.32
    ds: float = 0.2
    pre_s: float = 0.8
    shift_s: float = 0.4
    post_s: float = 1.0

    @property
    def first_step(self) -> float:
        """Time the first step begins [s]."""
        return self.pre_s + self.shift_s

    @property
    def end_of_steps(self) -> float:
        """Time the last step's double support ends [s]."""
        return self.first_step + self.steps * self.step_s

    @property
    def duration(self) -> float:
        """Length of the plan [s] (the robot stands after it)."""
        return self.end_of_steps + self.post_s

    @property
    def single_s(self) -> float:
        """Single-support time of a step [s]."""
        return (1.0 - self.ds) * self.step_s

    def step_at(self, t: float) -> tuple[int, float]:
        """(step index, time into that step [s]) at plan time ``t``; index -1 before the
        first step, ``steps`` after the last."""
        if t < self.first_step:
            return -1, t
        k = int((t - self.first_step) // self.step_s)
        if k >= self.steps:
            return self.steps, t - self.end_of_steps
        return k, t - self.first_step - k * self.step_s


def footholds(timing: WalkTiming, length: float, half_width: float):
    """Per step ``k``: stance foot (0 left, 1 right), its foothold and the swing's
    lift-off and landing points (x, y) in the walk frame [m].

    Returns (stance (steps,) int, stance_xy (steps, 2), liftoff_xy (steps, 2),
    landing_xy (steps, 2)).
    """
    n = timing.steps
    stance = np.array([1 if k % 2 == 0 else 0 for k in range(n)])     # right first
    side = np.where(stance == 0, half_width, -half_width)             # y of the stance foot
    # x of the foot that lands at step k; -1 is the start
    land = np.array([(k + 1) * length if k < n - 1 else (n - 1) * length for k in range(n)])
    land_prev = np.r_[0.0, land[:-1]]               # where each step's stance foot stands
    lift = np.r_[0.0, land_prev[:-1]] if n > 1 else np.zeros(1)
    stance_xy = np.column_stack([land_prev, side])
    liftoff_xy = np.column_stack([lift, -side])
    landing_xy = np.column_stack([land, -side])
    return stance, stance_xy, liftoff_xy, landing_xy


def zmp_reference(timing: WalkTiming, length: float, half_width: float, h: float = 0.005):
    """Sample times (N,) [s] and the ZMP reference (N, 2) [m] of the walk."""
    t = np.arange(0.0, timing.duration + 0.5 * h, h)
    _, stance_xy, _, landing_xy = footholds(timing, length, half_width)
    p = np.zeros((len(t), 2))
    final = 0.5 * (stance_xy[-1] + landing_xy[-1])
    final[1] = 0.0
    for i, ti in enumerate(t):
        k, tau = timing.step_at(ti)
        if k < 0:
            u = np.clip((ti - timing.pre_s) / timing.shift_s, 0.0, 1.0)
            p[i] = _smooth(u) * stance_xy[0]
        elif k >= timing.steps:
            p[i] = final
        else:
            nxt = landing_xy[k] if k < timing.steps - 1 else final
            u = np.clip((tau - timing.single_s) / max(timing.ds * timing.step_s, 1e-9), 0.0, 1.0)
            p[i] = stance_xy[k] + _smooth(u) * (nxt - stance_xy[k]) if tau > timing.single_s \
                else stance_xy[k]
    return t, p


def _smooth(u):
    return u * u * (3.0 - 2.0 * u)


def lip_com(t: np.ndarray, zmp: np.ndarray, z_c: float):
    """CoM position, velocity, acceleration (N, k) of the LIP for the ZMP reference (N, k).

    The CoM starts and ends at the reference's first and last ZMP, at rest (the
    reference should stand still there for ~1 s: the LIP's time constant
    ``sqrt(z_c / g)`` is 0.14 s on the built-in humanoid).
    """
    from scipy.linalg import solve_banded

    h = float(t[1] - t[0])
    n = len(t)
    c = z_c / (G * h * h)
    # unknowns x_1..x_{n-2}; x_0 and x_{n-1} fixed at the end ZMPs
    m = n - 2
    ab = np.zeros((3, m))
    ab[0, 1:] = -c
    ab[1, :] = 1.0 + 2.0 * c
    ab[2, :-1] = -c
    rhs = zmp[1:-1].copy()
    rhs[0] += c * zmp[0]
    rhs[-1] += c * zmp[-1]
    x = np.empty_like(zmp)
    x[0], x[-1] = zmp[0], zmp[-1]
    x[1:-1] = solve_banded((1, 1), ab, rhs)
    v = np.gradient(x, h, axis=0)
    a = np.zeros_like(x)
    a[1:-1] = (x[2:] - 2 * x[1:-1] + x[:-2]) / (h * h)
    return x, v, a
