"""Contact inverse dynamics of a system assembled by the caller (not one URDF tree).

:class:`ContactInverseDynamics` assembles M, h and the contact rows from one
:class:`core_cy.Model`.  Some systems are not one tree: seed 003's
manipulator case is a fixed arm holding a free box, whose contact rows
measure a fingertip's velocity *relative to* the box.  Assemble those
yourself (6 unactuated DoF first, e.g. the box; then the actuated joints)
and solve them with the same compiled kernels, nogil and allocation-free::

    sid = SystemInverseDynamics(nv=15, k=4, mu=1.0, variant="qp")
    res = sid.solve(M, h, N, S, T, gap, v, qdd_des)

``res.contact_forces`` holds each contact's components ``(f_t1, f_t2, f_n)``
in its own axes (the rows S, T, N), since every contact has its own frame.

Closed chains (a hand squeezing a box from two sides) can ask for what no
force gives: when the imposed joint accelerations drive two pads into the
box from opposite sides, the internal squeeze moves nothing, so no finite
force keeps both normal rows from closing.  With ``fallback`` (the default)
such a call takes the nearest joint acceleration that some admissible force
can realise (the paper's §4.5 consistency step, extended from the no-slip
rows to every variant's normal rows and friction cone) and solves again;
``diagnostics.fallback`` says so.
"""

from __future__ import annotations

import time

import numpy as np

from servoloop.core_cy.inverse_dynamics._cid import STATUS, VARIANT_CODES, CIDCore
from servoloop.core_cy.inverse_dynamics.errors import InfeasibleError
from servoloop.core_cy.inverse_dynamics.result import Diagnostics, Result
from servoloop.core_cy.inverse_dynamics.workspace import VARIANTS, _mu, core_diagnostics

__all__ = ["SystemInverseDynamics"]


