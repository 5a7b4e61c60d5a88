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

Modules: :mod:`.problem` (contacts, :func:`build_problem`), :mod:`.noslip`,
:mod:`.coulomb`, :mod:`.qp` (the variants), :mod:`.qp_backend` (qpsolvers and
the polish), :mod:`.lcp` (core_cy.contact's LCP solvers, errors translated),
:mod:`.result`, :mod:`.errors` and :mod:`.api` (:func:`solve`).

Everything is NumPy in the reduced form (only the 6x6 base inertia is
inverted, digest §2).  Measured with ``bench/inverse_dynamics.py`` on the
quadruped's four feet: lcp_noslip and lcp_coulomb ~0.75 ms, qp ~3 ms per
call (mostly HiGHS and qpsolvers overhead); no compiled part yet.
"""

from servoloop.core_cy.inverse_dynamics.api import VARIANTS, solve, solve_problem, workspace
from servoloop.core_cy.inverse_dynamics.errors import (
    ContactFrameError,
    FloatingBaseError,
    InfeasibleError,
    InverseDynamicsError,
)
from servoloop.core_cy.inverse_dynamics.lcp import lemke, ppm
from servoloop.core_cy.inverse_dynamics.noslip import find_indices
from servoloop.core_cy.inverse_dynamics.problem import (
    ContactProblem,
    ContactSet,
    WarmStart,
    build_problem,
)
from servoloop.core_cy.inverse_dynamics.result import Diagnostics, Result
from servoloop.core_cy.inverse_dynamics.workspace import ContactInverseDynamics

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
    "workspace",
    "ContactInverseDynamics",
    "lemke",
    "ppm",
    "find_indices",
]
