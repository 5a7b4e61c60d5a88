"""Slow NumPy reference of every compiled kernel in :mod:`core_cy.dynamics._dynamics`.

Plain Featherstone ("Rigid Body Dynamics Algorithms", 2008): 6x6 spatial
matrices in Featherstone's (angular; linear) order, recursions in body
(local) coordinates with parent-to-child transforms.  This is deliberately
a *different* formulation from the compiled kernels (world frame, (R, p)
placements, 3-vector algebra), so that agreement means something.
Results are converted to Pinocchio's conventions at the boundary: (linear;
angular) 6-vectors, free-flyer velocity (linear; angular) in the base frame.

Used only by the tests; nothing here is fast.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import expm

__all__ = [
    "skew",
    "crm",
    "crf",
    "xlt_rot",
    "spatial_inertia",
    "joint_kinematics",
    "placements",
    "rnea",
    "crba",
    "aba",
    "jacobian",
    "center_of_mass",
    "regressor",
    "integrate",
    "kinetic_energy",
]

# Joint type codes, as core_cy/dynamics/_dynamics.pxd.
REVOLUTE, PRISMATIC, FREEFLYER = 0, 1, 2


def skew(x) -> np.ndarray:
    """[x]x such that skew(x) @ y == cross(x, y), (3, 3)."""
    return np.array([[0.0, -x[2], x[1]], [x[2], 0.0, -x[0]], [-x[1], x[0], 0.0]])


def crm(v) -> np.ndarray:
    """Motion cross-product matrix v x, v = (w; v_lin), (6, 6)."""
    out = np.zeros((6, 6))
    out[:3, :3] = skew(v[:3])
    out[3:, :3] = skew(v[3:])
    out[3:, 3:] = skew(v[:3])
    return out


def crf(v) -> np.ndarray:
    """Force cross-product matrix v x* = -crm(v).T, (6, 6)."""
    return -crm(v).T


def xlt_rot(E, r) -> np.ndarray:
    """Motion transform A -> B: E rotates A coords to B coords, r = O_B in A coords."""
    X = np.zeros((6, 6))
    X[:3, :3] = E
    X[3:, 3:] = E
    X[3:, :3] = -E @ skew(r)
    return X


def spatial_inertia(m, c, I_c) -> np.ndarray:
    """Featherstone spatial inertia about the frame origin, (ang; lin), (6, 6)."""
    C = skew(c)
    out = np.zeros((6, 6))
    out[:3, :3] = I_c + m * C @ C.T
    out[:3, 3:] = m * C
    out[3:, :3] = m * C.T
    out[3:, 3:] = m * np.eye(3)
    return out


def _inertia_from_params(theta) -> np.ndarray:
    """Spatial inertia (ang; lin) from Pinocchio's 10 dynamic parameters."""
    m, h, (xx, xy, yy, xz, yz, zz) = theta[0], np.asarray(theta[1:4]), theta[4:10]
    I_o = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
    out = np.zeros((6, 6))
    out[:3, :3] = I_o
    out[:3, 3:] = skew(h)
    out[3:, :3] = skew(h).T
    out[3:, 3:] = m * np.eye(3)
    return out


def _swap(x):
    """(lin; ang) <-> (ang; lin) for 6-vectors or the rows of (6, n) arrays."""
    x = np.asarray(x)
    return np.concatenate([x[3:6], x[0:3]], axis=0)


def _quat_matrix(qv) -> np.ndarray:
    x, y, z, w = qv
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def _axis_rotation(a, q) -> np.ndarray:
    # Rodrigues' formula, exp([a]x q) for a unit axis
    K = skew(a)
    return np.eye(3) + np.sin(q) * K + (1.0 - np.cos(q)) * K @ K


