"""A learned reduced-order model's step, scaled from the five-link biped to another biped.

How the five-link model maps to a humanoid (dynamic similarity, Froude
scaling): lengths scale by ``s = leg / 1 m`` (the five-link leg, thigh +
shank, is 1 m; a humanoid's leg is its hip-pitch axis to sole distance with
the knee straight), times by ``sqrt(s)`` and so speeds by ``sqrt(s)``;
accelerations and gravity are unchanged, so a motion of the five-link
biped that obeys its dynamics maps to a motion with the same Froude number
``v^2 / (g leg)`` on the smaller robot.  Mass does not enter the motion (it
scales forces and torques only, by ``mass_ratio s``), so the CoM and swing
foot paths carry over unchanged in shape.

The step: the ROM-constrained optimal step of the five-link biped with the
learned ``theta`` (the inner problem of the learning, :mod:`locomotion.trajopt`,
at the Froude-scaled speed, flat ground), found as ``rom evaluate`` does
(from the full-order step, and by continuation from the LIP, the feasible
one of lower cost kept).  Its full-order knots give the CoM relative to the
stance foot and the swing foot relative to it, in the sagittal plane; those
are what a walking controller tracks.  The lateral plane is not in the
model (it is planar): a controller plans it with the LIP.
"""

from __future__ import annotations

import math

import numpy as np

from servoloop.locomotion.errors import RomInputError
from servoloop.locomotion.five_link import L_LINK, five_link
from servoloop.locomotion.task import DURATION, Task

__all__ = ["FIVE_LINK_LEG", "froude_scale", "RomStep", "rom_step"]

FIVE_LINK_LEG = 2.0 * L_LINK  #: thigh + shank of the five-link biped [m]


def froude_scale(leg_length: float) -> float:
    """Length scale ``s`` from the five-link biped to a biped of leg ``leg_length`` [m]."""
    if not (math.isfinite(leg_length) and leg_length > 0):
        raise RomInputError(f"leg length {leg_length!r} m: must be > 0")
    return float(leg_length) / FIVE_LINK_LEG


class RomStep:
    """One periodic step of a learned ROM, scaled to a biped of leg ``leg_length``.

    Attributes
    ----------
    scale : length scale s
    duration : s, the step's duration on the scaled robot (``0.746 sqrt(s)``)
    five_link_speed : m/s, the five-link task speed
    phase : (K,) knot phases in [0, 1]
    com : (K, 2) CoM (x, z) relative to the stance foot on the scaled robot [m]
    com_vel : (K, 2) its velocity [m/s]
    swing : (K, 2) swing foot (x, z) relative to the stance foot [m]
    cost : the step's cost on the five-link (J, with tau)
    """

    def __init__(self, scale, five_link_speed, q, v, cost, kind):
        m = five_link()
        self.scale = float(scale)
        self.kind = kind
        self.five_link_speed = float(five_link_speed)
        self.duration = DURATION * math.sqrt(self.scale)
        self.phase = np.linspace(0.0, 1.0, len(q))
        com = np.array([np.array(m.com(qi)).ravel() for qi in q])
        com_v = np.array([np.array(m.com_vel(qi, vi)).ravel() for qi, vi in zip(q, v, strict=True)])
        self.com = self.scale * com
        self.com_vel = math.sqrt(self.scale) * com_v
        self.swing = self.scale * np.array([np.array(m.swing_foot(qi)).ravel() for qi in q])
        self.cost = float(cost)

    def com_at(self, u: float) -> tuple[np.ndarray, np.ndarray]:
        """CoM (x, z) [m] and velocity [m/s] relative to the stance foot at phase ``u`` (cubic
        Hermite between knots)."""
        u = float(np.clip(u, 0.0, 1.0))
        k = min(int(u * (len(self.phase) - 1)), len(self.phase) - 2)
        h = self.phase[k + 1] - self.phase[k]
        s = (u - self.phase[k]) / h
        T = h * self.duration
        p0, p1 = self.com[k], self.com[k + 1]
        m0, m1 = self.com_vel[k] * T, self.com_vel[k + 1] * T
        h00, h10, h01, h11 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s, -2 * s**3 + 3 * s**2, s**3 - s**2
        pos = h00 * p0 + h10 * m0 + h01 * p1 + h11 * m1
        d00, d10, d01, d11 = 6 * s**2 - 6 * s, 3 * s**2 - 4 * s + 1, -6 * s**2 + 6 * s, 3 * s**2 - 2 * s
        vel = (d00 * p0 + d10 * m0 + d01 * p1 + d11 * m1) / T
        return pos, vel


_CACHE: dict = {}


def rom_step(model: str, speed: float, leg_length: float) -> RomStep:
    """The learned ROM's step for walking at ``speed`` [m/s] on a biped of leg ``leg_length``.

    ``model``: a file written by ``servoloop rom learn`` or ``builtin:five_link_4d`` /
    ``builtin:five_link_2d``.  Cached per process (a solve takes seconds).

    Raises
    ------
    RomInputError
        Unknown model file, a speed outside the five-link tasks' range once scaled, or a
        step the optimiser could not find.
    """
    from servoloop.locomotion.evaluate import CONTINUATION_STEPS
    from servoloop.locomotion.features import ROM_SPECS, theta0
    from servoloop.locomotion.model_file import load_model
    from servoloop.locomotion.trajopt import problem

    s = froude_scale(leg_length)
    v5 = float(speed) / math.sqrt(s)
    key = (model, round(v5, 6), round(s, 6))
    if key in _CACHE:
        return _CACHE[key]
    data = load_model(model)
    lo, hi = 0.05 * math.sqrt(s), 1.0 * math.sqrt(s)
    if not lo <= speed <= hi:
        raise RomInputError(f"speed {speed} m/s: with a {leg_length:.3f} m leg the learned model "
                            f"covers {lo:.3f}-{hi:.3f} m/s (the five-link tasks' 0.05-1 m/s, "
                            "Froude-scaled)")
    task = Task(v5, 0.0)
    kind, theta = data["model"], data["theta"]
    full = problem("full").solve(task)
    if not full.success:
        raise RomInputError(f"the five-link full-order step at {v5:.3f} m/s did not solve "
                            f"({full.status})")
    rom = problem(kind)
    w_full = rom.pack(problem("full").unpack(full.w))
    tries = [rom.solve(task, theta, w0=w_full)]
    sol = rom.solve(task, theta0(ROM_SPECS[kind]), w0=w_full)
    th0 = theta0(ROM_SPECS[kind])
    for k in range(1, CONTINUATION_STEPS + 1):
        if not sol.success:
            break
        sol = rom.solve(task, th0 + (theta - th0) * k / CONTINUATION_STEPS, w0=sol.w)
    tries.append(sol)
    ok = [t for t in tries if t.success]
    if not ok:
        raise RomInputError(f"model {model!r}: no feasible step at the five-link speed "
                            f"{v5:.3f} m/s ({tries[0].status})")
    best = min(ok, key=lambda t: t.cost)
    parts = rom.unpack(best.w)
    out = RomStep(s, v5, parts["q"], parts["v"], best.cost, kind)
    _CACHE[key] = out
    return out
