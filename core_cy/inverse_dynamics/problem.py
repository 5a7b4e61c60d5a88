"""The contact inverse-dynamics problem in reduced form (seed 003 digest §2).

:func:`build_problem` evaluates, once at (q, v), everything the variants need:
the mass matrix, the bias forces, the contact points' Jacobians rotated into
the ground's contact frame, and the velocity-level biases; the variants
(:mod:`.noslip`, :mod:`.coulomb`, :mod:`.qp`) only read it.

Unknowns are in force units (impulse / dt).  A contact's frame is the
ground's :func:`core_cy.contact.laws.plane_frame` (columns t1, t2, n), the
same axes as the simulator.  Normal rows are stabilised as in the simulator:
``n^T v+ + phi~ / dt >= 0`` with ``phi~ = phi`` for an open gap and
``baumgarte * phi`` for a penetration.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from servoloop.core_cy.contact.laws import plane_frame
from servoloop.core_cy.dynamics._dynamics import (
    Data,
    Model,
    crba,
    forward_kinematics,
    frame_jacobian,
    nonlinear_effects,
)
from servoloop.core_cy.inverse_dynamics.errors import ContactFrameError, FloatingBaseError
from servoloop.core_cy.sim.model import ContactPoints, Ground

__all__ = ["NB", "ContactSet", "WarmStart", "ContactProblem", "build_problem", "pyramid_rows"]

NB = 6  # unactuated (free-flyer) DOF


@dataclass(frozen=True)
class ContactSet:
    """Contact points resolved on a model.

    body (k,) body indices, position (k, 3) [m] point (sphere centre) in the
    body frame, radius (k,) [m] (0 for a point), names (k,).
    """

    body: np.ndarray
    position: np.ndarray
    radius: np.ndarray
    names: tuple

    def __len__(self) -> int:
        return int(self.body.shape[0])

    @classmethod
    def resolve(cls, model: Model, contacts) -> ContactSet:
        """From :class:`core_cy.sim.model.ContactPoints` or a list of link names.

        A link name gives a point contact at that link's frame origin.

        Raises
        ------
        ContactFrameError naming the link and the model's URDF.
        """
        if isinstance(contacts, ContactSet):
            return contacts
        if isinstance(contacts, ContactPoints):
            names = tuple(contacts.names) if contacts.names else tuple(
                f"contact{i}" for i in range(len(contacts)))
            return cls(np.asarray(contacts.body, dtype=int).copy(),
                       np.asarray(contacts.position, dtype=float).reshape(-1, 3).copy(),
                       np.asarray(contacts.radius, dtype=float).copy(), names)
        if isinstance(contacts, str):
            contacts = [contacts]
        body, pos = [], []
        for name in contacts:
            try:
                b, R, p = model.frame_placement(name)
            except KeyError:
                raise ContactFrameError(
                    f"contact frame '{name}': no such link in {model.source}; links: "
                    f"{', '.join(model.frame_names)}") from None
            if b < 0:
                raise ContactFrameError(f"contact frame '{name}' in {model.source} is fixed to "
                                        "the world: it cannot take contact forces")
            body.append(b)
            pos.append(np.asarray(p, dtype=float))
        if not body:
            raise ContactFrameError("contacts: empty list (give at least one link name)")
        return cls(np.array(body, dtype=int), np.array(pos), np.zeros(len(body)), tuple(contacts))


@dataclass
class WarmStart:
    """Active contact set carried from one ``lcp_noslip`` call to the next (§4.6).

    Indices refer to the contacts within the margin, in the caller's order.
    """

    active: list = field(default_factory=list)


@dataclass
class ContactProblem:
    """Everything the variants need, evaluated once at (q, v).

    M (nv, nv) with armature; h (nv,) = C(q, v) v + g(q); Jw (3k, nv) world
    point Jacobians; N, S, T (k, nv) normal and tangent rows; frame (3, 3)
    contact axes (t1, t2, n); bias_n (k,) = (N v + phi~/dt)/dt, bias_s, bias_t
    (k,) = S v / dt, T v / dt; a_q (na,) prescribed joint acceleration;
    mu (k,); gap (k,) [m].  Only the contacts with gap < margin are kept
    (``index`` says which of the caller's); the others get no force.
    """

    M: np.ndarray
    h: np.ndarray
    Jw: np.ndarray
    N: np.ndarray
    S: np.ndarray
    T: np.ndarray
    frame: np.ndarray
    bias_n: np.ndarray
    bias_s: np.ndarray
    bias_t: np.ndarray
    a_q: np.ndarray
    mu: np.ndarray
    gap: np.ndarray
    dt: float
    v: np.ndarray
    weight: float
    index: np.ndarray          # (k,) positions of these contacts in the caller's list
    k_total: int               # length of the caller's list (contacts past the margin dropped)

    @property
    def k(self) -> int:
        return self.N.shape[0]

    @property
    def nv(self) -> int:
        return self.M.shape[0]

    def base_terms(self, a_q=None):
        """A^-1 (as Cholesky factor solve), d_b = -B a_q - h_b."""
        a_q = self.a_q if a_q is None else a_q
        A = self.M[:NB, :NB]
        B = self.M[:NB, NB:]
        return A, -B @ a_q - self.h[:NB]


def _point_jacobians(model, data, q, cs: ContactSet, normal, plane_point):
    """World (3k, nv) point Jacobians, contact points (k, 3) [m] and gaps (k,) [m]."""
    forward_kinematics(model, data, q)
    R_all = np.asarray(data.rotation_body_to_world)
    p_all = np.asarray(data.position_body_in_world)
    k = len(cs)
    Jw = np.empty((3 * k, model.nv))
    pts = np.empty((k, 3))
    gap = np.empty(k)
    J6 = np.empty((6, model.nv))
    for i in range(k):
        b = int(cs.body[i])
        centre = R_all[b] @ cs.position[i] + p_all[b]
        gap[i] = normal @ (centre - plane_point) - cs.radius[i]
        pts[i] = centre - cs.radius[i] * normal
        frame_jacobian(model, data, q, b, frame="local_world_aligned", out=J6)
        arm = pts[i] - p_all[b]
        # v_p = v_o + w x arm = v_o - arm x w
        Jw[3 * i:3 * i + 3] = J6[:3] - np.cross(arm, J6[3:].T).T
    return Jw, pts, gap


def build_problem(model: Model, data: Data, q, v, qdd_des, contacts, mu=0.8, *,
                  dt: float = 1e-3, ground: Ground | None = None, baumgarte: float = 0.2,
                  margin: float = 0.005, armature=0.0) -> ContactProblem:
    """Evaluate M, h, contact rows and biases at (q, v); see :func:`solve`."""
    if not model.floating_base:
        raise FloatingBaseError(f"inverse dynamics with contact: {model.source} was loaded "
                                "with floating_base=False; load it with floating_base=True")
    q = _arr(q, "q", (model.nq,))
    v = _arr(v, "v", (model.nv,))
    qdd_des = _arr(qdd_des, "qdd_des", (model.nv,))
    if not dt > 0:
        raise ValueError(f"dt must be > 0 s, got {dt}")
    cs = ContactSet.resolve(model, contacts)
    k = len(cs)
    mu = np.broadcast_to(np.asarray(mu, dtype=float), (k,)).copy()
    if np.any(~(mu >= 0)):
        raise ValueError(f"mu: friction coefficients must be >= 0 (inf allowed), got {mu}")
    ground = ground or Ground()
    normal = ground.unit_normal()
    frame = plane_frame(normal)
    Jw, _, gap = _point_jacobians(model, data, q, cs, normal,
                                  np.asarray(ground.point, dtype=float))
    M = np.array(crba(model, data, q), dtype=float)
    M = 0.5 * (M + M.T)
    na = model.nv - NB
    M[NB:, NB:] += np.diag(np.broadcast_to(np.asarray(armature, dtype=float), (na,)))
    h = np.array(nonlinear_effects(model, data, q, v), dtype=float)
    Jc = np.einsum("ji,kjn->kin", frame, Jw.reshape(k, 3, -1))  # rows (t1, t2, n) per contact
    S, T, N = Jc[:, 0].copy(), Jc[:, 1].copy(), Jc[:, 2].copy()
    phi = np.where(gap < 0.0, baumgarte * gap, gap)
    weight = float(model.total_mass * np.linalg.norm(model.gravity))
    keep = np.flatnonzero(gap < margin)
    Jw = Jw.reshape(k, 3, -1)[keep].reshape(3 * keep.size, model.nv)
    N, S, T = N[keep], S[keep], T[keep]
    return ContactProblem(M, h, Jw, N, S, T, frame,
                          (N @ v + phi[keep] / dt) / dt, S @ v / dt, T @ v / dt,
                          qdd_des[NB:].copy(), mu[keep], gap[keep], float(dt), v.copy(), weight,
                          keep, k)


def _arr(x, name, shape):
    a = np.asarray(x, dtype=float)
    if a.shape != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name}: contains NaN or inf")
    return a



def pyramid_rows(p: ContactProblem):
    """R (nv, 5k) = [N^T, S^T, -S^T, T^T, -T^T] (direction-major, digest §1).

    The pyramid F = [S; -S; T; -T] of the paper: |f_t1| + |f_t2| <= mu f_n.
    """
    return np.vstack([p.N, p.S, -p.S, p.T, -p.T]).T
