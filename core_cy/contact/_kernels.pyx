# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled contact kernels (nogil, no allocation).

Compliant law of seed 002 with its errata fixed (A9: depth**e with a positive
depth; A10: optional clamp f_n >= 0; A11: friction opposes slip; A12: per-axis
or elliptic cone), plane detection for points, spheres and box corners, and a
projected Gauss-Seidel solver for the boxed LCP of rigid contact (normal
impulse complementarity plus a friction pyramid, or an elliptic cone).

The ``def`` functions at the end are thin entry points for core_cy/contact/laws.py
and the tests; the ``cdef`` kernels are what core_cy/sim/_kernels.pyx cimports.
"""

from libc.math cimport fabs, fmax, pow, sqrt

from servoloop.core_cy.linalg._dense cimport cross3, dot3, mat3_vec, mat3t_vec, matvec_add

import numpy as np

__all__ = [
    "law_from_dict", "normal_force_np", "damping_ramp_np", "friction_coefficient_np",
    "friction_force_np", "contact_force_np", "plane_frame_np", "box_plane_np", "pgs_solve_np",
]


cdef inline double _clamp(double x, double lo, double hi) noexcept nogil:
    return lo if x < lo else (hi if x > hi else x)


cdef double smoothstep(double x) noexcept nogil:
    """S(x) = 3x^2 - 2x^3 clamped to [0, 1] (C1 at both ends)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    return x * x * (3.0 - 2.0 * x)


cdef inline double _step(double x, double x0, double h0, double x1, double h1) noexcept nogil:
    # ADAMS STEP: h0 + (h1 - h0) * S((x - x0) / (x1 - x0))
    return h0 + (h1 - h0) * smoothstep((x - x0) / (x1 - x0))


cdef double damping_ramp(double depth, const ContactLaw* law) noexcept nogil:
    """c(depth) = c_max S(depth / w): 0 at touchdown, c_max from depth w on."""
    if law.ramp_width <= 0.0:
        return law.damping_max if depth > 0.0 else 0.0
    return law.damping_max * smoothstep(depth / law.ramp_width)


cdef double normal_force(double depth, double depth_rate, const ContactLaw* law) noexcept nogil:
    """f_n = K depth^e + c(depth) depth_rate [N]; 0 when depth <= 0.

    depth = -gap >= 0 in contact (erratum A9: raise the positive depth to e),
    depth_rate > 0 while pressing in.  With clamp_normal the ground never
    pulls (erratum A10, as the ADAMS IMPACT function).
    """
    cdef double f
    if depth <= 0.0:
        return 0.0
    f = law.stiffness * pow(depth, law.exponent) + damping_ramp(depth, law) * depth_rate
    if law.clamp_normal and f < 0.0:
        return 0.0
    return f


cdef double friction_coefficient(double slip, const ContactLaw* law) noexcept nogil:
    """Odd, C1 stick-slip coefficient mu(v) (seed 002 eq. 38, ADAMS law).

    |v| <= v_s: STEP(v, -v_s, -mu_s, v_s, mu_s); v_s < |v| <= v_d: sign(v)
    STEP(|v|, v_s, mu_s, v_d, mu_d); beyond: sign(v) mu_d.
    """
    cdef double a = fabs(slip), m
    if a <= law.v_static:
        return _step(slip, -law.v_static, -law.mu_static, law.v_static, law.mu_static)
    if a <= law.v_dynamic:
        m = _step(a, law.v_static, law.mu_static, law.v_dynamic, law.mu_dynamic)
    else:
        m = law.mu_dynamic
    return m if slip > 0.0 else -m


cdef double friction_slope(double slip, const ContactLaw* law) noexcept nogil:
    """d mu / d v (even in v, >= 0 in the stick band, <= 0 in the stick-slip drop)."""
    cdef double a = fabs(slip), x, span
    if a <= law.v_static:
        x = (slip + law.v_static) / (2.0 * law.v_static)
        return 2.0 * law.mu_static * 6.0 * x * (1.0 - x) / (2.0 * law.v_static)
    if a <= law.v_dynamic:
        span = law.v_dynamic - law.v_static
        x = (a - law.v_static) / span
        return (law.mu_dynamic - law.mu_static) * 6.0 * x * (1.0 - x) / span
    return 0.0


