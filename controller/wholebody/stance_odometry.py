"""Base position and velocity from the legs of the feet a walk *planned* in stance.

The estimate stage decides contacts from each sole's height and vertical
speed (a foot within ``contact_height`` of the lowest point, moving slowly,
is taken as standing).  A walking biped's swing foot stays that low for
much of its swing (the built-in humanoid steps 12 mm high), so the estimate
anchors a moving foot and, averaging it with the real stance foot, sees
about half the distance walked: the base PD then pushes the robot on to
catch the plan and it falls.  The walk knows which foot is down; this keeps
the estimate's orientation and angular velocity (IMU) and replaces position
and linear velocity with leg odometry over the planned stance feet:

- a foot's world point is anchored when its stance begins (the base
  position then, plus the foot's offset from the base, at the ground height);
- base position = mean over stance feet of (anchor - offset);
- base velocity = mean over stance feet of ``-(J_foot dq + w x r)``, low-passed
  (``cutoff_hz``): the joint rates are read in coarse counts.
"""

from __future__ import annotations

import math

import numpy as np

from servoloop.controller.controllers.base import BaseState
from servoloop.controller.wholebody.robot import WholeBodyRobot, quat_to_matrix

__all__ = ["StanceOdometry"]


class StanceOdometry:
    """Leg odometry over the planned stance feet (see the module docstring).

    Parameters
    ----------
    robot : WholeBodyRobot
    dt : control period [s]
    ground_z : world height of a standing foot's reference point [m]
    cutoff_hz : low-pass cutoff of the velocity [Hz]
    """

    def __init__(self, robot: WholeBodyRobot, dt: float, ground_z: float, cutoff_hz: float = 20.0):
        self.robot = robot
        self.ground_z = float(ground_z)
        self.alpha = 1.0 - math.exp(-2.0 * math.pi * cutoff_hz * dt)
        nf = len(robot.feet)
        self.anchor = np.zeros((nf, 3))
        self.stance = np.zeros(nf, dtype=bool)
        self.base = BaseState()
        self.q = robot.model.neutral().copy()
        self.v = np.zeros(robot.model.nv)
        self.started = False

    def update(self, estimate: BaseState, position, velocity, stance) -> BaseState:
        """The base state (:attr:`base`, filled in place) for joint ``position``, ``velocity``
        (n,) [rad, rad/s] in the controller's order, the estimate (orientation and angular
        velocity used) and the planned ``stance`` (feet,) bool."""
        r, q, v, b = self.robot, self.q, self.v, self.base
        R = quat_to_matrix(estimate.quaternion)
        q[:3] = 0.0
        q[3:7] = estimate.quaternion
        q[7 + r.idx] = position
        v[:6] = 0.0
        v[6 + r.idx] = velocity
        r.kinematics(q)
        w_world = R @ np.asarray(estimate.angular_velocity)
        offs, vels = [], []
        for f in r.feet:
            off = r.foot_position(f)                      # base at the origin: the offset
            J = r.point_jacobian(q, f.body, f.center, f.radius)
            vel = J @ v + np.cross(w_world, off)
            offs.append(off)
            vels.append(vel)
        if not self.started:
            b.position[:] = estimate.position
            b.linear_velocity[:] = 0.0
            for i in range(len(r.feet)):
                self.anchor[i] = b.position + offs[i]
                self.anchor[i, 2] = self.ground_z
            self.stance[:] = True
            self.started = True
        for i in range(len(r.feet)):
            if stance[i] and not self.stance[i]:            # planned touchdown: anchor it here
                self.anchor[i] = b.position + offs[i]
                self.anchor[i, 2] = self.ground_z
        self.stance[:] = stance
        on = [i for i in range(len(r.feet)) if stance[i]] or list(range(len(r.feet)))
        pos = np.mean([self.anchor[i] - offs[i] for i in on], axis=0)
        vel = -np.mean([vels[i] for i in on], axis=0)
        b.position[:] = pos
        lin = b.linear_velocity
        lin += self.alpha * (R.T @ vel - lin)              # body frame, as BaseState holds it
        b.quaternion[:] = estimate.quaternion
        b.angular_velocity[:] = estimate.angular_velocity
        b.valid = True
        return b
