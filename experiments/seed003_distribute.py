"""Seed 003, lcp_inf on rigid ground: the stance feet kept down and the load shared.

Two things made the paper's no-slip ID (LCP,inf) fall on our rigid mu = inf trot (at
0.48 s, the first lift-off of a loaded foot):

1. *Alg. 2's answer is undistributed.*  With the feet stuck (tangential forces unbounded)
   the contact forces that give the ID's base wrench form a family: with four coplanar
   feet, horizontal squeezes between feet and one twist of the normal forces across the
   diagonals (+ - - +).  Alg. 2 (§4.7) returns an end of it, feet at zero force (Appendix
   F: at most rank(N) positive normal forces).  Every member is an answer: the base and
   joint accelerations, the no-slip and non-penetration rows stay, only the internal
   forces (and through them the torques) change, and the rigid simulator, whose Delassus
   matrix is positive definite, realises it.  :func:`distribute` picks the member of least
   weighted norm, ``sum_i w_i f_n,i^2 + |f_t,i|^2``, pushing only, no force where the ID's
   row is open; :func:`liftoff_weights` makes a foot's weight grow over the last
   ``horizon`` seconds of its stance, so its load goes to the feet that stay before it
   lifts (as far as the twist allows).
2. *The unloaded feet float, and the wrench decides the split.*  The joint feedback's
   accelerations are overdetermined with four feet stuck, and with two they may need a
   pulling foot; the ID answers by letting a foot separate (its row open, a tenth of a
   millimetre per tick), and a separated foot cannot take the load; the base wrench the
   joint accelerations ask for fixes the normal forces up to the twist.
   :meth:`NoSlipSplit.consistent` first moves ``qdd_des`` to the joint acceleration that
   keeps every stance foot stuck and on the ground with pushing-only forces, trading the
   distance to ``qdd_des`` against the forces' norm (``QP_FORCE_WEIGHT``), so the feet
   share the load.  This does most of the work (see BENCHMARKS.md's seed 003 section).
"""

from __future__ import annotations

import numpy as np

from servoloop.controller.wholebody.force_split import _least_norm

__all__ = ["LIFTOFF_HORIZON_S", "distribute", "liftoff_weights"]

#: the last part of a foot's stance [s] over which its normal-force weight grows
LIFTOFF_HORIZON_S = 0.03
#: the stance QP's weight on a squared contact force [1/N^2 against s^4/rad^2 on a squared
#: joint-acceleration error]: it asks for loads the feet share, not only feasible ones.
#: 10 s, rigid mu = inf: 1e-6 and 1e-4 fell (at 1.94 and 0.03 m: which foot the QP left
#: loaded after a touchdown was chance), 1e-3 .. 10 trot (1: 0.6 %, 30 s too)
QP_FORCE_WEIGHT = 1.0
#: a foot's weight one tick before it lifts (relative to 1 for a foot that stays)
LIFTOFF_WEIGHT_MAX = 1.0e4


def liftoff_weights(gait, t: float, stance, dt: float, horizon: float = LIFTOFF_HORIZON_S):
    """(feet,) normal-force weights: 1, rising as ``(horizon / tau)^2`` over the last ``horizon``
    seconds before a stance foot's planned lift-off (``tau`` s left; at most LIFTOFF_WEIGHT_MAX).

    gait : :class:`controller.wholebody.gait.TrotGait`; t : its gait time [s] (negative
    while the robot stands before the trot); stance : (feet,) bool, the ID's contacts.
    """
    n = len(stance)
    w = np.ones(n)
    if horizon <= 0.0:
        return w
    # time to lift-off, to the tick: the first step ahead at which the foot is in swing
    # (gait time < 0: the stand before the trot, every foot down)
    steps = int(round(horizon / dt))
    left = np.full(n, np.inf)
    for s in range(1, steps + 1):
        if t + s * dt < 0.0:
            continue
        sw = gait.swing_progress(t + s * dt) >= 0.0
        new = sw & np.isinf(left)
        left[new] = s * dt
    lifting = np.asarray(stance, bool) & np.isfinite(left)
    w[lifting] = np.minimum((horizon / left[lifting]) ** 2, LIFTOFF_WEIGHT_MAX)
    return w


