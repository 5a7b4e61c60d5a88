# cython: language_level=3
"""The whole-body balance tick's arithmetic, compiled (issue 11: wbc at 1 kHz).

:class:`BalanceKernel` does, for :class:`controller.wholebody.balance.BalanceCore`,
what used to be dozens of ~1 us NumPy calls per tick on arrays of 3 to 18
numbers:

- :meth:`BalanceKernel.accelerations`: forward kinematics, the base PD
  (quaternion -> rotation, rotation log), the stance and swing foot rows
  (frame Jacobians of the compiled dynamics, called at C level), the
  normal equations ``H qdd = g`` of the weighted least squares and their
  Cholesky solve (LAPACK ``dposv`` from ``scipy.linalg.cython_lapack``, the
  routine ``scipy.linalg.lapack.dposv`` ran before, so the factorisation is
  the same);
- :meth:`BalanceKernel.stance_velocity`: the plane through the highest stance
  foot and the state velocity with its stance-row part removed (``v - J^+ J
  v`` through ``J J^T``), the inputs of the contact inverse dynamics.

Every buffer is the caller's (``BalanceCore`` keeps its arrays under their
old names) or allocated in ``__init__``; the inner loops run without the GIL.
The NumPy implementation this replaces is kept as the test oracle in
``tests/unit/controller/_balance_reference.py``.
"""

import numpy as np

from libc.math cimport acos, sin, sqrt
from libc.string cimport memcpy, memset
from scipy.linalg.cython_lapack cimport dposv

from servoloop.core_cy.linalg._dense cimport gram_rows
from servoloop.core_cy.dynamics._dynamics cimport (
    FRAME_LOCAL_WORLD_ALIGNED,
    Data,
    DataC,
    Model,
    ModelC,
    fk_c,
    jacobian_c,
)

#: the row-space projection refuses a result longer than ``v`` by this factor
#: (dependent stance rows: several points of one flat foot)
cdef double PROJ_GROWTH = 1e-9


cdef inline void _quat_to_matrix(const double* quat, double* R) noexcept nogil:
    # rotation (row-major 9) of a unit quaternion (x, y, z, w), as robot.quat_to_matrix
    cdef double x = quat[0], y = quat[1], z = quat[2], w = quat[3]
    R[0] = 1 - 2 * (y * y + z * z)
    R[1] = 2 * (x * y - z * w)
    R[2] = 2 * (x * z + y * w)
    R[3] = 2 * (x * y + z * w)
    R[4] = 1 - 2 * (x * x + z * z)
    R[5] = 2 * (y * z - x * w)
    R[6] = 2 * (x * z - y * w)
    R[7] = 2 * (y * z + x * w)
    R[8] = 1 - 2 * (x * x + y * y)


cdef inline void _rotation_log(const double* R, double* out) noexcept nogil:
    # rotation vector (3,) of R (row-major 9), as robot.rotation_log; a NaN passes through
    cdef double c = 0.5 * ((R[0] + R[4] + R[8]) - 1.0)
    cdef double angle, s, f, d
    cdef int i
    if c < -1.0:
        c = -1.0
    if c > 1.0:
        c = 1.0
    angle = acos(c)
    out[0] = R[7] - R[5]
    out[1] = R[2] - R[6]
    out[2] = R[3] - R[1]
    s = sin(angle)
    if s < 1e-9:
        if angle < 1e-6:
            for i in range(3):
                out[i] = 0.5 * out[i]
            return
        # near pi: the axis from the diagonal
        for i in range(3):
            d = (R[4 * i] + 1.0) * 0.5
            out[i] = angle * sqrt(d if d > 0.0 else 0.0)
        return
    f = angle / (2.0 * s)
    for i in range(3):
        out[i] = f * out[i]


