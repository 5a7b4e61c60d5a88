"""Test oracle: the whole-body balance tick in NumPy, as it ran before :mod:`._balance`.

``controller/wholebody/balance.py``'s ``BalanceCore`` up to issue 11 (commit
0b38359), kept so the compiled tick can be compared with it number for
number (tests/unit/controller/test_balance_compiled.py).  Not used by the
daemon.  Since issue 11's no-slip split (``force_split``) it shares the ``lcp_noslip``
answer's forces the same way, and the ``lcp_coulomb`` answer's sticking ones inside the cone (point feet)
(:meth:`ReferenceBalanceCore._split`; weights in
``liftoff_weights``, which the twin copies from the core each tick).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg.lapack import dposv as _dposv

from servoloop.controller.wholebody.balance import Targets
from servoloop.controller.wholebody.robot import quat_to_matrix, rotation_log


def posture_scale(robot, q, stance, on=True):
    """The factor on ``w_posture`` per controller joint (``Gains.swing_posture``): in a swing
    leg (moves a swing foot, no stance foot) ``min(1, |J_c|)``, else 1."""
    cols = 6 + np.asarray(robot.idx)
    out = np.ones(len(cols))
    if not on:
        return out
    swing = np.zeros(robot.model.nv)
    touched = np.zeros(robot.model.nv, dtype=bool)
    for i, foot in enumerate(robot.feet):
        if stance[i]:
            for p in foot.points:
                touched |= np.any(robot.point_jacobian(q, foot.body, p, foot.radius) != 0.0, axis=0)
        else:
            J = robot.point_jacobian(q, foot.body, foot.center, foot.radius)
            swing = np.maximum(swing, np.einsum("rc,rc->c", J, J))
    for k, c in enumerate(cols):
        if swing[c] > 0.0 and not touched[c]:
            out[k] = math.sqrt(min(1.0, swing[c]))
    return out

__all__ = ["ReferenceBalanceCore"]


class ReferenceBalanceCore:
    """The NumPy whole-body tick (``BalanceCore`` before it was compiled), unchanged.

    Parameters
    ----------
    robot : WholeBodyRobot
    dt : float, control period [s] (the ID spreads impulses over it)
    variant : "lcp_coulomb" | "qp" | "lcp_noslip"
    mu : float, friction coefficient the ID assumes (``inf``: no friction limit)
    gains : Gains
    plane : "stance" (default) or "world".  The ID's stabilised contact rows ask an open
        gap ``phi`` to close within the step (``n^T v+ >= -phi / dt``): 0.1 mm of base
        height error would ask for 0.1 m/s of approach and a huge acceleration.  With
        "stance" the ground plane passes through the highest stance foot, the
        Baumgarte term is off and the base twist given to the ID is the one that keeps
        the stance feet still, so the declared stance feet are in contact, at rest,
        whatever the estimate's error or the ground's compliance; "world" is the plane z = 0 with the simulator's
        stabilisation (the true state, as in the seed 003 experiment).
    """

    def __init__(self, robot, dt: float, variant: str = "lcp_coulomb",
                 mu: float = 0.8, gains=None, plane: str = "stance") -> None:
        from servoloop.core_cy.inverse_dynamics import WarmStart

        self.robot = robot
        self.dt = float(dt)
        #: (p,) bool, the feet's sole points (the stance plane; the test copies the core's)
        self.sole = np.zeros(sum(len(f.points) for f in robot.feet), dtype=bool)
        self.variant = variant
        self.mu = float(mu)
        self.gains = gains
        nv = robot.model.nv
        self.q = robot.model.neutral().copy()
        self.v = np.zeros(nv)
        self.qdd = np.zeros(nv)
        self.tau = np.zeros(robot.n)          # controller joint order
        self.forces = np.zeros((0, 3))
        self.failures = 0
        self.last_error = ""
        self.liftoff_weights = np.ones(len(robot.feet))
        if plane not in ("stance", "world"):
            raise ValueError(f"BalanceCore.plane: {plane!r}; choose stance or world")
        self.plane = plane
        self._warm = WarmStart()
        self._warm_key = None
        # step 2 by its normal equations H qdd = g (the same minimiser as the stacked least
        # squares): the base and posture rows give H's constant part and make it positive
        # definite when the controller's joints are all of the model's (else: lstsq)
        n = robot.n
        self._normal = n == nv - 6 and len(set(np.asarray(robot.idx).tolist())) == n
        self._H0 = np.zeros((nv, nv))
        self._H = np.zeros((nv, nv))
        self._g = np.zeros(nv)
        npts = sum(len(f.points) for f in robot.feet) + len(robot.feet)
        self._J = np.zeros((npts * 3, nv))      # weighted foot rows of one tick
        self._Js = np.zeros((npts * 3, nv))     # stance points' Jacobians of that tick
        self._Js_for = (None, 0, b"")           # (the q they were made at, rows, stance)
        self._a = np.zeros(npts * 3)
        self._pose_cols = 6 + np.asarray(robot.idx, dtype=np.intp)
        self._q_cols = self._pose_cols + 1      # the same joints in q (the quaternion's 4th number)
        self._gains_key = None
        # the contact ID: one workspace per stance set, solved in place
        self._ws: dict = {}
        self._tau_a = np.zeros(nv - 6)

    # -- step 1-2: accelerations ------------------------------------------
    def accelerations(self, q, v, tg: Targets) -> np.ndarray:
        """Desired ``qdd`` (nv,) of the tasks at state ``q`` (nq,), ``v`` (nv,)."""
        r, g = self.robot, self.gains
        r.kinematics(q)
        R = quat_to_matrix(q[3:7])
        v_lin_w = R @ v[:3]
        w_b = v[3:6]
        a_lin_w = g.base_kp * (tg.base_position - q[:3]) + g.base_kd * (tg.base_velocity - v_lin_w)
        a_ang_w = g.rot_kp * rotation_log(tg.base_rotation @ R.T) - g.rot_kd * (R @ w_b)
        if self._normal:
            return self._accelerations_normal(q, v, tg, R, w_b, a_lin_w, a_ang_w)
        return self._accelerations_lstsq(q, v, tg, R, w_b, a_lin_w, a_ang_w)

    def _accelerations_normal(self, q, v, tg, R, w_b, a_lin_w, a_ang_w) -> np.ndarray:
        """Step 2 through ``H qdd = g`` in preallocated arrays (see the module docstring)."""
        r, g = self.robot, self.gains
        key = (g.w_base, g.w_posture)
        if key != self._gains_key:          # gains are settable over the socket
            self._gains_key = key
            H0 = self._H0
            H0[:] = 0.0
            H0[range(6), range(6)] = g.w_base ** 2
            H0[self._pose_cols, self._pose_cols] = g.w_posture ** 2
        H, rhs = self._H, self._g
        wb2, wp2 = g.w_base ** 2, g.w_posture ** 2
        rhs[:3] = R.T @ a_lin_w
        rhs[:3] -= _cross(w_b, v[:3])
        rhs[3:6] = R.T @ a_ang_w
        rhs[:6] *= wb2
        cols = self._pose_cols
        Jw, aw, Js = self._J, self._a, self._Js
        m = ms = 0
        for i, foot in enumerate(r.feet):
            if tg.stance[i]:
                for p in foot.points:
                    J = r.point_jacobian(q, foot.body, p, foot.radius)
                    Js[ms:ms + 3] = J         # torques() needs the same rows at the same q
                    ms += 3
                    np.multiply(J, g.w_contact, out=Jw[m:m + 3])
                    aw[m:m + 3] = (-g.w_contact * g.contact_kd) * (J @ v)
                    m += 3
            else:
                J = r.point_jacobian(q, foot.body, foot.center, foot.radius)
                x = r.foot_position(foot)
                a = (tg.swing_acceleration[i] + g.swing_kp * (tg.swing_position[i] - x)
                     + g.swing_kd * (tg.swing_velocity[i] - J @ v))
                np.multiply(J, g.w_swing, out=Jw[m:m + 3])
                aw[m:m + 3] = g.w_swing * a
                m += 3
        self._Js_for = (q, ms, tg.stance.tobytes())
        # posture weights: w_posture^2, in a swing leg times min(1, |J_c|^2) (Gains.swing_posture)
        wp = wp2 * posture_scale(r, q, tg.stance, g.swing_posture) ** 2
        rhs[cols] = wp * (g.posture_kp * (tg.posture - q[self._q_cols]) - g.posture_kd * v[cols])
        Jm = Jw[:m]
        np.matmul(Jm.T, Jm, out=H)
        H += self._H0
        H[cols, cols] += wp - wp2
        rhs += Jm.T @ aw[:m]
        _, x, info = _dposv(H, rhs)         # Cholesky (LAPACK): H is symmetric positive definite
        if info != 0:
            x = np.linalg.lstsq(H, rhs, rcond=None)[0]
        self.qdd[:] = x
        return self.qdd

    def _accelerations_lstsq(self, q, v, tg, R, w_b, a_lin_w, a_ang_w) -> np.ndarray:
        """Step 2 as a stacked least squares (controller joints fewer than the model's)."""
        r, g = self.robot, self.gains
        nv = r.model.nv
        rows, rhs = [], []
        # base: body-frame free-flyer acceleration (classical accel minus w x v)
        Jb = np.zeros((6, nv))
        Jb[:, :6] = np.eye(6)
        rows.append(g.w_base * Jb)
        rhs.append(g.w_base * np.concatenate([R.T @ a_lin_w - np.cross(w_b, v[:3]), R.T @ a_ang_w]))
        for i, foot in enumerate(r.feet):
            if tg.stance[i]:
                for p in foot.points:
                    J = r.point_jacobian(q, foot.body, p, foot.radius)
                    rows.append(g.w_contact * J)
                    rhs.append(g.w_contact * (-g.contact_kd * (J @ v)))
            else:
                J = r.point_jacobian(q, foot.body, foot.center, foot.radius)
                x = r.foot_position(foot)
                a = (tg.swing_acceleration[i] + g.swing_kp * (tg.swing_position[i] - x)
                     + g.swing_kd * (tg.swing_velocity[i] - J @ v))
                rows.append(g.w_swing * J)
                rhs.append(g.w_swing * a)
        Jp = np.zeros((r.n, nv))
        Jp[np.arange(r.n), 6 + r.idx] = 1.0
        qj, vj = q[7 + r.idx], v[6 + r.idx]
        w = g.w_posture * posture_scale(r, q, tg.stance, g.swing_posture)
        rows.append(w[:, None] * Jp)
        rhs.append(w * (g.posture_kp * (tg.posture - qj) - g.posture_kd * vj))
        A = np.vstack(rows)
        b = np.concatenate(rhs)
        self.qdd[:] = np.linalg.lstsq(A, b, rcond=None)[0]
        return self.qdd

    # -- step 3: torques --------------------------------------------------
    def torques(self, q, v, qdd, stance) -> np.ndarray:
        """Joint torques (n,) [N m] realising the joint part of ``qdd`` with the stance feet.

        On a solver failure the previous torques are kept (counted in :attr:`failures`).
        """
        r = self.robot
        key = tuple(np.asarray(stance, dtype=bool).tolist())
        if key != self._warm_key:       # the warm start is per contact list
            self._warm.active = []
            self._warm_key = key
        entry = self._ws.get(key)
        if entry is None:
            # the stance set's contact points, once (a trot cycles through a few sets)
            contacts = r.contact_subset(stance)
            entry = self._ws[key] = [contacts, None, np.zeros((len(contacts.names), 3)), self.mu]
        contacts = entry[0]
        extra = {}
        if self.plane == "stance" and np.any(stance):
            from servoloop.core_cy.sim.model import Ground

            r.kinematics(q)
            # the plane through the highest sole point of the stance feet (``sole``, the
            # compiled core's set_soles; a foot without one: its lowest point)
            top, k = -np.inf, 0
            for f, on in zip(r.feet, stance, strict=True):
                zs = [r.point_world(f.body, p)[2] for p in f.points]
                if on:
                    high = max([min(zs)] + [z for z, s in zip(zs, self.sole[k:k + len(zs)],
                                                              strict=True) if s])
                    top = max(top, high - f.radius)
                k += len(zs)
            # margin 1 mm: the soles are on (or through) the plane; points of a foot higher
            # than that (a box's top corners, a rolled foot's heel) take no force
            extra = {"ground": Ground(point=(0.0, 0.0, float(top))), "baumgarte": 0.0,
                     "margin": 1e-3}
            # the nearest velocity that keeps the stance feet still: a foot sinking into
            # soft ground, legs splaying or an estimate's velocity error must not read as an
            # impact the contacts stop within one tick
            q_js, ms, st = self._Js_for
            if q_js is q and ms and st == np.asarray(stance).tobytes():
                J = self._Js[:ms]       # made by accelerations() this tick, same q and stance
            else:
                J = np.vstack([r.point_jacobian(q, f.body, p, f.radius)
                               for f, on in zip(r.feet, stance, strict=True) if on for p in f.points])
            self._Js_for = (None, 0, b"")
            v = v - _row_space_part(J, v)
        try:
            if self.variant == "lcp_noslip":
                # its warm start (Alg. 2's active set) goes through the Result-making call
                from servoloop.core_cy.inverse_dynamics import solve

                res = solve(r.model, r.data, q, v, qdd, contacts, self.mu, self.variant, dt=self.dt,
                            armature=r.armature, warm=self._warm, **extra)
                self.tau[:] = res.tau[r.idx]
                self.forces = res.contact_forces
                if extra:
                    self._split(q, stance, np.array(res.tau))
                return self.tau
            ws = entry[1]
            if ws is None:
                from servoloop.core_cy.inverse_dynamics import ContactInverseDynamics

                # this core's own workspace for the stance set (mu and the plane set on it)
                ws = entry[1] = ContactInverseDynamics(r.model, contacts, self.mu, self.variant,
                                                       dt=self.dt, armature=r.armature, **extra)
                entry[3] = self.mu
            if entry[3] != self.mu:
                ws.mu = entry[3] = self.mu
            if "ground" in extra:
                ws.ground = extra["ground"]
            ws.solve_into(q, v, qdd, self._tau_a, entry[2])
        except Exception as exc:  # noqa: BLE001 - a failed solve must not stop the loop
            self.failures += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            if self.variant != "lcp_noslip":
                return self.tau
            # as the compiled core: the Coulomb LCP at MU_FALLBACK answers a failed no-slip solve
            from servoloop.controller.wholebody.balance import coulomb_fallback

            try:
                self.forces = coulomb_fallback(self.__dict__.setdefault("_fallback_ws", {}),
                                               np.asarray(stance, dtype=bool).tobytes(), r, contacts,
                                               self.dt, extra, q, v, qdd, self._tau_a)
            except Exception:  # noqa: BLE001
                return self.tau
            self.tau[:] = self._tau_a[r.idx]
            if extra:
                self._split(q, stance, self._tau_a.copy())
            return self.tau
        self.tau[:] = self._tau_a[r.idx]
        self.forces = entry[2]
        if (extra and self.variant == "lcp_coulomb" and getattr(self, "coulomb_split", True)
                and all(len(f.points) == 1 for f in r.feet)):
            # the Coulomb answer's sticking contacts shared too, inside the cone mu
            self._split(q, stance, self._tau_a.copy(), self.mu)
        return self.tau

    def _split(self, q, stance, tau_m, mu=None) -> None:
        """The answer (torques ``tau_m`` in model order, :attr:`forces`) shared among the
        stance feet by the least weighted norm (``force_split``); with ``mu`` (the Coulomb
        LCP's answer) only the contacts that stick (tangential force under ``mu`` f_n, or no
        load), inside the cone."""
        from servoloop.controller.wholebody.force_split import split_forces

        r = self.robot
        r.kinematics(q)
        pts = [(f, p, self.liftoff_weights[j]) for j, f in enumerate(r.feet) if stance[j]
               for p in f.points]
        if not pts:
            return
        J = np.vstack([r.point_jacobian(q, f.body, p, f.radius) for f, p, _ in pts])
        keep = None
        if mu is not None:
            f = self.forces
            sliding = [fz > 1e-9 and math.hypot(fx, fy) >= mu * (1.0 - 1e-6) * fz for fx, fy, fz in f]
            if all(sliding):
                return
            keep = np.array(sliding)
        new, delta = split_forces(J, self.forces, np.array([w for _, _, w in pts]), mu=mu, keep=keep)
        if delta.any():
            tau_m = tau_m - J[:, 6:].T @ delta.reshape(-1)
            self.tau[:] = tau_m[r.idx]
            self.forces = new

    def step(self, q, v, tg: Targets) -> np.ndarray:
        """One tick: joint torques (n,) [N m] for the targets (also in :attr:`tau`)."""
        qdd = self.accelerations(q, v, tg)
        return self.torques(q, v, qdd, tg.stance)


def _row_space_part(J: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``J^+ J v`` (nv,): the part of ``v`` that moves the rows of ``J`` (m, nv).

    Through ``J J^T`` (m, m) where the rows are independent (point feet on distinct
    legs); a projection never lengthens ``v``, so a result that does (dependent rows:
    several points of one flat foot) falls back to the SVD least squares.
    """
    Jv = J @ v
    if J.shape[0] <= J.shape[1]:
        _, y, info = _dposv(J @ J.T, Jv)     # Cholesky fails (info > 0) on dependent rows
        if info == 0:
            x = J.T @ y
            if x @ x <= (v @ v) * (1.0 + 1e-9) + 1e-30:
                return x
    return np.linalg.lstsq(J, Jv, rcond=None)[0]


def _cross(a, b) -> np.ndarray:
    """``a x b`` of two (3,) vectors (np.cross costs ~10 us of argument handling)."""
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])
