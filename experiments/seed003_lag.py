"""Seed 003, ID(t-1) at a sticking rigid contact: the lagged force loop's gain.

The lagged controllers (``id_lag1`` / ``id_lag2``) compute ``tau_k = [M qdd + h - J^T
f_{k-lag}]_joints`` from the simulator's forces of an earlier step.  At a sticking rigid
contact the simulator's forces of step k are an affine function of ``tau_k`` (its
velocity-level LCP with every contact row active: ``f = D^-1 (b - J M^-1 S tau)``,
``D = J M^-1 J^T``), so with the state held::

    f_k = c + G f_{k-lag},   G = D^-1 J M^-1 P_j J^T

with ``P_j`` keeping the joint rows (the ID subtracts the forces from the joint rows
only).  ``G = I - D^-1 J M^-1 P_b J^T`` (``P_b`` the base rows): an internal force (no
base wrench) passes unchanged (eigenvalue 1), and a base-wrench error is corrected only by
what the base's share of the motion gives back.  :func:`force_loop_matrix` builds G.

That G is the ID with the base's acceleration taken as 0 (``seed003.LAG_BASE = "zero"``);
with it solved from the fed-back forces (the paper's reduced form, the experiment's
default) ``G = I - D^-1 J_b M_bb^-1 J_b^T``, eigenvalues in [0, 1] (``base="dynamics"``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["force_loop_matrix"]


def force_loop_matrix(robot, q, feet=None, base: str = "zero") -> np.ndarray:
    """G (3k, 3k): the simulator's contact forces' change per change of the forces an
    ID(t-1) controller feeds back, for ``feet`` (indices, default every foot) stuck.

    robot : :class:`controller.wholebody.robot.WholeBodyRobot` (armature set to the plant's);
    q : (nq,) configuration.  Forces in world axes [N], per foot (x, y, z).
    base : the ID's base acceleration (:func:`experiments.seed003_lag_loop.lagged_id_torques`):
        "zero" gives the G above; "dynamics" (the base rows solved with the fed-back forces)
        gives ``G = I - D^-1 J_b M_bb^-1 J_b^T``, eigenvalues in [0, 1] (``J_b M_bb^-1 J_b^T
        <= D``: the Schur complement), 1 only for the internal forces.
    """
    from servoloop import core_cy

    feet = range(len(robot.feet)) if feet is None else feet
    M = np.array(core_cy.crba(robot.model, core_cy.Data(robot.model), q), dtype=float)
    M[6:, 6:] += np.diag(robot.armature)
    robot.kinematics(q)
    J = np.vstack([robot.point_jacobian(q, robot.feet[i].body, robot.feet[i].center,
                                        robot.feet[i].radius) for i in feet])
    Jj = J.copy()
    Jj[:, :6] = 0.0                          # the ID's J^T f enters the joint rows only
    D = J @ np.linalg.solve(M, J.T)          # the contacts' Delassus matrix (3k, 3k)
    if base == "dynamics":
        Jb = J[:, :6]
        return np.eye(len(J)) - np.linalg.solve(D, Jb @ np.linalg.solve(M[:6, :6], Jb.T))
    if base != "zero":
        raise ValueError(f"force_loop_matrix base: {base!r}; choose zero or dynamics")
    return np.linalg.solve(D, J @ np.linalg.solve(M, Jj.T))