class _Tree:
    """The model's arrays, unpacked once."""

    def __init__(self, model):
        t = model.tree_arrays()
        self.nb, self.nq, self.nv = model.nbodies, model.nq, model.nv
        self.parent, self.jtype = t["parent"], t["jtype"]
        self.iq, self.iv, self.nvj = t["idx_q"], t["idx_v"], t["nv_joint"]
        self.axis, self.R_tree, self.p_tree = t["axis"], t["R_tree"], t["p_tree"]
        self.mass, self.com, self.I_com = t["mass"], t["com"], t["I_com"]
        self.gravity = np.asarray(model.gravity)
        self.inertia = [spatial_inertia(self.mass[i], self.com[i], self.I_com[i])
                        for i in range(self.nb)]

    def S(self, i) -> np.ndarray:
        """Motion subspace in the body frame, (ang; lin), (6, nv_i)."""
        if self.jtype[i] == REVOLUTE:
            return np.concatenate([self.axis[i], np.zeros(3)]).reshape(6, 1)
        if self.jtype[i] == PRISMATIC:
            return np.concatenate([np.zeros(3), self.axis[i]]).reshape(6, 1)
        # free-flyer: Pinocchio's v = (lin; ang) in the body frame
        S = np.zeros((6, 6))
        S[3:, :3] = np.eye(3)
        S[:3, 3:] = np.eye(3)
        return S

    def local_placement(self, i, q):
        """(R, p): body frame in the parent frame at configuration q."""
        qi = q[self.iq[i]:]
        Rt, pt = self.R_tree[i], self.p_tree[i]
        if self.jtype[i] == REVOLUTE:
            return Rt @ _axis_rotation(self.axis[i], qi[0]), pt.copy()
        if self.jtype[i] == PRISMATIC:
            return Rt.copy(), pt + Rt @ (self.axis[i] * qi[0])
        return Rt @ _quat_matrix(qi[3:7]), pt + Rt @ qi[:3]

    def X_up(self, i, q) -> np.ndarray:
        """Motion transform parent -> body i, (6, 6)."""
        R, p = self.local_placement(i, q)
        return xlt_rot(R.T, p)


def joint_kinematics(model, q):
    """List of parent->body motion transforms X_up[i], (6, 6) each."""
    tr = _Tree(model)
    return [tr.X_up(i, q) for i in range(tr.nb)]


def placements(model, q):
    """World placements [(R (3,3) body->world, p (3,) [m])] of every body."""
    tr = _Tree(model)
    out = []
    for i in range(tr.nb):
        R, p = tr.local_placement(i, q)
        if tr.parent[i] >= 0:
            Rp, pp = out[tr.parent[i]]
            R, p = Rp @ R, pp + Rp @ p
        out.append((R, p))
    return out


def _dofs(tr, i, x):
    return x[tr.iv[i]:tr.iv[i] + tr.nvj[i]]


def _forward_pass(tr, q, v, a, with_gravity=True):
    """Transforms, body velocities and accelerations (ang; lin), Table 5.1."""
    a_grav = np.concatenate([np.zeros(3), -tr.gravity]) if with_gravity else np.zeros(6)
    Xs = [tr.X_up(i, q) for i in range(tr.nb)]
    vel, acc = [None] * tr.nb, [None] * tr.nb
    for i in range(tr.nb):
        S = tr.S(i)
        vJ = S @ _dofs(tr, i, v)
        p = tr.parent[i]
        vp = vel[p] if p >= 0 else np.zeros(6)
        ap = acc[p] if p >= 0 else a_grav
        vel[i] = Xs[i] @ vp + vJ
        acc[i] = Xs[i] @ ap + S @ _dofs(tr, i, a) + crm(vel[i]) @ vJ
    return Xs, vel, acc


def rnea(model, q, v, a, fext=None, with_gravity=True) -> np.ndarray:
    """Inverse dynamics tau (nv,), Featherstone's Table 5.1.

    ``fext`` (nb, 6): local (force; torque) applied to each body (Pinocchio).
    """
    tr = _Tree(model)
    Xs, vel, acc = _forward_pass(tr, q, v, a, with_gravity)
    f = [None] * tr.nb
    for i in range(tr.nb):
        inertia = tr.inertia[i]
        f[i] = inertia @ acc[i] + crf(vel[i]) @ inertia @ vel[i]
        if fext is not None:
            f[i] = f[i] - _swap(fext[i])
    tau = np.zeros(tr.nv)
    for i in reversed(range(tr.nb)):
        tau[tr.iv[i]:tr.iv[i] + tr.nvj[i]] = tr.S(i).T @ f[i]
        if tr.parent[i] >= 0:
            f[tr.parent[i]] = f[tr.parent[i]] + Xs[i].T @ f[i]
    return tau


