"""Base, feet and posture references of a biped walk, tick by tick, for the balance core.

The plan is made once when the run begins (:mod:`controller.wholebody.lip`):
footholds, the ZMP reference and the CoM from the LIP, in the walk frame
(x along the heading, origin between the feet).  With a learned reduced-order
model (``rom``, :class:`locomotion.humanoid_rom.RomStep`) the sagittal CoM
of the steps in between is the learned model's step instead: the CoM
relative to the stance foot and its height wave, Froude-scaled from the
five-link biped; it is blended in over the second step and out over the one
before last, and the first and last steps keep the LIP's (they start and
stop from rest, which the periodic step does not).  Lateral: LIP.

Each tick: the base reference is the CoM reference plus the base-CoM offset
found standing (the legs are light: their swing moves the CoM against the
base by a few mm), level, at the heading; a stance foot is held where it
stands; a swing foot follows a smoothstep from lift-off to landing with a
``16 h u^2 (1 - u)^2`` height bump (zero velocity at both ends); the posture
is IK of the planned base and feet (:class:`LegIK`) so the swing sole stays
flat.
"""

from __future__ import annotations

import numpy as np

from servoloop.controller.wholebody.balance import Targets
from servoloop.controller.wholebody.leg_ik import LegIK
from servoloop.controller.wholebody.lip import WalkTiming, footholds, lip_com, zmp_reference
from servoloop.controller.wholebody.robot import WholeBodyRobot, quat_to_matrix

__all__ = ["WalkPlanner", "leg_length"]

H = 0.005  #: plan sample time [s]


def leg_length(robot: WholeBodyRobot) -> float:
    """Hip-to-sole distance [m] with every joint at zero (legs straight): the body two
    links above the foot (the hip pitch on a 6-DoF leg) to the foot's reference point."""
    q = robot.model.neutral().copy()
    robot.kinematics(q)
    f = robot.feet[0]
    parents = np.asarray(robot.model.parents)
    body = f.body
    for _ in range(3):
        body = max(int(parents[body]), 0)
    hip = robot.data.position_body_in_world[body]
    return float(hip[2] - robot.foot_position(f)[2])


