"""Inverse dynamics with rigid contact and friction (seed 003, Zapolsky & Drumwright).

Given a floating-base state (q, v) and a desired acceleration, compute the
joint torques and the contact forces that realise it under rigid contact,
predicted together (not measured)::

    res = solve(model, data, q, v, qdd_des, contacts, mu=0.8, variant="qp")
    res.tau             # (n_joints,) [N m]
    res.contact_forces  # (k, 3) world [N], on the robot
    res.qdd             # (nv,) achieved acceleration [same layout as v]

Everything is discretised at the velocity level over one step ``dt`` as in
the paper (and as the rigid mode of :class:`core_cy.sim.simulator.Simulator`):
``M (v+ - v) = dt (S^T tau + J^T f - h)`` with ``qdd = (v+ - v) / dt`` and
``S v+ = v_joints + dt qdd_des_joints`` prescribed.  Unknowns are in force
units (impulse / dt) so the solvers see numbers of order newtons.

Variants (digest §§3-5):

- ``"lcp_noslip"`` (A, ID LCP,inf): sticking contacts, normal complementarity;
  Alg. 1 keeps the linearly independent tangent rows, the normal LCP is
  solved by Alg. 2 (principal pivoting, warm-started from a
  :class:`WarmStart`; Lemke if it cycles); an inconsistent desired
  acceleration (a leg splay) falls back to the nearest consistent joint
  acceleration (§4.5), reported in ``diagnostics.fallback``.
- ``"lcp_coulomb"`` (B, ID LCP,mu): Anitescu-Potra LCP with the 4-edge
  pyramid, Lemke with the regularisation ladder of the authors' code.
- ``"qp"`` (C, ID QP,mu; ``mu=inf`` gives QP,inf): Stage I minimises the
  kinetic energy of v+ under non-penetration and the pyramid, Stage II picks
  the minimum-norm torque over Stage I's optimal set (nullspace-free form,
  digest §5).

Sign conventions: ``+S^T tau`` (digest erratum E1).  A contact's frame is
the ground's :func:`core_cy.contact.laws.plane_frame` (columns t1, t2, n), the
same axes as the simulator so the pyramids line up; the pyramid here is the
paper's F = [S; -S; T; -T], i.e. ``|f_t1| + |f_t2| <= mu f_n`` (inside the
simulator's per-axis square).  Normal rows are stabilised as in the
simulator: ``n^T v+ + phi~ / dt >= 0`` with ``phi~ = phi`` for an open gap
and ``baumgarte * phi`` for a penetration.

Everything is NumPy in the reduced form (only the 6x6 base inertia is
inverted, digest §2).  Measured with ``bench/inverse_dynamics.py`` on the
quadruped's four feet: lcp_noslip and lcp_coulomb ~0.75 ms, qp ~3 ms per
call (mostly HiGHS and qpsolvers overhead); no compiled part yet.
"""

from __future__ import annotations

import time
import warnings
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
from servoloop.core_cy.errors import CoreError
from servoloop.core_cy.sim.model import ContactPoints, Ground

__all__ = [
    "VARIANTS",
    "InverseDynamicsError",
    "ContactFrameError",
    "FloatingBaseError",
    "InfeasibleError",
    "ContactSet",
    "WarmStart",
    "Diagnostics",
    "Result",
    "ContactProblem",
    "build_problem",
    "solve",
    "solve_problem",
    "lemke",
    "ppm",
    "find_indices",
]

VARIANTS = ("qp", "lcp_noslip", "lcp_coulomb")
# HiGHS's QP solver is a primal active-set method that accepts a PSD cost:
# it returns the optimum to round-off where clarabel (interior point) stops
# ~1e-5 N off and needs the polish below (measured: bench/inverse_dynamics.py)
DEFAULT_QP_SOLVER = "highs"
# ... but Stage II (a huge optimal face when contacts are many or duplicated)
# stalls HiGHS's active set (5 s at 40 contacts); clarabel + polish takes ms
STAGE2_SOLVER = {"highs": "clarabel"}
NB = 6  # unactuated (free-flyer) DOF


class InverseDynamicsError(CoreError):
    """Base class of the inverse-dynamics errors."""


