"""Seed 003, ID(t-1) / ID(t-2) at mu = inf: the *full* closed loop linearised on the stand.

:mod:`experiments.seed003_lag` gives the force map alone (``f_k = c + G f_{k-lag}``, the
state held).  Here the whole tick is linearised: the state ``x = (q, v, f_{k-1} .. f_{k-lag})``
(q in the tangent chart at the operating point: 18 numbers), the controller (the
experiment's joint PD ``qdd_des = KP_ID (q_ref - q) - KD_ID v`` and its rigid-body ID with
the fed-back forces, :func:`lagged_id_torques`, the very function ``run_case`` calls), the
plant one step, by central finite differences of that map.  The same for two loops that
stand: ``oracle`` (ID(t): the ID fed the forces the simulator gives on the step its torques
act in, the exact fixed point of the force map, internal forces kept where they were) and
``lcp_mu`` (the experiment's Coulomb LCP ID, BalanceCore at ``MU_INF``).

The stand: the quadruped settled as in ``run_case`` (0.2 s joint PD), then the reference
held at the planner's first stand target (base still, feet where they stand), the loop run
under the oracle until still; every loop is linearised at that one point (a fixed point of
all three: with ``f_{k-1} = f_k`` the lagged IDs' torques are the oracle's).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["CONTROLLERS", "StandLoop", "applied_forces", "lagged_id_torques", "mode_summary", "rocking_mode"]

#: the loops linearised: the two lagged IDs, the oracle ID(t) and the Coulomb LCP ID
CONTROLLERS = ("id_lag1", "id_lag2", "oracle", "lcp_mu")


def lagged_id_torques(robot, data, q, v, qdd, forces, pts, base: str = "dynamics") -> np.ndarray:
    """Joint torques (n,) [N m] of the rigid-body ID with given contact forces.

    ``tau = [M a + h - sum_i J_i^T f_i]_joints`` with ``a = (a_b, qdd_joints)``: M with the
    robot's armature, h the nonlinear effects, ``forces`` (k, 3) [N] world axes at the
    simulator's contact points ``pts`` (its ``ContactPoints``; a zero row is skipped),
    qdd (nv,) [rad/s^2, m/s^2], its joint rows the desired ones.

    base : "dynamics" (the paper's reduced form, digest §2: the base acceleration is what
        the given forces give, ``M_bb a_b = sum J_b^T f - h_b - M_bj qdd_j``, and its
        coupling ``M_jb a_b`` enters the torques) or "zero" (``a_b = qdd[:6]``, the
        experiment's form until issue 11's lag round: the base taken as not accelerating).
    """
    from servoloop import core_cy

    if base not in ("dynamics", "zero"):
        raise ValueError(f"lagged_id_torques base: {base!r}; choose dynamics or zero")
    model = robot.model
    M = np.array(core_cy.crba(model, data, q), dtype=float)
    M[6:, 6:] += np.diag(robot.armature)
    h = np.array(core_cy.nonlinear_effects(model, data, q, v), dtype=float)
    core_cy.forward_kinematics(model, data, q)
    ext = np.zeros(model.nv)                    # sum J^T f: the contacts' generalised force
    for i in range(len(pts)):
        if forces[i].any():
            J = robot.point_jacobian(q, int(pts.body[i]), pts.position[i], pts.radius[i])
            ext += J.T @ forces[i]
    a = np.array(qdd, dtype=float)
    if base == "dynamics":
        a[:6] = np.linalg.solve(M[:6, :6], ext[:6] - h[:6] - M[:6, 6:] @ a[6:])
    return (M[6:] @ a + h[6:] - ext[6:]).copy()


def applied_forces(robot, config, pts, q, v, v_next, recorded) -> np.ndarray:
    """The contact forces (k, 3) [N], world axes, the compliant simulator applied over a step.

    The simulator's step is linearly implicit in the contact's damping (and, at mu = inf,
    in the tangential spring): ``(M + dt J^T D J) dv = dt (tau - h + J^T f)``, f the law's
    force at the step's start, which is what it reports (``contact_forces``).  The force
    that moved the robot over the step is ``f - D J dv``: the damper's force at the step's
    end velocity and the spring's at its end position.  ``D`` per loaded point is
    diag(c_t + dt k_t, c_t + dt k_t, c(depth)) (the law's anchored spring-damper and its
    damping ramp), J the point's Jacobian at q.  Returned as they are: on rigid ground (its
    forces are the step's impulses over dt), with ``config`` None, and under the stick-slip
    law (no anchored spring; its implicit friction slope is not modelled here).

    q (nq,), v (nv,) the state at the step's start, v_next (nv,) at its end, recorded
    (k, 3) the simulator's ``contact_forces`` of that step; robot after nothing (its
    kinematics are set here at q).
    """
    from servoloop.core_cy.contact.laws import damping_ramp

    law = getattr(config, "law", None)
    if config is None or config.mode != "compliant" or law.tangent_stiffness <= 0.0:
        return recorded
    out = np.array(recorded, dtype=float)
    n = config.ground.unit_normal()
    robot.kinematics(q)
    dv = np.asarray(v_next, dtype=float) - np.asarray(v, dtype=float)
    d_t = law.tangent_damping + config.dt * law.tangent_stiffness
    for i in np.flatnonzero(out.any(axis=1)):
        b = int(pts.body[i])
        depth = float(pts.radius[i] - n @ (robot.point_world(b, pts.position[i]) - config.ground.point))
        dvc = robot.point_jacobian(q, b, pts.position[i], pts.radius[i]) @ dv
        dvn = n @ dvc
        d_n = float(damping_ramp(law, depth)[0]) if out[i] @ n > 0.0 else 0.0
        out[i] -= d_n * dvn * n + d_t * (dvc - dvn * n)
    return out


class StandLoop:
    """The experiment's tick on the four-foot stand, as a map of the state.

    Parameters
    ----------
    ground : "rigid" or "compliant"; mu : the terrain's friction (math.inf allowed)
    settle : ticks of the oracle loop run to reach the operating point
    base : the lagged IDs' base acceleration, see :func:`lagged_id_torques`
    settle_with : the loop run to the operating point (the oracle assumes rigid stuck feet:
        on compliant ground settle with a lagged ID)
    forces : the forces fed back, "applied" (over the step, :func:`applied_forces`) or
        "recorded" (the simulator's ``contact_forces``); default ``seed003.LAG_FORCES``
    step_s : the simulator's step and control tick [s] (default ``seed003.STEP_S``); ``settle``
        and ``lift_ticks`` are in ticks of it
    lift : feet (indices into ``robot.feet``) whose reference is raised by ``LIFT_M`` after
        the stand is settled, and ``lift_ticks`` ticks run with ``settle_with`` from there:
        (1, 2) leaves the diagonal stance lf + rh, the trot's two-foot phase.  That is no
        fixed point (the trunk tips about the stance diagonal): :meth:`jacobian` is then the
        tick's map linearised at that state, frozen in time
    """

    #: the lifted feet's reference height above where they stood [m] (the gait's 1.5 cm step)
    LIFT_M = 0.015

    def __init__(self, ground: str = "rigid", mu: float = math.inf, settle: int = 400,
                 base: str = "dynamics", settle_with: str = "oracle", forces: str | None = None,
                 lift: tuple = (), lift_ticks: int = 40, step_s: float | None = None) -> None:
        from servoloop import core_cy
        from servoloop.controller.wholebody.robot import WholeBodyRobot
        from servoloop.controller.wholebody.trot_planner import TrotPlanner
        from servoloop.experiments import seed003
        from servoloop.experiments.closed_loop import TorquePlant, builtin_urdf
        from servoloop.experiments.gaits import stand_goals

        urdf = builtin_urdf("quadruped")
        self.robot = robot = WholeBodyRobot.from_urdf(urdf)
        q_stand = stand_goals(urdf, joint_names=list(robot.model.actuated_joint_names))
        self.plant = plant = TorquePlant(urdf, seed003._sim_config(
            ground, mu, step_s=seed003.STEP_S if step_s is None else step_s), q_stand)
        robot.armature[:] = plant.armature
        for _ in range(int(0.2 / plant.dt)):            # run_case's settling
            plant.step(20.0 * (q_stand - plant.q[7:]) - 0.15 * plant.v[6:])
        planner = TrotPlanner(robot, plant.q.copy(), q_stand, stand_time=0.3)
        tg = planner.update(0.0, plant.q, plant.v)
        robot.kinematics(plant.q)
        feet = np.array([robot.foot_position(f) for f in robot.feet])
        self.q_ref = seed003._Reference(robot, plant.q.copy()).solve(
            tg.base_position, tg.base_rotation, feet).copy()
        self.kp, self.kd = seed003.KP_ID, seed003.KD_ID
        self.pts = plant.sim.points
        self.data = core_cy.Data(robot.model)
        self.nv = robot.model.nv
        self.n_feet = len(robot.feet)             # the feet's points are the first rows
        self.mu_id = seed003.MU_INF if math.isinf(mu) else mu
        self._core = None
        self._ground = ground
        self.base = base
        self.forces = seed003.LAG_FORCES if forces is None else forces
        if self.forces not in ("applied", "recorded"):
            raise ValueError(f"StandLoop forces: {self.forces!r}; choose applied or recorded")
        f = plant.contact_forces.copy()
        x = (plant.q.copy(), plant.v.copy(), [f, f])
        for _ in range(settle):
            x = self.step(x, settle_with)
        if lift:
            feet = feet.copy()
            feet[list(lift), 2] += self.LIFT_M
            self.q_ref = seed003._Reference(robot, x[0].copy()).solve(x[0][:3], x[0][3:7], feet).copy()
            for _ in range(lift_ticks):
                x = self.step(x, settle_with)
        self.x0 = x

    # the tick ---------------------------------------------------------------
    def qdd(self, q, v) -> np.ndarray:
        """The experiment's joint feedback (nv,): base rows 0 (the contacts decide them)."""
        out = np.zeros(self.nv)
        out[6:] = self.kp * (self.q_ref - q[7:]) - self.kd * v[6:]
        return out

    def _plant_step(self, q, v, tau):
        sim = self.plant.sim
        sim.set_state(q, v)
        self.plant.step(tau)
        f = self.plant.contact_forces.copy()
        if self.forces == "applied":
            f = applied_forces(self.robot, sim.config, self.pts, q, v, sim.v, f)
        return sim.q.copy(), sim.v.copy(), f

    def _tau(self, q, v, f):
        return lagged_id_torques(self.robot, self.data, q, v, self.qdd(q, v), f, self.pts, self.base)

    def step(self, x, controller: str):
        """One tick: x = (q (nq,), v (nv,), [f_{k-1}, f_{k-2}] each (k, 3) [N]) -> the next x."""
        q, v, hist = x
        if controller in ("id_lag1", "id_lag2"):
            tau = self._tau(q, v, hist[0 if controller == "id_lag1" else 1])
        elif controller == "oracle":
            tau = self._oracle(q, v, hist[0])
        elif controller == "lcp_mu":
            tau = self._lcp(q, v)
        else:
            raise ValueError(f"StandLoop controller: {controller!r}; choose one of {', '.join(CONTROLLERS)}")
        q1, v1, f1 = self._plant_step(q, v, tau)
        return q1, v1, [f1, hist[0]]

    def _oracle(self, q, v, f_prev):
        """ID(t): the torques whose own step gives the forces the ID used.  At stuck contacts
        the simulator's forces are affine in the fed-back ones (slope G, checked against the
        simulator to 1e-9 N): one trial step and a least-change solve of ``f = c + G f``
        (``I - G`` is singular on the internal forces: those stay as they were)."""
        from servoloop.experiments.seed003_lag import force_loop_matrix

        nf = self.n_feet
        _, _, f_try = self._plant_step(q, v, self._tau(q, v, f_prev))
        G = force_loop_matrix(self.robot, q, base=self.base)
        r = (f_try[:nf] - f_prev[:nf]).reshape(-1)            # = (G - I) f_prev + c
        df = np.linalg.lstsq(np.eye(3 * nf) - G, r, rcond=1e-9)[0]
        f = f_prev.copy()
        f[:nf] += df.reshape(nf, 3)
        return self._tau(q, v, f)

    def _lcp(self, q, v):
        from servoloop.controller.wholebody.balance import BalanceCore

        if self._core is None:
            self._core = BalanceCore(self.robot, self.plant.dt, "lcp_coulomb", self.mu_id,
                                     plane="world" if self._ground == "rigid" else "stance",
                                     noslip_fallback=False)
        return self._core.torques(q, v, self.qdd(q, v), np.ones(self.n_feet, dtype=bool)).copy()

    # the linearisation ------------------------------------------------------
    def _pack(self, x, lag):
        """x -> the tangent vector at x0: dq (nv,) (chart q0 (+) dq), v, the lag forces."""
        q, v, hist = x
        nf = self.n_feet
        dq = self._chart_inv(q)
        return np.concatenate([dq, v] + [hist[i][:nf].reshape(-1) for i in range(lag)])

    def _unpack(self, z, lag):
        from servoloop import core_cy

        nv, nf = self.nv, self.n_feet
        q = np.array(core_cy.integrate(self.robot.model, self.x0[0], z[:nv]))
        hist = [h.copy() for h in self.x0[2]]
        for i in range(lag):
            hist[i][:nf] = z[2 * nv + 3 * nf * i: 2 * nv + 3 * nf * (i + 1)].reshape(nf, 3)
        return q, z[nv:2 * nv].copy(), hist

    def _chart_inv(self, q):
        """dq (nv,) with q0 (+) dq = q, to first order (the chart's Jacobian, once)."""
        from servoloop import core_cy

        if getattr(self, "_C", None) is None:
            eps, q0 = 1e-7, self.x0[0]
            self._C = np.column_stack([
                (np.array(core_cy.integrate(self.robot.model, q0, e * eps))
                 - np.array(core_cy.integrate(self.robot.model, q0, -e * eps))) / (2 * eps)
                for e in np.eye(self.nv)])
            self._C_pinv = np.linalg.pinv(self._C)
        return self._C_pinv @ (q - self.x0[0])

    def jacobian(self, controller: str, eps: float = 1e-6) -> np.ndarray:
        """A = dx_{k+1} / dx_k at the operating point, central differences.

        State: dq (18), v (18), then for ``id_lag1`` f_{k-1} and ``id_lag2`` f_{k-1}, f_{k-2}
        (the feet's points, 3 each [N]); the oracle's f_{k-1} only carries the internal forces
        it keeps; ``lcp_mu`` has no force state.  Returns (m, m).
        """
        lag = {"id_lag1": 1, "id_lag2": 2, "oracle": 1}.get(controller, 0)
        z0 = self._pack(self.x0, lag)
        cols = []
        for j in range(len(z0)):
            s = 1.0 if j < 2 * self.nv else 1e3      # forces [N] vs rad, m/s: step of like size
            e = np.zeros(len(z0))
            e[j] = eps * s
            if controller == "lcp_mu":
                self._core = None                   # no warm start carried between the probes
            zp = self._pack(self.step(self._unpack(z0 + e, lag), controller), lag)
            if controller == "lcp_mu":
                self._core = None
            zm = self._pack(self.step(self._unpack(z0 - e, lag), controller), lag)
            cols.append((zp - zm) / (2 * eps * s))
        return np.column_stack(cols)

    def residual(self, controller: str) -> float:
        """max |(dq, v)_{k+1} - (dq, v)_k| at the operating point: ~0 at a fixed point of the
        motion.  The forces are left out: with four stuck feet the internal forces drift
        (the oracle's by ~0.008 N per tick: the joint feedback's 0.2 mrad residual asks
        what stuck feet cannot do), a neutral direction."""
        self._core = None
        z1 = self._pack(self.step(self.x0, controller), 0)
        return float(np.abs(z1 - self._pack(self.x0, 0)).max())


def mode_summary(A: np.ndarray, nv: int, n_feet: int, joint_names, tol: float = 1e-6) -> dict:
    """The largest-|eigenvalue| mode of A that is not a neutral internal-force mode.

    Eigenvalues within ``tol`` of 1 whose eigenvectors have no velocity (|v| below 1e-6
    of the vector) are neutral: internal forces fed back unchanged, or a stuck foot's
    position offset nothing restores; counted in ``neutral``.
    Returns {"rho", "eig", "neutral", "v" (nv,), "forces" (n_feet, 3) of f_{k-1} or None,
    "joints" the three joints with the largest |v| component, their names}.
    """
    w, V = np.linalg.eig(A)
    moving = np.linalg.norm(V[nv:2 * nv], axis=0) > 1e-6 * np.linalg.norm(V, axis=0)
    neutral = int(np.sum((np.abs(w - 1.0) < tol) & ~moving))
    cand = np.flatnonzero(moving)
    i = cand[np.argmax(np.abs(w[cand]))]
    vec = V[:, i] / V[np.argmax(np.abs(V[:, i])), i]
    vel = vec[nv:2 * nv]
    vel = vel / np.abs(vel).max()
    forces = vec[2 * nv:2 * nv + 3 * n_feet].reshape(n_feet, 3) if len(vec) > 2 * nv else None
    order = np.argsort(-np.abs(vel[6:].real))[:3]
    return {"rho": float(np.abs(w[i])), "eig": complex(w[i]), "neutral": neutral, "v": vel,
            "forces": forces, "joints": [(joint_names[j], float(np.abs(vel[6 + j]))) for j in order]}


def rocking_mode(A: np.ndarray, nv: int, step_s: float) -> dict:
    """The slowest-decaying oscillating (complex) mode of A that moves: the stance's rocking.

    On the compliant stand that is the trunk pitching (with its forward sway) over ~140-160
    ticks; in the diagonal stance rolling about the diagonal, the load swinging between the
    two feet (the real tip mode, which every controller has, is left out).  A lagged ID's
    force feedback sets its damping.  Returns {"eig", "rho" (per tick), "per_ms" (its decay
    per millisecond), "tau_ms" (decay time [ms]), "period_ms", "base_v" (6,) the base's
    |velocity| in the mode, largest 1}.
    """
    w, V = np.linalg.eig(A)
    moving = np.linalg.norm(V[nv:2 * nv], axis=0) > 1e-6 * np.linalg.norm(V, axis=0)
    # oscillating: a period under 1e5 ticks (a neutral pair split by rounding has ~1e9)
    cand = np.flatnonzero(moving & (np.abs(np.angle(w)) > 2.0 * math.pi * 1e-5))
    i = cand[np.argmax(np.abs(w[cand]))]
    rho = float(np.abs(w[i]))
    ms = 1e-3 / step_s                                 # ticks per millisecond
    vb = np.abs(V[nv:nv + 6, i])
    return {"eig": complex(w[i]), "rho": rho, "per_ms": rho ** ms, "tau_ms": -1.0 / (ms * math.log(rho)),
            "period_ms": 2.0 * math.pi / abs(np.angle(w[i])) / ms, "base_v": vb / vb.max()}