cdef void contact_damping(double depth, const double* v_local, const ContactLaw* law,
                          double* D) noexcept nogil:
    """D = -d f / d v_contact (3, 3) row-major in the contact frame, made PSD.

    Used by the linearly implicit Euler step (the paper's stiffness warning:
    mu_s f_n / v_s on a light shank).  Normal: c(depth); friction: f_n times
    the positive part of the friction law's slope (cross terms through f_n
    left out: D only has to stabilise, the force itself stays exact).
    """
    cdef double fn, s, m, ms, ux, uy
    cdef int i
    for i in range(9):
        D[i] = 0.0
    if depth <= 0.0:
        return
    fn = normal_force(depth, -v_local[2], law)
    if fn <= 0.0:
        return
    D[8] = damping_ramp(depth, law)
    if law.cone == 0:
        D[0] = fn * fmax(friction_slope(v_local[0], law), 0.0)
        D[4] = fn * fmax(friction_slope(v_local[1], law), 0.0)
        return
    s = sqrt(v_local[0] * v_local[0] + v_local[1] * v_local[1])
    ms = fmax(friction_slope(s, law), 0.0)
    if s < 1e-9:
        m = 1.5 * law.mu_static / law.v_static  # mu(s)/s -> mu'(0)
        ux = 1.0
        uy = 0.0
        ms = m
    else:
        m = friction_coefficient(s, law) / s
        ux = v_local[0] / s
        uy = v_local[1] / s
    # f_n [ms u u^T + m (I - u u^T)], scaled per axis like the force
    D[0] = fn * law.cone_scale_x * (ms * ux * ux + m * (1.0 - ux * ux))
    D[1] = fn * law.cone_scale_x * (ms - m) * ux * uy
    D[3] = fn * law.cone_scale_y * (ms - m) * ux * uy
    D[4] = fn * law.cone_scale_y * (ms * uy * uy + m * (1.0 - uy * uy))


cdef void friction_force(double vx, double vy, double fn, const ContactLaw* law,
                         double* fx, double* fy) noexcept nogil:
    """Tangential force [N] in the contact frame, opposing the slip (vx, vy) [m/s].

    cone 0: per axis, f_x = -mu(v_x) f_n (square limit, seed 002's printed law).
    cone 1: elliptic, |(f_x/s_x, f_y/s_y)| = mu(|v_t|) f_n along -v_t.
    """
    cdef double s, m
    if fn <= 0.0:
        fx[0] = 0.0
        fy[0] = 0.0
        return
    if law.cone == 0:
        fx[0] = -friction_coefficient(vx, law) * fn
        fy[0] = -friction_coefficient(vy, law) * fn
        return
    s = sqrt(vx * vx + vy * vy)
    if s < 1e-300:
        fx[0] = 0.0
        fy[0] = 0.0
        return
    m = friction_coefficient(s, law) * fn / s
    fx[0] = -m * law.cone_scale_x * vx
    fy[0] = -m * law.cone_scale_y * vy


cdef void contact_force(double depth, const double* v_contact, const double* R_contact,
                        const ContactLaw* law, double* f_world) noexcept nogil:
    """World force [N] on the body at a contact point.

    depth [m] >= 0 in contact; v_contact (3,) the contact point's world
    velocity [m/s]; R_contact (3, 3) row-major, columns (t1, t2, n) in world.
    """
    cdef double v_local[3]
    cdef double f_local[3]
    if depth <= 0.0:
        f_world[0] = 0.0
        f_world[1] = 0.0
        f_world[2] = 0.0
        return
    mat3t_vec(R_contact, v_contact, v_local)
    f_local[2] = normal_force(depth, -v_local[2], law)
    friction_force(v_local[0], v_local[1], f_local[2], law, &f_local[0], &f_local[1])
    mat3_vec(R_contact, f_local, f_world)


