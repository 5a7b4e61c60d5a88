"""Seed 003's answer for a tick whose contact ID fails: the §4.5 nearest feasible solve.

The no-slip ID (LCP,inf) fails when its stuck-contact set does not settle: the
LCP loads a released contact, or leaves a stuck one unloaded and separating,
pass after pass (``E_NOSLIP_SET``).  :class:`BalanceCore` then keeps the
previous tick's torques; on the rigid mu = inf trot that happened for up to 22
ticks in a row and the robot fell.  The paper (§4.5) answers an inconsistent
no-slip problem with a QP instead: the joint acceleration nearest the desired
one that the contacts can realise, and the torques of that motion.

:class:`ContactFallback` assembles the stance contacts' rows from the robot
(the same rows, gaps, Baumgarte term and margin as the compiled ID on the world
plane) and solves them with :class:`core_cy.inverse_dynamics.SystemInverseDynamics`
with ``fallback=True``: its kernels first, then its nearest-feasible QP (the
no-slip rows as equalities, ``f_n >= 0``, no approach past the gap), and the
QP's own torques if the kernels still refuse.  Only if that QP has no answer
either, the Coulomb LCP at a large friction coefficient (``MU_LAST_RESORT``)
is tried.  Either way the torques are consistent with the current contacts.
"""

from __future__ import annotations

import numpy as np

from servoloop.controller.wholebody.balance import MU_FALLBACK
from servoloop.core_cy.inverse_dynamics import InfeasibleError, SystemInverseDynamics

__all__ = ["MU_LAST_RESORT", "ContactFallback"]

#: the Coulomb LCP's friction coefficient when even the nearest-feasible QP fails: the
#: balance step's own for a failed no-slip solve (a loaded foot sticks, Lemke stays finite)
MU_LAST_RESORT = MU_FALLBACK


class ContactFallback:
    """Torques for a tick the contact ID could not answer (module doc).

    Parameters
    ----------
    robot : WholeBodyRobot, the controller's model (its ``armature`` in model order)
    dt : float, control period [s]
    variant : "lcp_noslip" | "lcp_coulomb" | "qp", the failing ID's variant
    mu : float, the failing ID's friction coefficient (``inf`` for the no-slip model)
    plane : "world" (the plane z = 0 with the simulator's Baumgarte term and 5 mm margin,
        as the ID on rigid ground) or "stance" (the plane through the highest stance
        point, no Baumgarte term, 1 mm margin, the velocity that keeps the stance feet
        still: :class:`BalanceCore`'s stance plane)
    first : "nearest" (the §4.5 nearest feasible solve, then the Coulomb LCP) or "coulomb"
        (the Coulomb LCP at ``MU_LAST_RESORT`` straight away: a different controller on
        those ticks, not the paper's LCP,inf)

    Attributes
    ----------
    answered : int, ticks answered here
    last_resort : int, of those, ticks answered by the Coulomb LCP at ``MU_LAST_RESORT``
    last : the last answer's :class:`~core_cy.inverse_dynamics.Result` (contact forces
        (k, 3) as (f_x, f_y, f_n) on the rows of :meth:`rows`) or None
    """

    def __init__(self, robot, dt: float, variant: str, mu: float, plane: str = "world",
                 first: str = "nearest") -> None:
        if plane not in ("world", "stance"):
            raise ValueError(f"ContactFallback.plane: {plane!r}; choose world or stance")
        if first not in ("nearest", "coulomb"):
            raise ValueError(f"ContactFallback.first: {first!r}; choose nearest or coulomb")
        self.first = first
        self.plane = plane
        self.robot = robot
        self.dt = float(dt)
        self.variant = variant
        self.mu = float(mu)
        self.answered = 0
        self.last_resort = 0
        self.last = None
        self._sid: dict = {}

    def _solver(self, k: int, variant: str, mu: float) -> SystemInverseDynamics:
        key = (k, variant, mu)
        sid = self._sid.get(key)
        if sid is None:
            sid = self._sid[key] = SystemInverseDynamics(
                self.robot.model.nv, k, mu=mu, variant=variant, dt=self.dt,
                armature=self.robot.armature, fallback=True,
                **({"baumgarte": 0.0, "margin": 1e-3} if self.plane == "stance" else {}))
        return sid

    def rows(self, q, stance):
        """The stance contacts' rows on the ground plane (world z = 0, or the stance plane).

        Returns
        -------
        N, S, T : (k, nv) the normal (world z) and tangential (world x, y) Jacobian rows
        gap : (k,) [m] each touching point's height above the plane
        """
        r = self.robot
        r.kinematics(q)
        c = r.contact_subset(np.asarray(stance, dtype=bool))
        k = len(c.names)
        J = np.empty((3, k, r.model.nv))
        gap = np.empty(k)
        for i in range(k):
            b, p, rad = int(c.body[i]), np.asarray(c.position[i]), float(c.radius[i])
            Ji = r.point_jacobian(q, b, p, rad)
            J[:, i] = Ji
            gap[i] = r.point_world(b, p)[2] - rad
        if self.plane == "stance" and k:
            # the plane through the highest stance foot's lowest point (as BalanceCore):
            # a foot sunk into compliant ground is on it, not below it
            counts = [len(f.index) for f, on in zip(r.feet, stance, strict=True) if on]
            starts = np.cumsum([0] + counts[:-1])
            gap -= max(gap[s:s + n].min() for s, n in zip(starts, counts, strict=True) if n)
        return J[2], J[0], J[1], gap

    def torques(self, M, h, q, v, qdd, stance):
        """Joint torques (n,) [N m] in controller order and normal forces (k,) [N].

        M : (nv, nv) mass matrix without armature; h : (nv,) bias forces;
        q (nq,), v (nv,) the state; qdd (nv,) the desired acceleration (its joint part
        is imposed); stance : (feet,) bool, the feet the ID took as contacts.

        Raises
        ------
        InfeasibleError when neither the nearest-feasible QP nor the last resort answers.
        """
        N, S, T, gap = self.rows(q, stance)
        if self.plane == "stance" and gap.size:
            # as BalanceCore's stance plane: the velocity nearest v that keeps the stance
            # feet still (a foot sinking into compliant ground is no impact to stop in a
            # tick; with the raw v the no-slip rows asked for 1e3-1e4 N within 10 ticks)
            J = np.vstack([N, S, T])
            v = v - np.linalg.lstsq(J, J @ v, rcond=None)[0]
        args = (M, h, N, S, T, gap, v, qdd)
        res = None
        if self.first == "nearest":
            try:
                res = self._solver(len(gap), self.variant, self.mu).solve(*args)
            except InfeasibleError:
                res = None
        if res is None:
            res = self._solver(len(gap), "lcp_coulomb", MU_LAST_RESORT).solve(*args)
            self.last_resort += 1
        self.answered += 1
        self.last = res
        return res.tau[self.robot.idx], res.contact_forces[:, 2]
