"""The floating-base robot a whole-body controller works on: model, feet, joint order.

Built from a robot config (or directly from a URDF in experiments): the
compiled :class:`core_cy.Model` with a free-flyer base, the contact points of
the feet (the URDF's collision spheres and boxes), and the index maps between
the config's joint order and the model's.

State layout is Pinocchio's free-flyer layout (as the simulator): ``q =
[x y z qx qy qz qw, joints]`` and ``v = [linear, angular]`` of the base in its
own frame, then the joint rates.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from servoloop.controller.errors import ControllerParamError

__all__ = ["Foot", "WholeBodyRobot", "quat_to_matrix", "rotation_log", "rpy_to_matrix", "matrix_to_rpy"]


def quat_to_matrix(quat) -> np.ndarray:
    """Rotation matrix (3, 3) of a unit quaternion (x, y, z, w)."""
    x, y, z, w = quat
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def rpy_to_matrix(rpy) -> np.ndarray:
    """Rotation (3, 3) of roll, pitch, yaw [rad] (ZYX: ``Rz(yaw) Ry(pitch) Rx(roll)``)."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ])


def matrix_to_rpy(R) -> np.ndarray:
    """Roll, pitch, yaw [rad] (ZYX) of a rotation matrix (3, 3)."""
    pitch = np.arcsin(np.clip(-R[2, 0], -1.0, 1.0))
    return np.array([np.arctan2(R[2, 1], R[2, 2]), pitch, np.arctan2(R[1, 0], R[0, 0])])


def rotation_log(R) -> np.ndarray:
    """Rotation vector (3,) [rad] of a rotation matrix: axis times angle."""
    # min/max, not np.clip: the same number (NaN passes through) without a ufunc call per tick
    c = min(max(0.5 * (np.trace(R) - 1.0), -1.0), 1.0)
    angle = np.arccos(c)
    w = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    s = np.sin(angle)
    if s < 1e-9:
        if angle < 1e-6:
            return 0.5 * w
        # near pi: the axis from the diagonal
        axis = np.sqrt(np.maximum((np.diag(R) + 1.0) * 0.5, 0.0))
        return angle * axis
    return angle / (2.0 * s) * w


@dataclass(frozen=True)
class Foot:
    """One foot: a link carrying contact geometry.

    Attributes
    ----------
    link : str, the link's name
    body : int, model body the link is fixed to
    points : (p, 3) contact points in the body frame [m] (sphere centres, box corners)
    index : (p,) int, rows of those points in the robot's contact list
    center : (3,) the points' mean in the body frame [m] (a sphere's centre)
    radius : m, the largest sphere radius of the foot (0 for box corners); the foot's
        reference point is ``radius`` below ``center`` in the world (where a ball touches)
    """

    link: str
    body: int
    points: np.ndarray
    index: np.ndarray
    center: np.ndarray
    radius: float = 0.0


