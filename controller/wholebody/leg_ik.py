"""Leg inverse kinematics: joint angles that put each foot at a pose, the base given.

Used as the posture reference of a walk: the balance core's stance rows fix
a stance foot and its swing rows only a swing foot's *position*; the swing
foot's orientation (and what else the tasks leave free) follows the posture
task.  A posture from IK of the planned base and feet (soles flat, as they
stood) keeps the swing sole parallel to the ground, so it lands flat.

Damped least squares on the stacked 6-D foot errors (position of the foot's
reference point, rotation vector of the sole), over the joints that move a
foot; a few iterations per call, warm-started from the last answer (the
references move a few mm per tick).
"""

from __future__ import annotations

import numpy as np

from servoloop.controller.wholebody.robot import WholeBodyRobot, rotation_log

__all__ = ["LegIK"]


class LegIK:
    """IK of the feet of ``robot`` over the joints that move them.

    Parameters
    ----------
    robot : WholeBodyRobot
    q0 : (nq,) a configuration; the joints' start values and the feet's reference
        orientation (``foot_rotation``) come from it
    damping : DLS damping [m, rad] (keeps steps bounded near a stretched knee)
    """

    def __init__(self, robot: WholeBodyRobot, q0, damping: float = 1e-3) -> None:
        from servoloop import core_cy

        self.robot = robot
        self.q = np.array(q0, dtype=float)
        self.damping = float(damping)
        robot.kinematics(self.q)
        nv = robot.model.nv
        self._jac = np.zeros((6, nv))
        moved = np.zeros(nv, dtype=bool)
        for f in robot.feet:
            J = core_cy.frame_jacobian(robot.model, robot.data, self.q, f.body, "local_world_aligned",
                                       out=self._jac)
            moved |= np.abs(J).sum(axis=0) > 1e-12
        model_cols = np.flatnonzero(moved[6:])            # model joint indices (0..na-1)
        # joints the controller commands among those
        self.joints = np.array([j for j in model_cols if j in set(robot.idx.tolist())], dtype=np.intp)
        self.foot_rotation = np.array([robot.data.rotation_body_to_world[f.body].copy()
                                       for f in robot.feet])
        self.error = 0.0

    def solve(self, base_position, base_rotation_quat, foot_positions, foot_rotations=None,
              iterations: int = 2) -> np.ndarray:
        """Joint angles (na,) in model order for the base pose and feet.

        base_position (3,) m, base_rotation_quat (4,) (x, y, z, w), foot_positions (feet, 3)
        m of each foot's reference point, foot_rotations (feet, 3, 3) (default: as at ``q0``).
        The largest remaining foot error [m or rad] is in :attr:`error`.
        """
        from servoloop import core_cy

        r = self.robot
        q = self.q
        q[:3] = base_position
        q[3:7] = base_rotation_quat
        rots = self.foot_rotation if foot_rotations is None else foot_rotations
        cols = 6 + self.joints
        nf = len(r.feet)
        J = np.zeros((6 * nf, len(cols)))
        e = np.zeros(6 * nf)
        for _ in range(iterations):
            r.kinematics(q)
            for i, f in enumerate(r.feet):
                Jl = r.point_jacobian(q, f.body, f.center, f.radius)
                Jf = core_cy.frame_jacobian(r.model, r.data, q, f.body, "local_world_aligned",
                                            out=self._jac)
                J[6 * i:6 * i + 3] = Jl[:, cols]
                J[6 * i + 3:6 * i + 6] = Jf[3:, cols]
                e[6 * i:6 * i + 3] = foot_positions[i] - r.foot_position(f)
                e[6 * i + 3:6 * i + 6] = rotation_log(rots[i] @ r.data.rotation_body_to_world[f.body].T)
            A = J.T @ J + self.damping ** 2 * np.eye(len(cols))
            q[7 + self.joints] += np.linalg.solve(A, J.T @ e)
        self.error = float(np.abs(e).max())
        return q[7:]
