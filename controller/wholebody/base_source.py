"""The base state a whole-body controller uses: the estimator's, or leg odometry while none runs.

With an estimate stage in the tick (``state.base`` valid) its base state is
used as it is.  Without one (no IMU, or the estimator not converged), this
stand-in keeps the robot controllable on flat ground: the base's roll and
pitch are those over the plane through the stance feet (held while fewer
than 3 feet stand), yaw is held at 0, and the base is placed by leg
odometry, the stance feet assumed not to move in the world; its twist is the
one that keeps the stance feet still (least squares over their Jacobians).  It cannot see a slope or a slipping foot:
that needs the estimator.
"""

from __future__ import annotations

import numpy as np

from servoloop.controller.wholebody.robot import WholeBodyRobot

__all__ = ["BaseSource"]


class BaseSource:
    """Fills the model state ``q`` (nq,), ``v`` (nv,) from a JointState, tick by tick.

    Parameters
    ----------
    robot : WholeBodyRobot
    dt : control period [s]
    """

    def __init__(self, robot: WholeBodyRobot, dt: float) -> None:
        self.robot = robot
        self.dt = float(dt)
        self.q = robot.model.neutral().copy()
        self.v = np.zeros(robot.model.nv)
        self.feet_world = None
        self.estimated = False     # last tick used the estimator's base state
        self.rp = np.zeros(2)      # roll, pitch [rad] from the stance feet

    def update(self, state, stance=None) -> tuple[np.ndarray, np.ndarray]:
        """Model ``(q, v)`` for this tick (views into this object, refreshed in place).

        state : JointState (``state.base`` used when valid)
        stance : (feet,) bool, feet on the ground (default all)
        """
        r, q, v = self.robot, self.q, self.v
        base = state.base
        if base is not None and base.valid:
            r.full_state(base, state.position, state.velocity, q, v)     # joints too
            self.estimated = True
            self.feet_world = None
            return q, v
        q[r.q_joints] = state.position
        v[r.v_joints] = state.velocity
        self.estimated = False
        nf = len(r.feet)
        stance = np.ones(nf, dtype=bool) if stance is None else np.asarray(stance, dtype=bool)
        q[3:7] = (0.0, 0.0, 0.0, 1.0)
        q[:3] = 0.0
        r.kinematics(q)
        rel = np.array([r.foot_position(f) for f in r.feet])    # feet in the base frame
        if stance.sum() >= 3:
            self.rp = self._tilt(rel[stance])
        R = _roll_pitch_matrix(*self.rp)
        rel_w = rel @ R.T
        if self.feet_world is None:                # first tick: the ground under the lowest foot
            pos = np.zeros(3)
            pos[2] = -rel_w[:, 2].min()
            self.feet_world = rel_w + pos
        else:
            on = stance if stance.any() else np.ones(nf, dtype=bool)
            pos = (self.feet_world[on] - rel_w[on]).mean(axis=0)
        # feet in the air follow the base (they land where they are)
        self.feet_world[~stance] = pos + rel_w[~stance]
        q[:3] = pos
        q[3:7] = _quat(R)
        # base twist that keeps the stance feet still (leg odometry, no lag): J_b v_b = -J_q dq
        on = stance if stance.any() else np.ones(nf, dtype=bool)
        r.kinematics(q)
        J = np.vstack([r.point_jacobian(q, f.body, f.center, f.radius) for f, s in zip(r.feet, on, strict=True) if s])
        v[:6] = np.linalg.lstsq(J[:, :6], -J[:, 6:] @ v[6:], rcond=None)[0]
        return q, v

    @staticmethod
    def _tilt(feet) -> np.ndarray:
        """Roll and pitch [rad] of the base over the plane through the feet (p, 3) (base frame)."""
        A = np.column_stack([feet[:, 0], feet[:, 1], np.ones(len(feet))])
        a, b, _ = np.linalg.lstsq(A, feet[:, 2], rcond=None)[0]
        n = np.array([-a, -b, 1.0]) / np.sqrt(a * a + b * b + 1.0)   # world up, in the base frame
        return np.array([np.arctan2(n[1], n[2]), -np.arcsin(np.clip(n[0], -1.0, 1.0))])


def _roll_pitch_matrix(roll: float, pitch: float) -> np.ndarray:
    cr, sr, cp, sp = np.cos(roll), np.sin(roll), np.cos(pitch), np.sin(pitch)
    return np.array([[cp, sp * sr, sp * cr], [0.0, cr, -sr], [-sp, cp * sr, cp * cr]])


def _quat(R) -> np.ndarray:
    """Quaternion (x, y, z, w) of a rotation matrix (3, 3) close to identity."""
    w = 0.5 * np.sqrt(max(1.0 + R[0, 0] + R[1, 1] + R[2, 2], 1e-12))
    return np.array([(R[2, 1] - R[1, 2]) / (4 * w), (R[0, 2] - R[2, 0]) / (4 * w),
                     (R[1, 0] - R[0, 1]) / (4 * w), w])