cdef void plane_frame(const double* normal, double* R) noexcept nogil:
    """Contact frame (3, 3) row-major: columns t1, t2, n (n = unit plane normal).

    t1 is the world axis least aligned with n, made orthogonal to it, so a
    level ground gives the world-aligned frame (seed 002's {C_k}).
    """
    cdef double a[3]
    cdef double t1[3]
    cdef double t2[3]
    cdef double d, nrm
    cdef int i
    a[0] = 1.0
    a[1] = 0.0
    a[2] = 0.0
    if fabs(normal[0]) > 0.9:
        a[0] = 0.0
        a[1] = 1.0
    d = dot3(a, normal)
    for i in range(3):
        t1[i] = a[i] - d * normal[i]
    nrm = sqrt(dot3(t1, t1))
    for i in range(3):
        t1[i] /= nrm
    cross3(normal, t1, t2)
    for i in range(3):
        R[3 * i] = t1[i]
        R[3 * i + 1] = t2[i]
        R[3 * i + 2] = normal[i]


cdef double point_plane_gap(const double* p, const double* plane_point,
                            const double* normal) noexcept nogil:
    """Signed distance [m] of p above the plane (seed 002 eq. 31, d = n^T (p - P))."""
    return (normal[0] * (p[0] - plane_point[0]) + normal[1] * (p[1] - plane_point[1])
            + normal[2] * (p[2] - plane_point[2]))


cdef int box_plane(const double* center, const double* R_box, const double* half,
                   const double* plane_point, const double* normal,
                   double* points, double* gaps) noexcept nogil:
    """The 8 corners of a box (points (8, 3) world) and their gaps (8,) [m]."""
    cdef int k, i
    cdef double sx, sy, sz, lx, ly, lz
    for k in range(8):
        sx = 1.0 if (k & 1) else -1.0
        sy = 1.0 if (k & 2) else -1.0
        sz = 1.0 if (k & 4) else -1.0
        lx = sx * half[0]
        ly = sy * half[1]
        lz = sz * half[2]
        for i in range(3):
            points[3 * k + i] = center[i] + R_box[3 * i] * lx + R_box[3 * i + 1] * ly + R_box[3 * i + 2] * lz
        gaps[k] = point_plane_gap(&points[3 * k], plane_point, normal)
    return 8


cdef inline double _friction_limit(double mu, double lam_n) noexcept nogil:
    """mu lam_n, and 0 without a normal impulse even for mu = inf (inf * 0 is NaN, which the
    clamp let through: an unloaded or separating contact then held any tangential impulse)."""
    if lam_n <= 0.0:
        return 0.0
    return mu * lam_n


cdef inline void _project_friction(double* lam, double lim, int cone) noexcept nogil:
    cdef double s
    if cone == 0:
        lam[0] = _clamp(lam[0], -lim, lim)
        lam[1] = _clamp(lam[1], -lim, lim)
    else:
        s = sqrt(lam[0] * lam[0] + lam[1] * lam[1])
        if s > lim:
            if s > 0.0:
                lam[0] *= lim / s
                lam[1] *= lim / s


