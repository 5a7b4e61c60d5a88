"""``servoloop bench inverse_dynamics``: contact inverse dynamics (seed 003) per call.

The built-in quadruped settled on its four feet, qdd_des = 0; the contact
set is the four feet duplicated (k = 4, 8, 16 and 30: the paper's scaling
experiment with duplicated feet, digest §9.18).  Ours is the compiled
:class:`core_cy.inverse_dynamics.ContactInverseDynamics` through its
no-allocation ``solve_into``.  The anchor ("pinocchio+qpsolvers") is the
same problem as a user writes it today: Pinocchio for M, h and the contact
points' Jacobians, NumPy for the reduced form, qpsolvers(daqp) for the
solve -- the no-slip normal LCP as its convex QP (digest §3) for
``lcp_noslip``, the two QPs (Stage I, Stage II) for ``qp``, and Stage I for
``lcp_coulomb`` (the Coulomb LCP is not a QP; Stage I is its nearest QP
form, same size).  Both are timed interleaved in this process.
"""

from __future__ import annotations

import numpy as np

from servoloop.bench.common import Row, interleaved_times, report

__all__ = ["add_arguments", "run"]

KS = (4, 8, 16, 30)


def add_arguments(parser) -> None:
    parser.add_argument("--number", type=int, default=50, help="calls per timed block")
    parser.add_argument("--repeats", type=int, default=5, help="timed blocks (best is kept)")
    parser.add_argument("--k", type=int, nargs="+", default=list(KS),
                        help="contact counts (the four feet duplicated)")