def crba(model, q) -> np.ndarray:
    """Joint-space inertia M (nv, nv), Featherstone's Table 6.2."""
    tr = _Tree(model)
    Xs = [tr.X_up(i, q) for i in range(tr.nb)]
    Ic = [inertia.copy() for inertia in tr.inertia]
    for i in reversed(range(tr.nb)):
        if tr.parent[i] >= 0:
            Ic[tr.parent[i]] += Xs[i].T @ Ic[i] @ Xs[i]
    M = np.zeros((tr.nv, tr.nv))
    for i in range(tr.nb):
        si = slice(tr.iv[i], tr.iv[i] + tr.nvj[i])
        F = Ic[i] @ tr.S(i)
        M[si, si] = tr.S(i).T @ F
        j = i
        while tr.parent[j] >= 0:
            F = Xs[j].T @ F
            j = tr.parent[j]
            sj = slice(tr.iv[j], tr.iv[j] + tr.nvj[j])
            M[sj, si] = tr.S(j).T @ F
            M[si, sj] = M[sj, si].T
    return M


def aba(model, q, v, tau, fext=None) -> np.ndarray:
    """Forward dynamics ddq (nv,), Featherstone's Table 7.1 (multi-dof joints)."""
    tr = _Tree(model)
    Xs = [tr.X_up(i, q) for i in range(tr.nb)]
    nb = tr.nb
    vel, c, IA, pA = [None] * nb, [None] * nb, [None] * nb, [None] * nb
    for i in range(nb):
        S = tr.S(i)
        vJ = S @ _dofs(tr, i, v)
        p = tr.parent[i]
        vel[i] = Xs[i] @ (vel[p] if p >= 0 else np.zeros(6)) + vJ
        c[i] = crm(vel[i]) @ vJ
        IA[i] = tr.inertia[i].copy()
        pA[i] = crf(vel[i]) @ tr.inertia[i] @ vel[i]
        if fext is not None:
            pA[i] = pA[i] - _swap(fext[i])
    U, Dinv, u = [None] * nb, [None] * nb, [None] * nb
    for i in reversed(range(nb)):
        S = tr.S(i)
        U[i] = IA[i] @ S
        Dinv[i] = np.linalg.inv(S.T @ U[i])
        u[i] = _dofs(tr, i, tau) - S.T @ pA[i]
        p = tr.parent[i]
        if p >= 0:
            Ia = IA[i] - U[i] @ Dinv[i] @ U[i].T
            pa = pA[i] + Ia @ c[i] + U[i] @ Dinv[i] @ u[i]
            IA[p] = IA[p] + Xs[i].T @ Ia @ Xs[i]
            pA[p] = pA[p] + Xs[i].T @ pa
    ddq = np.zeros(tr.nv)
    acc = [None] * nb
    a_grav = np.concatenate([np.zeros(3), -tr.gravity])
    for i in range(nb):
        p = tr.parent[i]
        ap = Xs[i] @ (acc[p] if p >= 0 else a_grav) + c[i]
        qdd = Dinv[i] @ (u[i] - U[i].T @ ap)
        ddq[tr.iv[i]:tr.iv[i] + tr.nvj[i]] = qdd
        acc[i] = ap + tr.S(i) @ qdd
    return ddq


def jacobian(model, q, body, frame="world", R_local=None, p_local=None) -> np.ndarray:
    """Frame Jacobian (6, nv), rows (linear; angular), Pinocchio's conventions."""
    tr = _Tree(model)
    J = np.zeros((6, tr.nv))
    if body < 0:
        return J
    R_local = np.eye(3) if R_local is None else np.asarray(R_local).reshape(3, 3)
    p_local = np.zeros(3) if p_local is None else np.asarray(p_local)
    Xs = [tr.X_up(i, q) for i in range(tr.nb)]
    # columns in the frame's own coordinates: X_{j -> frame} S_j
    X_frame = xlt_rot(R_local.T, p_local)  # body -> frame
    X = X_frame
    j = body
    while j >= 0:
        cols = X @ tr.S(j)
        J[:, tr.iv[j]:tr.iv[j] + tr.nvj[j]] = _swap(cols)
        X = X @ Xs[j]
        j = tr.parent[j]
    if frame == "local":
        return J
    R_b, p_b = placements(model, q)[body]
    R_f, p_f = R_b @ R_local, p_b + R_b @ p_local
    lin, ang = R_f @ J[:3], R_f @ J[3:]
    if frame == "local_world_aligned":
        return np.vstack([lin, ang])
    if frame == "world":
        return np.vstack([lin + np.cross(p_f, ang.T).T, ang])
    raise ValueError(f"frame: unknown {frame!r}")


