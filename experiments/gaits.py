"""Open-loop trot for the built-in quadruped (seed 002 §6.2 stand-in, [PH] values).

The paper's CPG/Bézier generator (its ref. [20]) is not available, so, as
the digest proposes: phase-locked diagonal pairs (LF+RH at phase 0, RF+LH at
1/2), duty factor 0.6 (with 1/2 the open-loop trot of this robot yaws by
+-10 deg a cycle and its 10 s course depends on the timestep), a straight stance sweep and a smooth lifted swing in
each leg's sagittal plane, planar two-link inverse kinematics for hip
flexion and knee, ab/ad held at 0.  The joint goals are precomputed so that
the same table drives our simulator and MuJoCo.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from servoloop.core_cy.dynamics.urdf import parse_urdf

__all__ = ["TrotParams", "leg_lengths", "planar_ik", "trot_goals", "stand_goals"]

LEGS = ("lf", "lh", "rf", "rh")
PHASE = {"lf": 0.0, "rh": 0.0, "rf": 0.5, "lh": 0.5}


@dataclass(frozen=True)
class TrotParams:
    """Trot placeholders: period [s], duty [-], step_length [m], step_height [m],
    stance_depth [m] (hip-flexion axis to foot centre), stand_time [s] before
    the gait starts, ramp_time [s] over which the step length grows to full."""

    period: float = 0.5
    duty: float = 0.6
    step_length: float = 0.06
    step_height: float = 0.04
    stance_depth: float = 0.225
    stand_time: float = 0.5
    ramp_time: float = 1.0


def leg_lengths(urdf) -> tuple[float, float]:
    """Thigh and shank lengths [m]: hip-flex -> knee and knee -> foot centre."""
    t = parse_urdf(str(urdf), floating_base=True)
    knee = t.joint_names.index("lf_knee")
    l1 = float(np.linalg.norm(t.p_tree[knee][[0, 2]]))
    body, _, p = t.frames["lf_foot_link"]
    if body != knee:
        raise ValueError(f"{urdf}: lf_foot_link is not fixed to the lf_knee body")
    return l1, float(np.linalg.norm(p[[0, 2]]))


def planar_ik(x, z, l1, l2):
    """Hip flexion and knee angles [rad] putting the foot at (x, z) [m] from the hip axis.

    Joint axes along +y, q = 0 is the leg straight down; the knee bends with
    q_knee < 0 (the built-in quadruped's stance is hip 0.6, knee -1.2).
    """
    x, z = np.asarray(x, float), np.asarray(z, float)
    D = np.clip((x * x + z * z - l1 * l1 - l2 * l2) / (2 * l1 * l2), -1.0, 1.0)
    q2 = -np.arccos(D)
    phi = np.arctan2(-x, -z)
    q1 = phi - np.arctan2(l2 * np.sin(q2), l1 + l2 * np.cos(q2))
    return q1, q2


def _foot_path(s, p: TrotParams, length):
    """Foot (x, z) [m] relative to the hip axis at gait phase s in [0, 1)."""
    s = np.mod(s, 1.0)
    stance = s < p.duty
    u = np.where(stance, s / p.duty, (s - p.duty) / (1.0 - p.duty))
    x_st = length * (0.5 - u)
    sm = u * u * (3 - 2 * u)
    x_sw = length * (sm - 0.5)
    z_sw = p.step_height * np.sin(np.pi * u) ** 2
    x = np.where(stance, x_st, x_sw)
    z = -p.stance_depth + np.where(stance, 0.0, z_sw)
    return x, z


def trot_goals(urdf, dt: float, duration: float, params: TrotParams | None = None,
               joint_names=None) -> np.ndarray:
    """Joint goals (n_steps, 12) [rad], one row per step of ``dt`` over ``duration`` [s].

    Columns follow ``joint_names`` (default Pinocchio's order: lf, lh, rf, rh
    legs, each hip_abad, hip_flex, knee).  The robot stands for
    ``stand_time`` then trots, the step length ramping in over ``ramp_time``.
    """
    p = params or TrotParams()
    l1, l2 = leg_lengths(urdf)
    t = np.arange(int(round(duration / dt))) * dt
    tg = np.maximum(t - p.stand_time, 0.0)
    length = p.step_length * np.clip(tg / p.ramp_time, 0.0, 1.0)
    if joint_names is None:
        joint_names = [f"{leg}_{j}" for leg in LEGS for j in ("hip_abad", "hip_flex", "knee")]
    out = np.zeros((t.size, len(joint_names)))
    for leg in LEGS:
        s = tg / p.period + PHASE[leg]
        # before the gait starts every foot stands (phase in stance, zero length)
        s = np.where(t < p.stand_time, 0.25 * p.duty, s)
        x, z = _foot_path(s, p, length)
        q1, q2 = planar_ik(x, z, l1, l2)
        for name, val in (("hip_abad", 0.0), ("hip_flex", q1), ("knee", q2)):
            col = joint_names.index(f"{leg}_{name}")
            out[:, col] = val
    return out


def stand_goals(urdf, depth: float = 0.225, joint_names=None) -> np.ndarray:
    """Standing joint goals (12,) [rad]: every foot straight below its hip at ``depth`` [m]."""
    l1, l2 = leg_lengths(urdf)
    q1, q2 = planar_ik(0.0, -depth, l1, l2)
    if joint_names is None:
        joint_names = [f"{leg}_{j}" for leg in LEGS for j in ("hip_abad", "hip_flex", "knee")]
    out = np.zeros(len(joint_names))
    for leg in LEGS:
        out[joint_names.index(f"{leg}_hip_flex")] = q1
        out[joint_names.index(f"{leg}_knee")] = q2
    return out