def _open_rows(J_list, gaps, v, qdd, dt, baumgarte=0.2, tol=1e-6):
    """(k,) bool: contacts whose no-penetration row ``v_n+ + phi~/dt >= 0`` is slack [m/s]."""
    out = np.zeros(len(J_list), dtype=bool)
    for i, J in enumerate(J_list):
        vn = J[2] @ (v + dt * qdd)
        phi = gaps[i] if gaps[i] >= 0.0 else baumgarte * gaps[i]
        out[i] = vn + phi / dt > tol
    return out


def distribute(J_list, forces, weights, open_rows=None, iters: int = 8):
    """Forces (k, 3) [N, world] of least weighted norm with the same base wrench as ``forces``.

    J_list : k (3, nv) world point Jacobians of the ID's contact points (base columns 0:6)
    forces : (k, 3) the ID's contact forces [N]; weights : (k,) normal-force weights
    open_rows : (k,) bool or None, contacts that must stay unloaded
    Returns the new forces and ``delta`` (k, 3), their change (``tau -= J_j^T delta``).
    A normal force that comes out negative is held at zero and the rest solved again.
    """
    k = len(J_list)
    forces = np.asarray(forces, dtype=float)
    if k == 0:
        return forces.copy(), np.zeros_like(forces)
    A = np.hstack([J[:, :6].T for J in J_list])          # (6, 3k): forces -> base wrench
    b = A @ forces.reshape(-1)
    wdiag = np.ones(3 * k)
    wdiag[2::3] = weights
    free = np.ones(3 * k, dtype=bool)
    if open_rows is not None:
        for i in np.flatnonzero(open_rows):
            free[3 * i:3 * i + 3] = False
    x = _least_norm(A, wdiag, free, b, iters)      # the daemon's split, the same arithmetic
    new = x.reshape(k, 3)
    if np.any(new[:, 2] < -1e-9) or np.abs(A @ x - b).max() > 1e-6 * max(1.0, np.abs(b).max()):
        return forces.copy(), np.zeros_like(forces)       # no such split: the ID's own answer
    return new, new - forces