cdef LCPStats pgs_solve(int nc, const double* W, const double* b, const double* mu,
                        double* lam, double* w, int max_iter, double tol, int cone) noexcept nogil:
    """Projected Gauss-Seidel on w = W lam + b for nc contacts, warm-started.

    Per contact the unknowns are ordered (t1, t2, n); W is (3nc, 3nc)
    row-major (the Delassus matrix J M^-1 J^T), b (3nc,) the free contact
    velocity plus stabilisation.  Normal: 0 <= lam_n  _|_  w_n >= 0.
    Friction: |lam_t| <= mu lam_n per axis (cone 0, a square pyramid) or
    on the disc (cone 1), with w_t = 0 inside and opposite to lam_t on the
    boundary.  lam holds the warm start on entry and the impulses on exit;
    w receives W lam + b.
    """
    cdef int n = 3 * nc, it, c, k, j, r
    cdef double delta, maxd, scale, acc, old, lim
    cdef double tmp[2]
    cdef double res2[2]
    cdef double dmax
    cdef LCPStats st
    it = 0
    for it in range(1, max_iter + 1):
        maxd = 0.0
        scale = 1e-12
        for c in range(nc):
            # normal row first so the friction bound uses the fresh lam_n
            r = 3 * c + 2
            # acc = b[r] + W[r] @ lam, written out: linalg's dot_acc here measured
            # +35% per PGS sweep (gcc unrolls the inlined copy worse)
            acc = b[r]
            for j in range(n):
                acc += W[r * n + j] * lam[j]
            old = lam[r]
            if W[r * n + r] > 0.0:
                lam[r] = old - acc / W[r * n + r]
                if lam[r] < 0.0:
                    lam[r] = 0.0
            delta = fabs(lam[r] - old)
            if delta > maxd:
                maxd = delta
            if lam[r] > scale:
                scale = lam[r]
            lim = _friction_limit(mu[c], lam[r])
            if cone == 0:
                # the box is separable: plain Gauss-Seidel per axis
                for k in range(2):
                    r = 3 * c + k
                    acc = b[r]
                    for j in range(n):
                        acc += W[r * n + j] * lam[j]
                    tmp[k] = lam[r]
                    if W[r * n + r] > 0.0:
                        lam[r] = lam[r] - acc / W[r * n + r]
            else:
                # the disc is not separable: one scalar step for the block, so
                # the Euclidean projection's fixed point solves the cone problem
                dmax = W[(3 * c) * n + 3 * c]
                if W[(3 * c + 1) * n + 3 * c + 1] > dmax:
                    dmax = W[(3 * c + 1) * n + 3 * c + 1]
                for k in range(2):
                    r = 3 * c + k
                    acc = b[r]
                    for j in range(n):
                        acc += W[r * n + j] * lam[j]
                    res2[k] = acc
                    tmp[k] = lam[r]
                if dmax > 0.0:
                    for k in range(2):
                        lam[3 * c + k] = tmp[k] - res2[k] / dmax
            _project_friction(&lam[3 * c], lim, cone)
            for k in range(2):
                delta = fabs(lam[3 * c + k] - tmp[k])
                if delta > maxd:
                    maxd = delta
        if maxd <= tol * scale:
            break
    lcp_stats(nc, W, b, mu, lam, w, cone, &st)
    st.iterations = it
    return st


cdef void lcp_stats(int nc, const double* W, const double* b, const double* mu,
                    const double* lam, double* w, int cone, LCPStats* st) noexcept nogil:
    """w = W lam + b, the natural-map residual and the complementarity error."""
    cdef int c, k
    cdef double res = 0.0, comp = 0.0, lim, e
    cdef double p[2]
    matvec_add(3 * nc, 3 * nc, W, lam, b, w)
    for c in range(nc):
        # normal pair: |min(lam_n, w_n)| and |lam_n w_n|
        e = fabs(lam[3 * c + 2] if lam[3 * c + 2] < w[3 * c + 2] else w[3 * c + 2])
        if e > res:
            res = e
        e = fabs(lam[3 * c + 2] * w[3 * c + 2])
        if e > comp:
            comp = e
        lim = _friction_limit(mu[c], lam[3 * c + 2])
        # friction: |lam_t - proj(lam_t - w_t)| (natural map of the box/disc)
        p[0] = lam[3 * c] - w[3 * c]
        p[1] = lam[3 * c + 1] - w[3 * c + 1]
        _project_friction(p, lim, cone)
        for k in range(2):
            e = fabs(lam[3 * c + k] - p[k])
            if e > res:
                res = e
        # slip only at the boundary: (lim - |lam_t|) |w_t| = 0 (mu = inf: no boundary, and the
        # residual above already holds |w_t|)
        if lim > 1e300:
            pass
        elif cone == 0:
            for k in range(2):
                e = fabs((lim - fabs(lam[3 * c + k])) * w[3 * c + k])
                if e > comp:
                    comp = e
        else:
            e = fabs((lim - sqrt(lam[3 * c] ** 2 + lam[3 * c + 1] ** 2))
                     * sqrt(w[3 * c] ** 2 + w[3 * c + 1] ** 2))
            if e > comp:
                comp = e
    st.residual = res
    st.complementarity = comp


