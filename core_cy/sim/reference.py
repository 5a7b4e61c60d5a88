"""Slow reference simulator on Pinocchio (tests and prototyping only).

The same algorithm as the compiled step in ``core_cy/sim/_kernels.pyx``,
written plainly with ``pinocchio`` (a test dependency) so that the compiled
simulator has an independent implementation to agree with:

- compliant: contact forces from the law at every contact point, joint
  torques from the seed-000 servo model, ``M(q) a = tau - h(q, v, f_ext)``
  with M from the CRBA plus the servo armature; semi-implicit Euler or RK4
  on the configuration manifold (quaternion base, body-frame base twist:
  seed 002 erratum A5/A7);
- rigid: velocity-level time stepping, ``M (v+ - v) = dt (tau - h) + J^T lam``
  with lam from the boxed LCP (PGS, warm-started), Baumgarte-stabilised
  normal rows ``w_n = J_n v+ + gap/dt`` (gap < 0 scaled by ``baumgarte``).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from servoloop.core_cy.actuator import ServoModel
from servoloop.core_cy.actuator.reference import servo_torque_reference
from servoloop.core_cy.contact.laws import ContactLaw, contact_force, plane_frame
from servoloop.core_cy.contact.lcp import solve_lcp_pgs
from servoloop.core_cy.contact.reference import contact_damping
from servoloop.core_cy.sim.model import (
    ContactPoints,
    Ground,
    JointSettings,
    RigidSettings,
    simulator_servo_model,
)

__all__ = ["ReferenceSimulator", "servo_torque", "stop_torque"]


def _law(servo: ServoModel, q, qd, goal, torque_on):
    n = len(q)
    full = np.full(n, 1.0)
    return servo_torque_reference(
        np.zeros(n, dtype=int), torque_on, servo.kp_nm_per_rad * full, servo.kd_nm_s_per_rad * full,
        0.0 * full, servo.stall_torque_at_supply_nm * full, servo.back_emf_nm_s_per_rad * full,
        servo.stall_torque_at_supply_nm * full, goal, q, qd, 0.0 * full)


def _passive(servo: ServoModel, torque_on):
    return servo.viscous_nm_s_per_rad + np.where(torque_on, 0.0, servo.torque_off_damping_nm_s_per_rad)


def servo_torque(servo: ServoModel, joints: JointSettings, q, qd, goal, torque_on) -> np.ndarray:
    """The servo law's torque [N m] for joint angles q, rates qd, goals (n,): motor torque
    (0 with torque off) less the gearbox friction, its sgn regularised over sign_band."""
    sgn = np.clip(qd / joints.sign_band, -1.0, 1.0)
    motor, _ = _law(servo, q, qd, goal, torque_on)
    return motor - servo.coulomb_nm * sgn - _passive(servo, torque_on) * qd


def servo_damping(servo: ServoModel, joints: JointSettings, q, qd, goal, torque_on) -> np.ndarray:
    """-d tau / d qd (n,) of :func:`servo_torque` (implicit step)."""
    _, slope = _law(servo, q, qd, goal, torque_on)
    dc = np.where(np.abs(qd) < joints.sign_band, servo.coulomb_nm / joints.sign_band, 0.0)
    return -slope + dc + _passive(servo, torque_on)


def stop_torque(joints: JointSettings, lo, hi, q, qd) -> np.ndarray:
    """One-sided compliant joint-stop torque [N m] past the limits lo/hi (n,)."""
    k, d = joints.stop_stiffness, joints.stop_damping
    up = np.minimum(-k * (q - hi) - d * qd, 0.0)
    down = np.maximum(k * (lo - q) - d * qd, 0.0)
    return np.where(k > 0, np.where(q > hi, up, np.where(q < lo, down, 0.0)), 0.0)


def stop_damping(joints: JointSettings, lo, hi, q, qd) -> np.ndarray:
    """-d tau_stop / d qd (n,) where a stop is pushing."""
    return np.where(stop_torque(joints, lo, hi, q, qd) != 0.0, joints.stop_damping, 0.0)


class ReferenceSimulator:
    """Floating-base robot on a plane, stepped in NumPy/Pinocchio.

    q (nq,) and v (nv,) follow Pinocchio's free-flyer layout.
    """

    def __init__(self, urdf, points: ContactPoints, law: ContactLaw | None = None,
                 servo: ServoModel | None = None, ground: Ground | None = None,
                 mode: str = "compliant", integrator: str = "euler", dt: float = 1e-3,
                 rigid: RigidSettings | None = None, joints: JointSettings | None = None):
        self.model = pin.buildModelFromUrdf(str(urdf), pin.JointModelFreeFlyer())
        self.data = self.model.createData()
        self.points = points
        self.law = law or ContactLaw()
        if self.law.tangent_stiffness > 0.0:
            # the anchors are state the compiled simulator keeps; this reference has none
            raise ValueError("ReferenceSimulator: law.tangent_stiffness > 0 (the anchored tangential "
                             "spring) is only in the compiled Simulator")
        self.servo = servo or simulator_servo_model()
        self.joints = joints or JointSettings()
        self.ground = ground or Ground()
        self.mode, self.integrator, self.dt = mode, integrator, dt
        self.rigid = rigid or RigidSettings()
        self.n = self.model.nv - 6
        self.q_lo = np.array(self.model.lowerPositionLimit[7:])
        self.q_hi = np.array(self.model.upperPositionLimit[7:])
        self.normal = self.ground.unit_normal()
        self.plane_point = np.asarray(self.ground.point, dtype=float)
        self.R_contact = plane_frame(self.normal)
        self.q = pin.neutral(self.model)
        self.v = np.zeros(self.model.nv)
        self.forces = np.zeros((len(points), 3))   # world contact forces [N]
        self._lam = np.zeros(3 * len(points))
        self.lcp_stats = (0, 0.0, 0.0)

    # -- geometry ---------------------------------------------------------
    def _contacts(self, q, v):
        """Gaps (k,), contact points (k, 3) and their world velocities (k, 3)."""
        m, d = self.model, self.data
        pin.forwardKinematics(m, d, q, v)
        k = len(self.points)
        gaps, pts, vel = np.empty(k), np.empty((k, 3)), np.empty((k, 3))
        for i in range(k):
            jid = int(self.points.body[i]) + 1
            oMi = d.oMi[jid]
            centre = oMi.rotation @ self.points.position[i] + oMi.translation
            gaps[i] = self.normal @ (centre - self.plane_point) - self.points.radius[i]
            pts[i] = centre - self.points.radius[i] * self.normal
            vl = d.v[jid]  # local twist at the joint origin
            w = oMi.rotation @ vl.angular
            vel[i] = oMi.rotation @ vl.linear + np.cross(w, pts[i] - oMi.translation)
        return gaps, pts, vel

    def _mass(self, q):
        M = pin.crba(self.model, self.data, q)
        M = np.triu(M) + np.triu(M, 1).T
        M[6:, 6:] += np.eye(self.n) * self.servo.armature_kg_m2
        return M

    def _tau(self, q, v, goal, on):
        tau = np.zeros(self.model.nv)
        tau[6:] = (servo_torque(self.servo, self.joints, q[7:], v[6:], goal, on)
                   + stop_torque(self.joints, self.q_lo, self.q_hi, q[7:], v[6:]))
        return tau

    # -- compliant --------------------------------------------------------
    def _point_jacobian(self, q, i, p):
        """(3, nv) rows (t1, t2, n) of the contact frame for world point p on contact i's body."""
        m, d = self.model, self.data
        pin.computeJointJacobians(m, d, q)
        jid = int(self.points.body[i]) + 1
        J6 = pin.getJointJacobian(m, d, jid, pin.LOCAL_WORLD_ALIGNED)
        arm = p - d.oMi[jid].translation
        return self.R_contact.T @ (J6[:3] - np.cross(arm, J6[3:].T).T)  # v_p = v_o + w x arm

    def _damping_matrix(self, q, v, goal, on, gaps, pts, vel):
        """D (nv, nv): servo damping plus J^T D_c J of every touching contact."""
        D = np.zeros((self.model.nv, self.model.nv))
        D[6:, 6:] = np.diag(servo_damping(self.servo, self.joints, q[7:], v[6:], goal, on)
                            + stop_damping(self.joints, self.q_lo, self.q_hi, q[7:], v[6:]))
        for i in range(len(gaps)):
            if gaps[i] >= 0:
                continue
            J = self._point_jacobian(q, i, pts[i])
            Dc = contact_damping(self.law, -gaps[i], self.R_contact.T @ vel[i])
            D += J.T @ Dc @ J
        return D

    def acceleration(self, q, v, goal, on, implicit_dt=0.0):
        """Generalized acceleration (nv,) under compliant contact; fills self.forces.

        implicit_dt > 0: solve (M + implicit_dt D) a = tau - h with D the
        velocity derivative of the servo and contact forces (the compiled
        semi-implicit Euler step).
        """
        gaps, pts, vel = self._contacts(q, v)
        fext = [pin.Force.Zero() for _ in range(self.model.njoints)]
        for i in range(len(gaps)):
            f = contact_force(self.law, -gaps[i], vel[i], self.R_contact)
            self.forces[i] = f
            jid = int(self.points.body[i]) + 1
            oMi = self.data.oMi[jid]
            R = oMi.rotation
            fl = R.T @ f
            tl = R.T @ np.cross(pts[i] - oMi.translation, f)
            fext[jid] = fext[jid] + pin.Force(fl, tl)
        A = self._mass(q)
        if implicit_dt > 0:
            A = A + implicit_dt * self._damping_matrix(q, v, goal, on, gaps, pts, vel)
            self._contacts(q, v)  # restore kinematics of q for rnea below
        h = pin.rnea(self.model, self.data, q, v, np.zeros(self.model.nv), fext)
        return np.linalg.solve(A, self._tau(q, v, goal, on) - h)

    def _step_compliant(self, goal, on):
        m, dt, q, v = self.model, self.dt, self.q, self.v
        if self.integrator == "euler":
            a = self.acceleration(q, v, goal, on, implicit_dt=dt)
            self.v = v + dt * a
            self.q = pin.integrate(m, q, dt * self.v)
            return
        a1 = self.acceleration(q, v, goal, on)
        f1 = self.forces.copy()
        v2 = v + 0.5 * dt * a1
        a2 = self.acceleration(pin.integrate(m, q, 0.5 * dt * v), v2, goal, on)
        v3 = v + 0.5 * dt * a2
        a3 = self.acceleration(pin.integrate(m, q, 0.5 * dt * v2), v3, goal, on)
        v4 = v + dt * a3
        a4 = self.acceleration(pin.integrate(m, q, dt * v3), v4, goal, on)
        self.v = v + dt / 6 * (a1 + 2 * a2 + 2 * a3 + a4)
        self.q = pin.integrate(m, q, dt / 6 * (v + 2 * v2 + 2 * v3 + v4))
        self.forces = f1  # forces at the start of the step, as with Euler

    # -- rigid --------------------------------------------------------------
    def _step_rigid(self, goal, on):
        m, d, dt, q, v, rs = self.model, self.data, self.dt, self.q, self.v, self.rigid
        gaps, pts, _ = self._contacts(q, v)
        M = self._mass(q)
        M[6:, 6:] += dt * np.diag(servo_damping(self.servo, self.joints, q[7:], v[6:], goal, on)
                                  + stop_damping(self.joints, self.q_lo, self.q_hi, q[7:], v[6:]))
        h = pin.rnea(m, d, q, v, np.zeros(m.nv))
        v_free = v + dt * np.linalg.solve(M, self._tau(q, v, goal, on) - h)
        active = np.flatnonzero(gaps < rs.margin)
        self.forces[:] = 0.0
        if active.size == 0:
            self._lam[:] = 0.0
            self.lcp_stats = (0, 0.0, 0.0)
            self.v = v_free
            self.q = pin.integrate(m, q, dt * self.v)
            return
        J = np.zeros((3 * active.size, m.nv))
        for r, i in enumerate(active):
            J[3 * r:3 * r + 3] = self._point_jacobian(q, i, pts[i])
        MinvJT = np.linalg.solve(M, J.T)
        W = J @ MinvJT
        b = J @ v_free
        g = gaps[active]
        b[2::3] += np.where(g < 0, rs.baumgarte * g, g) / dt
        warm = np.concatenate([self._lam[3 * i:3 * i + 3] for i in active])
        res = solve_lcp_pgs(W, b, np.full(active.size, rs.mu), warm, rs.max_iter, rs.tol, rs.cone)
        self.lcp_stats = (res.iterations, res.residual, res.complementarity)
        self._lam[:] = 0.0
        for r, i in enumerate(active):
            self._lam[3 * i:3 * i + 3] = res.impulses[3 * r:3 * r + 3]
            self.forces[i] = self.R_contact @ res.impulses[3 * r:3 * r + 3] / dt
        self.v = v_free + MinvJT @ res.impulses
        self.q = pin.integrate(m, q, dt * self.v)

    def step(self, goal, torque_on=True):
        """Advance by dt with joint goals (n,) [rad] held over the step."""
        goal = np.asarray(goal, dtype=float)
        on = np.broadcast_to(np.asarray(torque_on, dtype=bool), goal.shape)
        if self.mode == "compliant":
            self._step_compliant(goal, on)
        else:
            self._step_rigid(goal, on)
