"""Base and foot references of a trot at a desired forward speed, tick by tick.

The base reference moves at the desired velocity (forward, in the heading
it had at the start) at the standing height, level; stance feet stay put
(the balance core holds them still), swing feet follow
:meth:`TrotGait.swing_reference` from lift-off to a touchdown point ahead
of the hip, on the ground height :attr:`TrotPlanner.ground_z` (or each
foot's lift-off height).  The speed is slewed (``accel`` m/s^2) so a
new ``speed_mps`` from the command socket does not jerk the base, and the
base reference is kept within ``max_lead`` of the measured base so a slip
cannot make it run away.
"""

from __future__ import annotations

import numpy as np

from servoloop.controller.wholebody._gait import TrotKernel
from servoloop.controller.wholebody.balance import Targets
from servoloop.controller.wholebody.gait import TrotGait, touchdown_phase
from servoloop.controller.wholebody.robot import WholeBodyRobot, quat_to_matrix

__all__ = ["TrotPlanner", "swing_joint_speed"]


class TrotPlanner:
    """Fills :class:`Targets` for a trot.

    Parameters
    ----------
    robot : WholeBodyRobot
    q0 : (nq,) the standing configuration the trot starts from
    posture : (n,) joint posture [rad], controller joint order
    gait : TrotGait (touchdown phases filled from the feet's link names when None)
    height : base height above the ground [m], default ``q0``'s
    accel : speed slew [m/s^2]
    stand_time : s of standing (all feet down) before the first step
    """

    def __init__(self, robot: WholeBodyRobot, q0, posture, gait: TrotGait | None = None,
                 height: float | None = None, accel: float = 0.5, stand_time: float = 0.3,
                 max_lead: float = 0.03) -> None:
        self.robot = robot
        nf = len(robot.feet)
        gait = gait or TrotGait()
        if gait.touchdown is None:
            gait.touchdown = np.array([touchdown_phase(f.link, i) for i, f in enumerate(robot.feet)])
        self.gait = gait
        self.accel = float(accel)
        self.stand_time = float(stand_time)
        self.max_lead = float(max_lead)
        q0 = np.asarray(q0, dtype=float)
        self.targets = Targets.standing(robot, q0, posture)
        R0 = quat_to_matrix(q0[3:7])
        yaw = np.arctan2(R0[1, 0], R0[0, 0])
        self.heading = np.array([np.cos(yaw), np.sin(yaw), 0.0])
        Rz = np.array([[np.cos(yaw), -np.sin(yaw), 0.0], [np.sin(yaw), np.cos(yaw), 0.0], [0.0, 0.0, 1.0]])
        self.targets.base_rotation = Rz
        if height is not None:
            self.targets.base_position[2] = height
        robot.kinematics(q0)
        feet = np.array([robot.foot_position(f) for f in robot.feet])
        #: [m] or None: the height every swing starts and lands at: the standing feet's mean
        #: at the start (seed 003 sets 0.0, its surface); None: each foot's own lift-off
        #: height.  The mean stays the default (issue 11, BENCHMARKS.md "daemon trot: the
        #: landing"): with the estimator the stance feet stand at z = 0 and the lift-off
        #: points scatter only +-0.3 mm about it (the late landings are the swing's tracking,
        #: not the plan), and under leg odometry (no IMU) the per-foot height carries each
        #: landing's error into the next swing (tests/hil: Solo12 without an IMU ended 16 mm
        #: under its 0.225 m stand, the 13 kg quadruped on weak servos tilted 0.43 rad).
        self.ground_z: float | None = float(feet[:, 2].mean())
        # foot offsets from the base in the heading frame (where each foot stands)
        self.offset = (feet - q0[:3]) @ Rz
        self.offset[:, 2] = 0.0
        self.liftoff = feet.copy()
        self.speed = 0.0
        self.speed_goal = 0.0
        self._prev_stance = np.ones(nf, dtype=bool)
        self._t_prev = None
        # update()'s compiled tick (buffers bound once)
        self._kernel = TrotKernel(gait.touchdown, self.offset, self.liftoff, self._prev_stance,
                                  self.targets, robot, self.heading)

    def update(self, t: float, q, v, weights=None, dt: float = 0.0) -> Targets:
        """Targets at time ``t`` [s] since the trot began, state ``q`` (nq,), ``v`` (nv,).

        ``weights`` (feet,) float64, optional: the force split's lift-off weights at gait
        time ``t - stand_time`` (:func:`.force_split.liftoff_weights`, tick ``dt`` [s]) are
        written into it.  One compiled call (:meth:`TrotKernel.tick`, issue 11); the NumPy
        planner it replaced is the test oracle (tests/unit/controller/_trot_reference.py).
        """
        g = self.gait
        self.speed = self._kernel.tick(t, self._t_prev, q, self.speed, self.speed_goal,
                                       self.accel, self.max_lead, self.stand_time, g.period,
                                       g.duty, g.step_height, self.ground_z, weights, dt)
        self._t_prev = t
        return self.targets


def swing_joint_speed(robot: WholeBodyRobot, q0, gait: TrotGait, speed: float = 0.0,
                      samples: int = 60) -> np.ndarray:
    """Peak joint speed [rad/s] each foot's swing reference asks of its leg, (feet,).

    The trot's swing as :class:`TrotPlanner` plans it at a steady ``speed`` [m/s] (forward
    in the heading of ``q0``): the base level at ``q0``'s pose moving at ``speed``, the foot
    lifting off half the stance travel behind where it stands at ``q0`` and landing half
    of it ahead, along :meth:`TrotGait.swing_reference`.  At ``samples`` points of the swing
    the leg is solved for the foot's point (position IK over the joints that move it, from
    ``q0``'s angles) and the joint rates for the foot's velocity relative to the base are
    ``J_leg^+ (v_foot - v_base)``.  A diagnostic (issue 11: the servos' no-load speed caps
    what a swing can do; compare with it), not run in the tick.
    """
    q = np.array(q0, dtype=float)
    robot.kinematics(q)
    feet = np.array([robot.foot_position(f) for f in robot.feet])
    R0 = quat_to_matrix(q[3:7])
    h = np.array([R0[0, 0], R0[1, 0], 0.0])
    h /= np.linalg.norm(h)
    T = gait.swing_time
    ground_z = float(feet[:, 2].mean())
    out = np.zeros(len(robot.feet))
    base0 = q[:3].copy()
    for i, f in enumerate(robot.feet):
        qi = q.copy()
        robot.kinematics(qi)
        J = robot.point_jacobian(qi, f.body, f.center, f.radius)
        cols = 6 + np.flatnonzero(np.abs(J[:, 6:]).sum(axis=0) > 1e-12)
        start = feet[i] - h * speed * gait.stance_time / 2.0
        target = feet[i] + h * speed * (T + gait.stance_time / 2.0)
        for u in np.linspace(0.0, 1.0, samples, endpoint=False):
            p, v, _ = gait.swing_reference(float(u), start.copy(), target, ground_z)
            shift = h * speed * u * T                # the base has moved on
            for _ in range(3):                       # Newton, from the last sample's angles
                qi[:3] = base0 + shift
                robot.kinematics(qi)
                J = robot.point_jacobian(qi, f.body, f.center, f.radius)[:, cols]
                qi[1 + cols] += np.linalg.lstsq(J, p - robot.foot_position(f), rcond=None)[0]
            robot.kinematics(qi)
            J = robot.point_jacobian(qi, f.body, f.center, f.radius)[:, cols]
            rates = np.linalg.lstsq(J, v - h * speed, rcond=None)[0]
            out[i] = max(out[i], float(np.abs(rates).max()))
    return out