cdef class BalanceKernel:
    """Compiled per-tick work of one :class:`BalanceCore` (see the module docstring).

    Parameters
    ----------
    model, data : core_cy.Model (floating base), core_cy.Data
    foot_body : (nf,) int, the model body of each foot
    foot_first, foot_count : (nf,) int, each foot's rows in ``points``
    points : (p, 3) contact points in their body frames [m], foot by foot
    centers : (nf, 3) each foot's reference point in its body frame [m]
    radii : (nf,) each foot's ball radius [m]
    pose_cols : (n,) int, the controller joints' columns in ``v``
    H : (nv, nv), g : (nv,), Jw : (r, nv), aw : (r,), Js : (r, nv), qdd : (nv,),
    vp : (nv,) the caller's arrays the kernel fills (normal matrix and right side,
        weighted foot rows and their targets, stance rows, accelerations, projected
        velocity); ``r`` = 3 (points + feet)
    """

    cdef Model model
    cdef Data data
    cdef ModelC* m
    cdef DataC* d
    cdef readonly int nv, nq, nf, n
    cdef readonly int ms, rows
    #: (p,) 1 where a point is on its foot's sole (:meth:`set_sole`): the stance plane passes
    #: through the stance feet's highest sole point (all 0: each foot's lowest point)
    cdef unsigned char[::1] sole
    cdef int[::1] foot_body, foot_first, foot_count, cols
    cdef double[:, ::1] points, centers, H, Jw, Js, L, G, jac
    cdef double[::1] radii, g, aw, qdd, vp, qbuf, vbuf, Jv, swing_norm, posture_w
    cdef unsigned char[::1] stance_col
    cdef object _keep

    def __init__(self, Model model, Data data, foot_body, foot_first, foot_count, points,
                 centers, radii, pose_cols, H, g, Jw, aw, Js, qdd, vp):
        self.model = model
        self.data = data
        self.m = &model.c
        self.d = &data.c
        self.nv = model.nv
        self.nq = model.nq
        self.foot_body = np.ascontiguousarray(foot_body, dtype=np.intc)
        self.foot_first = np.ascontiguousarray(foot_first, dtype=np.intc)
        self.foot_count = np.ascontiguousarray(foot_count, dtype=np.intc)
        self.nf = self.foot_body.shape[0]
        self.points = np.ascontiguousarray(points, dtype=float).reshape(-1, 3)
        self.centers = np.ascontiguousarray(centers, dtype=float).reshape(-1, 3)
        self.radii = np.ascontiguousarray(radii, dtype=float)
        self.cols = np.ascontiguousarray(pose_cols, dtype=np.intc)
        self.n = self.cols.shape[0]
        self.H, self.g, self.Jw, self.aw, self.Js, self.qdd, self.vp = H, g, Jw, aw, Js, qdd, vp
        rows = self.Jw.shape[0]
        if (self.H.shape[0] != self.nv or self.H.shape[1] != self.nv or self.g.shape[0] != self.nv
                or self.Jw.shape[1] != self.nv or self.Js.shape[0] != rows
                or self.Js.shape[1] != self.nv or self.aw.shape[0] != rows
                or self.qdd.shape[0] != self.nv or self.vp.shape[0] != self.nv):
            raise ValueError("BalanceKernel: buffer shapes do not match the model's nv "
                             f"({self.nv}) and the foot rows ({rows})")
        self.rows = rows
        self.L = np.zeros((self.nv, self.nv))
        self.G = np.zeros((max(rows, 1), max(rows, 1)))
        self.jac = np.zeros((6, self.nv))
        self.qbuf = np.zeros(self.nq)
        self.vbuf = np.zeros(self.nv)
        self.Jv = np.zeros(max(rows, 1))
        self.swing_norm = np.zeros(self.nv)
        self.stance_col = np.zeros(self.nv, dtype=np.uint8)
        self.posture_w = np.zeros(max(self.n, 1))
        self.ms = 0
        self.sole = np.zeros(self.points.shape[0], dtype=np.uint8)

    # ------------------------------------------------------------------ C helpers
    cdef void _point_row(self, int body, const double* p, double radius, double* out) noexcept nogil:
        # world-axes linear Jacobian (3, nv) of a point of `body`, `radius` below it along
        # world z (robot.point_jacobian): v_p = v_o + w x r = v_o - [r]x w
        cdef int k, nv = self.nv
        cdef double* J = &self.jac[0, 0]
        cdef const double* R = &self.d.oR[9 * body]
        cdef double r0, r1, r2, w0, w1, w2
        jacobian_c(self.m, self.d, body, NULL, NULL, FRAME_LOCAL_WORLD_ALIGNED, J)
        r0 = R[0] * p[0] + R[1] * p[1] + R[2] * p[2]
        r1 = R[3] * p[0] + R[4] * p[1] + R[5] * p[2]
        r2 = R[6] * p[0] + R[7] * p[1] + R[8] * p[2] - radius
        for k in range(nv):
            w0 = J[3 * nv + k]
            w1 = J[4 * nv + k]
            w2 = J[5 * nv + k]
            out[k] = J[k] - (r1 * w2 - r2 * w1)
            out[nv + k] = J[nv + k] - (r2 * w0 - r0 * w2)
            out[2 * nv + k] = J[2 * nv + k] - (r0 * w1 - r1 * w0)

    cdef inline double _world_z(self, int body, const double* p) noexcept nogil:
        cdef const double* R = &self.d.oR[9 * body]
        return R[6] * p[0] + R[7] * p[1] + R[8] * p[2] + self.d.op[3 * body + 2]

    cdef int _stance_rows(self, const unsigned char* stance) noexcept nogil:
        # the stance points' rows into Js (after fk_c); returns their number
        cdef int i, j, ms = 0, nv = self.nv
        for i in range(self.nf):
            if stance[i]:
                for j in range(self.foot_first[i], self.foot_first[i] + self.foot_count[i]):
                    self._point_row(self.foot_body[i], &self.points[j, 0], self.radii[i],
                                    &self.Js[ms, 0])
                    ms += 3
        return ms

    # ------------------------------------------------------------------ step 1-2
    def accelerations(self, const double[:] q, const double[:] v, const unsigned char[::1] stance,
                      const double[:] base_position, const double[:] base_velocity,
                      const double[:, :] base_rotation, const double[:] posture,
                      const double[:, :] swing_position, const double[:, :] swing_velocity,
                      const double[:, :] swing_acceleration, gains):
        """Fill ``qdd`` (nv,) with the tasks' weighted least-squares accelerations.

        Returns LAPACK's ``info`` (0: solved; else ``H`` and ``g`` hold the normal
        equations unsolved and the caller falls back to a least squares).
        """
        cdef double base_kp = gains.base_kp, base_kd = gains.base_kd
        cdef double rot_kp = gains.rot_kp, rot_kd = gains.rot_kd
        cdef double swing_kp = gains.swing_kp, swing_kd = gains.swing_kd
        cdef double posture_kp = gains.posture_kp, posture_kd = gains.posture_kd
        cdef double contact_kd = gains.contact_kd, w_contact = gains.w_contact
        cdef double w_base = gains.w_base, w_swing = gains.w_swing, w_posture = gains.w_posture
        cdef bint swing_posture = gains.swing_posture
        cdef int nv = self.nv, nq = self.nq, n = self.n, nf = self.nf
        if (q.shape[0] != nq or v.shape[0] != nv or stance.shape[0] != nf
                or base_position.shape[0] < 3 or base_velocity.shape[0] < 3
                or base_rotation.shape[0] != 3 or base_rotation.shape[1] != 3
                or posture.shape[0] != n or swing_position.shape[0] != nf
                or swing_velocity.shape[0] != nf or swing_acceleration.shape[0] != nf
                or swing_position.shape[1] != 3 or swing_velocity.shape[1] != 3
                or swing_acceleration.shape[1] != 3):
            raise ValueError(f"BalanceKernel.accelerations: expected q ({nq},), v ({nv},), "
                             f"stance ({nf},), posture ({n},), swing arrays ({nf}, 3)")
        cdef double Rt[9]
        cdef double bp[3]
        cdef double bv[3]
        cdef double sp[3]
        cdef double sv[3]
        cdef double sa[3]
        cdef double* qp = &self.qbuf[0]
        cdef double* vp = &self.vbuf[0]
        cdef int i, j, info
        for i in range(nq):
            qp[i] = q[i]
        for i in range(nv):
            vp[i] = v[i]
        for i in range(3):
            bp[i] = base_position[i]
            bv[i] = base_velocity[i]
            for j in range(3):
                Rt[3 * i + j] = base_rotation[i, j]
        with nogil:
            info = self._accelerations(qp, vp, &stance[0], Rt, bp, bv, posture,
                                       swing_position, swing_velocity, swing_acceleration,
                                       base_kp, base_kd, rot_kp, rot_kd, swing_kp, swing_kd,
                                       posture_kp, posture_kd, contact_kd, w_contact, w_base,
                                       w_swing, w_posture, swing_posture)
        return info

    cdef int _accelerations(self, const double* q, const double* v, const unsigned char* stance,
                            const double* Rt, const double* bp, const double* bv,
                            const double[:] posture, const double[:, :] swing_position,
                            const double[:, :] swing_velocity,
                            const double[:, :] swing_acceleration,
                            double base_kp, double base_kd, double rot_kp, double rot_kd,
                            double swing_kp, double swing_kd, double posture_kp,
                            double posture_kd, double contact_kd, double w_contact,
                            double w_base, double w_swing, double w_posture,
                            bint swing_posture) noexcept nogil:
        cdef int nv = self.nv, n = self.n, nf = self.nf
        cdef int i, j, k, r, c, m = 0, ms = 0, info = 0, one = 1
        cdef char uplo = b'U'
        cdef double R[9]
        cdef double E[9]
        cdef double lg[3]
        cdef double a_lin[3]
        cdef double a_ang[3]
        cdef double vl[3]
        cdef double x[3]
        cdef double s, jv, wb2 = w_base * w_base, wp2 = w_posture * w_posture
        cdef double* g = &self.g[0]
        cdef double* H = &self.H[0, 0]
        cdef double* Jw = &self.Jw[0, 0]
        cdef double* aw = &self.aw[0]
        cdef double* row
        cdef const double* ctr
        cdef int body
        fk_c(self.m, self.d, q, NULL)
        # base: world linear and angular PD accelerations
        _quat_to_matrix(&q[3], R)
        for i in range(3):
            vl[i] = R[3 * i] * v[0] + R[3 * i + 1] * v[1] + R[3 * i + 2] * v[2]
            a_lin[i] = base_kp * (bp[i] - q[i]) + base_kd * (bv[i] - vl[i])
        for i in range(3):              # E = Rt @ R.T
            for j in range(3):
                E[3 * i + j] = Rt[3 * i] * R[3 * j] + Rt[3 * i + 1] * R[3 * j + 1] + Rt[3 * i + 2] * R[3 * j + 2]
        _rotation_log(E, lg)
        for i in range(3):              # R @ w_b
            vl[i] = R[3 * i] * v[3] + R[3 * i + 1] * v[4] + R[3 * i + 2] * v[5]
            a_ang[i] = rot_kp * lg[i] - rot_kd * vl[i]
        # right side: body-frame free-flyer acceleration (classical minus w x v), posture
        for i in range(3):
            g[i] = R[i] * a_lin[0] + R[3 + i] * a_lin[1] + R[6 + i] * a_lin[2]
            g[3 + i] = R[i] * a_ang[0] + R[3 + i] * a_ang[1] + R[6 + i] * a_ang[2]
        g[0] -= v[4] * v[2] - v[5] * v[1]
        g[1] -= v[5] * v[0] - v[3] * v[2]
        g[2] -= v[3] * v[1] - v[4] * v[0]
        for i in range(6):
            g[i] *= wb2
        for k in range(nv):
            self.swing_norm[k] = 0.0
            self.stance_col[k] = 0
        # foot rows, weighted
        for i in range(nf):
            body = self.foot_body[i]
            if stance[i]:
                for j in range(self.foot_first[i], self.foot_first[i] + self.foot_count[i]):
                    row = &self.Js[ms, 0]
                    self._point_row(body, &self.points[j, 0], self.radii[i], row)
                    ms += 3
                    for r in range(3):
                        jv = 0.0
                        for k in range(nv):
                            if row[r * nv + k] != 0.0:
                                self.stance_col[k] = 1
                            Jw[(m + r) * nv + k] = w_contact * row[r * nv + k]
                            jv += row[r * nv + k] * v[k]
                        aw[m + r] = (-w_contact * contact_kd) * jv
                    m += 3
            else:
                ctr = &self.centers[i, 0]
                row = &Jw[m * nv]
                self._point_row(body, ctr, self.radii[i], row)
                for k in range(6, nv):      # the swing foot's travel per joint rad [m^2/rad^2]
                    s = row[k] * row[k] + row[nv + k] * row[nv + k] + row[2 * nv + k] * row[2 * nv + k]
                    if s > self.swing_norm[k]:
                        self.swing_norm[k] = s
                x[0] = self.d.oR[9 * body] * ctr[0] + self.d.oR[9 * body + 1] * ctr[1] + self.d.oR[9 * body + 2] * ctr[2] + self.d.op[3 * body]
                x[1] = self.d.oR[9 * body + 3] * ctr[0] + self.d.oR[9 * body + 4] * ctr[1] + self.d.oR[9 * body + 5] * ctr[2] + self.d.op[3 * body + 1]
                x[2] = self.d.oR[9 * body + 6] * ctr[0] + self.d.oR[9 * body + 7] * ctr[1] + self.d.oR[9 * body + 8] * ctr[2] + self.d.op[3 * body + 2] - self.radii[i]
                for r in range(3):
                    jv = 0.0
                    for k in range(nv):
                        jv += row[r * nv + k] * v[k]
                    aw[m + r] = w_swing * (swing_acceleration[i, r]
                                           + swing_kp * (swing_position[i, r] - x[r])
                                           + swing_kd * (swing_velocity[i, r] - jv))
                    for k in range(nv):
                        row[r * nv + k] = w_swing * row[r * nv + k]
                m += 3
        self.ms = ms
        # posture: w_posture^2 per joint, in a swing leg (the joints that move a swing foot and
        # no stance foot) times min(1, |J_c|^2), see balance.Gains.swing_posture
        for i in range(n):
            c = self.cols[i]
            s = wp2
            if swing_posture and self.swing_norm[c] > 0.0 and not self.stance_col[c]:
                s = wp2 * (self.swing_norm[c] if self.swing_norm[c] < 1.0 else 1.0)
            self.posture_w[i] = s
            g[c] = s * (posture_kp * (posture[i] - q[c + 1]) - posture_kd * v[c])
        # H = Jw^T Jw + diag(base, posture weights); g += Jw^T aw
        memset(H, 0, nv * nv * sizeof(double))
        for r in range(m):
            row = &Jw[r * nv]
            for j in range(nv):
                s = row[j]
                if s != 0.0:
                    g[j] += s * aw[r]
                    for k in range(j, nv):
                        H[j * nv + k] += s * row[k]
        for i in range(6):
            H[i * nv + i] += wb2
        for i in range(n):
            c = self.cols[i]
            H[c * nv + c] += self.posture_w[i]
        for j in range(nv):
            for k in range(j + 1, nv):
                H[k * nv + j] = H[j * nv + k]
        # Cholesky (LAPACK, the routine scipy.linalg.lapack.dposv runs) on a copy: H and g
        # stay for the caller's fallback
        memcpy(&self.L[0, 0], H, nv * nv * sizeof(double))
        memcpy(&self.qdd[0], g, nv * sizeof(double))
        dposv(&uplo, &nv, &one, &self.L[0, 0], &nv, &self.qdd[0], &nv, &info)
        return info

    def set_sole(self, mask) -> None:
        """(p,) bool: the points on their foot's sole (the stance plane's height)."""
        m = np.ascontiguousarray(mask, dtype=np.uint8)
        if m.shape[0] != self.points.shape[0]:
            raise ValueError(f"BalanceKernel.set_sole: expected ({self.points.shape[0]},) points")
        self.sole = m.copy()

    # ------------------------------------------------------------------ step 3's inputs
    def stance_velocity(self, const double[:] q, const double[:] v,
                        const unsigned char[::1] stance, bint reuse_rows):
        """The stance plane's height and the velocity that keeps the stance feet still.

        Returns ``(top, status)``: ``top`` [m] the highest sole point of the stance feet
        (:meth:`set_sole`; a foot without one: its lowest point), the ground plane for the
        contact ID; ``status`` 0 when ``vp`` (nv,) holds
        ``v - J^+ J v`` (``J`` the stance points' rows, reused from :meth:`accelerations`
        when ``reuse_rows``), 1 when the rows are dependent and the caller must project
        through a least squares (``Js[:ms]`` holds them).
        """
        cdef int nv = self.nv, nq = self.nq, nf = self.nf
        if q.shape[0] != nq or v.shape[0] != nv or stance.shape[0] != nf:
            raise ValueError(f"BalanceKernel.stance_velocity: expected q ({nq},), v ({nv},), "
                             f"stance ({nf},)")
        cdef int i
        cdef double top
        cdef int status
        for i in range(nq):
            self.qbuf[i] = q[i]
        for i in range(nv):
            self.vbuf[i] = v[i]
        with nogil:
            status = self._stance_velocity(&stance[0], reuse_rows, &top)
        return top, status

    cdef int _stance_velocity(self, const unsigned char* stance, bint reuse_rows,
                              double* top_out) noexcept nogil:
        cdef int nv = self.nv, nf = self.nf, i, j, r, k, ms, info = 0, one = 1
        cdef char uplo = b'U'
        cdef double z, low, high, top = -1e300, xx, vv, s
        cdef bint any_foot = False
        cdef double* v = &self.vbuf[0]
        cdef double* Js = &self.Js[0, 0]
        cdef double* G = &self.G[0, 0]
        cdef double* Jv = &self.Jv[0]
        cdef double* vp = &self.vp[0]
        fk_c(self.m, self.d, &self.qbuf[0], NULL)
        for i in range(nf):
            if stance[i]:
                low = 1e300
                for j in range(self.foot_first[i], self.foot_first[i] + self.foot_count[i]):
                    z = self._world_z(self.foot_body[i], &self.points[j, 0])
                    if z < low or j == self.foot_first[i]:
                        low = z
                # the highest point of its sole
                high = low
                for j in range(self.foot_first[i], self.foot_first[i] + self.foot_count[i]):
                    if self.sole[j]:
                        z = self._world_z(self.foot_body[i], &self.points[j, 0])
                        if z > high:
                            high = z
                low = high - self.radii[i]
                if not any_foot or low > top:
                    top = low
                any_foot = True
        top_out[0] = top
        if reuse_rows:
            ms = self.ms
        else:
            ms = self._stance_rows(stance)
            self.ms = ms
        for r in range(ms):
            s = 0.0
            for k in range(nv):
                s += Js[r * nv + k] * v[k]
            Jv[r] = s
        if ms == 0:
            memcpy(vp, v, nv * sizeof(double))
            return 0
        if ms > nv:
            return 1
        gram_rows(ms, nv, Js, G)            # J J^T, exactly symmetric
        # y = (J J^T)^-1 J v in Jv; LAPACK refuses dependent rows (info > 0)
        dposv(&uplo, &ms, &one, G, &ms, Jv, &ms, &info)
        if info != 0:
            return 1
        for k in range(nv):
            vp[k] = 0.0
        for r in range(ms):
            s = Jv[r]
            for k in range(nv):
                vp[k] += Js[r * nv + k] * s
        xx = 0.0
        vv = 0.0
        for k in range(nv):
            xx += vp[k] * vp[k]
            vv += v[k] * v[k]
        # a projection never lengthens v: a longer result means dependent rows
        if not xx <= vv * (1.0 + PROJ_GROWTH) + 1e-30:
            return 1
        for k in range(nv):
            vp[k] = v[k] - vp[k]
        return 0