class NoSlipSplit:
    """The experiment's hook around the no-slip ID: a joint acceleration that keeps every
    stance foot on the ground (:meth:`consistent`), then the distributed forces (:meth:`split`).

    robot : :class:`controller.wholebody.robot.WholeBodyRobot` (its armature the plant's);
    dt : control step [s].  Rigid ground (the plane z = 0) only.
    """

    def __init__(self, robot, dt: float, horizon: float | None = None) -> None:
        from servoloop import core_cy

        self.robot = robot
        self.dt = float(dt)
        self.horizon = LIFTOFF_HORIZON_S if horizon is None else float(horizon)
        self._cy = core_cy
        self._data = core_cy.Data(robot.model)
        self.changed = 0            # ticks whose forces were redistributed
        self.projected = 0          # ticks whose qdd_des was moved to keep the feet down
        self._J, self._gaps, self._foot = [], [], []
        self.answer = None          # (tau (n,), f_n (k,)) of the last consistent() solve
        self.answered = 0           # failed ID ticks answered by it

    def _rows(self, q, stance) -> None:
        r = self.robot
        r.kinematics(q)
        self._J, self._gaps, self._foot = [], [], []
        for j, f in enumerate(r.feet):
            if stance[j]:
                for p in f.points:
                    self._J.append(r.point_jacobian(q, f.body, p, f.radius).copy())
                    self._gaps.append(float(r.point_world(f.body, p)[2] - f.radius))
                    self._foot.append(j)

    def consistent(self, q, v, qdd, stance, baumgarte: float = 0.2, base_weight: float = 1e-6,
                   force_weight: float = QP_FORCE_WEIGHT):
        """qdd (nv,): the nearest joint acceleration to ``qdd``'s with which the base, under
        its own dynamics and pushing-only contact forces, keeps every stance point stuck *and*
        on the ground over the step (``J (v + dt a) = -phi~/dt e_z``, the ID's
        velocity-level rows held as equalities).

        With the feet stuck the joint accelerations the feedback asks for are overdetermined
        (four feet) or need a pulling foot to hold the trunk (two): the no-slip ID answers by
        letting a foot separate (its row open by tenths of a millimetre), and a separated
        foot carries nothing when the loaded one lifts.  Solved as the least squares
        ``min |a_q - qdd_q|^2 + base_weight |a_b|^2 + force_weight |f|^2`` under the base
        rows of ``M a + h = S tau + J^T f`` and those contact rows; a foot whose normal
        force comes out negative is kept down with no force (the legs' accelerations change
        instead) and the rest solved again.  The QP's own torques and forces are kept in
        :attr:`answer`.
        """
        self._rows(q, stance)
        k = len(self._J)
        if k == 0:
            return qdd
        r, cy = self.robot, self._cy
        M = np.array(cy.crba(r.model, self._data, q), dtype=float)
        M[6:, 6:] += np.diag(r.armature)
        h = np.array(cy.nonlinear_effects(r.model, self._data, q, v), dtype=float)
        C = np.vstack(self._J)                                   # (3k, nv)
        d = -(C @ v) / self.dt
        for i, g in enumerate(self._gaps):
            d[3 * i + 2] -= (g if g >= 0.0 else baumgarte * g) / self.dt ** 2
        nv = C.shape[1]
        w = np.concatenate([np.full(6, base_weight), np.ones(nv - 6), np.full(3 * k, force_weight)])
        x0 = np.concatenate([qdd, np.zeros(3 * k)])
        loaded = np.ones(k, dtype=bool)      # contacts that may carry force
        x = None
        for _ in range(k + 1):
            fcols = nv + np.flatnonzero(np.repeat(loaded, 3))
            cols = np.concatenate([np.arange(nv), fcols])
            # equalities E x = e: base dynamics M_b a - J_b^T f = -h_b, every contact's rows
            E = np.zeros((6 + 3 * k, cols.size))
            E[:6, :nv] = M[:6]
            E[:6, nv:] = -C[np.repeat(loaded, 3), :6].T
            E[6:, :nv] = C
            e = np.concatenate([-h[:6], d])
            wi = 1.0 / w[cols]
            EW = E * wi
            lam = np.linalg.lstsq(EW @ E.T, e - E @ x0[cols], rcond=1e-12)[0]
            xc = x0[cols] + EW.T @ lam
            if np.abs(E @ xc - e).max() > 1e-6 * max(1.0, np.abs(e).max()):
                break                       # no joint motion keeps that foot down unloaded
            x, x_loaded = xc, loaded.copy()
            fn = xc[nv + 2::3]
            if fn.min(initial=0.0) >= 0.0:
                break
            # a foot that would have to pull: kept down with no force (the legs move instead)
            loaded[np.flatnonzero(loaded)[np.argmin(fn)]] = False
        if x is None:
            self.answer = None
            return qdd
        # the QP's own answer (every contact stuck and on the ground, f_n >= 0): a no-slip ID
        # answer the simulator realises, for a tick the LCP's set of stuck feet does not settle
        f = np.zeros(3 * k)
        f[np.repeat(x_loaded, 3)] = x[nv:]
        a = x[:nv]
        self.answer = ((M @ a + h - C.T @ f)[6:], f[2::3].copy())
        self.projected += 1
        out = qdd.copy()
        out[6:] = x[6:nv]
        return out

    def split(self, q, v, tau, forces, stance, gait, t_gait: float):
        """(tau (n,) [N m], normal forces (k,) [N]) of the split; ``forces`` (k, 3) the ID's
        for the contact points of the ``stance`` (feet,) feet, in the robot's foot order."""
        r, cy = self.robot, self._cy
        forces = np.asarray(forces, dtype=float)
        if forces.shape[0] == 0:
            return tau, forces[:, 2]
        self._rows(q, stance)
        J_list = self._J
        M = np.array(cy.crba(r.model, self._data, q), dtype=float)
        M[6:, 6:] += np.diag(r.armature)
        h = np.array(cy.nonlinear_effects(r.model, self._data, q, v), dtype=float)
        gen = -h
        gen[6:] += tau
        for J, f in zip(J_list, forces, strict=True):
            gen += J.T @ f
        qdd = np.linalg.solve(M, gen)
        open_rows = _open_rows(J_list, self._gaps, v, qdd, self.dt)
        w = liftoff_weights(gait, t_gait, stance, self.dt, self.horizon)[self._foot]
        new, delta = distribute(J_list, forces, w, open_rows)
        if not delta.any():
            return tau, forces[:, 2]
        tau = tau.copy()
        for J, dl in zip(J_list, delta, strict=True):
            tau -= J[:, 6:].T @ dl
        self.changed += 1
        return tau, new[:, 2]
