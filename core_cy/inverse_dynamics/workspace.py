"""The compiled contact inverse dynamics as a Model/Data-style workspace.

Create one :class:`ContactInverseDynamics` per (model, contact list,
variant) and call it every tick::

    cid = ContactInverseDynamics(model, contacts, mu=0.8, variant="qp", dt=1e-3,
                                 armature=0.0012)
    res = cid.solve(q, v, qdd_des)             # a Result (copies)
    cid.solve_into(q, v, qdd_des, tau, forces) # no allocation: fills tau (na,), forces (k, 3)

The kernels are :mod:`._cid` (Cython, nogil, every buffer allocated here
once); :func:`core_cy.inverse_dynamics.solve` keeps one workspace per
argument set, so the functional API runs the same code.
"""

from __future__ import annotations

import time

import numpy as np

from servoloop.core_cy.contact.laws import plane_frame
from servoloop.core_cy.dynamics._dynamics import Data, Model
from servoloop.core_cy.inverse_dynamics._cid import STATUS, VARIANT_CODES, CIDCore
from servoloop.core_cy.inverse_dynamics.errors import FloatingBaseError, InfeasibleError
from servoloop.core_cy.inverse_dynamics.problem import ContactSet, WarmStart
from servoloop.core_cy.inverse_dynamics.result import Diagnostics, Result
from servoloop.core_cy.sim.model import Ground

__all__ = ["ContactInverseDynamics", "VARIANTS"]

VARIANTS = ("qp", "lcp_noslip", "lcp_coulomb")