def servo_command(const double[::1] tau, double[::1] tau_f, double alpha,
                  const double[::1] position, const double[::1] velocity,
                  const double[::1] advance, const double[::1] posture,
                  const unsigned char[::1] impedance, const double[::1] own_offset,
                  const double[::1] coulomb, double band,
                  double[::1] effort, double[::1] goal, double[::1] kp, double[::1] kd):
    """``wbc``'s command from the core's torques (n,) [N m], in place (one call, not eleven).

    ``tau_f`` (n,) is low-passed towards ``tau`` by ``alpha``; ``effort`` is ``tau_f`` plus
    the servo's gearbox Coulomb friction ``coulomb`` (n,) [N m] in the direction of the
    measured ``velocity``, its sign ramped linearly over ``|velocity| < band`` [rad/s] (the
    servo model's ``-coulomb sgn(qd)`` inverted: 0 where ``coulomb`` is 0); the goal is
    ``position + advance * velocity`` (``posture`` where ``impedance``) plus
    ``own_offset * effort``; the host gains ``kp`` and ``kd`` are zeroed.
    """
    cdef Py_ssize_t i, n = tau.shape[0]
    cdef double s
    if not (tau_f.shape[0] == position.shape[0] == velocity.shape[0] == advance.shape[0]
            == posture.shape[0] == impedance.shape[0] == own_offset.shape[0]
            == coulomb.shape[0] == effort.shape[0] == goal.shape[0] == kp.shape[0]
            == kd.shape[0] == n):
        raise ValueError(f"servo_command: every array must have the {n} joints of tau")
    if not band > 0.0:
        raise ValueError(f"servo_command: band must be > 0 rad/s, got {band}")
    with nogil:
        for i in range(n):
            tau_f[i] += (tau[i] - tau_f[i]) * alpha
            s = velocity[i] / band
            if s > 1.0:
                s = 1.0
            elif s < -1.0:
                s = -1.0
            elif s != s:            # a NaN reading: no friction term (the goal is NaN anyway)
                s = 0.0
            effort[i] = tau_f[i] + coulomb[i] * s
            if impedance[i]:
                goal[i] = posture[i]
            else:
                goal[i] = velocity[i] * advance[i] + position[i]
            goal[i] += effort[i] * own_offset[i]
            kp[i] = 0.0
            kd[i] = 0.0
