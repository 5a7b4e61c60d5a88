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
"""

from __future__ import annotations

import time

import numpy as np

from servoloop.core_cy.inverse_dynamics._cid import STATUS, VARIANT_CODES, CIDCore
from servoloop.core_cy.inverse_dynamics.errors import InfeasibleError
from servoloop.core_cy.inverse_dynamics.result import Result
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
    """

    def __init__(self, nv: int, k: int, mu=0.8, variant: str = "qp", *, dt: float = 1e-3,
                 baumgarte: float = 0.2, margin: float = 0.005, armature=0.0, stage2: bool = True):
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
        arm = np.broadcast_to(np.asarray(armature, dtype=float), (self.nv - 6,)).copy()
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
        if rc != 0:
            raise InfeasibleError(f"contact inverse dynamics ({self.variant}): {STATUS[rc]}",
                                  float(max(c.violation, c.residual)))
        qdd = c.qdd_a.copy()
        f_local = c.flocal_a.copy()
        scale = max(float(np.abs(args[1][:6]).max()), 1e-12)
        d = core_diagnostics(c, self.variant, f_local[:, 2] > 1e-9 * scale)
        d.solve_time = time.perf_counter() - t0
        return Result(c.tau_a.copy(), f_local, qdd, args[6] + self.dt * qdd, self.variant, d)


def _f64(x, name, shape):
    a = np.ascontiguousarray(x, dtype=float)
    if a.shape != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name}: contains NaN or inf")
    return a