class WholeBodyRobot:
    """Model, data, feet and joint maps of one floating-base robot.

    Parameters
    ----------
    model : core_cy.Model, floating base
    contacts : core_cy.sim.ContactPoints, the contact candidates (names are link names)
    joint_names : sequence of str, the controller's joint order (n,)
    feet : sequence of str, optional; default every link carrying contact geometry
        that is not the base link
    armature : (n,) [kg m^2] rotor inertia per joint, in ``joint_names`` order

    Raises
    ------
    ControllerParamError
        Not floating base, unknown joint or foot, no feet.
    """

    def __init__(self, model, contacts, joint_names, feet=None, armature=None, what: str = "wbc"):
        from servoloop import core_cy

        if not model.floating_base:
            raise ControllerParamError(f"{what}: the robot model is fixed-base; whole-body control "
                                       "needs model.floating_base: true")
        self.model = model
        self.data = core_cy.Data(model)
        names = list(model.actuated_joint_names)
        missing = [j for j in joint_names if j not in names]
        if missing:
            raise ControllerParamError(f"{what}: joints {missing} are not in the model ({model.source})")
        self.joint_names = tuple(joint_names)
        self.n = len(joint_names)
        self.na = model.nv - 6
        #: model joint index (0..na-1) of each controller joint
        self.idx = np.array([names.index(j) for j in joint_names], dtype=np.intp)
        # the controller joints' entries of q and v: slices when in model order (a slice
        # assignment costs a third of an index-array one, and this runs every tick)
        in_order = np.array_equal(self.idx, np.arange(self.n))
        self.q_joints = slice(7, 7 + self.n) if in_order else 7 + self.idx
        self.v_joints = slice(6, 6 + self.n) if in_order else 6 + self.idx
        self.contacts = contacts
        base_link = model.body_names[0]
        link_names = [str(nm).split(":")[0] for nm in contacts.names]
        with_geometry = [nm for nm in dict.fromkeys(link_names) if nm != base_link]
        if feet is None:
            feet = with_geometry
        feet = list(feet)
        bad = [f for f in feet if f not in with_geometry]
        if bad:
            # say which mistake: the base, a name the URDF does not have, or a bare link
            f = bad[0]
            why = (f"{f!r} is the floating base, not a foot" if f == base_link
                   else f"{f!r} is not a link of {Path(str(model.source)).name}"
                   if f not in model.frame_names
                   else f"link {f!r} carries no contact geometry (declare it in simulation.contacts)")
            raise ControllerParamError(f"{what}.feet: {why}; links with contact geometry: "
                                       f"{', '.join(with_geometry) or 'none'}")
        if not feet:
            raise ControllerParamError(f"{what}: the robot has no feet (no link with collision "
                                       "geometry besides the base)")
        self.feet = []
        for link in feet:
            rows = np.array([i for i, nm in enumerate(link_names) if nm == link], dtype=np.intp)
            pts = np.asarray(contacts.position, dtype=float)[rows].copy()
            radius = float(np.asarray(contacts.radius, dtype=float)[rows].max())
            body = int(contacts.body[rows[0]])
            self.feet.append(Foot(link, body, pts, rows, pts.mean(axis=0), radius))
        self.armature = np.zeros(self.na)
        if armature is not None:
            self.armature[self.idx] = armature
        self.mass = float(model.total_mass)
        self._jac = np.zeros((6, model.nv))
        self._rx = np.zeros((3, 3))
        # bound once: an import statement per call costs microseconds in a 1 kHz tick
        self._fk, self._frame_jacobian = core_cy.forward_kinematics, core_cy.frame_jacobian

    @classmethod
    def from_urdf(cls, urdf, joint_names=None, feet=None, armature=None, what: str = "wbc",
                  mimic: str = "error") -> WholeBodyRobot:
        """Floating-base model and contact geometry of ``urdf``."""
        from servoloop import core_cy
        from servoloop.core_cy.sim.model import contact_points_from_urdf

        model = core_cy.Model.from_urdf(str(urdf), floating_base=True, mimic=mimic)
        pts = contact_points_from_urdf(urdf, floating_base=True)
        return cls(model, pts, joint_names or model.actuated_joint_names, feet, armature, what)

    # -- state ------------------------------------------------------------
    def full_state(self, base, q_joint, dq_joint, q_out, v_out) -> None:
        """Model ``q`` (nq,) and ``v`` (nv,) from a BaseState and joint arrays (n,), in place."""
        q_out[:3] = base.position
        q_out[3:7] = base.quaternion
        v_out[:3] = base.linear_velocity
        v_out[3:6] = base.angular_velocity
        q_out[self.q_joints] = q_joint
        v_out[self.v_joints] = dq_joint

    def kinematics(self, q) -> None:
        """Forward kinematics at ``q`` into :attr:`data`."""
        self._fk(self.model, self.data, q)

    def point_world(self, body: int, p_local) -> np.ndarray:
        """World position (3,) of a point fixed in ``body`` (after :meth:`kinematics`)."""
        return self.data.rotation_body_to_world[body] @ p_local + self.data.position_body_in_world[body]

    def point_jacobian(self, q, body: int, p_local, radius: float = 0.0) -> np.ndarray:
        """World-axes linear Jacobian (3, nv) of a point of ``body`` (after kinematics).

        The point is ``p_local`` (body frame) lowered by ``radius`` along world z: the
        touching point of a ball of that radius, as the contact ID and the simulator
        take it (a rolling ball's centre moves while its touching point stays).
        """
        J = self._frame_jacobian(self.model, self.data, q, body, "local_world_aligned", out=self._jac)
        r = self.data.rotation_body_to_world[body] @ p_local
        r[2] -= radius
        # v_p = v_o + w x r = v_o - r x w
        rx = self._rx
        rx[0, 1], rx[0, 2], rx[1, 2] = -r[2], r[1], -r[0]
        rx[1, 0], rx[2, 0], rx[2, 1] = r[2], -r[1], r[0]
        return J[:3] - rx @ J[3:]

    def foot_position(self, foot: Foot) -> np.ndarray:
        """World position (3,) of a foot's reference point, ``radius`` below its centre
        (after :meth:`kinematics`)."""
        p = self.point_world(foot.body, foot.center)
        p[2] -= foot.radius
        return p

    def contact_subset(self, feet_mask):
        """ContactPoints of the feet where ``feet_mask`` (len(feet),) is True."""
        from servoloop.core_cy.sim.model import ContactPoints

        rows = np.concatenate([f.index for f, on in zip(self.feet, feet_mask, strict=True) if on]
                              or [np.zeros(0, np.intp)])
        c = self.contacts
        return ContactPoints(np.asarray(c.body)[rows].astype(np.int32), np.asarray(c.position)[rows],
                             np.asarray(c.radius)[rows], [c.names[i] for i in rows])
