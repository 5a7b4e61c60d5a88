"""The entry points: :func:`solve` and :func:`solve_problem` (seed 003 variants)."""

from __future__ import annotations

import time
from collections import OrderedDict

import numpy as np

from servoloop.core_cy.dynamics._dynamics import Data, Model
from servoloop.core_cy.inverse_dynamics.coulomb import solve_coulomb
from servoloop.core_cy.inverse_dynamics.noslip import solve_noslip
from servoloop.core_cy.inverse_dynamics.problem import NB, ContactProblem, ContactSet, WarmStart
from servoloop.core_cy.inverse_dynamics.qp import solve_qp
from servoloop.core_cy.inverse_dynamics.qp_backend import DEFAULT_QP_SOLVER
from servoloop.core_cy.inverse_dynamics.result import Diagnostics, Result
from servoloop.core_cy.inverse_dynamics.workspace import ContactInverseDynamics
from servoloop.core_cy.sim.model import ContactPoints, Ground

__all__ = ["VARIANTS", "solve", "solve_problem", "workspace"]

VARIANTS = ("qp", "lcp_noslip", "lcp_coulomb")


def solve_problem(p: ContactProblem, variant: str = "qp", solver: str = DEFAULT_QP_SOLVER,
                  warm: WarmStart | None = None) -> Result:
    """The NumPy reference: solve a :class:`ContactProblem` built by :func:`build_problem`.

    Kept for the tests (the compiled path is :func:`solve`); ``solver`` is the
    qpsolvers backend of the QP variant and the §4.5 fallback.
    """
    t0 = time.perf_counter()
    if p.k == 0:   # every contact past the margin: free flight
        A, d_b = p.base_terms()
        f_n = f_t1 = f_t2 = np.zeros(0)
        a_b, a_q, info = np.linalg.solve(A, d_b), p.a_q, {"iterations": 0}
    elif variant == "qp":
        f_n, f_t1, f_t2, a_b, a_q, info = solve_qp(p, solver)
    elif variant == "lcp_noslip":
        f_n, f_t1, f_t2, a_b, a_q, info = solve_noslip(p, warm)
    elif variant == "lcp_coulomb":
        f_n, f_t1, f_t2, a_b, a_q, info = solve_coulomb(p)
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
            np.where(np.isfinite(p.mu), np.abs(f_t1) + np.abs(f_t2)
                     - np.where(np.isfinite(p.mu), p.mu, 0.0) * f_n, -np.inf),
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


_CACHE: OrderedDict = OrderedDict()
_CACHE_SIZE = 32     # e.g. every stance subset of four feet, for two variants


def workspace(model: Model, contacts, mu=0.8, variant: str = "qp", *, dt: float = 1e-3,
              ground: Ground | None = None, baumgarte: float = 0.2, margin: float = 0.005,
              armature=0.0) -> ContactInverseDynamics:
    """The cached :class:`ContactInverseDynamics` for these arguments (built on first use).

    At most 32 are kept (least recently used dropped); ``mu`` and ``ground``
    are set on the cached one (a controller may move the plane every tick),
    the other arguments select it.
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant: {variant!r}; choose one of {', '.join(VARIANTS)}")
    if isinstance(contacts, ContactPoints):
        ckey = ("pts", np.asarray(contacts.body).tobytes(),
                np.asarray(contacts.position, dtype=float).tobytes(),
                np.asarray(contacts.radius, dtype=float).tobytes())
    elif isinstance(contacts, ContactSet):
        ckey = ("set", contacts.body.tobytes(), contacts.position.tobytes(),
                contacts.radius.tobytes())
    else:
        ckey = ("names", (contacts,) if isinstance(contacts, str) else tuple(contacts))
    key = (id(model), variant, ckey, float(dt), float(baumgarte), float(margin),
           np.asarray(armature, dtype=float).tobytes())
    ws = _CACHE.get(key)
    if ws is None or ws.model is not model:
        ws = ContactInverseDynamics(model, contacts, mu, variant, dt=dt, ground=ground,
                                    baumgarte=baumgarte, margin=margin, armature=armature)
        _CACHE[key] = ws
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    else:
        _CACHE.move_to_end(key)
        ws.mu = mu
        ws.ground = ground
    return ws


def solve(model: Model, data: Data, q, v, qdd_des, contacts, mu=0.8, variant: str = "qp", *,
          dt: float = 1e-3, ground: Ground | None = None, baumgarte: float = 0.2,
          margin: float = 0.005, armature=0.0, solver: str | None = None,
          warm: WarmStart | None = None) -> Result:
    """Joint torques and contact forces that realise ``qdd_des`` (seed 003), compiled.

    Parameters
    ----------
    model, data : :class:`core_cy.Model` and its workspace (``data`` is not
        used: the compiled workspace has its own; kept for the Model/Data call form)
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
    armature : float or (n_joints,) [kg m^2] added to M's joint diagonal
        (the servo rotor inertia the simulator adds: pass the same value)
    warm : :class:`WarmStart`, optional; ``lcp_noslip`` starts Alg. 2 from the
        active set it holds and stores the new one there.  Without it the
        cached workspace's own last active set is used.
    solver : ignored (the QP is solved by the compiled Lemke on its KKT
        LCP); the NumPy reference :func:`solve_problem` takes a qpsolvers name

    A fixed-base model is accepted: its contacts take force only when the
    prescribed motion would otherwise penetrate (LCP variants) or as Stage I
    decides (QP); with no contact force tau is the classical ID.

    Returns
    -------
    Result with tau (n_joints,) [N m], contact_forces (k, 3) [N] world,
    qdd (nv,), v_next (nv,), diagnostics.

    Raises
    ------
    ContactFrameError, InfeasibleError (with ``residual``), ValueError for
    bad shapes, mu or an unknown variant.
    """
    ws = workspace(model, contacts, mu, variant, dt=dt, ground=ground, baumgarte=baumgarte,
                   margin=margin, armature=armature)
    return ws.solve(q, v, qdd_des, warm)
