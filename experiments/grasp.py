"""A fixed-base arm holding a free box: the contact ID problem of seed 003's manipulator case.

The robot model is one tree with a fixed base (an arm with fingers); the box
is a free rigid body that is not part of it.  The contact inverse dynamics
needs the two as one system: generalized velocity ``[box (6), arm (n)]`` with
the box's 6 unactuated DoF as the "base" (digest §2: ``A = M_box``, ``B = 0``,
Eq. 3 block-diagonal), and contact rows that measure the velocity of a
fingertip *relative to* the box.  :func:`grasp_rows` assembles M, h and the rows;
:class:`GraspInverseDynamics` solves them with the compiled kernels
(:class:`core_cy.inverse_dynamics.SystemInverseDynamics`), and
:func:`grasp_problem` hands them to the NumPy reference of the paper's
formulation (:func:`core_cy.inverse_dynamics.solve_problem`).

Conventions
-----------
Box velocity: world-frame linear velocity of its centre and world-frame
angular velocity.  A contact's normal ``n`` is the outward normal of the box
face the fingertip touches; ``f_n >= 0`` pushes the finger along ``+n`` and
the box along ``-n``.  The problem's ``frame`` is the identity, so
``Result.contact_forces`` holds the raw components ``(f_t1, f_t2, f_n)`` in
each contact's own axes; :func:`world_forces` turns them into world vectors.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from servoloop.core_cy import (
    Data,
    Model,
    crba,
    forward_kinematics,
    frame_jacobian,
    nonlinear_effects,
)
from servoloop.core_cy.inverse_dynamics.problem import NB, ContactProblem
from servoloop.core_cy.inverse_dynamics.system import SystemInverseDynamics

__all__ = ["Box", "Pad", "Grasp", "BoxState", "grasp_rows", "grasp_problem", "GraspInverseDynamics",
           "world_forces"]

GRAVITY = 9.81


@dataclass(frozen=True)
class Box:
    """A uniform box: mass [kg] and half extents (3,) [m] along its own axes."""

    mass: float
    half: tuple

    @property
    def inertia(self) -> np.ndarray:
        """(3, 3) inertia about the centre, in the box frame [kg m^2]."""
        a, b, c = (2.0 * np.asarray(self.half, dtype=float)) ** 2
        return self.mass / 12.0 * np.diag([b + c, a + c, a + b])


@dataclass(frozen=True)
class Pad:
    """A spherical fingertip point: sphere centre on ``link`` and the box face it touches.

    ``position`` is in the frame of the body that carries ``link`` (the link
    itself when it has a joint).

    ``face`` is the box-frame outward normal of that face (a unit axis, e.g.
    ``(0, -1, 0)``).
    """

    link: str
    position: tuple
    radius: float
    face: tuple


@dataclass
class BoxState:
    """Pose and velocity of the box: centre (3,) [m], R (3, 3), v (3,) [m/s], w (3,) [rad/s], world."""

    position: np.ndarray
    rotation: np.ndarray
    velocity: np.ndarray = field(default_factory=lambda: np.zeros(3))
    angular_velocity: np.ndarray = field(default_factory=lambda: np.zeros(3))


@dataclass
class Grasp:
    """The arm model, its workspace, the box and the pads (resolved to body indices once)."""

    model: Model
    box: Box
    pads: tuple
    armature: object = 0.0      # [kg m^2 | kg], scalar or (n,) per arm joint
    data: Data = None
    bodies: np.ndarray = None

    def __post_init__(self):
        if self.model.floating_base:
            raise ValueError(f"grasp: {self.model.source} has a floating base; the arm must be fixed")
        if self.data is None:
            self.data = Data(self.model)
        idx = []
        for p in self.pads:
            b = self.model.body_index(p.link)      # KeyError names the link and the file
            if b < 0:
                raise ValueError(f"grasp pad: link {p.link!r} is fixed to the world in {self.model.source}")
            idx.append(b)
        self.bodies = np.asarray(idx, dtype=int)

    @property
    def nv(self) -> int:
        return NB + self.model.nv


def _tangents(n):
    a = np.array([1.0, 0.0, 0.0]) if abs(n[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    t1 = np.cross(n, a)
    t1 /= np.linalg.norm(t1)
    return t1, np.cross(n, t1)


def _skew(r):
    return np.array([[0.0, -r[2], r[1]], [r[2], 0.0, -r[0]], [-r[1], r[0], 0.0]])


def grasp_rows(g: Grasp, q, v, box: BoxState):
    """M, h, contact rows and gaps of arm + box at (q, v, box state), every pad.

    Returns
    -------
    M : (nv, nv) without armature; h : (nv,); N, S, T : (k, nv) rows (n, t1,
    t2 per pad) of the finger's velocity relative to the box; gap : (k,) [m];
    vv : (nv,) the system velocity; axes : (k, 3, 3) rows (t1, t2, n), world
    """
    m, d = g.model, g.data
    q = np.asarray(q, dtype=float)
    v = np.asarray(v, dtype=float)
    n_arm = m.nv
    k = len(g.pads)
    forward_kinematics(m, d, q)
    R_all = np.asarray(d.rotation_body_to_world)
    p_all = np.asarray(d.position_body_in_world)
    R_box = np.asarray(box.rotation, dtype=float)
    c_box = np.asarray(box.position, dtype=float)
    nv = NB + n_arm
    Jw = np.zeros((k, 3, nv))
    axes = np.empty((k, 3, 3))
    gap = np.empty(k)
    J6 = np.empty((6, n_arm))
    half = np.asarray(g.box.half, dtype=float)
    for i, (pad, b) in enumerate(zip(g.pads, g.bodies, strict=True)):
        face = np.asarray(pad.face, dtype=float)
        n = R_box @ face
        centre = R_all[b] @ np.asarray(pad.position, dtype=float) + p_all[b]
        gap[i] = n @ (centre - c_box) - float(np.abs(face) @ half) - pad.radius
        x = centre - pad.radius * n                          # the touching point on the sphere
        frame_jacobian(m, d, q, int(b), frame="local_world_aligned", out=J6)
        Jf = J6[:3] - np.cross(x - p_all[b], J6[3:].T).T      # finger point velocity
        Jw[i, :, :NB] = -np.hstack([np.eye(3), -_skew(x - c_box)])   # minus the box point's
        Jw[i, :, NB:] = Jf
        t1, t2 = _tangents(n)
        axes[i] = np.vstack([t1, t2, n])
    Jc = np.einsum("kij,kjn->kin", axes, Jw)
    M = np.zeros((nv, nv))
    M[:3, :3] = g.box.mass * np.eye(3)
    I_w = R_box @ g.box.inertia @ R_box.T
    M[3:6, 3:6] = I_w
    Ma = np.array(crba(m, d, q), dtype=float)
    M[NB:, NB:] = 0.5 * (Ma + Ma.T)
    h = np.empty(nv)
    h[:3] = (0.0, 0.0, g.box.mass * GRAVITY)
    w = np.asarray(box.angular_velocity, dtype=float)
    h[3:6] = np.cross(w, I_w @ w)
    h[NB:] = nonlinear_effects(m, d, q, v)
    vv = np.concatenate([box.velocity, w, v])
    return M, h, Jc[:, 2].copy(), Jc[:, 0].copy(), Jc[:, 1].copy(), gap, vv, axes


def grasp_problem(g: Grasp, q, v, box: BoxState, qdd_arm_des, mu, *, dt: float = 1e-3,
                  baumgarte: float = 0.2, margin: float = 0.005):
    """The NumPy reference's :class:`ContactProblem` of arm + box, and the contact axes.

    For :func:`core_cy.inverse_dynamics.solve_problem` (the paper's own
    formulation); the controller path is :class:`GraspInverseDynamics`.
    """
    M, h, N, S, T, gap, vv, axes = grasp_rows(g, q, v, box)
    k, nv = N.shape
    M[NB:, NB:] += np.diag(np.broadcast_to(np.asarray(g.armature, dtype=float), (nv - NB,)))
    mu = np.broadcast_to(np.asarray(mu, dtype=float), (k,)).copy()
    phi = np.where(gap < 0.0, baumgarte * gap, gap)
    keep = np.flatnonzero(gap < margin)
    Jw = np.einsum("kij,kin->kjn", axes, np.stack([S, T, N], axis=1))[keep].reshape(3 * keep.size, nv)
    N, S, T = N[keep], S[keep], T[keep]
    p = ContactProblem(M, h, Jw, N, S, T, np.eye(3),
                       (N @ vv + phi[keep] / dt) / dt, S @ vv / dt, T @ vv / dt,
                       np.asarray(qdd_arm_des, dtype=float).copy(), mu[keep], gap[keep], float(dt),
                       vv, float(g.box.mass * GRAVITY), keep, k)
    return p, axes


class GraspInverseDynamics:
    """The compiled contact ID (:class:`SystemInverseDynamics`) of a :class:`Grasp`."""

    def __init__(self, g: Grasp, mu, variant: str = "qp", *, dt: float = 1e-3,
                 baumgarte: float = 0.2, margin: float = 0.005, slack: float = 2e-6):
        self.g = g
        self.slack = float(slack)
        nv = NB + g.model.nv
        self.sid = SystemInverseDynamics(nv, len(g.pads), mu, variant, dt=dt, baumgarte=baumgarte,
                                         margin=margin, armature=g.armature)
        self.gap = np.zeros(len(g.pads))
        self.axes = np.zeros((len(g.pads), 3, 3))

    def solve(self, q, v, box: BoxState, qdd_arm_des):
        """A :class:`Result` (tau of the arm, (t1, t2, n) per pad); ``self.gap``/``axes`` updated."""
        M, h, N, S, T, gap, vv, axes = grasp_rows(self.g, q, v, box)
        self.gap[:] = gap
        self.axes[:] = axes
        qdd = np.concatenate([np.zeros(NB), np.asarray(qdd_arm_des, dtype=float)])
        # a penetrating pad may not approach further, up to ``slack`` per step: the rows hold the
        # box's normals fixed over the step, so two pads rigid on a turning hand "approach" each
        # other by |w|^2 r dt^2 (~0.4 um at 3 rad/s), which no finite force could prevent
        gap_eff = np.maximum(gap, 0.0) + self.slack
        return self.sid.solve(M, h, N, S, T, gap_eff, vv, qdd)


def world_forces(result, axes) -> np.ndarray:
    """(k, 3) world force of every pad on the box's face partner (the finger) [N].

    ``result.contact_forces`` holds (f_t1, f_t2, f_n) per pad (identity frame);
    the box receives the opposite.
    """
    comp = np.asarray(result.contact_forces, dtype=float)
    return np.einsum("ki,kij->kj", comp, axes)
