# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled rigid-body kernels on a Model / Data pair (Pinocchio's split).

All kernels work on (R, p) placements and 3-vectors, never on 6x6 spatial
transforms.  CRBA, ABA, the Jacobians, the centre of mass and the regressor
work in the world frame (spatial quantities at the world origin, Pinocchio's
WORLD convention): body inertias are moved to the world once per call and
the backward passes then add without transforms, which is what makes CRBA
and ABA cheap.  RNEA works in body frames (as Pinocchio's), which needs no
world inertias at all and measured ~25% faster than its world form.
The slow NumPy reference these are tested against is core_cy/dynamics/reference.py.
3-vector, 3x3 and 6x6 products and the LDL^T solve are the shared kernels of
core_cy/linalg/_dense.pxd.

The Python wrappers check types and shapes with a few C-level tests and
call the ``noexcept nogil`` kernels declared in ``_dynamics.pxd``.  Without
``out=`` they return the workspace's own array, overwritten by the next call
of the same function on that workspace (as Pinocchio's ``data.tau``).
"""

cimport numpy as cnp
from libc.math cimport sin, cos, sqrt, fabs
from libc.string cimport memset, memcpy

from servoloop.core_cy.linalg._dense cimport (
    cross3, dot3, dot6, ldlt_solve, mat3_congruence_sym, mat3_mul, mat3_vec, mat3t_vec, mat6_vec,
)

import os
import operator

import numpy as np

cnp.import_array()

__all__ = [
    "Model", "Data", "forward_kinematics", "rnea", "nonlinear_effects", "gravity",
    "crba", "aba", "frame_jacobian", "center_of_mass", "regressor", "integrate",
    "rnea_batch", "aba_batch", "regressor_batch",
]

# sin and cos of the joint angles: glibc's sincos costs ~13 ns, 15-20% of an
# RNEA on solo12.  Joint angles are small, so a Cody-Waite reduction to
# [-pi/4, pi/4] and fdlibm's kernel polynomials (< 1 ulp there) give the
# same numbers to ~1e-16 in ~5 ns; anything large or non-finite goes to libm.
cdef double _PIO2_HI = 1.57079632673412561417e+00   # first 33 bits of pi/2
cdef double _PIO2_LO = 6.07710050650619224932e-11   # pi/2 - _PIO2_HI
cdef double _TWO_OVER_PI = 6.36619772367581382433e-01


cdef inline void _sincos(double x, double* s_out, double* c_out) noexcept nogil:
    cdef double n, r, z, sr, cr
    cdef double v[2]
    cdef int quadrant, swap
    if not fabs(x) < 1.0e5:
        s_out[0] = sin(x)
        c_out[0] = cos(x)
        return
    # round to nearest with the 1.5 * 2^52 trick: floor() is a libm call without SSE4.1
    n = (x * _TWO_OVER_PI + 6755399441055744.0) - 6755399441055744.0
    r = (x - n * _PIO2_HI) - n * _PIO2_LO
    z = r * r
    sr = r + r * z * (-1.66666666666666324348e-01 + z * (8.33333333332248946124e-03
         + z * (-1.98412698298579493134e-04 + z * (2.75573137070700676789e-06
         + z * (-2.50507602534068634195e-08 + z * 1.58969099521155010221e-10)))))
    cr = 1.0 - (0.5 * z - z * z * (4.16666666666666019037e-02 + z * (-1.38888888888741095749e-03
         + z * (2.48015872894767294178e-05 + z * (-2.75573143513906633035e-07
         + z * (2.08757232129817482790e-09 + z * -1.13596475577881948265e-11))))))
    # quadrant without branches (random angles would mispredict half of them)
    quadrant = (<int>n) & 3
    v[0] = sr
    v[1] = cr
    swap = quadrant & 1
    s_out[0] = (1 - (quadrant & 2)) * v[swap]
    c_out[0] = (1 - ((quadrant + 1) & 2)) * v[1 - swap]


def _sincos_check(x):
    """Test hook: (sin, cos) of every element of x by the kernels' _sincos."""
    cdef double[::1] xv = np.ascontiguousarray(x, dtype=np.float64).ravel()
    out = np.empty((2, xv.shape[0]))
    cdef double[:, ::1] o = out
    cdef Py_ssize_t k
    for k in range(xv.shape[0]):
        _sincos(xv[k], &o[0, k], &o[1, k])
    return out


cdef inline double* _sincos_table(const ModelC* m, DataC* d) noexcept nogil:
    # where the per-joint (sin q, cos q) pairs live: after the general scratch
    return &d.scratch[64 if 6 * m.nv < 64 else 6 * m.nv]


cdef void _joint_sincos(const ModelC* m, DataC* d, const double* q) noexcept nogil:
    """(sin q, cos q) of every revolute joint, in one independent pass.

    Computed up front because the iterations do not depend on each other:
    the polynomial evaluations overlap in the pipeline instead of sitting
    on the critical path of the tree recursion (measured: ~25% of an RNEA).
    """
    cdef int i
    cdef double* sc = _sincos_table(m, d)
    for i in range(m.nbodies):
        if m.jtype[i] == JOINT_REVOLUTE:
            _sincos(q[m.idx_q[i]], &sc[2 * i], &sc[2 * i + 1])


cdef inline void _axis_rotation(const double* a, double s, double c, double* R) noexcept nogil:
    # Rodrigues: R = I + sin(q) [a]x + (1 - cos(q)) [a]x^2, |a| = 1, (s, c) = (sin q, cos q)
    cdef double t = 1.0 - c
    cdef double x = a[0], y = a[1], z = a[2]
    R[0] = c + t * x * x;     R[1] = t * x * y - s * z; R[2] = t * x * z + s * y
    R[3] = t * x * y + s * z; R[4] = c + t * y * y;     R[5] = t * y * z - s * x
    R[6] = t * x * z - s * y; R[7] = t * y * z + s * x; R[8] = c + t * z * z

cdef inline void _quat_to_matrix(const double* qv, double* R) noexcept nogil:
    # q = (x, y, z, w), assumed unit (as Eigen's toRotationMatrix)
    cdef double x = qv[0], y = qv[1], z = qv[2], w = qv[3]
    cdef double tx = 2 * x, ty = 2 * y, tz = 2 * z
    cdef double twx = tx * w, twy = ty * w, twz = tz * w
    cdef double txx = tx * x, txy = ty * x, txz = tz * x
    cdef double tyy = ty * y, tyz = tz * y, tzz = tz * z
    R[0] = 1 - (tyy + tzz); R[1] = txy - twz;        R[2] = txz + twy
    R[3] = txy + twz;       R[4] = 1 - (txx + tzz);  R[5] = tyz - twx
    R[6] = txz - twy;       R[7] = tyz + twx;        R[8] = 1 - (txx + tyy)

# spatial 6-vectors are (linear; angular)

cdef inline void _motion_cross(const double* m1, const double* m2, double* out) noexcept nogil:
    # out = m1 x m2 = (w1 x v2 + v1 x w2, w1 x w2); out may alias neither
    cdef double t[3]
    cross3(&m1[3], &m2[0], &out[0])
    cross3(&m1[0], &m2[3], t)
    out[0] += t[0]; out[1] += t[1]; out[2] += t[2]
    cross3(&m1[3], &m2[3], &out[3])

cdef inline void _force_cross_add(const double* m, const double* f, double* out) noexcept nogil:
    # out += m x* f = (w x fl, w x fa + v x fl)
    cdef double t[3]
    cross3(&m[3], &f[0], t)
    out[0] += t[0]; out[1] += t[1]; out[2] += t[2]
    cross3(&m[3], &f[3], t)
    out[3] += t[0]; out[4] += t[1]; out[5] += t[2]
    cross3(&m[0], &f[0], t)
    out[3] += t[0]; out[4] += t[1]; out[5] += t[2]

cdef inline void _inertia_apply(const double* mass, const double* Iw, const double* V,
                                double* out) noexcept nogil:
    # Body inertia in world, COM form (c = Iw[0:3], Ic = Iw[3:12]), applied to
    # a world spatial motion V at the world origin:
    # lin = m (v - c x w); ang = Ic w + c x lin
    cdef double t[3]
    cdef double m = mass[0]
    cross3(Iw, &V[3], t)
    out[0] = m * (V[0] - t[0]); out[1] = m * (V[1] - t[1]); out[2] = m * (V[2] - t[2])
    mat3_vec(&Iw[3], &V[3], &out[3])
    cross3(Iw, &out[0], t)
    out[3] += t[0]; out[4] += t[1]; out[5] += t[2]

cdef inline void _origin_apply(const double* Y, const double* V, double* out) noexcept nogil:
    # Inertia in origin form Y = (m, h(3), I_O: xx xy yy xz yz zz):
    # lin = m v - h x w; ang = I_O w + h x v
    cdef double t[3]
    cdef const double* I = &Y[4]
    cross3(&Y[1], &V[3], t)
    out[0] = Y[0] * V[0] - t[0]; out[1] = Y[0] * V[1] - t[1]; out[2] = Y[0] * V[2] - t[2]
    cross3(&Y[1], &V[0], t)
    out[3] = I[0] * V[3] + I[1] * V[4] + I[3] * V[5] + t[0]
    out[4] = I[1] * V[3] + I[2] * V[4] + I[4] * V[5] + t[1]
    out[5] = I[3] * V[3] + I[4] * V[4] + I[5] * V[5] + t[2]

cdef inline void _force_to_world(const double* R, const double* p, const double* f_local,
                                 double* out) noexcept nogil:
    # a force at the body origin in body axes -> world axes at the world origin
    cdef double t[3]
    mat3_vec(R, &f_local[0], &out[0])
    mat3_vec(R, &f_local[3], &out[3])
    cross3(p, &out[0], t)
    out[3] += t[0]; out[4] += t[1]; out[5] += t[2]

cdef inline void _motion_to_local(const double* R, const double* p, const double* Vw,
                                  double* out) noexcept nogil:
    # world spatial motion at the world origin -> body frame at the body origin
    cdef double t[3]
    cross3(p, &Vw[3], t)
    t[0] = Vw[0] - t[0]; t[1] = Vw[1] - t[1]; t[2] = Vw[2] - t[2]
    mat3t_vec(R, t, &out[0])
    mat3t_vec(R, &Vw[3], &out[3])

# ---------------------------------------------------------------------------
# kernels
# ---------------------------------------------------------------------------

cdef inline int _aligned_axis(const double* a) noexcept nogil:
    # 0, 1, 2 when the unit axis is +-x, +-y, +-z (most URDFs), -1 otherwise
    if a[0] == 0.0 and a[1] == 0.0:
        return 2
    if a[0] == 0.0 and a[2] == 0.0:
        return 1
    if a[1] == 0.0 and a[2] == 0.0:
        return 0
    return -1


cdef inline void _rotate_columns(double* R, int k, double c, double s) noexcept nogil:
    # R <- R @ Rot(e_k, angle) in place, (c, s) = (cos, sin) of the angle:
    # only the two columns (i, j) orthogonal to e_k change (12 mults, not 27)
    cdef int i = (k + 1) % 3, j = (k + 2) % 3, r
    cdef double x, y
    for r in range(3):
        x = R[3 * r + i]
        y = R[3 * r + j]
        R[3 * r + i] = c * x + s * y
        R[3 * r + j] = c * y - s * x


cdef inline bint _is_identity(const double* R) noexcept nogil:
    # exact test: a tiny rpy can round the diagonal to 1.0 and keep off-diagonals
    return (R[0] == 1.0 and R[4] == 1.0 and R[8] == 1.0 and R[1] == 0.0 and R[2] == 0.0
            and R[3] == 0.0 and R[5] == 0.0 and R[6] == 0.0 and R[7] == 0.0)


cdef void _placements(const ModelC* m, DataC* d, const double* q) noexcept nogil:
    """oR, op and Sw of every body (Iw: _world_inertias)."""
    cdef int i, par, k, ax
    cdef double* sc = _sincos_table(m, d)
    cdef double Rj[9]
    cdef double T[9]
    cdef double t[3]
    cdef double* oR
    cdef double* op
    cdef double* S
    cdef const double* a
    cdef const double* qi
    cdef const double* Rt
    cdef const double* pt
    cdef double sn, cs, sg
    _joint_sincos(m, d, q)
    for i in range(m.nbodies):
        par = m.parent[i]
        qi = &q[m.idx_q[i]]
        a = &m.axis[3 * i]
        oR = &d.oR[9 * i]
        op = &d.op[3 * i]
        Rt = &m.R_tree[9 * i]
        pt = &m.p_tree[3 * i]
        # frame of the joint before it moves: oR = oR_parent @ R_tree, op = op_parent + oR_parent @ p_tree
        if par < 0:
            memcpy(oR, Rt, 9 * sizeof(double))
            op[0] = pt[0]; op[1] = pt[1]; op[2] = pt[2]
        else:
            if _is_identity(Rt):
                memcpy(oR, &d.oR[9 * par], 9 * sizeof(double))
            else:
                mat3_mul(&d.oR[9 * par], Rt, oR)
            mat3_vec(&d.oR[9 * par], pt, op)
            op[0] += d.op[3 * par]; op[1] += d.op[3 * par + 1]; op[2] += d.op[3 * par + 2]
        S = &d.Sw[6 * m.idx_v[i]]
        if m.jtype[i] == JOINT_REVOLUTE:
            ax = _aligned_axis(a)
            if ax >= 0:
                sg = a[ax]
                _rotate_columns(oR, ax, sc[2 * i + 1], sg * sc[2 * i])
                S[3] = sg * oR[ax]; S[4] = sg * oR[3 + ax]; S[5] = sg * oR[6 + ax]
            else:
                _axis_rotation(a, sc[2 * i], sc[2 * i + 1], Rj)
                memcpy(T, oR, 9 * sizeof(double))
                mat3_mul(T, Rj, oR)
                mat3_vec(oR, a, &S[3])
            cross3(op, &S[3], &S[0])
        elif m.jtype[i] == JOINT_PRISMATIC:
            mat3_vec(oR, a, &S[0])
            S[3] = 0.0; S[4] = 0.0; S[5] = 0.0
            op[0] += S[0] * qi[0]; op[1] += S[1] * qi[0]; op[2] += S[2] * qi[0]
        else:
            # free-flyer (root): oR = R_tree @ R(quat), op = p_tree + R_tree @ xyz
            mat3_vec(oR, qi, t)
            op[0] += t[0]; op[1] += t[1]; op[2] += t[2]
            _quat_to_matrix(&qi[3], Rj)
            memcpy(T, oR, 9 * sizeof(double))
            mat3_mul(T, Rj, oR)
            for k in range(3):
                # linear columns: (R e_k, 0); angular: (p x R e_k, R e_k)
                S[6 * k + 0] = oR[k]; S[6 * k + 1] = oR[3 + k]; S[6 * k + 2] = oR[6 + k]
                S[6 * k + 3] = 0.0; S[6 * k + 4] = 0.0; S[6 * k + 5] = 0.0
                S[6 * (k + 3) + 3] = oR[k]; S[6 * (k + 3) + 4] = oR[3 + k]
                S[6 * (k + 3) + 5] = oR[6 + k]
                cross3(op, &S[6 * (k + 3) + 3], &S[6 * (k + 3)])


cdef void _world_inertias(const ModelC* m, DataC* d) noexcept nogil:
    """Iw: every body's inertia in the world frame, COM form (after _placements)."""
    cdef int i
    cdef double* oR
    for i in range(m.nbodies):
        oR = &d.oR[9 * i]
        mat3_vec(oR, &m.com[3 * i], &d.Iw[12 * i])
        d.Iw[12 * i] += d.op[3 * i]; d.Iw[12 * i + 1] += d.op[3 * i + 1]
        d.Iw[12 * i + 2] += d.op[3 * i + 2]
        mat3_congruence_sym(oR, &m.I_com[9 * i], &d.Iw[12 * i + 3])


cdef inline void _joint_motion(const ModelC* m, const DataC* d, int i, const double* x,
                               double* out) noexcept nogil:
    # out = S_i @ x[idx_v[i]:...]  (world)
    cdef int k, nvj = m.nv_joint[i], iv = m.idx_v[i]
    cdef const double* S = &d.Sw[6 * iv]
    cdef double xk
    xk = x[iv]
    out[0] = S[0] * xk; out[1] = S[1] * xk; out[2] = S[2] * xk
    out[3] = S[3] * xk; out[4] = S[4] * xk; out[5] = S[5] * xk
    for k in range(1, nvj):
        xk = x[iv + k]
        out[0] += S[6 * k] * xk; out[1] += S[6 * k + 1] * xk; out[2] += S[6 * k + 2] * xk
        out[3] += S[6 * k + 3] * xk; out[4] += S[6 * k + 4] * xk; out[5] += S[6 * k + 5] * xk


cdef void fk_c(const ModelC* m, DataC* d, const double* q, const double* v) noexcept nogil:
    """Placements (oR, op), Sw, Iw; with v: world and local body velocities."""
    cdef int i, par, k
    cdef double Sq[6]
    _placements(m, d, q)
    _world_inertias(m, d)
    if v == NULL:
        return
    for i in range(m.nbodies):
        par = m.parent[i]
        _joint_motion(m, d, i, v, Sq)
        for k in range(6):
            d.vw[6 * i + k] = Sq[k] + (d.vw[6 * par + k] if par >= 0 else 0.0)
        _motion_to_local(&d.oR[9 * i], &d.op[3 * i], &d.vw[6 * i], &d.v_local[6 * i])


cdef inline void _local_placement(const ModelC* m, int i, const double* q, const double* sc,
                                  double* R, double* p) noexcept nogil:
    """(R, p): body i's frame in its parent's frame at configuration q.

    sc: the (sin q, cos q) table of _joint_sincos.
    """
    cdef const double* a = &m.axis[3 * i]
    cdef const double* qi = &q[m.idx_q[i]]
    cdef const double* Rt = &m.R_tree[9 * i]
    cdef const double* pt = &m.p_tree[3 * i]
    cdef double Rj[9]
    cdef double t[3]
    cdef int ax
    cdef double sg
    if m.jtype[i] == JOINT_REVOLUTE:
        p[0] = pt[0]; p[1] = pt[1]; p[2] = pt[2]
        ax = _aligned_axis(a)
        if ax >= 0:
            memcpy(R, Rt, 9 * sizeof(double))
            sg = a[ax]
            _rotate_columns(R, ax, sc[2 * i + 1], sg * sc[2 * i])
        else:
            _axis_rotation(a, sc[2 * i], sc[2 * i + 1], Rj)
            mat3_mul(Rt, Rj, R)
    elif m.jtype[i] == JOINT_PRISMATIC:
        memcpy(R, Rt, 9 * sizeof(double))
        t[0] = a[0] * qi[0]; t[1] = a[1] * qi[0]; t[2] = a[2] * qi[0]
        mat3_vec(Rt, t, p)
        p[0] += pt[0]; p[1] += pt[1]; p[2] += pt[2]
    else:
        _quat_to_matrix(&qi[3], Rj)
        mat3_mul(Rt, Rj, R)
        mat3_vec(Rt, qi, p)
        p[0] += pt[0]; p[1] += pt[1]; p[2] += pt[2]


cdef inline void _inertia_apply_local(const ModelC* m, int i, const double* V,
                                      double* out) noexcept nogil:
    # body inertia in its own frame (COM form): lin = m (v - c x w); ang = Ic w + c x lin
    cdef double t[3]
    cdef const double* c = &m.com[3 * i]
    cdef double mm = m.mass[i]
    cross3(c, &V[3], t)
    out[0] = mm * (V[0] - t[0]); out[1] = mm * (V[1] - t[1]); out[2] = mm * (V[2] - t[2])
    mat3_vec(&m.I_com[9 * i], &V[3], &out[3])
    cross3(c, &out[0], t)
    out[3] += t[0]; out[4] += t[1]; out[5] += t[2]


cdef inline void _motion_inv(const double* R, const double* p, const double* Vp,
                             double* out) noexcept nogil:
    # parent-frame motion -> child frame: (R^T (v - p x w), R^T w)
    cdef double t[3]
    cross3(p, &Vp[3], t)
    t[0] = Vp[0] - t[0]; t[1] = Vp[1] - t[1]; t[2] = Vp[2] - t[2]
    mat3t_vec(R, t, &out[0])
    mat3t_vec(R, &Vp[3], &out[3])


cdef void rnea_c(const ModelC* m, DataC* d, const double* q, const double* v,
                 const double* a, const double* fext, int with_gravity,
                 double* tau) noexcept nogil:
    """tau = M(q) a + C(q, v) v + g(q) - J^T fext (v, a, fext may be NULL = 0).

    Local-frame recursion (Pinocchio's): no world placements or world
    inertias are needed, which makes it ~25% cheaper than the world form.
    Uses d.Ia as scratch; leaves d.oR, d.op, d.Sw, d.vw untouched.
    """
    cdef int i, par, k, nvj, iv
    cdef double Sq[6]
    cdef double t[6]
    cdef double h[6]
    cdef double fp[6]
    cdef double* W
    cdef double* R
    cdef double* p
    cdef double* V
    cdef double* A
    cdef double* F
    cdef const double* ax
    cdef double ag[6]
    cdef double qd, qdd
    ag[0] = 0.0; ag[1] = 0.0; ag[2] = 0.0; ag[3] = 0.0; ag[4] = 0.0; ag[5] = 0.0
    if with_gravity:
        ag[0] = -m.gravity[0]; ag[1] = -m.gravity[1]; ag[2] = -m.gravity[2]
    cdef const double* sc = _sincos_table(m, d)
    _joint_sincos(m, d, q)
    for i in range(m.nbodies):
        # per-body scratch in d.Ia: R (9) p (3) V (6) A (6) F (6)
        W = &d.Ia[36 * i]
        R = &W[0]; p = &W[9]; V = &W[12]; A = &W[18]; F = &W[24]
        par = m.parent[i]
        iv = m.idx_v[i]
        _local_placement(m, i, q, sc, R, p)
        if par >= 0:
            _motion_inv(R, p, &d.Ia[36 * par + 12], V)
            _motion_inv(R, p, &d.Ia[36 * par + 18], A)
        else:
            V[0] = 0.0; V[1] = 0.0; V[2] = 0.0; V[3] = 0.0; V[4] = 0.0; V[5] = 0.0
            _motion_inv(R, p, ag, A)
        if m.jtype[i] == JOINT_FREEFLYER:
            # S = identity: v_0 = nu, a_0 += nu_dot (v x v = 0)
            for k in range(6):
                if v != NULL:
                    V[k] += v[iv + k]
                if a != NULL:
                    A[k] += a[iv + k]
        else:
            ax = &m.axis[3 * i]
            qd = v[iv] if v != NULL else 0.0
            qdd = a[iv] if a != NULL else 0.0
            Sq[0] = 0.0; Sq[1] = 0.0; Sq[2] = 0.0; Sq[3] = 0.0; Sq[4] = 0.0; Sq[5] = 0.0
            k = 3 if m.jtype[i] == JOINT_REVOLUTE else 0
            Sq[k] = ax[0] * qd; Sq[k + 1] = ax[1] * qd; Sq[k + 2] = ax[2] * qd
            A[k] += ax[0] * qdd; A[k + 1] += ax[1] * qdd; A[k + 2] += ax[2] * qdd
            for k in range(6):
                V[k] += Sq[k]
            if qd != 0.0:
                _motion_cross(V, Sq, t)
                for k in range(6):
                    A[k] += t[k]
        _inertia_apply_local(m, i, A, F)
        if v != NULL:
            _inertia_apply_local(m, i, V, h)
            _force_cross_add(V, h, F)
        if fext != NULL:
            for k in range(6):
                F[k] -= fext[6 * i + k]
    for i in range(m.nbodies - 1, -1, -1):
        W = &d.Ia[36 * i]
        R = &W[0]; p = &W[9]; F = &W[24]
        par = m.parent[i]
        iv = m.idx_v[i]
        if m.jtype[i] == JOINT_FREEFLYER:
            for k in range(6):
                tau[iv + k] = F[k]
        else:
            ax = &m.axis[3 * i]
            k = 3 if m.jtype[i] == JOINT_REVOLUTE else 0
            tau[iv] = ax[0] * F[k] + ax[1] * F[k + 1] + ax[2] * F[k + 2]
        if par >= 0:
            # parent += X f: (R f_lin, R f_ang + p x R f_lin)
            mat3_vec(R, &F[0], &fp[0])
            mat3_vec(R, &F[3], &fp[3])
            cross3(p, &fp[0], t)
            F = &d.Ia[36 * par + 24]
            F[0] += fp[0]; F[1] += fp[1]; F[2] += fp[2]
            F[3] += fp[3] + t[0]; F[4] += fp[4] + t[1]; F[5] += fp[5] + t[2]


cdef inline void _composite_init(const ModelC* m, DataC* d, int i) noexcept nogil:
    # origin form of the world inertia of body i: m, h = m c, I_O = Ic - m [c]x^2
    cdef double* Y = &d.Yc[10 * i]
    cdef const double* c = &d.Iw[12 * i]
    cdef const double* Ic = &d.Iw[12 * i + 3]
    cdef double mm = m.mass[i]
    Y[0] = mm
    Y[1] = mm * c[0]; Y[2] = mm * c[1]; Y[3] = mm * c[2]
    Y[4] = Ic[0] + mm * (c[1] * c[1] + c[2] * c[2])
    Y[5] = Ic[1] - mm * c[0] * c[1]
    Y[6] = Ic[4] + mm * (c[0] * c[0] + c[2] * c[2])
    Y[7] = Ic[2] - mm * c[0] * c[2]
    Y[8] = Ic[5] - mm * c[1] * c[2]
    Y[9] = Ic[8] + mm * (c[0] * c[0] + c[1] * c[1])


cdef void crba_c(const ModelC* m, DataC* d, const double* q, double* M) noexcept nogil:
    """Joint-space inertia matrix M(q), full symmetric (nv, nv) row-major."""
    cdef int i, j, k, l, r, par, nv = m.nv
    cdef double F[6]
    cdef double x
    # pairs of joints on different branches stay zero
    memset(M, 0, nv * nv * sizeof(double))
    _placements(m, d, q)
    _world_inertias(m, d)
    for i in range(m.nbodies):
        _composite_init(m, d, i)
    for i in range(m.nbodies - 1, 0, -1):
        par = m.parent[i]
        if par >= 0:
            for k in range(10):
                d.Yc[10 * par + k] += d.Yc[10 * i + k]
    for i in range(m.nbodies):
        for l in range(m.idx_v[i], m.idx_v[i] + m.nv_joint[i]):
            _origin_apply(&d.Yc[10 * i], &d.Sw[6 * l], F)
            for k in range(m.idx_v[i], l + 1):
                x = dot6(&d.Sw[6 * k], F)
                M[nv * k + l] = x
                M[nv * l + k] = x
            j = m.parent[i]
            while j >= 0:
                for k in range(m.idx_v[j], m.idx_v[j] + m.nv_joint[j]):
                    x = dot6(&d.Sw[6 * k], F)
                    M[nv * k + l] = x
                    M[nv * l + k] = x
                j = m.parent[j]


cdef inline void _spatial_inertia6(const ModelC* m, const DataC* d, int i, double* I6) noexcept nogil:
    # 6x6 (lin, ang) world inertia at the world origin: [[m 1, -[h]x], [[h]x, I_O]]
    cdef double mm = m.mass[i]
    cdef const double* c = &d.Iw[12 * i]
    cdef const double* Ic = &d.Iw[12 * i + 3]
    cdef double hx = mm * c[0], hy = mm * c[1], hz = mm * c[2]
    cdef double Ixx = Ic[0] + mm * (c[1] * c[1] + c[2] * c[2])
    cdef double Iyy = Ic[4] + mm * (c[0] * c[0] + c[2] * c[2])
    cdef double Izz = Ic[8] + mm * (c[0] * c[0] + c[1] * c[1])
    cdef double Ixy = Ic[1] - mm * c[0] * c[1]
    cdef double Ixz = Ic[2] - mm * c[0] * c[2]
    cdef double Iyz = Ic[5] - mm * c[1] * c[2]
    I6[0] = mm;   I6[1] = 0.0;  I6[2] = 0.0;  I6[3] = 0.0;  I6[4] = hz;   I6[5] = -hy
    I6[6] = 0.0;  I6[7] = mm;   I6[8] = 0.0;  I6[9] = -hz;  I6[10] = 0.0; I6[11] = hx
    I6[12] = 0.0; I6[13] = 0.0; I6[14] = mm;  I6[15] = hy;  I6[16] = -hx; I6[17] = 0.0
    I6[18] = 0.0; I6[19] = -hz; I6[20] = hy;  I6[21] = Ixx; I6[22] = Ixy; I6[23] = Ixz
    I6[24] = hz;  I6[25] = 0.0; I6[26] = -hx; I6[27] = Ixy; I6[28] = Iyy; I6[29] = Iyz
    I6[30] = -hy; I6[31] = hx;  I6[32] = 0.0; I6[33] = Ixz; I6[34] = Iyz; I6[35] = Izz


cdef int _ldlt6(const double* A, double* b, double* work) noexcept nogil:
    # The shared LDL^T solve at n = 6, kept out of line: inlined into aba_c's
    # loop it made ABA ~4% slower (bench dynamics, ur5 / solo12 / talos).
    return ldlt_solve(6, A, b, work)


cdef int aba_c(const ModelC* m, DataC* d, const double* q, const double* v,
               const double* tau, const double* fext, double* ddq) noexcept nogil:
    """Forward dynamics ddq = M^-1 (tau + J^T fext - C v - g); 0, or -1 if singular."""
    cdef int i, par, k, r, iv
    cdef double Sq[6]
    cdef double h[6]
    cdef double t[6]
    cdef double pa[6]
    cdef double* V
    cdef double* Ia
    cdef double* U
    cdef double* A
    cdef const double* S
    cdef double D, Dinv, uu, x
    cdef double* P
    cdef double ag[6]
    ag[0] = -m.gravity[0]; ag[1] = -m.gravity[1]; ag[2] = -m.gravity[2]
    ag[3] = 0.0; ag[4] = 0.0; ag[5] = 0.0
    _placements(m, d, q)
    _world_inertias(m, d)
    for i in range(m.nbodies):
        par = m.parent[i]
        V = &d.vw[6 * i]
        _joint_motion(m, d, i, v, Sq)
        if par >= 0:
            for k in range(6):
                V[k] = d.vw[6 * par + k] + Sq[k]
        else:
            for k in range(6):
                V[k] = Sq[k]
        _motion_cross(V, Sq, &d.cw[6 * i])
        _spatial_inertia6(m, d, i, &d.Ia[36 * i])
        _inertia_apply(&m.mass[i], &d.Iw[12 * i], V, h)
        memset(&d.pA[6 * i], 0, 6 * sizeof(double))
        _force_cross_add(V, h, &d.pA[6 * i])
        if fext != NULL:
            _force_to_world(&d.oR[9 * i], &d.op[3 * i], &fext[6 * i], t)
            for k in range(6):
                d.pA[6 * i + k] -= t[k]
    for i in range(m.nbodies - 1, -1, -1):
        if m.jtype[i] == JOINT_FREEFLYER:
            continue
        par = m.parent[i]
        iv = m.idx_v[i]
        S = &d.Sw[6 * iv]
        Ia = &d.Ia[36 * i]
        U = &d.U[6 * iv]
        mat6_vec(Ia, S, U)
        D = dot6(S, U)
        if not D > 0.0:
            return i + 1
        Dinv = 1.0 / D
        d.Dinv[iv] = Dinv
        uu = tau[iv] - dot6(S, &d.pA[6 * i])
        d.u[iv] = uu
        if par >= 0:
            # Ia_a = Ia - U U^T / D ; pa = pA + Ia_a c + U u / D
            for r in range(6):
                x = U[r] * Dinv
                for k in range(r, 6):
                    Ia[6 * r + k] -= x * U[k]
                    Ia[6 * k + r] = Ia[6 * r + k]
            mat6_vec(Ia, &d.cw[6 * i], pa)
            P = &d.pA[6 * par]
            x = uu * Dinv
            for k in range(6):
                P[k] += d.pA[6 * i + k] + pa[k] + U[k] * x
            P = &d.Ia[36 * par]
            for k in range(36):
                P[k] += Ia[k]
    for i in range(m.nbodies):
        par = m.parent[i]
        A = &d.aw[6 * i]
        iv = m.idx_v[i]
        if m.jtype[i] == JOINT_FREEFLYER:
            # S invertible: A0 = Ia^-1 (S^-T tau - pA), ddq = S^-1 (A0 - a_g)
            _force_to_world(&d.oR[9 * i], &d.op[3 * i], &tau[iv], t)
            for k in range(6):
                A[k] = t[k] - d.pA[6 * i + k]
            if _ldlt6(&d.Ia[36 * i], A, d.scratch) != 0:
                return i + 1
            for k in range(6):
                t[k] = A[k] - ag[k]
            _motion_to_local(&d.oR[9 * i], &d.op[3 * i], t, &ddq[iv])
            continue
        if par >= 0:
            for k in range(6):
                A[k] = d.aw[6 * par + k] + d.cw[6 * i + k]
        else:
            for k in range(6):
                A[k] = ag[k] + d.cw[6 * i + k]
        S = &d.Sw[6 * iv]
        ddq[iv] = (d.u[iv] - dot6(&d.U[6 * iv], A)) * d.Dinv[iv]
        for k in range(6):
            A[k] += S[k] * ddq[iv]
    return 0


cdef void jacobian_c(const ModelC* m, DataC* d, int body, const double* R_local,
                     const double* p_local, int frame, double* J) noexcept nogil:
    """(6, nv) Jacobian of a frame fixed on ``body`` (after fk_c), rows (lin; ang).

    R_local, p_local: the frame's placement in the body frame (NULL = body
    frame).  frame: FRAME_WORLD, FRAME_LOCAL or FRAME_LOCAL_WORLD_ALIGNED.
    """
    cdef int j, k, r, nv = m.nv
    cdef double oRf[9]
    cdef double opf[3]
    cdef double t[3]
    cdef double col[6]
    cdef double loc[6]
    cdef const double* S
    memset(J, 0, 6 * nv * sizeof(double))
    if body < 0:
        return
    if R_local != NULL:
        mat3_mul(&d.oR[9 * body], R_local, oRf)
    else:
        memcpy(oRf, &d.oR[9 * body], 9 * sizeof(double))
    memcpy(opf, &d.op[3 * body], 3 * sizeof(double))
    if p_local != NULL:
        mat3_vec(&d.oR[9 * body], p_local, t)
        opf[0] += t[0]; opf[1] += t[1]; opf[2] += t[2]
    j = body
    while j >= 0:
        for k in range(m.idx_v[j], m.idx_v[j] + m.nv_joint[j]):
            S = &d.Sw[6 * k]
            if frame == FRAME_WORLD:
                memcpy(col, S, 6 * sizeof(double))
            else:
                # velocity of the frame origin: v - p x w
                cross3(opf, &S[3], t)
                col[0] = S[0] - t[0]; col[1] = S[1] - t[1]; col[2] = S[2] - t[2]
                col[3] = S[3]; col[4] = S[4]; col[5] = S[5]
                if frame == FRAME_LOCAL:
                    mat3t_vec(oRf, &col[0], &loc[0])
                    mat3t_vec(oRf, &col[3], &loc[3])
                    memcpy(col, loc, 6 * sizeof(double))
            for r in range(6):
                J[nv * r + k] = col[r]
        j = m.parent[j]


cdef void com_c(const ModelC* m, DataC* d, const double* q, double* com,
                double* Jcom) noexcept nogil:
    """Centre of mass (3,) in world [m]; with Jcom != NULL its (3, nv) Jacobian."""
    cdef int i, k, par, nv = m.nv
    cdef double* Y
    cdef double t[3]
    cdef const double* S
    cdef double invm = 1.0 / m.total_mass if m.total_mass > 0 else 0.0
    _placements(m, d, q)
    for i in range(m.nbodies):
        Y = &d.Yc[10 * i]
        mat3_vec(&d.oR[9 * i], &m.com[3 * i], t)
        Y[0] = m.mass[i]
        Y[1] = m.mass[i] * (t[0] + d.op[3 * i])
        Y[2] = m.mass[i] * (t[1] + d.op[3 * i + 1])
        Y[3] = m.mass[i] * (t[2] + d.op[3 * i + 2])
    com[0] = 0.0; com[1] = 0.0; com[2] = 0.0
    for i in range(m.nbodies - 1, -1, -1):
        par = m.parent[i]
        Y = &d.Yc[10 * i]
        if par >= 0:
            for k in range(4):
                d.Yc[10 * par + k] += Y[k]
        else:
            com[0] += Y[1]; com[1] += Y[2]; com[2] += Y[3]
    com[0] *= invm; com[1] *= invm; com[2] *= invm
    if Jcom == NULL:
        return
    for i in range(m.nbodies):
        Y = &d.Yc[10 * i]
        for k in range(m.idx_v[i], m.idx_v[i] + m.nv_joint[i]):
            S = &d.Sw[6 * k]
            # subtree momentum of the unit joint motion: m_sub v + w x h_sub
            cross3(&S[3], &Y[1], t)
            Jcom[k] = (Y[0] * S[0] + t[0]) * invm
            Jcom[nv + k] = (Y[0] * S[1] + t[1]) * invm
            Jcom[2 * nv + k] = (Y[0] * S[2] + t[2]) * invm


cdef inline void _body_regressor_world(const double* R, const double* p, const double* v,
                                       const double* a, double* B) noexcept nogil:
    """Body regressor of one body, columns moved to the world frame.

    f = I a + v x* (I v) = B(v, a) theta with theta = [m, h_x, h_y, h_z, Ixx,
    Ixy, Iyy, Ixz, Iyz, Izz] (Pinocchio's order, about the body origin);
    v, a local (lin; ang).  Output B (42,): the mass and the three first-moment
    columns as world 6-vectors (4 x 6), then the six inertia columns, whose
    linear part is zero, as world torques (6 x 3).
    Local closed forms: mass column (f_m, 0) with f_m = a_lin + w x v_lin;
    h_c column (alpha x e_c + w (w . e_c) - |w|^2 e_c, e_c x f_m); inertia
    column E: (0, E alpha + w x (E w)).
    """
    cdef const double* vl = &v[0]
    cdef const double* w = &v[3]
    cdef const double* al = &a[0]
    cdef const double* aa = &a[3]
    cdef double fm[3]
    cdef double fmw[3]
    cdef double t[3]
    cdef double n[3]
    cdef double Rc[3]
    cdef double* col
    cdef double ww = w[0] * w[0] + w[1] * w[1] + w[2] * w[2]
    cdef int c
    cross3(w, vl, t)
    fm[0] = al[0] + t[0]; fm[1] = al[1] + t[1]; fm[2] = al[2] + t[2]
    mat3_vec(R, fm, fmw)
    B[0] = fmw[0]; B[1] = fmw[1]; B[2] = fmw[2]
    cross3(p, fmw, &B[3])
    for c in range(3):
        col = &B[6 + 6 * c]
        # local f = alpha x e_c + w w_c - |w|^2 e_c
        t[0] = w[0] * w[c]; t[1] = w[1] * w[c]; t[2] = w[2] * w[c]
        t[c] -= ww
        t[(c + 1) % 3] += aa[(c + 2) % 3]
        t[(c + 2) % 3] -= aa[(c + 1) % 3]
        mat3_vec(R, t, col)
        # world n = (R e_c) x (R f_m) + p x f_w
        Rc[0] = R[c]; Rc[1] = R[3 + c]; Rc[2] = R[6 + c]
        cross3(Rc, fmw, &col[3])
        cross3(p, col, t)
        col[3] += t[0]; col[4] += t[1]; col[5] += t[2]
    # inertia columns (Ixx, Ixy, Iyy, Ixz, Iyz, Izz): local torques, then rotated
    n[0] = aa[0]; n[1] = w[0] * w[2]; n[2] = -w[0] * w[1]
    mat3_vec(R, n, &B[24])
    n[0] = aa[1] - w[0] * w[2]; n[1] = aa[0] + w[1] * w[2]; n[2] = w[0] * w[0] - w[1] * w[1]
    mat3_vec(R, n, &B[27])
    n[0] = -w[1] * w[2]; n[1] = aa[1]; n[2] = w[0] * w[1]
    mat3_vec(R, n, &B[30])
    n[0] = aa[2] + w[0] * w[1]; n[1] = w[2] * w[2] - w[0] * w[0]; n[2] = aa[0] - w[1] * w[2]
    mat3_vec(R, n, &B[33])
    n[0] = w[1] * w[1] - w[2] * w[2]; n[1] = aa[2] - w[0] * w[1]; n[2] = aa[1] + w[0] * w[2]
    mat3_vec(R, n, &B[36])
    n[0] = w[1] * w[2]; n[1] = -w[0] * w[2]; n[2] = aa[2]
    mat3_vec(R, n, &B[39])


cdef void regressor_c(const ModelC* m, DataC* d, const double* q, const double* v,
                      const double* a, double* Y) noexcept nogil:
    """Y (nv, 10 nbodies + 4 n_actuated), row-major: tau = Y [theta; friction]."""
    _regressor_zeros(m, d, Y)
    _regressor_blocks(m, d, q, v, a, Y)


cdef void _regressor_zeros(const ModelC* m, DataC* d, double* Y) noexcept nogil:
    """Zero every entry of Y that _regressor_blocks does not write."""
    cdef int i, k, par, last, ncol = 10 * m.nbodies + 4 * m.n_actuated
    cdef double* row
    cdef double* lastd = d.scratch
    # Bodies are in depth-first preorder (checked by Model), so body b's subtree
    # is the range [b, last(b)] and row k of b's joint is only written in the
    # blocks of that range: zero the rest instead of the whole Y (a memset of
    # Y was a quarter of the time on solo12).
    for i in range(m.nbodies):
        lastd[i] = i
    for i in range(m.nbodies - 1, -1, -1):
        par = m.parent[i]
        if par >= 0 and lastd[i] > lastd[par]:
            lastd[par] = lastd[i]
    for i in range(m.nbodies):
        last = <int>lastd[i]
        for k in range(m.idx_v[i], m.idx_v[i] + m.nv_joint[i]):
            row = &Y[ncol * k]
            memset(row, 0, 10 * i * sizeof(double))
            memset(&row[10 * (last + 1)], 0, (ncol - 10 * (last + 1)) * sizeof(double))


cdef void _regressor_blocks(const ModelC* m, DataC* d, const double* q, const double* v,
                            const double* a, double* Y) noexcept nogil:
    """The entries of Y that can be nonzero (body blocks on their support
    rows, friction columns); the rest must be zero already.  regressor_c
    zeroes only that rest; the batch form memsets each state's whole block."""
    cdef int i, j, k, c, par, ncol = 10 * m.nbodies + 4 * m.n_actuated
    cdef double Sq[6]
    cdef double Sa[6]
    cdef double t[6]
    cdef double vl[6]
    cdef double al[6]
    cdef double* V
    cdef double* A
    cdef double* B
    cdef double* row
    cdef const double* S
    cdef int fi
    _placements(m, d, q)
    for i in range(m.nbodies):
        par = m.parent[i]
        V = &d.vw[6 * i]
        A = &d.aw[6 * i]
        _joint_motion(m, d, i, v, Sq)
        _joint_motion(m, d, i, a, Sa)
        if par >= 0:
            for k in range(6):
                V[k] = d.vw[6 * par + k] + Sq[k]
                A[k] = d.aw[6 * par + k] + Sa[k]
        else:
            for k in range(6):
                V[k] = Sq[k]
                A[k] = Sa[k]
            A[0] -= m.gravity[0]; A[1] -= m.gravity[1]; A[2] -= m.gravity[2]
        _motion_cross(V, Sq, t)
        for k in range(6):
            A[k] += t[k]
        _motion_to_local(&d.oR[9 * i], &d.op[3 * i], V, vl)
        _motion_to_local(&d.oR[9 * i], &d.op[3 * i], A, al)
        B = &d.Bw[60 * i]
        _body_regressor_world(&d.oR[9 * i], &d.op[3 * i], vl, al, B)
        # rows of every joint on the support of body i: Y[k, 10 i + c] = S_k . B_c
        j = i
        while j >= 0:
            for k in range(m.idx_v[j], m.idx_v[j] + m.nv_joint[j]):
                S = &d.Sw[6 * k]
                row = &Y[ncol * k + 10 * i]
                row[0] = dot6(S, &B[0])
                row[1] = dot6(S, &B[6])
                row[2] = dot6(S, &B[12])
                row[3] = dot6(S, &B[18])
                for c in range(6):
                    row[4 + c] = S[3] * B[24 + 3 * c] + S[4] * B[25 + 3 * c] + S[5] * B[26 + 3 * c]
            j = m.parent[j]
    # friction / armature columns [sign(v), v, a, 1] per actuated joint
    fi = 0
    for i in range(m.nbodies):
        if m.jtype[i] == JOINT_FREEFLYER:
            continue
        k = m.idx_v[i]
        c = 10 * m.nbodies + 4 * fi
        Y[ncol * k + c] = 1.0 if v[k] > 0.0 else (-1.0 if v[k] < 0.0 else 0.0)
        Y[ncol * k + c + 1] = v[k]
        Y[ncol * k + c + 2] = a[k]
        Y[ncol * k + c + 3] = 1.0
        fi += 1


cdef void integrate_c(const ModelC* m, const double* q, const double* v, double dt,
                      double* qout) noexcept nogil:
    """qout = q (+) v dt; the free-flyer moves by exp6 of its local twist (Pinocchio)."""
    cdef int i, iq, iv
    cdef double w[3]
    cdef double u[3]
    cdef double R[9]
    cdef double t[3]
    cdef double t2[3]
    cdef double th, th2, A, Bc, s, c, n, qx, qy, qz, qw, ex, ey, ez, ew
    for i in range(m.nbodies):
        iq = m.idx_q[i]
        iv = m.idx_v[i]
        if m.jtype[i] != JOINT_FREEFLYER:
            qout[iq] = q[iq] + v[iv] * dt
            continue
        u[0] = v[iv] * dt; u[1] = v[iv + 1] * dt; u[2] = v[iv + 2] * dt
        w[0] = v[iv + 3] * dt; w[1] = v[iv + 4] * dt; w[2] = v[iv + 5] * dt
        th2 = dot3(w, w)
        th = sqrt(th2)
        # translation part of exp6: V u, V = I + A [w]x + Bc [w]x^2
        if th < 1e-4:
            A = 0.5 - th2 / 24.0
            Bc = 1.0 / 6.0 - th2 / 120.0
        else:
            A = (1.0 - cos(th)) / th2
            Bc = (th - sin(th)) / (th2 * th)
        cross3(w, u, t)
        cross3(w, t, t2)
        t[0] = u[0] + A * t[0] + Bc * t2[0]
        t[1] = u[1] + A * t[1] + Bc * t2[1]
        t[2] = u[2] + A * t[2] + Bc * t2[2]
        _quat_to_matrix(&q[iq + 3], R)
        mat3_vec(R, t, t2)
        qout[iq] = q[iq] + t2[0]; qout[iq + 1] = q[iq + 1] + t2[1]; qout[iq + 2] = q[iq + 2] + t2[2]
        # rotation: q (x) exp(w / 2)
        if th < 1e-4:
            s = 0.5 - th2 / 48.0
            c = 1.0 - th2 / 8.0
        else:
            s = sin(0.5 * th) / th
            c = cos(0.5 * th)
        ex = w[0] * s; ey = w[1] * s; ez = w[2] * s; ew = c
        qx = q[iq + 3]; qy = q[iq + 4]; qz = q[iq + 5]; qw = q[iq + 6]
        t[0] = qw * ex + qx * ew + qy * ez - qz * ey
        t[1] = qw * ey - qx * ez + qy * ew + qz * ex
        t[2] = qw * ez + qx * ey - qy * ex + qz * ew
        n = qw * ew - qx * ex - qy * ey - qz * ez
        s = 1.0 / sqrt(t[0] * t[0] + t[1] * t[1] + t[2] * t[2] + n * n)
        qout[iq + 3] = t[0] * s; qout[iq + 4] = t[1] * s; qout[iq + 5] = t[2] * s
        qout[iq + 6] = n * s


include "_dynamics_api.pxi"
