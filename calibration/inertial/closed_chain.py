"""Closed kinematic chains: the paper's "fully-actuated representation" (eqs. 18-23).

A closed chain is modelled as its spanning tree (a URDF with each loop cut)
plus loop closures: a point of one body must coincide with a point of
another, ``c(q) = p_a(q) - p_b(q) = 0`` on the chosen world axes.  With
``J = dc/dq`` split into actuated and passive columns, and ``n_c = n_u``
(Assumption 1: the passive joints follow from the actuated ones)::

    G(q) = [I ; -J_u^{-1} J_a]  (rows scattered by joint index)      eq. 19
    v = G v_a,   a_u = -J_u^{-1} (J_a a_a + Jdot v)                  eqs. 21-22
    u = G^T W(q, v, a) theta                                           eq. 23

``G^T J^T = 0`` removes the constraint forces, so the actuated torques ``u``
are linear in theta with no need to measure lambda.  Regroup the *projected*
stack ``G^T W`` (it has more dependencies than W: digest section 5).

Errata followed (digest section 5): rows of G are scattered by joint index,
never assumed actuated-first (the reference code's row-ordering bug).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from servoloop.calibration.errors import FitError
from servoloop.calibration.inertial.regressor import RegressorModel

__all__ = ["LoopClosure", "ClosedChain"]


@dataclass(frozen=True)
class LoopClosure:
    """Point ``point_a`` of ``body_a`` coincides with ``point_b`` of ``body_b``
    (body-frame coordinates [m]) along the world ``axes`` (0 = x, 1 = y, 2 = z)."""

    body_a: str
    point_a: tuple
    body_b: str
    point_b: tuple
    axes: tuple = (0, 1, 2)


class ClosedChain:
    """Spanning tree + loop closures + the actuated joints.

    Parameters
    ----------
    model : RegressorModel, the spanning tree (fixed base)
    closures : list of LoopClosure
    actuated : list of str, names of the actuated joints (the others are passive)
    """

    def __init__(self, model: RegressorModel, closures, actuated):
        self.model = model
        self.closures = list(closures)
        names = list(model.layout.joint_names)
        missing = [a for a in actuated if a not in names]
        if missing:
            raise FitError(f"{model.urdf_path.name}: actuated joints {missing} not in {names}")
        self.ia = np.array(sorted(names.index(a) for a in actuated), dtype=int)
        self.iu = np.array([i for i in range(model.nv) if i not in set(self.ia)], dtype=int)
        self.nc = sum(len(c.axes) for c in self.closures)
        if self.nc != len(self.iu):
            raise FitError(f"{model.urdf_path.name}: {self.nc} constraints for {len(self.iu)} "
                           f"passive joints; the method needs n_c = n_u (fully actuated)")

    @property
    def na(self) -> int:
        return len(self.ia)

    def constraint(self, q) -> np.ndarray:
        """c(q) (nc,) [m] and J(q) (nc, nv) as a pair."""
        cs, Js = [], []
        for cl in self.closures:
            pa, Ja = self.model.point_kinematics(q, cl.body_a, cl.point_a)
            pb, Jb = self.model.point_kinematics(q, cl.body_b, cl.point_b)
            ax = list(cl.axes)
            cs.append((pa - pb)[ax])
            Js.append((Ja - Jb)[ax])
        return np.concatenate(cs), np.vstack(Js)

    def jdot_v(self, q, v) -> np.ndarray:
        """J-dot(q, v) v (nc,) [m/s^2]: d/dt (J(q + t v) v) at t = 0, central
        differences with one Richardson step (error ~h^4: ~1e-12 relative)."""
        q, v = np.asarray(q, dtype=float), np.asarray(v, dtype=float)
        speed = np.max(np.abs(v))
        if speed == 0.0:
            return np.zeros(self.nc)
        h = 2e-3 / speed

        def d(step):
            return (self.constraint(q + step * v)[1] @ v - self.constraint(q - step * v)[1] @ v) / (2 * step)

        return (4.0 * d(h / 2) - d(h)) / 3.0

    def G(self, q) -> np.ndarray:
        """G(q) (nv, na): v = G v_a, with G_a = I on the actuated rows (eq. 19)."""
        _, J = self.constraint(q)
        return self._G(J)

    def _G(self, J):
        Ju, Ja = J[:, self.iu], J[:, self.ia]
        G = np.zeros((self.model.nv, self.na))
        G[self.ia] = np.eye(self.na)
        G[self.iu] = -np.linalg.solve(Ju, Ja)
        return G

    def solve_passive(self, q_guess, tol: float = 1e-13, max_iter: int = 50) -> np.ndarray:
        """Gamma: q with the actuated entries of ``q_guess`` kept and the passive ones
        solved by Newton so that c(q) = 0 (|c| <= tol [m]).  Raises FitError if it fails."""
        q = np.array(q_guess, dtype=float)
        for _ in range(max_iter):
            c, J = self.constraint(q)
            if np.max(np.abs(c)) <= tol:
                return q
            Ju = J[:, self.iu]
            if np.linalg.cond(Ju) > 1e12:
                raise FitError(f"{self.model.urdf_path.name}: J_u is singular at q = {q} "
                               "(the loop is at a singular configuration)")
            q[self.iu] -= np.linalg.solve(Ju, c)
        raise FitError(f"{self.model.urdf_path.name}: loop closure did not converge from {q_guess} "
                       f"(|c| = {np.max(np.abs(c)):.3g} m)")

    def complete(self, Qa, Va, Aa, qu0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Full (N, nv) q, v, a from the actuated joints' (N, na) ones (eqs. 21-22).

        ``qu0`` (nu,) seeds Newton at the first sample; every later sample starts
        from the previous solution, which keeps the trajectory on one assembly branch.
        """
        Qa, Va, Aa = (np.atleast_2d(np.asarray(x, dtype=float)) for x in (Qa, Va, Aa))
        N = Qa.shape[0]
        Q, V, A = (np.zeros((N, self.model.nv)) for _ in range(3))
        qu = np.asarray(qu0, dtype=float)
        for i in range(N):
            guess = np.zeros(self.model.nv)
            guess[self.ia], guess[self.iu] = Qa[i], qu
            q = self.solve_passive(guess)
            qu = q[self.iu]
            _, J = self.constraint(q)
            v = self._G(J) @ Va[i]
            a = np.zeros(self.model.nv)
            a[self.ia] = Aa[i]
            # eq. (6) J a + Jdot v = 0 solved for the passive accelerations
            a[self.iu] = -np.linalg.solve(J[:, self.iu], J[:, self.ia] @ Aa[i] + self.jdot_v(q, v))
            Q[i], V[i], A[i] = q, v, a
        return Q, V, A

    def projected_regressor(self, Q, V, A) -> np.ndarray:
        """G^T W for N consistent states, stacked: (N * na, n_params) (eq. 23-27)."""
        W = self.model.regressor_batch(Q, V, A)
        out = np.empty((W.shape[0], self.na, W.shape[2]))
        for i, q in enumerate(np.atleast_2d(Q)):
            out[i] = self.G(q).T @ W[i]
        return out.reshape(-1, W.shape[2])
