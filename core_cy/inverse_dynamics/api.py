"""The entry points: :func:`solve` and :func:`solve_problem` (seed 003 variants)."""

from __future__ import annotations

import time

import numpy as np

from servoloop.core_cy.dynamics._dynamics import Data, Model
from servoloop.core_cy.inverse_dynamics.coulomb import solve_coulomb
from servoloop.core_cy.inverse_dynamics.noslip import solve_noslip
from servoloop.core_cy.inverse_dynamics.problem import (
    NB,
    ContactProblem,
    WarmStart,
    build_problem,
)
from servoloop.core_cy.inverse_dynamics.qp import solve_qp
from servoloop.core_cy.inverse_dynamics.qp_backend import DEFAULT_QP_SOLVER
from servoloop.core_cy.inverse_dynamics.result import Diagnostics, Result
from servoloop.core_cy.sim.model import Ground

__all__ = ["VARIANTS", "solve", "solve_problem"]

VARIANTS = ("qp", "lcp_noslip", "lcp_coulomb")


def solve_problem(p: ContactProblem, variant: str = "qp", solver: str = DEFAULT_QP_SOLVER,
                  warm: WarmStart | None = None) -> Result:
    """Solve a :class:`ContactProblem` built by :func:`build_problem`."""
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