# ---------------------------------------------------------------- entry points

cdef ContactLaw _law(dict d) except *:
    cdef ContactLaw law
    law.stiffness = d["stiffness"]
    law.exponent = d["exponent"]
    law.damping_max = d["damping_max"]
    law.ramp_width = d["ramp_width"]
    law.mu_static = d["mu_static"]
    law.mu_dynamic = d["mu_dynamic"]
    law.v_static = d["v_static"]
    law.v_dynamic = d["v_dynamic"]
    law.cone = d["cone"]
    law.cone_scale_x = d["cone_scale_x"]
    law.cone_scale_y = d["cone_scale_y"]
    law.clamp_normal = d["clamp_normal"]
    law.tangent_stiffness = d.get("tangent_stiffness", 0.0)
    law.tangent_damping = d.get("tangent_damping", 0.0)
    return law


def law_from_dict(dict d):
    """Round trip a law dict through the C struct (checks every key exists)."""
    return _law(d)


def normal_force_np(dict law, const double[::1] depth, const double[::1] depth_rate, double[::1] out):
    cdef ContactLaw c = _law(law)
    cdef Py_ssize_t i
    for i in range(depth.shape[0]):
        out[i] = normal_force(depth[i], depth_rate[i], &c)


def damping_ramp_np(dict law, const double[::1] depth, double[::1] out):
    cdef ContactLaw c = _law(law)
    cdef Py_ssize_t i
    for i in range(depth.shape[0]):
        out[i] = damping_ramp(depth[i], &c)


def friction_coefficient_np(dict law, const double[::1] slip, double[::1] out):
    cdef ContactLaw c = _law(law)
    cdef Py_ssize_t i
    for i in range(slip.shape[0]):
        out[i] = friction_coefficient(slip[i], &c)


def friction_force_np(dict law, const double[:, ::1] slip, const double[::1] fn, double[:, ::1] out):
    cdef ContactLaw c = _law(law)
    cdef Py_ssize_t i
    for i in range(slip.shape[0]):
        friction_force(slip[i, 0], slip[i, 1], fn[i], &c, &out[i, 0], &out[i, 1])


def contact_force_np(dict law, double depth, const double[::1] v_contact, const double[:, ::1] R_contact,
                     double[::1] out):
    cdef ContactLaw c = _law(law)
    contact_force(depth, &v_contact[0], &R_contact[0, 0], &c, &out[0])


def plane_frame_np(const double[::1] normal, double[:, ::1] out):
    plane_frame(&normal[0], &out[0, 0])


def box_plane_np(const double[::1] center, const double[:, ::1] R_box, const double[::1] half,
                 const double[::1] plane_point, const double[::1] normal,
                 double[:, ::1] points, double[::1] gaps):
    box_plane(&center[0], &R_box[0, 0], &half[0], &plane_point[0], &normal[0],
              &points[0, 0], &gaps[0])


def pgs_solve_np(const double[:, ::1] W, const double[::1] b, const double[::1] mu, double[::1] lam,
                 double[::1] w, int max_iter, double tol, int cone):
    cdef LCPStats st
    with nogil:
        st = pgs_solve(<int>mu.shape[0], &W[0, 0], &b[0], &mu[0], &lam[0], &w[0],
                       max_iter, tol, cone)
    return st.iterations, st.residual, st.complementarity