class SystemInverseDynamics:
    """The compiled contact ID over caller-assembled matrices.

    Parameters
    ----------
    nv : int, DoF of the system (>= 6); the first 6 are unactuated
    k : int, number of contacts (rows of N, S, T)
    mu, variant, dt, baumgarte, margin, armature, stage2 : as
        :class:`~core_cy.inverse_dynamics.ContactInverseDynamics`
        (``armature`` (nv - 6,) is added to M's actuated diagonal)
    fallback : bool
        On a call the kernels cannot answer, take the nearest feasible joint
        acceleration and solve again (module doc); False: raise InfeasibleError.
    """

    def __init__(self, nv: int, k: int, mu=0.8, variant: str = "qp", *, dt: float = 1e-3,
                 baumgarte: float = 0.2, margin: float = 0.005, armature=0.0, stage2: bool = True,
                 fallback: bool = True):
        if variant not in VARIANT_CODES:
            raise ValueError(f"variant: {variant!r}; choose one of {', '.join(VARIANTS)}")
        if int(nv) < 6:
            raise ValueError(f"nv: the system needs its 6 unactuated DoF first, got nv = {nv}")
        if not dt > 0:
            raise ValueError(f"dt must be > 0 s, got {dt}")
        if not 0.0 <= baumgarte <= 1.0:
            raise ValueError(f"baumgarte must be in [0, 1], got {baumgarte}")
        mu_a = _mu(mu, int(k))
        if variant == "lcp_coulomb" and not np.all(np.isfinite(mu_a)):
            raise ValueError(f"mu: lcp_coulomb needs finite friction coefficients, got {mu_a} "
                             "(lcp_noslip is the mu = inf model)")
        self.nv, self.k, self.variant, self.dt, self.stage2 = int(nv), int(k), variant, float(dt), bool(stage2)
        self.baumgarte, self.margin, self.fallback = float(baumgarte), float(margin), bool(fallback)
        arm = np.broadcast_to(np.asarray(armature, dtype=float), (self.nv - 6,)).copy()
        self._armature = arm
        self._core = CIDCore(None, None, np.zeros(self.k, dtype=np.intc), np.zeros((self.k, 3)),
                             np.zeros(self.k), mu_a, arm, np.eye(3), np.zeros(3),
                             VARIANT_CODES[variant], float(dt), float(baumgarte), float(margin),
                             nv_external=self.nv)
        self._mu = mu_a

    @property
    def mu(self) -> np.ndarray:
        return self._mu.copy()

    @mu.setter
    def mu(self, value) -> None:
        mu_a = _mu(value, self.k)
        if self.variant == "lcp_coulomb" and not np.all(np.isfinite(mu_a)):
            raise ValueError(f"mu: lcp_coulomb needs finite friction coefficients, got {mu_a}")
        self._mu = mu_a
        self._core.set_mu(mu_a)

    def solve(self, M, h, N, S, T, gap, v, qdd_des) -> Result:
        """Torques (nv - 6,), contact components (k, 3) and qdd (nv,) as a :class:`Result`.

        Raises
        ------
        InfeasibleError when the solver finds no answer; ValueError on a shape or a NaN.
        """
        t0 = time.perf_counter()
        n, k = self.nv, self.k
        args = [_f64(M, "M", (n, n)), _f64(h, "h", (n,)), _f64(N, "N", (k, n)), _f64(S, "S", (k, n)),
                _f64(T, "T", (k, n)), _f64(gap, "gap", (k,)), _f64(v, "v", (n,)),
                _f64(qdd_des, "qdd_des", (n,))]
        c = self._core
        rc = c.run_rows(*args, int(self.stage2))
        fell_back = False
        if rc != 0 and self.fallback:
            first = rc
            near = self.nearest_feasible(*args)
            if near is None:
                rc = first
            else:
                fell_back = True
                args[7] = near[0]
                rc = c.run_rows(*args, int(self.stage2))
                if rc != 0:         # the kernels still refuse (tolerances): the QP's own answer
                    return self._from_qp(args, *near, t0)
        if rc != 0:
            raise InfeasibleError(f"contact inverse dynamics ({self.variant}): {STATUS[rc]}",
                                  float(max(c.violation, c.residual)))
        qdd = c.qdd_a.copy()
        f_local = c.flocal_a.copy()
        scale = max(float(np.abs(args[1][:6]).max()), 1e-12)
        d = core_diagnostics(c, self.variant, f_local[:, 2] > 1e-9 * scale)
        d.fallback = d.fallback or fell_back
        d.solve_time = time.perf_counter() - t0
        return Result(c.tau_a.copy(), f_local, qdd, args[6] + self.dt * qdd, self.variant, d)

    def nearest_feasible(self, M, h, N, S, T, gap, v, qdd_des):
        """The joint acceleration nearest ``qdd_des[6:]`` that some admissible force realises.

        min |a_q - a_q_des|^2 (+ 1e-9 |a_b|^2 + 1e-9 |f|^2 to make it strictly convex) over
        the accelerations a = (a_b, a_q) and the forces f = (f_t1, f_t2, f_n) of the contacts
        within the margin, subject to the unactuated rows' dynamics
        ``M_b a + h_b = (J^T f)_b``, no approach past the gap ``N (v + dt a) + phi / dt >= 0``,
        ``f_n >= 0`` and the 4-edge pyramid ``|f_t1| +- |f_t2| <= mu f_n`` (no-slip:
        ``S (v + dt a) = T (v + dt a) = 0`` instead).  Complementarity is dropped (the LCP run
        afterwards restores it).  Returns (qdd (nv,), a (nv,), f (k, 3)) or None when even
        this has no solution.
        """
        from servoloop.core_cy.inverse_dynamics.qp_backend import qp_solve

        n, dt = self.nv, self.dt
        keep = np.flatnonzero(gap < self.margin)
        kk = keep.size
        Nk, Sk, Tk = N[keep], S[keep], T[keep]
        phi = np.where(gap[keep] < 0.0, self.baumgarte * gap[keep], gap[keep])
        nx = n + 3 * kk
        P = np.full(nx, 1e-9)
        P[6:n] = 1.0
        q = np.zeros(nx)
        q[6:n] = -qdd_des[6:]
        # J^T f, f = (f_t1, f_t2, f_n) per contact, as a (n, 3 kk) block
        JT = np.empty((n, 3 * kk))
        JT[:, 0::3], JT[:, 1::3], JT[:, 2::3] = Sk.T, Tk.T, Nk.T
        Aeq = [np.hstack([M[:6], -JT[:6]])]
        beq = [-h[:6]]
        G, hg = [], []
        G.append(np.hstack([-dt * Nk, np.zeros((kk, 3 * kk))]))     # -N dt a <= N v + phi / dt
        hg.append(Nk @ v + phi / dt)
        noslip = self.variant == "lcp_noslip"
        if noslip:
            Aeq.append(np.hstack([np.vstack([Sk, Tk]), np.zeros((2 * kk, 3 * kk))]))
            beq.append(-np.concatenate([Sk @ v, Tk @ v]) / dt)
        for j in range(kk):
            col = n + 3 * j
            row = np.zeros(nx)
            row[col + 2] = -1.0                                        # f_n >= 0
            G.append(row[None])
            hg.append(np.zeros(1))
            mu = float(self._mu[keep[j]])
            if noslip or not np.isfinite(mu):
                continue
            for s1 in (1.0, -1.0):
                for s2 in (1.0, -1.0):
                    row = np.zeros(nx)
                    row[col], row[col + 1], row[col + 2] = s1, s2, -mu
                    G.append(row[None])
                    hg.append(np.zeros(1))
        try:
            x = qp_solve(np.diag(P), q, np.vstack(G), np.concatenate(hg), np.vstack(Aeq),
                         np.concatenate(beq), solver="clarabel",
                         what="nearest feasible joint acceleration (closed chain)")
        except InfeasibleError:
            return None
        a = x[:n]
        f = np.zeros((self.k, 3))
        f[keep] = x[n:].reshape(kk, 3)
        qdd = np.asarray(qdd_des, dtype=float).copy()
        qdd[6:] = a[6:]
        return qdd, a, f

    def _from_qp(self, args, qdd, a, f, t0) -> Result:
        """The fallback QP's own answer: torques from the actuated rows of the dynamics."""
        M, h, N, S, T, _gap, v, _ = args
        Ma = M[6:].copy()
        Ma[:, 6:] += np.diag(self._armature)
        tau = Ma @ a + h[6:] - (S.T @ f[:, 0] + T.T @ f[:, 1] + N.T @ f[:, 2])[6:]
        scale = max(float(np.abs(h[:6]).max()), 1e-12)
        d = Diagnostics(iterations=-1, fallback=True, active=f[:, 2] > 1e-9 * scale)
        d.solve_time = time.perf_counter() - t0
        return Result(tau, f, a.copy(), v + self.dt * a, self.variant, d)


def _f64(x, name, shape):
    a = np.ascontiguousarray(x, dtype=float)
    if a.shape != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name}: contains NaN or inf")
    return a