def _contacts(feet, k):
    from servoloop.core_cy.sim.model import ContactPoints

    reps = ContactPoints.concat([feet] * (-(-k // len(feet))))
    return ContactPoints(reps.body[:k].copy(), reps.position[:k].copy(), reps.radius[:k].copy(),
                         list(reps.names[:k]))


class PinocchioAnchor:
    """The same contact ID problem with Pinocchio + NumPy + qpsolvers(daqp)."""

    def __init__(self, urdf, pts, armature, dt=1e-3, mu=0.8):
        import pinocchio as pin

        self.pin = pin
        self.model = pin.buildModelFromUrdf(urdf, pin.JointModelFreeFlyer())
        self.data = self.model.createData()
        self.frames = []
        for i in range(len(pts)):
            jid = int(pts.body[i]) + 1
            p = np.asarray(pts.position[i], dtype=float)
            fid = self.model.addFrame(pin.Frame(f"c{i}", jid, 0, pin.SE3(np.eye(3), p),
                                                pin.FrameType.OP_FRAME))
            self.frames.append(fid)
        self.data = self.model.createData()
        self.radius = np.asarray(pts.radius, dtype=float)
        self.armature = armature
        self.dt = dt
        self.mu = mu

    def assemble(self, q, v, qdd_des):
        pin = self.pin
        m, d = self.model, self.data
        M = pin.crba(m, d, q).copy()
        M = np.triu(M) + np.triu(M, 1).T
        M[6:, 6:] += self.armature * np.eye(m.nv - 6)
        h = pin.nonLinearEffects(m, d, q, v)
        pin.computeJointJacobians(m, d, q)
        pin.updateFramePlacements(m, d)
        J = np.vstack([pin.getFrameJacobian(m, d, f, pin.LOCAL_WORLD_ALIGNED)[:3]
                       for f in self.frames])                       # (3k, nv): x, y, z
        # the sphere's lowest point: v_p = v_c + w x (-r e_z)
        Jw = np.vstack([pin.getFrameJacobian(m, d, f, pin.LOCAL_WORLD_ALIGNED)[3:]
                        for f in self.frames])
        k = len(self.frames)
        for i in range(k):
            ez = np.array([0.0, 0.0, 1.0])
            J[3 * i:3 * i + 3] -= self.radius[i] * np.cross(Jw[3 * i:3 * i + 3].T, ez).T
        gap = np.array([d.oMf[f].translation[2] for f in self.frames]) - self.radius
        S, T, N = J[0::3], J[1::3], J[2::3]
        aq = qdd_des[6:]
        A, B = M[:6, :6], M[:6, 6:]
        Ainv = np.linalg.inv(A)
        d_b = -B @ aq - h[:6]
        phi = np.where(gap < 0, 0.2 * gap, gap)
        bias = np.concatenate([(N @ v + phi / self.dt) / self.dt, S @ v / self.dt, T @ v / self.dt])
        return M, h, N, S, T, Ainv, d_b, aq, bias

    def noslip(self, q, v, qdd_des):
        from qpsolvers import solve_qp

        M, h, N, S, T, Ainv, d_b, aq, bias = self.assemble(q, v, qdd_des)
        k = N.shape[0]
        K = np.vstack([S[:, :6], T[:, :6]])
        G = K @ Ainv @ K.T + 1e-12 * np.eye(2 * k)
        AK = Ainv @ K.T
        Gi = np.linalg.pinv(G)
        Phi = Ainv - AK @ Gi @ AK.T
        Nb = N[:, :6]
        e_t = np.concatenate([S[:, 6:] @ aq, T[:, 6:] @ aq]) + bias[k:]
        r = Nb @ (Phi @ d_b - AK @ Gi @ e_t) + N[:, 6:] @ aq + bias[:k]
        Q = Nb @ Phi @ Nb.T + 1e-10 * np.eye(k)
        f = solve_qp(Q, r, lb=np.zeros(k), solver="daqp")
        return self._torque(M, h, N, f, aq, Ainv, d_b)

    def _stage1(self, N, S, T, Ainv, d_b, aq, bias):
        from qpsolvers import solve_qp

        k = N.shape[0]
        R = np.vstack([N, S, -S, T, -T])                            # (5k, nv)
        Y = R[:, :6] @ Ainv
        H = Y @ R[:, :6].T + 1e-10 * np.eye(5 * k)
        c = R[:, :6] @ (Ainv @ d_b) + R[:, 6:] @ aq + np.concatenate(
            [bias[:k], bias[k:2 * k], -bias[k:2 * k], bias[2 * k:], -bias[2 * k:]])
        Gf = np.zeros((k, 5 * k))
        for i in range(k):
            Gf[i, i] = -self.mu
            Gf[i, k + i::k] = 1.0
        f = solve_qp(H, c, Gf, np.zeros(k), lb=np.zeros(5 * k), solver="daqp")
        return R, f

    def coulomb(self, q, v, qdd_des):
        M, h, N, S, T, Ainv, d_b, aq, bias = self.assemble(q, v, qdd_des)
        R, f = self._stage1(N, S, T, Ainv, d_b, aq, bias)
        return f

    def qp(self, q, v, qdd_des):
        from qpsolvers import solve_qp

        M, h, N, S, T, Ainv, d_b, aq, bias = self.assemble(q, v, qdd_des)
        k = N.shape[0]
        R, f0 = self._stage1(N, S, T, Ainv, d_b, aq, bias)
        Rb, Rq = R[:, :6].T, R[:, 6:].T
        a_b = Ainv @ (d_b + Rb @ f0)
        t = M[6:, :6] @ a_b + M[6:, 6:] @ aq + h[6:]
        Gf = np.zeros((k, 5 * k))
        for i in range(k):
            Gf[i, i] = -self.mu
            Gf[i, k + i::k] = 1.0
        P2 = Rq.T @ Rq + 1e-10 * np.eye(5 * k)
        f = solve_qp(P2, -Rq.T @ t, Gf, np.zeros(k), Rb, Rb @ f0, lb=np.zeros(5 * k),
                     solver="daqp")
        return t - Rq @ (f if f is not None else f0)

    def _torque(self, M, h, N, f, aq, Ainv, d_b):
        return f


def run(args) -> dict:
    from servoloop.core_cy import inverse_dynamics as ID
    from servoloop.core_cy.dynamics._dynamics import Model
    from servoloop.core_cy.sim.model import (
        RigidSettings,
        contact_points_from_urdf,
        simulator_servo_model,
    )
    from servoloop.core_cy.sim.simulator import SimConfig, Simulator
    from servoloop.experiments.gaits import stand_goals
    from servoloop.robots import urdf_path

    urdf = str(urdf_path("quadruped"))
    model = Model.from_urdf(urdf, floating_base=True)
    armature = simulator_servo_model().armature_kg_m2
    sim = Simulator.from_urdf(urdf, SimConfig(mode="rigid", rigid=RigidSettings(max_iter=500)))
    stand = stand_goals(urdf)
    sim.reset(stand)
    sim.step(stand, n_steps=1000)
    q0, v0 = sim.q.copy(), sim.v.copy()
    feet = contact_points_from_urdf(urdf)
    zero = np.zeros(model.nv)
    rows = []
    for k in args.k:
        pts = _contacts(feet, k)
        anchor = PinocchioAnchor(urdf, pts, armature)
        for variant in ID.VARIANTS:
            ws = ID.ContactInverseDynamics(model, pts, 0.8, variant, armature=armature)
            tau = np.empty(model.nv - 6)
            forces = np.empty((k, 3))

            def ours(ws=ws, tau=tau, forces=forces):
                ws.solve_into(q0, v0, zero, tau, forces)

            theirs = {"qp": anchor.qp, "lcp_noslip": anchor.noslip,
                      "lcp_coulomb": anchor.coulomb}[variant]

            def anch(theirs=theirs):
                theirs(q0, v0, zero)

            ours()
            anch()
            t_o, t_a = interleaved_times(ours, anch, args.number, args.repeats)
            rows.append(Row(f"quadruped k={k} {variant}", "us_per_call", "us", t_o * 1e6,
                            "pinocchio+qpsolvers", t_a * 1e6))
    return report("inverse_dynamics", rows)