class WalkPlanner:
    """Fills :class:`Targets` for a walk of ``timing.steps`` steps at ``speed``.

    Parameters
    ----------
    robot : WholeBodyRobot with two feet (left first in the walk's order is found from y)
    q0 : (nq,) the standing configuration the walk starts from
    posture : (n,) joint posture [rad] (controller order): the arms keep it
    timing : WalkTiming
    speed : m/s forward
    step_height : m, swing apex
    rom : RomStep or None (LIP)
    limits : ((n,), (n,)) joint limits [rad] the IK posture is clipped to
    """

    def __init__(self, robot: WholeBodyRobot, q0, posture, timing: WalkTiming, speed: float,
                 step_height: float, rom=None, limits=None) -> None:
        from servoloop import core_cy

        if len(robot.feet) != 2:
            raise ValueError(f"walk: a biped needs 2 feet, the robot has {len(robot.feet)}")
        self.robot = robot
        self.timing = timing
        self.speed = float(speed)
        self.length = self.speed * timing.step_s
        self.step_height = float(step_height)
        self.rom = rom
        self.limits = limits
        q0 = np.asarray(q0, dtype=float)
        self.targets = Targets.standing(robot, q0, posture)
        R0 = quat_to_matrix(q0[3:7])
        yaw = np.arctan2(R0[1, 0], R0[0, 0])
        c, s = np.cos(yaw), np.sin(yaw)
        self.Rz = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
        self.quat = np.array([0.0, 0.0, np.sin(yaw / 2), np.cos(yaw / 2)])
        self.targets.base_rotation = self.Rz.copy()
        robot.kinematics(q0)
        feet = np.array([robot.foot_position(f) for f in robot.feet])
        self.ground_z = float(feet[:, 2].mean())
        self.origin = np.r_[feet[:, :2].mean(axis=0), self.ground_z]
        local = (feet - self.origin) @ self.Rz            # feet in the walk frame
        # walk order: 0 = left (y > 0), 1 = right
        self.order = [int(np.argmax(local[:, 1])), int(np.argmin(local[:, 1]))]
        self.half_width = float(0.5 * (local[self.order[0], 1] - local[self.order[1], 1]))
        self.foot_x = local[:, 0].copy()                  # each foot's x offset at the stand
        com = np.array(core_cy.center_of_mass(robot.model, robot.data, q0), dtype=float)
        self.z_c = float(com[2] - self.ground_z)
        self.base_offset = (q0[:3] - com) @ self.Rz       # base minus CoM, walk frame
        self.ik = LegIK(robot, np.r_[q0[:3], self.quat, q0[7:]])
        self._make_plan()

    # -- the plan ---------------------------------------------------------------------------
    def _make_plan(self) -> None:
        tm = self.timing
        self.t, zmp = zmp_reference(tm, self.length, self.half_width, H)
        self.zmp = zmp
        com, _, _ = lip_com(self.t, zmp, self.z_c)
        self.lip = com.copy()
        z = np.full(len(self.t), self.z_c)
        self.stance, self.stance_xy, self.liftoff_xy, self.landing_xy = footholds(
            tm, self.length, self.half_width)
        if self.rom is not None:
            x_rom, dz, w = self._rom_sagittal()
            com[:, 0] += w * (x_rom - com[:, 0])
            z += w * dz
        self.com = np.column_stack([com, z])
        self.com_vel = np.gradient(self.com, H, axis=0)

    def _rom_sagittal(self):
        """Learned-model CoM x (N,), height wave (N,) and its blend weight (N,)."""
        tm, rom = self.timing, self.rom
        n = len(self.t)
        x, dz, w = np.zeros(n), np.zeros(n), np.zeros(n)
        z_mean = float(rom.com[:, 1].mean())
        last = tm.steps - 2
        for i, ti in enumerate(self.t):
            k, tau = tm.step_at(ti)
            if not 1 <= k <= last:
                continue
            u = tau / tm.step_s
            pos, _ = rom.com_at(u)
            x[i] = self.stance_xy[k, 0] + pos[0]
            dz[i] = pos[1] - z_mean
            ramp_in = u * u * (3 - 2 * u) if k == 1 else 1.0
            ramp_out = 1.0 - u * u * (3 - 2 * u) if k == last else 1.0
            w[i] = min(ramp_in, ramp_out)
        return x, dz, w

    # -- queries ----------------------------------------------------------------------------
    def sample(self, t: float):
        """CoM reference position, velocity (3,) each in the walk frame at plan time ``t``."""
        f = np.clip(t / H, 0.0, len(self.t) - 1.0)
        i = min(int(f), len(self.t) - 2)
        a = f - i
        return ((1 - a) * self.com[i] + a * self.com[i + 1],
                (1 - a) * self.com_vel[i] + a * self.com_vel[i + 1])

    def to_world(self, p) -> np.ndarray:
        return self.origin + self.Rz @ p

    def steps_done(self, t: float) -> int:
        k, tau = self.timing.step_at(t)
        if k < 0:
            return 0
        if k >= self.timing.steps:
            return self.timing.steps
        return k + (1 if tau >= self.timing.single_s else 0)

    def foot_plan(self, t: float):
        """Per foot (robot order): stance (2,) bool, position, velocity, acceleration (2, 3)
        in the walk frame at plan time ``t``."""
        tm = self.timing
        k, tau = tm.step_at(t)
        stance = np.ones(2, dtype=bool)
        pos = np.zeros((2, 3))
        vel = np.zeros((2, 3))
        acc = np.zeros((2, 3))
        # where each walk-order foot stands at this time
        at = np.zeros((2, 2))
        at[0] = (self.foot_x[self.order[0]], self.half_width)
        at[1] = (self.foot_x[self.order[1]], -self.half_width)
        if k >= 0:
            kk = min(k, tm.steps - 1)
            sw = 1 - self.stance[kk]
            at[self.stance[kk]] = self.stance_xy[kk]
            at[sw] = self.landing_xy[kk] if (k >= tm.steps or tau >= tm.single_s) else self.liftoff_xy[kk]
            if k < tm.steps and tau < tm.single_s:
                stance[self.order[sw]] = False
                p, v, a = self._swing(tau / tm.single_s, self.liftoff_xy[kk], self.landing_xy[kk])
                pos[self.order[sw]], vel[self.order[sw]], acc[self.order[sw]] = p, v, a
        for j in range(2):
            if stance[self.order[j]]:
                pos[self.order[j], :2] = at[j]
        return stance, pos, vel, acc

    def _swing(self, u: float, start, end):
        T = self.timing.single_s
        s = u * u * (3.0 - 2.0 * u)
        ds = 6.0 * u * (1.0 - u) / T
        dds = (6.0 - 12.0 * u) / (T * T)
        d = np.r_[np.asarray(end) - np.asarray(start), 0.0]
        h = self.step_height
        p = np.r_[start, 0.0] + s * d
        v = ds * d
        a = dds * d
        p[2] = h * 16.0 * u * u * (1.0 - u) ** 2
        v[2] = h * 16.0 * (2.0 * u - 6.0 * u * u + 4.0 * u ** 3) / T
        a[2] = h * 16.0 * (2.0 - 12.0 * u + 12.0 * u * u) / (T * T)
        return p, v, a

    # -- the tick ---------------------------------------------------------------------------
    def update(self, t: float, q=None, v=None) -> Targets:
        """Targets at time ``t`` [s] since the walk began (``q``, ``v`` unused: the plan is
        followed as made; the balance core's feedback keeps the robot on it)."""
        tg, r = self.targets, self.robot
        c, cv = self.sample(t)
        tg.base_position[:] = self.to_world(c + self.base_offset)
        tg.base_velocity[:] = self.Rz @ cv
        stance, pos, vel, acc = self.foot_plan(t)
        tg.stance[:] = stance
        feet_w = np.array([self.to_world(p) for p in pos])
        for i in range(2):
            tg.swing_position[i] = feet_w[i]
            tg.swing_velocity[i] = self.Rz @ vel[i]
            tg.swing_acceleration[i] = self.Rz @ acc[i]
        qj = self.ik.solve(tg.base_position, self.quat, feet_w)
        post = qj[r.idx]
        if self.limits is not None:
            post = np.clip(post, self.limits[0], self.limits[1])
        legs = np.isin(r.idx, self.ik.joints)
        tg.posture[legs] = post[legs]
        return tg
