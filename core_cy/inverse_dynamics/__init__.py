"""Inverse dynamics with rigid contact and friction (seed 003, Zapolsky & Drumwright).

Given a state (q, v) and a desired acceleration, compute the joint torques
and the contact forces that realise it under rigid contact, predicted
together (not measured).  The compiled workspace, created once per (model,
contact list, variant) and called every tick::

    cid = ContactInverseDynamics(model, contacts, mu=0.8, variant="qp", dt=1e-3,
                                 armature=0.0012)
    res = cid.solve(q, v, qdd_des)              # Result (copies)
    cid.solve_into(q, v, qdd_des, tau, forces)  # fills the caller's arrays

or the functional form, which keeps one such workspace per argument set::

    res = solve(model, data, q, v, qdd_des, contacts, mu=0.8, variant="qp")
    res.tau             # (n_joints,) [N m]
    res.contact_forces  # (k, 3) world [N], on the robot
    res.qdd             # (nv,) achieved acceleration [same layout as v]

Everything is discretised at the velocity level over one step ``dt`` as in
the paper (and as the rigid mode of :class:`core_cy.sim.simulator.Simulator`):
``M (v+ - v) = dt (S^T tau + J^T f - h)`` with ``qdd = (v+ - v) / dt`` and
``S v+ = v_joints + dt qdd_des_joints`` prescribed.  Unknowns are in force
units (impulse / dt).  Pass the simulator's (or the robot's) servo armature:
without it the closed-loop force prediction degrades tenfold.

Variants (digest §§3-5), kernels in :mod:`._cid` (Cython, nogil):

- ``"lcp_noslip"`` (ID LCP,inf): sticking contacts, normal complementarity;
  Alg. 1 keeps the independent tangent rows, Alg. 2 solves the normal LCP
  warm-started from the last active set (Lemke's ladder if it gives up); an
  inconsistent desired acceleration falls back to the nearest joint
  acceleration under which the dropped rows hold (§4.5,
  ``diagnostics.fallback``); an unloaded, separating contact releases its
  tangent rows (the plant cannot hold friction there).
- ``"lcp_coulomb"`` (ID LCP,mu): Anitescu-Potra LCP with the 4-edge pyramid,
  Lemke with the regularisation ladder.
- ``"qp"`` (ID QP,mu; ``mu=inf`` gives QP,inf): two stages, both LCPs solved
  by the compiled Lemke (the authors' route, footnote 1).  Stage I: the
  paper's is the complementarity-free QP (max dissipation); its KKT conditions
  put ``-mu lambda`` on the normal rows, i.e. a sliding contact opens at
  ``mu |v_t+|``.  With the joint accelerations imposed at 1 kHz a foot sliding
  at 0.5 m/s then "lifts" at 5 cm/s and the QP pushes the base up instead of
  loading the foot (closed-loop trot, rigid mu 0.1: 40-57 % force error).
  Here Stage I drops that term: it is the Coulomb LCP in the contact-space
  terms (``1/2 f^T H f + c^T f`` with H the paper's Hessian and c the contacts'
  accelerations without force), the simulator's model; the relaxed form is
  the fallback if Lemke gives up (always solvable; QP,inf's tangent rows then
  carry the paper's kinetic-energy term).  QP,inf uses a pyramid of mu = 10.
  Stage II (the paper's: min-norm torque over Stage I's optimal set) runs on
  the forces that keep Stage I's base motion *and* its multipliers:
  no force where Stage I's slack is open (more than 1 um over the step), the
  pyramid tight where the contact slides, forces of contacts that do not end
  the step closed fixed.  The paper's nullspace alone lets Stage II load a
  foot that separates or slides whenever that lowers the torque (the loaded
  feet differed from the simulator's on 70 % of the trot's ticks).  Result:
  qp_mu 1.5 % force error on that trot (the paper: 12.5 %).  The NumPy
  reference :func:`solve_problem` keeps the paper's own form.

Fixed-base models are accepted (contacts then take force only when the
motion would penetrate).  A contact's frame is the ground's
:func:`core_cy.contact.laws.plane_frame` (columns t1, t2, n), the same axes
as the simulator; normal rows are stabilised as in the simulator:
``n^T v+ + phi~ / dt >= 0`` with ``phi~ = phi`` for an open gap and
``baumgarte * phi`` for a penetration.

Modules: :mod:`.workspace` (:class:`ContactInverseDynamics`), :mod:`.api`
(:func:`solve`, the cache, and :func:`solve_problem`, the NumPy reference of
the paper's formulation built by :func:`build_problem` in :mod:`.problem`,
with :mod:`.noslip`, :mod:`.coulomb`, :mod:`.qp`, :mod:`.qp_backend`),
:mod:`.lcp`, :mod:`.result`, :mod:`.errors`; :mod:`.system`
(:class:`SystemInverseDynamics`) runs the same kernels on matrices the
caller assembles, for systems that are not one tree (an arm holding a free
object).  Measured per call at four
contacts (``servoloop bench inverse_dynamics``): lcp_noslip 6 us,
lcp_coulomb 14 us, qp 41 us.
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
from servoloop.core_cy.inverse_dynamics.system import SystemInverseDynamics
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
    "SystemInverseDynamics",
    "lemke",
    "ppm",
    "find_indices",
]