def center_of_mass(model, q):
    """(com (3,) [m], Jcom (3, nv)) from the bodies' point Jacobians."""
    tr = _Tree(model)
    total = tr.mass.sum()
    com = np.zeros(3)
    Jc = np.zeros((3, tr.nv))
    for i, (R, p) in enumerate(placements(model, q)):
        com += tr.mass[i] * (p + R @ tr.com[i])
        Jc += tr.mass[i] * jacobian(model, q, i, "local_world_aligned", p_local=tr.com[i])[:3]
    return com / total, Jc / total


def regressor(model, q, v, a) -> np.ndarray:
    """Y (nv, 10 nb + 4 n_actuated): column (j, c) is the joint torque of body j
    alone with the unit parameter vector e_c (RNEA is linear in the inertias)."""
    tr = _Tree(model)
    n_act = int(np.sum(tr.jtype != FREEFLYER))
    Y = np.zeros((tr.nv, 10 * tr.nb + 4 * n_act))
    Xs, vel, acc = _forward_pass(tr, q, v, a)
    for j in range(tr.nb):
        for c in range(10):
            theta = np.zeros(10)
            theta[c] = 1.0
            inertia = _inertia_from_params(theta)
            f = inertia @ acc[j] + crf(vel[j]) @ inertia @ vel[j]
            i = j
            while i >= 0:
                Y[tr.iv[i]:tr.iv[i] + tr.nvj[i], 10 * j + c] = tr.S(i).T @ f
                f = Xs[i].T @ f
                i = tr.parent[i]
    k = 0
    for i in range(tr.nb):
        if tr.jtype[i] == FREEFLYER:
            continue
        r = tr.iv[i]
        Y[r, 10 * tr.nb + 4 * k:10 * tr.nb + 4 * k + 4] = [np.sign(v[r]), v[r], a[r], 1.0]
        k += 1
    return Y


def integrate(model, q, v, dt=1.0) -> np.ndarray:
    """q (+) v dt; the free-flyer by the 4x4 matrix exponential of its twist."""
    tr = _Tree(model)
    out = np.array(q, dtype=float)
    for i in range(tr.nb):
        iq, iv = tr.iq[i], tr.iv[i]
        if tr.jtype[i] != FREEFLYER:
            out[iq] = q[iq] + v[iv] * dt
            continue
        T = np.eye(4)
        T[:3, :3] = _quat_matrix(q[iq + 3:iq + 7])
        T[:3, 3] = q[iq:iq + 3]
        tw = np.zeros((4, 4))
        tw[:3, :3] = skew(v[iv + 3:iv + 6] * dt)
        tw[:3, 3] = v[iv:iv + 3] * dt
        T = T @ expm(tw)
        out[iq:iq + 3] = T[:3, 3]
        out[iq + 3:iq + 7] = _matrix_quat(T[:3, :3], q[iq + 3:iq + 7])
    return out


def _matrix_quat(R, q_near) -> np.ndarray:
    """Unit quaternion (x, y, z, w) of R, with the sign closest to q_near."""
    w = 0.5 * np.sqrt(max(0.0, 1.0 + np.trace(R)))
    if w > 0.1:
        x = (R[2, 1] - R[1, 2]) / (4 * w)
        y = (R[0, 2] - R[2, 0]) / (4 * w)
        z = (R[1, 0] - R[0, 1]) / (4 * w)
        qv = np.array([x, y, z, w])
    else:
        # eigenvector of the symmetric K matrix (robust away from w ~ 1)
        K = np.array([
            [R[0, 0] - R[1, 1] - R[2, 2], R[1, 0] + R[0, 1], R[2, 0] + R[0, 2], R[2, 1] - R[1, 2]],
            [R[1, 0] + R[0, 1], R[1, 1] - R[0, 0] - R[2, 2], R[2, 1] + R[1, 2], R[0, 2] - R[2, 0]],
            [R[2, 0] + R[0, 2], R[2, 1] + R[1, 2], R[2, 2] - R[0, 0] - R[1, 1], R[1, 0] - R[0, 1]],
            [R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1], R[0, 0] + R[1, 1] + R[2, 2]],
        ]) / 3.0
        vals, vecs = np.linalg.eigh(K)
        qv = vecs[:, np.argmax(vals)]
    qv = qv / np.linalg.norm(qv)
    return qv if np.dot(qv, q_near) >= 0 else -qv


def kinetic_energy(model, q, v) -> float:
    """0.5 v^T M(q) v [J]."""
    return 0.5 * float(v @ crba(model, q) @ v)