class ContactFrameError(InverseDynamicsError, KeyError):
    """A contact named a link that the model does not have."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class FloatingBaseError(InverseDynamicsError, ValueError):
    """Contact inverse dynamics needs a floating-base model."""


class InfeasibleError(InverseDynamicsError, ArithmeticError):
    """No solution: the solver failed or its answer violates the constraints.

    ``residual`` is the largest constraint violation [N or m/s^2] found.
    """

    def __init__(self, message: str, residual: float = float("nan")):
        super().__init__(message)
        self.residual = residual


# --------------------------------------------------------------------------
# contacts
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


# --------------------------------------------------------------------------
# results
@dataclass
class Diagnostics:
    """How the solve went.

    iterations: Lemke pivots (LCP variants), -1 where the QP backend does not
        report them; residual [N]: max |M qdd + h - S^T tau - J^T f|;
    complementarity: max |f_n w_n| (and friction pairs for lcp_coulomb)
        [N m/s^2]; cone_violation [N]: max of (sum |f_t| - mu f_n, -f_n);
    penetration [m/s^2]: max of -(n^T qdd + bias) (w_n < 0);
    solve_time [s] wall time of the whole call; stage_times [s] per stage;
    regularization: Tikhonov term Lemke needed (0 = none);
    fallback: the §4.5 consistency QP changed the joint acceleration;
    stage2: Stage II ran (nullspace of Stage I's Hessian not empty);
    nullity: that nullspace's dimension (>= 5k - 6, erratum E5);
    tau_stage1, qdd_stage1: Stage I's own answer (qp only), for §9.16;
    active: (k,) normal force above 1e-9 of the weight.
    """

    iterations: int = 0
    residual: float = 0.0
    complementarity: float = 0.0
    cone_violation: float = 0.0
    penetration: float = 0.0
    solve_time: float = 0.0
    stage_times: dict = field(default_factory=dict)
    regularization: float = 0.0
    fallback: bool = False
    stage2: bool = False
    nullity: int = 0
    tau_stage1: np.ndarray | None = None
    qdd_stage1: np.ndarray | None = None
    active: np.ndarray | None = None


@dataclass
class Result:
    """tau (n_joints,) [N m]; contact_forces (k, 3) world [N] on the robot;
    qdd (nv,) achieved acceleration; v_next (nv,) = v + dt qdd; variant."""

    tau: np.ndarray
    contact_forces: np.ndarray
    qdd: np.ndarray
    v_next: np.ndarray
    variant: str
    diagnostics: Diagnostics


# --------------------------------------------------------------------------
# the problem in reduced form (digest §2)
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


# --------------------------------------------------------------------------
# Lemke (digest §4): complementary pivoting with covering vector 1
def lemke(Q, r, max_iter: int | None = None, tol: float | None = None):
    """Solve the LCP w = Q z + r >= 0, z >= 0, z^T w = 0 by Lemke's method.

    Returns (z, w, pivots) or raises InfeasibleError (ray termination or
    pivot limit).  Ties in the ratio test go to the artificial variable
    first (it ends the run), then to the lowest row.
    """
    Q = np.asarray(Q, dtype=float)
    r = np.asarray(r, dtype=float)
    n = r.shape[0]
    if n == 0 or r.min() >= 0.0:
        return np.zeros(n), r.copy(), 0
    max_iter = max_iter or max(1000, 50 * n)  # Moby's cap is min(1000, 50n); ours is looser
    scale = max(1.0, np.abs(Q).max(), np.abs(r).max())
    tol = tol or n * 1e-13 * scale
    # tableau [I, -Q, -1 | r] over the variables (w_1..w_n, z_1..z_n, z0)
    T = np.hstack([np.eye(n), -Q, -np.ones((n, 1)), r[:, None]])
    basis = np.arange(n)
    z0 = 2 * n
    row = int(np.argmin(r))
    entering = z0
    for it in range(1, max_iter + 1):
        if it > 1:
            col = T[:, entering]
            pos = col > tol
            if not pos.any():
                raise InfeasibleError(f"Lemke: ray termination after {it - 1} pivots "
                                      "(no solution from this start)", float(-r.min()))
            ratios = np.full(n, np.inf)
            ratios[pos] = T[pos, -1] / col[pos]
            best = ratios.min()
            ties = np.flatnonzero(ratios <= best + tol * max(1.0, abs(best)))
            art = ties[basis[ties] == z0]
            row = int(art[0]) if art.size else int(ties[0])
        T[row] /= T[row, entering]
        others = np.arange(n) != row
        T[others] -= np.outer(T[others, entering], T[row])
        leaving = basis[row]
        basis[row] = entering
        if leaving == z0:
            break
        entering = leaving + n if leaving < n else leaving - n
    else:
        raise InfeasibleError(f"Lemke: no solution within {max_iter} pivots", float(-r.min()))
    x = np.zeros(2 * n + 1)
    x[basis] = T[:, -1]
    z = np.maximum(x[n:2 * n], 0.0)
    return z, Q @ z + r, it


def _lemke_regularized(Q, r):
    """Lemke, then Q + eps I for eps = 1e-20 ... 1e-4 (authors' ladder, digest §4)."""
    n = r.shape[0]
    tol = max(np.abs(Q).max() if n else 0.0, 1.0) * n * np.finfo(float).eps * 1e4
    tol = max(tol, 1e-9 * max(1.0, np.abs(r).max() if n else 1.0))
    last = None
    total = 0
    for eps in (0.0, 1e-20, 1e-16, 1e-12, 1e-8, 1e-4):
        try:
            z, _, it = lemke(Q + eps * np.eye(n), r)
        except InfeasibleError as e:
            last = e
            continue
        total += it
        w = Q @ z + r
        if z.min() >= -tol and w.min() >= -tol and np.abs(z * w).max() < tol * max(1.0, z.max()):
            return z, w, total, eps
        last = InfeasibleError("Lemke: result fails the complementarity check",
                               float(max(-w.min(), np.abs(z * w).max())))
    raise InfeasibleError(f"Coulomb LCP: no solution even with regularisation 1e-4 ({last})",
                          getattr(last, "residual", float("nan")))


def ppm(Q, r, active=(), tol: float | None = None, max_iter: int | None = None):
    """Alg. 2 (modified PPM I) for the PSD no-slip LCP w = Q z + r, warm-started.

    ``active`` is the previous call's active set (indices with z > 0, the
    paper's "non-basic" set, erratum E9); if a solution with that set exists
    it is the one returned, so the force split does not jump between calls
    (§4.6).  Returns (z, w, iterations, active) or None when it cycles or
    stalls (the caller then falls back to Lemke).  The sub-block Q[a, a] may be
    singular (rank(Q) < |a|, erratum E9): least squares, then a check.
    """
    n = r.shape[0]
    scale = max(1.0, np.abs(Q).max(initial=0.0), np.abs(r).max(initial=0.0))
    tol = tol or 1e-10 * scale
    if n == 0 or r.min() >= -tol:
        return np.zeros(n), r.copy(), 0, []
    act = [int(i) for i in active if 0 <= int(i) < n] or [int(np.argmin(r))]
    seen = set()
    for it in range(1, (max_iter or 4 * n + 10) + 1):
        key = tuple(sorted(act))
        if key in seen:
            return None
        seen.add(key)
        z = np.zeros(n)
        if act:
            z[act] = np.linalg.lstsq(Q[np.ix_(act, act)], -r[act], rcond=1e-12)[0]
        w = Q @ z + r
        if act and z[act].min() < -tol:
            act.remove(act[int(np.argmin(z[act]))])
            continue
        if act and np.abs(w[act]).max() > tol:
            return None                     # singular block with no exact solution
        free = np.setdiff1d(np.arange(n), act)
        if free.size and w[free].min() < -tol:
            act.append(int(free[np.argmin(w[free])]))
            continue
        return np.maximum(z, 0.0), w, it, sorted(act)
    return None


# --------------------------------------------------------------------------
# Alg. 1 (Find-Indices) in reduced form: X^T M^-1 X nonsingular with X = [P^T, rows^T]
# is equivalent to rows_b A^-1 rows_b^T nonsingular (Schur complement on P).
def find_indices(Ainv, S_b, T_b, rel_tol: float = 1e-10):
    """Indices (kept_s, kept_t) of linearly independent tangent rows (Alg. 1).

    Ainv (6, 6) base inverse inertia, S_b, T_b (k, 6) base columns of the
    tangent rows.  Cholesky pivots below rel_tol of the diagonal count as
    singular (roundoff makes a rank-deficient Gram matrix factor anyway).
    """
    kept_s, kept_t = [], []

    def ok(rows):
        G = rows @ Ainv @ rows.T
        try:
            L = np.linalg.cholesky(G)
        except np.linalg.LinAlgError:
            return False
        return np.min(np.diag(L)) ** 2 > rel_tol * max(np.max(np.diag(G)), 1e-300)

    for i in range(S_b.shape[0]):
        if len(kept_s) + len(kept_t) >= NB:
            break
        if ok(np.vstack([S_b[kept_s + [i]], T_b[kept_t]])):
            kept_s.append(i)
        if len(kept_s) + len(kept_t) < NB and ok(np.vstack([S_b[kept_s], T_b[kept_t + [i]]])):
            kept_t.append(i)
    return kept_s, kept_t


# --------------------------------------------------------------------------
# variants; each returns (f_n, f_t1, f_t2, a_b, a_q, info)
def _noslip(p: ContactProblem, warm=None):
    A, d_b = p.base_terms()
    Ainv = np.linalg.inv(A)
    ks, kt = find_indices(Ainv, p.S[:, :NB], p.T[:, :NB])
    info = {"fallback": False}
    a_q = p.a_q
    f_n, f_t, a_b, it, viol = _noslip_lcp(p, Ainv, ks, kt, a_q, warm)
    if viol > _kin_tol(p):
        # §4.5: the desired joint acceleration cannot be met without slipping;
        # take the nearest one that can, then solve the LCP again (E10: we keep
        # f_n complementary by re-solving rather than fixing f_n)
        a_q = _consistent_joint_accel(p)
        info["fallback"] = True
        f_n, f_t, a_b, it2, viol = _noslip_lcp(p, Ainv, ks, kt, a_q, warm)
        it += it2
        if viol > _kin_tol(p):
            raise InfeasibleError(f"no-slip inverse dynamics: contact constraints violated by "
                                  f"{viol:.3g} m/s^2 even after the §4.5 fallback", viol)
    f_t1 = np.zeros(p.k)
    f_t2 = np.zeros(p.k)
    f_t1[ks] = f_t[:len(ks)]
    f_t2[kt] = f_t[len(ks):]
    info.update(iterations=it, kept=(ks, kt))
    return f_n, f_t1, f_t2, a_b, a_q, info


def _kin_tol(p):
    """Contact-acceleration error [m/s^2] below which qdd_des counts as consistent.

    Relative to gravity and the tangential/joint terms (not bias_n: a gap
    over dt^2 can be 1e5 m/s^2).  Settled stances leave ~2e-7 m/s^2 here.
    """
    return 1e-7 * max(9.81, np.abs(p.a_q).max(initial=0.0),
                      np.abs(p.bias_s).max(initial=0.0), np.abs(p.bias_t).max(initial=0.0))


def _noslip_lcp(p: ContactProblem, Ainv, ks, kt, a_q, warm=None):
    """MLCP -> LCP (App. C) with x = [a_b; f_t], z = f_n; returns violation of dropped rows."""
    B = p.M[:NB, NB:]
    d_b = -B @ a_q - p.h[:NB]
    K = np.vstack([p.S[ks, :NB], p.T[kt, :NB]])                    # kept tangent rows, base cols
    e_t = np.concatenate([p.S[ks, NB:] @ a_q + p.bias_s[ks], p.T[kt, NB:] @ a_q + p.bias_t[kt]])
    if K.shape[0]:
        G = K @ Ainv @ K.T
        AK = Ainv @ K.T
        Gi = np.linalg.inv(G)
        Phi = Ainv - AK @ Gi @ AK.T                                   # Phi_J, reduced
        a_star = Phi @ d_b - AK @ Gi @ e_t
    else:
        Phi, a_star, Gi = Ainv, Ainv @ d_b, np.zeros((0, 0))
    Nb = p.N[:, :NB]
    Q = Nb @ Phi @ Nb.T
    Q = 0.5 * (Q + Q.T)
    r = Nb @ a_star + p.N[:, NB:] @ a_q + p.bias_n
    out = ppm(Q, r, warm.active if warm is not None else ())
    if out is None:
        f_n, _, it, _ = _lemke_regularized(Q, r)
        active = [int(i) for i in np.flatnonzero(f_n > 0)]
    else:
        f_n, _, it, active = out
    if warm is not None:
        warm.active = active
    rhs = d_b + Nb.T @ f_n
    if K.shape[0]:
        f_t = -Gi @ (e_t + K @ Ainv @ rhs)
        a_b = Ainv @ (rhs + K.T @ f_t)
    else:
        f_t = np.zeros(0)
        a_b = Ainv @ rhs
    a = np.concatenate([a_b, a_q])
    viol = max(np.abs(p.S @ a + p.bias_s).max(), np.abs(p.T @ a + p.bias_t).max(),
               max(0.0, -(p.N @ a + p.bias_n).min()))
    return f_n, f_t, a_b, it, viol


def _consistent_joint_accel(p: ContactProblem):
    """§4.5 fallback QP: nearest a_q such that some a_b sticks every contact.

    min ||a_q - a_q_des||^2 over a = (a_b, a_q) s.t. S a + b_s = 0,
    T a + b_t = 0, N a + b_n >= 0 (tiny weight on a_b keeps it PD).
    """
    nv = p.nv
    P = np.eye(nv)
    P[:NB, :NB] *= 1e-9
    q = np.concatenate([np.zeros(NB), -p.a_q])
    Aeq = np.vstack([p.S, p.T])
    beq = -np.concatenate([p.bias_s, p.bias_t])
    # clarabel: the equalities are redundant when contacts repeat, which HiGHS rejects
    sol = _qp_solve(P, q, -p.N, p.bias_n, Aeq, beq, solver="clarabel", what="§4.5 fallback QP (nearest joint "
                    "acceleration that keeps every contact sticking)")
    return sol[NB:]


def _pyramid_rows(p: ContactProblem):
    """R (nv, 5k) = [N^T, S^T, -S^T, T^T, -T^T] (direction-major, digest §1)."""
    return np.vstack([p.N, p.S, -p.S, p.T, -p.T]).T


def _coulomb(p: ContactProblem):
    A, d_b = p.base_terms()
    Ainv = np.linalg.inv(A)
    k = p.k
    R = _pyramid_rows(p)
    Rb = R[:NB]
    Nrows, Frows = R[:, :k].T, R[:, k:].T            # (k, nv), (4k, nv)
    a_star = np.concatenate([Ainv @ d_b, p.a_q])      # zero contact force
    bias_F = np.concatenate([p.bias_s, -p.bias_s, p.bias_t, -p.bias_t])
    E = np.tile(np.eye(k), (4, 1))                   # (4k, k)
    finite = np.isfinite(p.mu)
    if not finite.all():
        raise ValueError(f"mu: lcp_coulomb needs finite friction coefficients, got {p.mu} "
                         "(lcp_noslip is the mu = inf model)")
    W = Rb.T @ Ainv @ Rb                              # (5k, 5k)
    Q = np.zeros((6 * k, 6 * k))
    Q[:5 * k, :5 * k] = W
    Q[k:5 * k, 5 * k:] = E
    Q[5 * k:, :k] = np.diag(p.mu)
    Q[5 * k:, k:5 * k] = -E.T
    r = np.concatenate([Nrows @ a_star + p.bias_n, Frows @ a_star + bias_F, np.zeros(k)])
    z, w, it, eps = _lemke_regularized(Q, r)
    f = z[:5 * k]
    a_b = Ainv @ (d_b + Rb @ f)
    f_n = f[:k]
    f_t1 = f[k:2 * k] - f[2 * k:3 * k]
    f_t2 = f[3 * k:4 * k] - f[4 * k:5 * k]
    comp = float(np.abs(z * w).max()) if z.size else 0.0
    return f_n, f_t1, f_t2, a_b, p.a_q, {"iterations": it, "regularization": eps,
                                         "complementarity": comp, "lam": z[5 * k:]}


def _qp_solve(P, q, G, h, A=None, b=None, lb=None, solver=DEFAULT_QP_SOLVER, what="QP"):
    """qpsolvers call (then, for an interior-point backend, a polish).

    Clarabel to 1e-9 is robust but leaves ~1e-5 relative error in the
    forces; the polish solves the KKT system of the active set it identified
    (OSQP's idea) and is kept only if it is feasible with multipliers of the
    right sign.  HiGHS (active set) runs with 1e-12 feasibility tolerances.
    """
    from qpsolvers import Problem, solve_problem

    prob = Problem(P, q, G, h, A, b, lb, None)
    opts = {"clarabel": {"tol_gap_abs": 1e-9, "tol_gap_rel": 1e-9, "tol_feas": 1e-9,
                         "max_iter": 200},
            "highs": {"primal_feasibility_tolerance": 1e-12,
                      "dual_feasibility_tolerance": 1e-12}}.get(solver, {})
    with warnings.catch_warnings():
        # dense matrices are converted to sparse, and "AlmostSolved" is
        # judged below by the primal residual instead
        warnings.simplefilter("ignore")
        sol = solve_problem(prob, solver=solver, **opts)
    res = _primal_residual(prob, sol.x)
    scale = max(1.0, np.abs(h).max() if h is not None and h.size else 1.0,
                np.abs(b).max() if b is not None and b.size else 1.0)
    if not (sol.found or res < 1e-6 * scale):
        raise InfeasibleError(f"{what}: {solver} found no solution "
                              f"(status {sol.extras.get('status', '?')}, primal residual "
                              f"{res:.3g})", res)
    # HiGHS is an active-set method: its answer is a vertex of the active
    # set already; interior-point answers get polished
    x = _polish(prob, sol)
    return x if x is not None else np.maximum(sol.x, 0.0 if lb is not None else -np.inf)


def _polish(prob, sol):
    """Exact solve on the active set of an interior-point answer, or None.

    P is singular here (many optimal forces), so the KKT system of the
    guessed active set is solved for the smallest step (dx, multipliers)
    from the solver's x by least squares: the point stays on the optimal
    face next to x instead of jumping to a far minimum-norm one.
    Constraints the polished point violates join the active set, ones with
    negative multipliers leave it, for a few rounds.
    """
    x0 = sol.x
    n = x0.size
    G = prob.G if prob.G is not None else np.zeros((0, n))
    h = prob.h if prob.h is not None else np.zeros(0)
    # every inequality as a row of Gall x <= hall (bounds as -x <= -lb)
    Gall = np.vstack([G, -np.eye(n)]) if prob.lb is not None else G
    hall = np.concatenate([h, -prob.lb]) if prob.lb is not None else h
    z = sol.z if sol.z is not None and sol.z.size == h.size else np.zeros(h.size)
    duals = z
    if prob.lb is not None:
        zb = -sol.z_box if sol.z_box is not None and sol.z_box.size == n else np.zeros(n)
        duals = np.concatenate([z, zb])
    act = duals > hall - Gall @ x0
    Aeq = prob.A if prob.A is not None else np.zeros((0, n))
    beq = prob.b if prob.b is not None else np.zeros(0)
    meq = Aeq.shape[0]
    scale = max(1.0, np.abs(prob.q).max(), np.abs(hall).max() if hall.size else 1.0,
                np.abs(beq).max() if beq.size else 1.0)
    for _ in range(10):
        C = np.vstack([Aeq, Gall[act]])
        d = np.concatenate([beq, hall[act]])
        m = C.shape[0]
        K = np.block([[prob.P, C.T], [C, np.zeros((m, m))]])
        r = np.concatenate([-prob.q - prob.P @ x0, d - C @ x0])
        step = np.linalg.lstsq(K, r, rcond=1e-12)[0]
        x, lam = x0 + step[:n], step[n:]
        if np.abs(K @ step - r).max() > 1e-7 * scale:
            return None                       # this active set has no KKT point
        viol = Gall @ x - hall > 1e-12 * scale
        neg = lam[meq:] < -1e-9 * scale
        if not viol.any() and not neg.any():
            break
        drop = np.flatnonzero(act)[neg]      # lam[meq:] follows the active rows' order
        act |= viol
        act[drop] = False
    else:
        return None
    if prob.lb is not None:
        x = np.maximum(x, prob.lb)
    return x


def _primal_residual(prob, x) -> float:
    """Largest violation of G x <= h, A x = b, x >= lb (inf when there is no x).

    Clarabel's "AlmostSolved" at our tight tolerances is still accurate, so
    it is accepted when this is small.
    """
    if x is None or not np.all(np.isfinite(x)):
        return float("inf")
    v = [0.0]
    if prob.G is not None:
        v.append(float(np.max(prob.G @ x - prob.h, initial=0.0)))
    if prob.A is not None:
        v.append(float(np.max(np.abs(prob.A @ x - prob.b), initial=0.0)))
    if prob.lb is not None:
        v.append(float(np.max(prob.lb - x, initial=0.0)))
    return max(v)


def _qp(p: ContactProblem, solver=DEFAULT_QP_SOLVER):
    A, d_b = p.base_terms()
    Ainv = np.linalg.inv(A)
    k = p.k
    R = _pyramid_rows(p)
    Rb, Rq = R[:NB], R[NB:]
    # one pyramid row per finite-mu contact; mu = inf drops it (QP,inf, erratum E13)
    finite = np.flatnonzero(np.isfinite(p.mu))
    Gf = np.zeros((finite.size, 5 * k))
    for r_, i in enumerate(finite):
        Gf[r_, i] = -p.mu[i]
        Gf[r_, k + i::k] = 1.0
    # Stage I (digest §5, force units): min 1/2 v+^T M v+ / dt^2 over f >= 0
    B = p.M[:NB, NB:]
    mom_b = (p.M[:NB] @ p.v) / p.dt - p.h[:NB]        # ((M v)_b + dt f_ext,b) / dt
    P1 = Rb.T @ Ainv @ Rb
    q1 = Rb.T @ Ainv @ mom_b
    Nb = p.N[:, :NB]
    G1 = np.vstack([-Nb @ Ainv @ Rb, Gf])
    h1 = np.concatenate([Nb @ Ainv @ d_b + p.N[:, NB:] @ p.a_q + p.bias_n, np.zeros(finite.size)])
    t0 = time.perf_counter()
    s1 = _qp_solve(0.5 * (P1 + P1.T), q1, G1, h1, lb=np.zeros(5 * k), solver=solver,
                   what="inverse dynamics Stage I")
    t1 = time.perf_counter()
    f0 = s1
    y0 = Rb @ f0
    a_b = Ainv @ (d_b + y0)
    info = {"stage_times": {"stage1": t1 - t0}, "iterations": -1}
    # Stage II: min 1/2 ||tau||^2 over Stage I's optimal set {R_b f = R_b f0}
    sv = np.linalg.svd(Rb, compute_uv=False)
    nullity = 5 * k - int(np.sum(sv > 1e-10 * max(sv.max(), 1e-300)))
    info["stage2"] = nullity > 0
    info["nullity"] = nullity
    f = f0
    t = B.T @ a_b + p.M[NB:, NB:] @ p.a_q + p.h[NB:]       # tau = t - R_q f
    info["tau_stage1"] = t - Rq @ f0
    info["qdd_stage1"] = np.concatenate([a_b, p.a_q])
    if nullity > 0:
        P2 = Rq.T @ Rq
        q2 = -Rq.T @ t
        s2 = _qp_solve(0.5 * (P2 + P2.T), q2, Gf if finite.size else None,
                       np.zeros(finite.size) if finite.size else None, Rb, y0,
                       lb=np.zeros(5 * k), solver=STAGE2_SOLVER.get(solver, solver),
                       what="inverse dynamics Stage II")
        f = s2
        info["stage_times"]["stage2"] = time.perf_counter() - t1
        a_b = Ainv @ (d_b + Rb @ f)
    f_n = f[:k]
    f_t1 = f[k:2 * k] - f[2 * k:3 * k]
    f_t2 = f[3 * k:4 * k] - f[4 * k:5 * k]
    return f_n, f_t1, f_t2, a_b, p.a_q, info


# --------------------------------------------------------------------------
def solve_problem(p: ContactProblem, variant: str = "qp", solver: str = DEFAULT_QP_SOLVER,
                  warm: WarmStart | None = None) -> Result:
    """Solve a :class:`ContactProblem` built by :func:`build_problem`."""
    t0 = time.perf_counter()
    if p.k == 0:   # every contact past the margin: free flight
        A, d_b = p.base_terms()
        f_n = f_t1 = f_t2 = np.zeros(0)
        a_b, a_q, info = np.linalg.solve(A, d_b), p.a_q, {"iterations": 0}
    elif variant == "qp":
        f_n, f_t1, f_t2, a_b, a_q, info = _qp(p, solver)
    elif variant == "lcp_noslip":
        f_n, f_t1, f_t2, a_b, a_q, info = _noslip(p, warm)
    elif variant == "lcp_coulomb":
        f_n, f_t1, f_t2, a_b, a_q, info = _coulomb(p)
    else:
        raise ValueError(f"variant: {variant!r}; choose one of {', '.join(VARIANTS)}")
    qdd = np.concatenate([a_b, a_q])
    Rf = p.N.T @ f_n + p.S.T @ f_t1 + p.T.T @ f_t2          # J^T f, generalized [N]
    gen = p.M @ qdd + p.h - Rf
    tau = gen[NB:]
    forces = np.zeros((p.k_total, 3))
    forces[p.index] = (p.frame @ np.vstack([f_t1, f_t2, f_n])).T     # world
    active = np.zeros(p.k_total, dtype=bool)
    active[p.index] = f_n > 1e-9 * p.weight
    w_n = p.N @ qdd + p.bias_n
    d = Diagnostics(
        iterations=int(info.get("iterations", -1)),
        residual=float(np.abs(gen[:NB]).max()),
        complementarity=float(max(np.abs(f_n * w_n).max() if p.k else 0.0,
                                  info.get("complementarity", 0.0))),
        cone_violation=float(max(0.0, np.max(-f_n, initial=0.0), np.max(
            np.where(np.isfinite(p.mu), np.abs(f_t1) + np.abs(f_t2) - p.mu * f_n, -np.inf),
            initial=0.0))),
        penetration=float(max(0.0, -w_n.min(initial=0.0))),
        stage_times=info.get("stage_times", {}),
        regularization=float(info.get("regularization", 0.0)),
        fallback=bool(info.get("fallback", False)),
        stage2=bool(info.get("stage2", False)),
        nullity=int(info.get("nullity", 0)),
        tau_stage1=info.get("tau_stage1"),
        qdd_stage1=info.get("qdd_stage1"),
        active=active,
    )
    d.solve_time = time.perf_counter() - t0
    return Result(tau, forces, qdd, p.v + p.dt * qdd, variant, d)


def solve(model: Model, data: Data, q, v, qdd_des, contacts, mu=0.8, variant: str = "qp", *,
          dt: float = 1e-3, ground: Ground | None = None, baumgarte: float = 0.2,
          margin: float = 0.005, armature=0.0, solver: str = DEFAULT_QP_SOLVER,
          warm: WarmStart | None = None) -> Result:
    """Joint torques and contact forces that realise ``qdd_des`` (seed 003).

    Parameters
    ----------
    model, data : floating-base :class:`core_cy.Model` and its workspace
    q : (nq,) configuration; v : (nv,) velocity (Pinocchio free-flyer layout)
    qdd_des : (nv,) desired acceleration; its joint part is imposed
        (``v_joints+ = v_joints + dt qdd_des_joints``), its base part is what
        the contacts then produce (returned in ``Result.qdd``)
    contacts : :class:`core_cy.sim.model.ContactPoints` (e.g. from
        ``contact_points_from_urdf``) or a list of link names (point contacts
        at the link origins).  Those with gap < ``margin`` are candidates:
        ``n^T v+ >= -phi/dt`` holds for open gaps too (Anitescu-Hart), and
        ``lcp_noslip`` holds every candidate's tangential velocity at zero
        (the paper's model: pass only the contacts that should stick)
    mu : float or (k,) friction coefficients; ``inf`` drops the pyramid
        (QP,inf); ``lcp_noslip`` ignores it
    variant : "qp" | "lcp_noslip" | "lcp_coulomb"
    dt : float [s], the control step the impulses are spread over
    ground : :class:`core_cy.sim.model.Ground`, default the plane z = 0
    baumgarte : fraction of a penetration removed per step (as the simulator)
    margin : float [m]; contacts whose gap is not below it take no force
        (the simulator's rule; without it the complementarity-free QP would
        push with a foot in the air whenever that lowers the kinetic energy)
    armature : float or (n_joints,) [kg m^2] added to M's joint diagonal
        (the servo rotor inertia the simulator adds)
    warm : :class:`WarmStart`, optional; ``lcp_noslip`` starts Alg. 2 from the
        active set it holds and stores the new one there (keep one per
        controller and pass it every tick, with the same contact list)
    solver : qpsolvers backend for the QP variant and the §4.5 fallback; it must
        accept a PSD cost: "highs" (default, exact active set) or "clarabel"
        (interior point + active-set polish)

    Returns
    -------
    Result with tau (n_joints,) [N m], contact_forces (k, 3) [N] world,
    qdd (nv,), v_next (nv,), diagnostics.

    Raises
    ------
    FloatingBaseError, ContactFrameError, InfeasibleError (with ``residual``),
    ValueError for bad shapes or an unknown variant.
    """
    t0 = time.perf_counter()
    if variant not in VARIANTS:
        raise ValueError(f"variant: {variant!r}; choose one of {', '.join(VARIANTS)}")
    p = build_problem(model, data, q, v, qdd_des, contacts, mu, dt=dt, ground=ground,
                      baumgarte=baumgarte, margin=margin, armature=armature)
    res = solve_problem(p, variant, solver, warm)
    res.diagnostics.solve_time = time.perf_counter() - t0
    return res