class ContactInverseDynamics:
    """Contact inverse dynamics (seed 003) for one model, contact list and variant.

    Parameters
    ----------
    model : :class:`core_cy.Model`, floating base (or fixed base: then the
        contacts take no force and tau is the classical ID)
    contacts : :class:`core_cy.sim.model.ContactPoints` or link names
        (point contacts at the link frames' origins)
    mu : float or (k,) friction coefficients (``inf`` drops the pyramid;
        ``lcp_noslip`` ignores it; ``lcp_coulomb`` needs finite ones)
    variant : "qp" | "lcp_noslip" | "lcp_coulomb"
    dt : float [s] the control step the impulses are spread over
    ground : :class:`core_cy.sim.model.Ground`, default the plane z = 0
    baumgarte : fraction of a penetration removed per step (as the simulator)
    margin : float [m]; contacts whose gap is not below it take no force
    armature : float or (n_joints,) [kg m^2] added to M's joint diagonal
    data : optional :class:`core_cy.Data` workspace (one is made otherwise)
    stage2 : bool, run the QP's Stage II (min-norm torque); default True

    Raises
    ------
    ContactFrameError, FloatingBaseError, ValueError naming the argument.
    """

    def __init__(self, model: Model, contacts, mu=0.8, variant: str = "qp", *,
                 dt: float = 1e-3, ground: Ground | None = None, baumgarte: float = 0.2,
                 margin: float = 0.005, armature=0.0, data: Data | None = None,
                 stage2: bool = True, require_floating_base: bool = False):
        if variant not in VARIANT_CODES:
            raise ValueError(f"variant: {variant!r}; choose one of {', '.join(VARIANTS)}")
        if require_floating_base and not model.floating_base:
            raise FloatingBaseError(f"inverse dynamics with contact: {model.source} was loaded "
                                    "with floating_base=False; load it with floating_base=True")
        if not dt > 0:
            raise ValueError(f"dt must be > 0 s, got {dt}")
        if not 0.0 <= baumgarte <= 1.0:
            raise ValueError(f"baumgarte must be in [0, 1], got {baumgarte}")
        cs = ContactSet.resolve(model, contacts)
        k = len(cs)
        mu_a = _mu(mu, k)
        if variant == "lcp_coulomb" and not np.all(np.isfinite(mu_a)):
            raise ValueError(f"mu: lcp_coulomb needs finite friction coefficients, got {mu_a} "
                             "(lcp_noslip is the mu = inf model)")
        na = model.nv - (6 if model.floating_base else 0)
        arm = np.broadcast_to(np.asarray(armature, dtype=float), (na,)).copy()
        ground = ground or Ground()
        normal = ground.unit_normal()
        self.model = model
        self.data = data if data is not None else Data(model)
        self.contacts = cs
        self.variant = variant
        self.dt = float(dt)
        self.stage2 = bool(stage2)
        self.frame = plane_frame(normal)
        self._ground = ground
        self._moved = None          # (x, y, z) when move_ground moved the plane since
        self._mu = mu_a
        self._core = CIDCore(model, self.data, cs.body.astype(np.intc), cs.position, cs.radius,
                             mu_a, arm, self.frame, np.asarray(ground.point, dtype=float),
                             VARIANT_CODES[variant], float(dt), float(baumgarte), float(margin))

    # ------------------------------------------------------------------ mu
    @property
    def mu(self) -> np.ndarray:
        return self._mu.copy()

    @mu.setter
    def mu(self, value) -> None:
        mu_a = _mu(value, len(self.contacts))
        if self.variant == "lcp_coulomb" and not np.all(np.isfinite(mu_a)):
            raise ValueError(f"mu: lcp_coulomb needs finite friction coefficients, got {mu_a}")
        self._mu = mu_a
        self._core.set_mu(mu_a)

    @property
    def ground(self) -> Ground:
        if self._moved is not None:     # moved by move_ground: the Ground made when asked
            self._ground = Ground(self._moved, self._ground.normal)
            self._moved = None
        return self._ground

    def move_ground(self, x: float, y: float, z: float) -> None:
        """The plane, its normal kept, through (x, y, z) [m]: the per-tick form of the
        :attr:`ground` setter (a balance controller's stance plane moves every tick, tilts
        never).  Makes no object and compares none: ~0.1 us, against 3-9 us for the setter
        with a new :class:`Ground` each tick."""
        self._core.set_plane_point(x, y, z)
        self._moved = (x, y, z)

    @ground.setter
    def ground(self, value: Ground | None) -> None:
        """The plane the contacts touch; cheap to change every tick (no rebuild)."""
        value = value or Ground()
        if value == self.ground:
            return
        if tuple(value.normal) != tuple(self._ground.normal):   # a plane's height changes per tick, its tilt rarely
            self.frame = plane_frame(value.unit_normal())
        self._ground = value
        self._core.set_ground(self.frame, np.asarray(value.point, dtype=float))

    @property
    def warm_active(self) -> list:
        """lcp_noslip: the contacts (caller's indices) of Alg. 2's last active set."""
        return self._core.get_warm()

    @warm_active.setter
    def warm_active(self, active) -> None:
        self._core.set_warm(list(active))

    # ------------------------------------------------------------------ solve
    def _check(self, q, v, qdd_des):
        m = self.model
        return (_arr(q, "q", (m.nq,)), _arr(v, "v", (m.nv,)),
                _arr(qdd_des, "qdd_des", (m.nv,)))

    def _run(self, q, v, qdd_des):
        rc = self._core.run(q, v, qdd_des, int(self.stage2))
        if rc != 0:
            c = self._core
            raise InfeasibleError(f"contact inverse dynamics ({self.variant}): {STATUS[rc]}",
                                  float(max(c.violation, c.residual)))

    def solve_into(self, q, v, qdd_des, tau, forces=None, qdd=None) -> None:
        """Solve and write tau (na,) [N m], forces (k, 3) world [N], qdd (nv,).

        No allocation when q, v, qdd_des are float64 C-contiguous arrays of
        the right sizes (they are not copied; shapes are checked).

        Raises
        ------
        InfeasibleError when the solver finds no answer (with ``residual``).
        """
        m = self.model
        if q.shape != (m.nq,) or v.shape != (m.nv,) or qdd_des.shape != (m.nv,):
            q, v, qdd_des = self._check(q, v, qdd_des)
        self._run(q, v, qdd_des)
        c = self._core
        tau[...] = c.tau_a
        if forces is not None:
            forces[...] = c.forces_a
        if qdd is not None:
            qdd[...] = c.qdd_a

    def solve(self, q, v, qdd_des, warm: WarmStart | None = None) -> Result:
        """Joint torques and contact forces that realise ``qdd_des``: a :class:`Result`.

        ``warm`` (lcp_noslip): Alg. 2 starts from ``warm.active`` and stores
        the new active set there (the workspace also keeps its own).
        """
        t0 = time.perf_counter()
        q, v, qdd_des = self._check(q, v, qdd_des)
        c = self._core
        if warm is not None:
            c.set_warm(warm.active)
        self._run(q, v, qdd_des)
        if warm is not None:
            warm.active = c.get_warm()
        qdd = c.qdd_a.copy()
        weight = self.model.total_mass * float(np.linalg.norm(self.model.gravity))
        d = core_diagnostics(c, self.variant, c.flocal_a[:, 2] > 1e-9 * weight)
        d.solve_time = time.perf_counter() - t0
        return Result(c.tau_a.copy(), c.forces_a.copy(), qdd, v + self.dt * qdd, self.variant, d)


def core_diagnostics(c: CIDCore, variant: str, active) -> Diagnostics:
    """The :class:`Diagnostics` of a compiled core's last solve (``active``: (k,) loaded contacts)."""
    return Diagnostics(
        iterations=int(c.iterations), residual=float(c.residual),
        complementarity=float(c.complementarity), cone_violation=float(c.cone_violation),
        penetration=float(c.penetration), regularization=float(c.regularization),
        fallback=bool(c.fallback), stage2=bool(c.stage2), nullity=int(c.nullity),
        tau_stage1=c.tau1_a.copy() if variant == "qp" else None,
        qdd_stage1=c.qdd1_a.copy() if variant == "qp" else None,
        active=active)


def _mu(mu, k: int) -> np.ndarray:
    try:
        a = np.broadcast_to(np.asarray(mu, dtype=float), (k,)).copy()
    except ValueError:
        raise ValueError(f"mu: expected a number or {k} friction coefficients (one per contact), "
                         f"got shape {np.shape(mu)}") from None
    if np.any(~(a >= 0)):
        raise ValueError(f"mu: friction coefficients must be >= 0 (inf allowed), got {a}")
    return a


def _arr(x, name, shape):
    a = np.ascontiguousarray(x, dtype=float)
    if a.shape != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name}: contains NaN or inf")
    return a
