# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled simulator step: floating-base robot, servo actuators, plane contact.

One step (no GIL, no allocation; all scratch is in a per-environment buffer):

compliant (seed 002 law, core_cy/contact/_kernels.pyx)
    fk -> contact points, gaps, velocities -> contact forces as body wrenches
    -> h = rnea(q, v, 0, f_ext) (= C v + g - J^T f) -> M = crba + armature
    -> semi-implicit Euler: (M + dt D) dv = dt (tau - h), v+ = v + dv,
       q+ = q (+) v+ dt, where D holds the servo damping and J^T D_c J of the
       contact force's velocity derivative (linearly implicit: the regularised
       friction slope mu_s f_n / v_s would otherwise need dt ~ 1e-5 s);
    or classic RK4 on (q, v) with the quaternion base integrated on SO(3).
rigid (velocity-level time stepping, seed 000/003)
    v_free = v + dt A^-1 (tau - h), A = M + armature + dt D_servo; candidate
    contacts (gap < margin) give J (3 rows per contact in its frame),
    W = J A^-1 J^T = Y^T Y with Y = L^-1 J^T (A = L L^T), b = J v_free +
    stabilisation; the contact LCP -> v+ = v_free + L^-T Y lam, q+ = q (+) v+ dt.
    The LCP: PGS on the boxed pyramid |lam_t1|, |lam_t2| <= mu lam_n
    (warm-started from the previous step's impulses), or (lcp_solver 1) the
    Stewart-Trinkle / Anitescu-Potra LCP of seed 003's simulator (Moby):
    friction pyramid of 4 directions +-t1, +-t2 with beta >= 0,
    sum beta <= mu lam_n, and the slip slack gamma, solved by Lemke with the
    regularisation ladder (core_cy/contact/_pivot.pxd), PGS if Lemke fails.

The rigid-body kernels are core_cy/dynamics' nogil fk_c / rnea_c / crba_c /
integrate_c, the Cholesky factor and solves core_cy/linalg/_dense.pxd's, the
LCP solver core_cy/contact's pgs_solve; the Python face is core_cy/sim/simulator.py.
"""

from libc.math cimport sqrt
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memset

import numpy as np

from servoloop.core_cy.actuator._law cimport passive_damping, servo_torque
from servoloop.core_cy.dynamics._dynamics cimport Model, Data, ModelC, DataC, fk_c, rnea_c, crba_c, integrate_c
from servoloop.core_cy.contact._pivot cimport lemke_ladder_c
from servoloop.core_cy.contact._kernels cimport (
    ContactLaw, LCPStats, contact_force, contact_damping, damping_ramp, normal_force, plane_frame,
    pgs_solve,
)
from servoloop.core_cy.linalg._dense cimport (
    cholesky_factor, cholesky_solve, cross3, dot, gram_rows, matTvec_acc, solve_lower, solve_lower_t,
)

__all__ = ["SimCore"]

# Per-joint servo parameters (see core_cy/sim/simulator.py _SERVO_ARRAYS)
_SERVO_ARRAYS = ("kp", "kd", "kc", "tau_max", "armature", "stall", "emf", "viscous", "off_damping",
                 "kv", "drive", "command")

cdef enum:
    MODE_COMPLIANT = 0
    MODE_RIGID = 1
    INT_EULER = 0
    INT_RK4 = 1
    SOLVER_PGS = 0
    SOLVER_LEMKE = 1

#: Lemke's pyramid needs a finite mu: mu = inf (and anything larger) enters as this
#: (|f_t| <= 1e3 f_n is sticking for any contact here; a slack row stays, so an
#: unloaded contact carries no friction)
cdef double LEMKE_MU_MAX = 1e3


cdef struct SimParams:
    int mode
    int integrator
    double dt
    int nq, nv, na, qa, va          # na actuated joints at q[qa:], v[va:]
    int ncp
    const int* cp_body               # (ncp,)
    const double* cp_pos             # (ncp, 3) body frame [m]
    const double* cp_radius          # (ncp,) [m]
    double plane_point[3]
    double normal[3]
    double Rc[9]                     # contact frame, columns (t1, t2, n)
    ContactLaw law
    const double* kp                 # (na,) servo arrays
    const double* kd
    const double* kc
    const double* tau_max           # torque limit [N m]
    const double* armature
    const double* stall              # stall torque at the supply [N m]
    const double* emf                # motor line slope [N m s/rad]
    const double* viscous            # gearbox viscous friction [N m s/rad]
    const double* off_damping        # torque-off damping [N m s/rad]
    const double* kv                 # velocity-loop gain [N m s/rad] (drive 1)
    const double* drive              # 0 position, 1 velocity, 2 torque (current / PWM mode)
    const double* command            # goal velocity [rad/s] (drive 1) or torque [N m] (drive 2)
    const double* q_lo               # (na,) joint stops [rad] (-inf/+inf: none)
    const double* q_hi
    double sign_band
    double stop_k, stop_d            # compliant stop stiffness [N m/rad], damping [N m s/rad]
    double baumgarte, margin, lcp_tol
    int lcp_max_iter, lcp_cone, lcp_solver
    const double* mu                 # (ncp,) rigid friction coefficients


cdef struct Work:
    double* M          # (nv, nv), then its Cholesky factor
    double* J          # (3 ncp, nv) contact rows
    double* MJ         # (3 ncp, nv) L^-1 J^T (A = L L^T), stored by row
    double* W          # (3 ncp, 3 ncp)
    double* b          # (3 ncp,)
    double* lam        # (3 ncp,) persistent impulses (warm start) [N s]
    double* lam_a      # (3 ncp,) active-contact impulses
    double* w          # (3 ncp,)
    double* mu_a       # (ncp,)
    int* active        # (ncp,)
    double* fext       # (nb, 6)
    double* tau        # (nv,) servo torques (0 on the base) of the recorded stage
    double* tau_s      # (nv,) servo torques of the other RK4 stages
    double* damp       # (nv,) servo damping for the implicit step
    double* h          # (nv,)
    double* rhs        # (nv,)
    double* ddq        # (nv,)
    double* qs         # (nq,) RK stage configuration
    double* vs         # (nv,) RK stage velocity
    double* vk         # (nv,) previous stage velocity
    double* acc_a      # (nv,)
    double* acc_v      # (nv,)
    double* tmp        # (3 nv,)
    double* force      # (ncp, 3) world contact forces [N]
    double* gap        # (ncp,) [m]
    double* pc         # (ncp, 3) contact points, world [m]
    double* vc         # (ncp, 3) their velocities [m/s]
    double* qn         # (nq,)
    double* lq         # (6 ncp, 6 ncp) Lemke: the LCP matrix (solver 1 only)
    double* lr         # (6 ncp,) its vector
    double* lz         # (6 ncp,) lam_n, beta, gamma
    double* lw         # (6 ncp,)
    double* lt         # Lemke tableau, 6 ncp (12 ncp + 2)
    int* lbasis        # (18 ncp + 2,)
    double* fallbacks  # (1,) steps where Lemke failed and PGS answered
    LCPStats stats


cdef void _servo(const SimParams* P, const double* q, const double* v, const double* goal,
                 const unsigned char* on, double* tau, double* damp) noexcept nogil:
    """The one servo law (core_cy/actuator/_law.pxd) at every actuated joint, plus the
    one-sided compliant joint stop past q_lo/q_hi (torque on or off).

    Motor torque: the servo's demand (seed 000's PD in position mode, the
    velocity loop or the commanded torque per ``drive``) bounded by the motor line at the supply
    voltage and the torque limit (0 with torque off: the drive is open); the
    gearbox: -kc sgn(qd) (sgn regularised over sign_band) - viscous qd, plus
    the torque-off damping when off.  damp: -d tau / d qd (for the implicit step).
    """
    cdef int j
    cdef double qd, sg, t, dsg, qj, slope = 0.0, c
    cdef bint is_on
    memset(tau, 0, P.nv * sizeof(double))
    memset(damp, 0, P.nv * sizeof(double))
    for j in range(P.na):
        qd = v[P.va + j]
        qj = q[P.qa + j]
        if P.stop_k > 0.0:
            if qj > P.q_hi[j]:
                t = -P.stop_k * (qj - P.q_hi[j]) - P.stop_d * qd
                if t < 0.0:
                    tau[P.va + j] += t
                    damp[P.va + j] += P.stop_d
            elif qj < P.q_lo[j]:
                t = P.stop_k * (P.q_lo[j] - qj) - P.stop_d * qd
                if t > 0.0:
                    tau[P.va + j] += t
                    damp[P.va + j] += P.stop_d
        sg = qd / P.sign_band
        dsg = 1.0 / P.sign_band
        if sg > 1.0:
            sg = 1.0
            dsg = 0.0
        elif sg < -1.0:
            sg = -1.0
            dsg = 0.0
        is_on = on[j] != 0
        t = servo_torque(<int>P.drive[j], is_on, P.kp[j], P.kd[j], P.kv[j], P.stall[j], P.emf[j],
                         P.tau_max[j], goal[j], qj, qd, P.command[j], &slope)
        c = passive_damping(P.viscous[j], P.off_damping[j], is_on)
        tau[P.va + j] += t - P.kc[j] * sg - c * qd
        damp[P.va + j] += -slope + P.kc[j] * dsg + c


cdef void _contact_geometry(const SimParams* P, const DataC* d, Work* W) noexcept nogil:
    """Gaps, contact points and their world velocities (after fk_c with v)."""
    cdef int i, k, b
    cdef double c[3]
    cdef double t[3]
    cdef const double* R
    cdef const double* pl
    for i in range(P.ncp):
        b = P.cp_body[i]
        R = &d.oR[9 * b]
        pl = &P.cp_pos[3 * i]
        for k in range(3):
            c[k] = d.op[3 * b + k] + R[3 * k] * pl[0] + R[3 * k + 1] * pl[1] + R[3 * k + 2] * pl[2]
        W.gap[i] = (P.normal[0] * (c[0] - P.plane_point[0]) + P.normal[1] * (c[1] - P.plane_point[1])
                    + P.normal[2] * (c[2] - P.plane_point[2])) - P.cp_radius[i]
        for k in range(3):
            W.pc[3 * i + k] = c[k] - P.cp_radius[i] * P.normal[k]
        # world spatial velocity at the world origin: v_p = v_O + w x p
        cross3(&d.vw[6 * b + 3], &W.pc[3 * i], t)
        for k in range(3):
            W.vc[3 * i + k] = d.vw[6 * b + k] + t[k]


cdef void _point_jacobian(const SimParams* P, const ModelC* m, const DataC* d, int body,
                          const double* p, double* J) noexcept nogil:
    """(3, nv) rows t1, t2, n of the contact frame: d(R_c^T v_p)/dv for p on body."""
    cdef int j, k, r
    cdef double col[3]
    cdef double t[3]
    cdef const double* S
    memset(J, 0, 3 * P.nv * sizeof(double))
    j = body
    while j >= 0:
        for k in range(m.idx_v[j], m.idx_v[j] + m.nv_joint[j]):
            S = &d.Sw[6 * k]
            cross3(&S[3], p, t)  # v_p column: S_lin + S_ang x p
            col[0] = S[0] + t[0]
            col[1] = S[1] + t[1]
            col[2] = S[2] + t[2]
            for r in range(3):
                J[r * P.nv + k] = P.Rc[r] * col[0] + P.Rc[3 + r] * col[1] + P.Rc[6 + r] * col[2]
        j = m.parent[j]


cdef void _add_wrench(const DataC* d, int b, const double* p, const double* f,
                      double* fext) noexcept nogil:
    """Add world force f at world point p to body b's local wrench (force; torque)."""
    cdef double r[3]
    cdef double tq[3]
    cdef const double* R = &d.oR[9 * b]
    cdef int k
    r[0] = p[0] - d.op[3 * b]
    r[1] = p[1] - d.op[3 * b + 1]
    r[2] = p[2] - d.op[3 * b + 2]
    cross3(r, f, tq)
    for k in range(3):
        fext[6 * b + k] += R[k] * f[0] + R[3 + k] * f[1] + R[6 + k] * f[2]
        fext[6 * b + 3 + k] += R[k] * tq[0] + R[3 + k] * tq[1] + R[6 + k] * tq[2]


cdef void _mass_with_armature(const SimParams* P, const ModelC* m, DataC* d, const double* q,
                              const double* damp, double dt, Work* W) noexcept nogil:
    cdef int j
    crba_c(m, d, q, W.M)
    for j in range(P.na):
        W.M[(P.va + j) * P.nv + P.va + j] += P.armature[j]
    if dt > 0.0:
        for j in range(P.nv):
            W.M[j * P.nv + j] += dt * damp[j]


cdef int _accel_compliant(const SimParams* P, const ModelC* m, DataC* d, Work* W,
                          const double* q, const double* v, const double* goal,
                          const unsigned char* on, double implicit_dt, bint record,
                          double* ddq) noexcept nogil:
    """ddq = (M + h D)^-1 (tau - C v - g + J^T f) with h = implicit_dt (0: explicit)."""
    cdef int i, k, r, c, nv = P.nv
    cdef double depth
    cdef double f[3]
    cdef double vl[3]
    cdef double D[9]
    cdef double* J = W.J
    cdef double* K = W.tmp
    cdef double* tau = W.tau if record else W.tau_s
    cdef bint spring = P.law.tangent_stiffness > 0.0, sliding = 0
    fk_c(m, d, q, v)
    _contact_geometry(P, d, W)
    memset(W.fext, 0, 6 * m.nbodies * sizeof(double))
    _servo(P, q, v, goal, on, tau, W.damp)
    if implicit_dt > 0.0:
        # crba_c re-places the bodies for the same q: Sw stays valid for J
        _mass_with_armature(P, m, d, q, W.damp, implicit_dt, W)
    for i in range(P.ncp):
        depth = -W.gap[i]
        if depth <= 0.0:
            if record:
                W.force[3 * i] = 0.0
                W.force[3 * i + 1] = 0.0
                W.force[3 * i + 2] = 0.0
                W.lam[3 * i + 2] = 0.0          # lifted: the next touchdown anchors anew
            continue
        if spring:
            sliding = _tangent_spring(P, W, i, depth, record, f)
        else:
            contact_force(depth, &W.vc[3 * i], P.Rc, &P.law, f)
        if record:
            memcpy(&W.force[3 * i], f, 3 * sizeof(double))
        _add_wrench(d, P.cp_body[i], &W.pc[3 * i], f, W.fext)
        if implicit_dt > 0.0:
            for k in range(3):
                vl[k] = P.Rc[k] * W.vc[3 * i] + P.Rc[3 + k] * W.vc[3 * i + 1] + P.Rc[6 + k] * W.vc[3 * i + 2]
            if spring:
                # (the friction law's terms would read mu = inf)
                for k in range(9):
                    D[k] = 0.0
                D[8] = damping_ramp(depth, &P.law) if normal_force(depth, -vl[2], &P.law) > 0.0 else 0.0
                # the spring-damper's own -df/dv, the spring linearly implicit (h k_t);
                # none while it slides (its force is then mu f_n, whatever the speed)
                D[0] = 0.0 if sliding else P.law.tangent_damping + implicit_dt * P.law.tangent_stiffness
                D[4] = D[0]
            else:
                contact_damping(depth, vl, &P.law, D)
            _point_jacobian(P, m, d, P.cp_body[i], &W.pc[3 * i], J)
            # M += h J^T D J   (K = D J, 3 x nv)
            for r in range(3):
                for c in range(nv):
                    K[r * nv + c] = D[3 * r] * J[c] + D[3 * r + 1] * J[nv + c] + D[3 * r + 2] * J[2 * nv + c]
            for r in range(nv):
                if J[r] == 0.0 and J[nv + r] == 0.0 and J[2 * nv + r] == 0.0:
                    continue
                for c in range(nv):
                    W.M[r * nv + c] += implicit_dt * (J[r] * K[c] + J[nv + r] * K[nv + c]
                                                      + J[2 * nv + r] * K[2 * nv + c])
    rnea_c(m, d, q, v, NULL, W.fext, 1, W.h)
    if implicit_dt <= 0.0:
        _mass_with_armature(P, m, d, q, W.damp, 0.0, W)
    for k in range(nv):
        ddq[k] = tau[k] - W.h[k]
    if cholesky_factor(nv, W.M) != 0:
        return -1
    cholesky_solve(nv, W.M, ddq)
    return 0


cdef bint _tangent_spring(const SimParams* P, Work* W, int i, double depth, bint record,
                          double* f) noexcept nogil:
    """Contact i's world force f (3,) [N] at ``depth`` > 0 [m]: the law's normal force
    and, tangentially, its anchored spring-damper.

    f_t = -k_t (p_t - a_t) - c_t v_t, p the contact point, a its anchor (set where the
    point touched down), v its velocity, all along the contact frame's t1, t2.  At a
    finite mu the force is capped at mu f_n and (on the recorded stage) the anchor
    slides so that the spring alone gives the cap: stick-slip without a slip speed.  At
    mu = inf nothing caps it: no slip ever.  The anchors live in W.lam (unused by the
    compliant mode; zeroed on reset): (a_t1, a_t2, anchored flag).  Returns 1 when capped.
    """
    cdef int k
    cdef double p1 = 0.0, p2 = 0.0, v1 = 0.0, v2 = 0.0, vn = 0.0, fn, f1, f2, ft, cap, s
    cdef double kt = P.law.tangent_stiffness, ct = P.law.tangent_damping
    cdef double* a = &W.lam[3 * i]
    cdef bint capped = 0
    for k in range(3):          # Rc row-major: columns t1, t2, n
        p1 += P.Rc[3 * k] * W.pc[3 * i + k]
        p2 += P.Rc[3 * k + 1] * W.pc[3 * i + k]
        v1 += P.Rc[3 * k] * W.vc[3 * i + k]
        v2 += P.Rc[3 * k + 1] * W.vc[3 * i + k]
        vn += P.Rc[3 * k + 2] * W.vc[3 * i + k]
    fn = normal_force(depth, -vn, &P.law)
    if a[2] == 0.0:
        # touchdown: anchored where the point is (an RK4 stage before the recorded one
        # has no anchor yet: no displacement)
        if record:
            a[0] = p1
            a[1] = p2
            a[2] = 1.0
        f1 = -ct * v1
        f2 = -ct * v2
    else:
        f1 = -kt * (p1 - a[0]) - ct * v1
        f2 = -kt * (p2 - a[1]) - ct * v2
    cap = P.law.mu_static * fn if fn > 0.0 else 0.0
    ft = sqrt(f1 * f1 + f2 * f2)
    if ft > cap:
        capped = 1
        s = cap / ft
        f1 *= s
        f2 *= s
        if record:
            a[0] = p1 + (f1 + ct * v1) / kt
            a[1] = p2 + (f2 + ct * v2) / kt
    for k in range(3):
        f[k] = fn * P.Rc[3 * k + 2] + f1 * P.Rc[3 * k] + f2 * P.Rc[3 * k + 1]
    return capped


cdef int _step_compliant(const SimParams* P, const ModelC* m, DataC* d, Work* W,
                         double* q, double* v, const double* goal,
                         const unsigned char* on) noexcept nogil:
    cdef int k, rc
    cdef double dt = P.dt
    if P.integrator == INT_EULER:
        rc = _accel_compliant(P, m, d, W, q, v, goal, on, dt, 1, W.ddq)
        for k in range(P.nv):
            v[k] += dt * W.ddq[k]
        integrate_c(m, q, v, dt, W.qn)
        memcpy(q, W.qn, P.nq * sizeof(double))
        return rc
    # RK4: stages share q's tangent space; the base moves by exp of the stage twist
    rc = _accel_compliant(P, m, d, W, q, v, goal, on, 0.0, 1, W.ddq)
    for k in range(P.nv):
        W.acc_a[k] = W.ddq[k]
        W.acc_v[k] = v[k]
        W.vs[k] = v[k] + 0.5 * dt * W.ddq[k]
    integrate_c(m, q, v, 0.5 * dt, W.qs)
    rc |= _accel_compliant(P, m, d, W, W.qs, W.vs, goal, on, 0.0, 0, W.ddq)
    for k in range(P.nv):
        W.acc_a[k] += 2.0 * W.ddq[k]
        W.acc_v[k] += 2.0 * W.vs[k]
        W.vk[k] = W.vs[k]
        W.vs[k] = v[k] + 0.5 * dt * W.ddq[k]
    integrate_c(m, q, W.vk, 0.5 * dt, W.qs)
    rc |= _accel_compliant(P, m, d, W, W.qs, W.vs, goal, on, 0.0, 0, W.ddq)
    for k in range(P.nv):
        W.acc_a[k] += 2.0 * W.ddq[k]
        W.acc_v[k] += 2.0 * W.vs[k]
        W.vk[k] = W.vs[k]
        W.vs[k] = v[k] + dt * W.ddq[k]
    integrate_c(m, q, W.vk, dt, W.qs)
    rc |= _accel_compliant(P, m, d, W, W.qs, W.vs, goal, on, 0.0, 0, W.ddq)
    for k in range(P.nv):
        W.acc_a[k] += W.ddq[k]
        W.acc_v[k] += W.vs[k]
        v[k] += dt / 6.0 * W.acc_a[k]
    integrate_c(m, q, W.acc_v, dt / 6.0, W.qn)
    memcpy(q, W.qn, P.nq * sizeof(double))
    # forces recorded at the step start (stage 1), as with Euler
    return rc


cdef int _step_rigid(const SimParams* P, const ModelC* m, DataC* d, Work* W,
                     double* q, double* v, const double* goal,
                     const unsigned char* on) noexcept nogil:
    cdef int i, k, r, na, nv = P.nv, n3
    cdef double dt = P.dt, g
    fk_c(m, d, q, v)
    _contact_geometry(P, d, W)
    _servo(P, q, v, goal, on, W.tau, W.damp)
    # contact rows need Sw of this q: build them before crba_c/rnea_c reuse d
    na = 0
    for i in range(P.ncp):
        if W.gap[i] < P.margin:
            W.active[na] = i
            _point_jacobian(P, m, d, P.cp_body[i], &W.pc[3 * i], &W.J[3 * na * nv])
            na += 1
    rnea_c(m, d, q, v, NULL, NULL, 1, W.h)
    _mass_with_armature(P, m, d, q, W.damp, dt, W)
    if cholesky_factor(nv, W.M) != 0:
        return -1
    for k in range(nv):
        W.ddq[k] = W.tau[k] - W.h[k]
    cholesky_solve(nv, W.M, W.ddq)
    for k in range(nv):
        v[k] += dt * W.ddq[k]          # v is now v_free
    memset(W.force, 0, 3 * P.ncp * sizeof(double))
    if na == 0:
        memset(W.lam, 0, 3 * P.ncp * sizeof(double))
        W.stats.iterations = 0
        W.stats.residual = 0.0
        W.stats.complementarity = 0.0
    else:
        n3 = 3 * na
        # Y = L^-1 J^T row by row (forward substitution only): W = Y^T Y and the
        # velocity update is L^-T (Y lam), half the work of forming A^-1 J^T
        for r in range(n3):
            memcpy(&W.MJ[r * nv], &W.J[r * nv], nv * sizeof(double))
            solve_lower(nv, W.M, &W.MJ[r * nv])
        gram_rows(n3, nv, W.MJ, W.W)                   # W = Y^T Y (MJ holds Y^T)
        for r in range(n3):
            W.b[r] = dot(nv, &W.J[r * nv], v)
        for r in range(na):
            i = W.active[r]
            g = W.gap[i]
            # Anitescu-Hart: an open gap may close within the step; a
            # penetration is removed at the Baumgarte rate
            W.b[3 * r + 2] += (P.baumgarte * g if g < 0.0 else g) / dt
            memcpy(&W.lam_a[3 * r], &W.lam[3 * i], 3 * sizeof(double))
            W.mu_a[r] = P.mu[i]
        if P.lcp_solver == SOLVER_LEMKE and _lemke_pyramid(na, W) == 0:
            pass
        else:
            if P.lcp_solver == SOLVER_LEMKE:
                W.fallbacks[0] += 1.0
            W.stats = pgs_solve(na, W.W, W.b, W.mu_a, W.lam_a, W.w, P.lcp_max_iter, P.lcp_tol,
                                P.lcp_cone)
        memset(W.lam, 0, 3 * P.ncp * sizeof(double))
        for r in range(na):
            i = W.active[r]
            memcpy(&W.lam[3 * i], &W.lam_a[3 * r], 3 * sizeof(double))
            for k in range(3):
                W.force[3 * i + k] = (P.Rc[3 * k] * W.lam_a[3 * r] + P.Rc[3 * k + 1] * W.lam_a[3 * r + 1]
                                      + P.Rc[3 * k + 2] * W.lam_a[3 * r + 2]) / dt
        memset(W.rhs, 0, nv * sizeof(double))
        matTvec_acc(n3, nv, W.MJ, W.lam_a, W.rhs)      # rhs = Y lam
        solve_lower_t(nv, W.M, W.rhs)
        for k in range(nv):
            v[k] += W.rhs[k]
    integrate_c(m, q, v, dt, W.qn)
    memcpy(q, W.qn, P.nq * sizeof(double))
    return 0


cdef int _lemke_pyramid(int na, Work* W) noexcept nogil:
    """The Anitescu-Potra LCP of the na active contacts, from W (3na, 3na) and b, by Lemke.

    Unknowns z = [lam_n (na), beta (4 na: +t1, -t1, +t2, -t2 per contact), gamma (na)];
    w_n = N v+ + stab >= 0, w_beta = D v+ + E gamma >= 0 (gamma: the slip speed),
    w_gamma = mu lam_n - E^T beta >= 0, each complementary to its z.  D's rows are
    signed rows of the (t1, t2) Jacobian, so every block is a signed entry of W.
    Writes lam_a (t1, t2, n per contact) and stats; returns 0, or -1 when the
    ladder found no answer (lam_a untouched).
    """
    cdef int n = 6 * na, i, j, ri, rj, c, eps_piv = 0
    cdef double si, sj, eps = 0.0, resid = 0.0, mu
    memset(W.lq, 0, n * n * sizeof(double))
    for i in range(5 * na):
        ri = _lemke_row(na, i, &si)
        W.lr[i] = si * W.b[ri]
        for j in range(5 * na):
            rj = _lemke_row(na, j, &sj)
            W.lq[i * n + j] = si * sj * W.W[ri * 3 * na + rj]
    for c in range(na):
        mu = W.mu_a[c]
        if not mu < LEMKE_MU_MAX:
            mu = LEMKE_MU_MAX
        W.lr[5 * na + c] = 0.0
        W.lq[(5 * na + c) * n + c] = mu
        for j in range(4):
            W.lq[(na + 4 * c + j) * n + 5 * na + c] = 1.0
            W.lq[(5 * na + c) * n + na + 4 * c + j] = -1.0
    if lemke_ladder_c(n, W.lq, W.lr, W.lz, W.lw, W.lt, W.lbasis, &eps, &eps_piv, &resid) != 0:
        return -1
    for c in range(na):
        W.lam_a[3 * c] = W.lz[na + 4 * c] - W.lz[na + 4 * c + 1]
        W.lam_a[3 * c + 1] = W.lz[na + 4 * c + 2] - W.lz[na + 4 * c + 3]
        W.lam_a[3 * c + 2] = W.lz[c]
    W.stats.iterations = eps_piv
    W.stats.residual = resid
    W.stats.complementarity = eps
    return 0


cdef inline int _lemke_row(int na, int i, double* sign) noexcept nogil:
    """Row of W (and its sign) behind row i of the Lemke LCP's first 5 na rows."""
    cdef int c, d
    if i < na:
        sign[0] = 1.0
        return 3 * i + 2
    c = (i - na) // 4
    d = (i - na) % 4
    sign[0] = 1.0 if d % 2 == 0 else -1.0
    return 3 * c + d // 2


cdef int _step(const SimParams* P, const ModelC* m, DataC* d, Work* W, double* q, double* v,
               const double* goal, const unsigned char* on) noexcept nogil:
    if P.mode == MODE_RIGID:
        return _step_rigid(P, m, d, W, q, v, goal, on)
    return _step_compliant(P, m, d, W, q, v, goal, on)


cdef class SimCore:
    """N environments of one robot sharing a model and parameters (see core_cy/sim/simulator.py).

    Holds each environment's Data and scratch; the state arrays q (N, nq),
    v (N, nv) belong to the caller and are advanced in place.
    """

    cdef SimParams P                 # template; each environment has its own copy
    cdef SimParams* Ps
    cdef Model model
    cdef object _keep
    cdef list _datas
    cdef DataC* datas
    cdef Work* works
    cdef readonly int n_env, ncp, nq, nv, na
    cdef readonly object force, tau, lam, stats_array, gap, fallbacks

    def __cinit__(self):
        self.datas = NULL
        self.works = NULL
        self.Ps = NULL

    def __init__(self, Model model, int n_env, dict p, cp_body, cp_pos, cp_radius,
                 servo_arrays, mu):
        cdef int i, nv = model.nv, nq = model.nq, ncp, nb = model.nbodies
        cdef Data dat
        cdef double[::1] buf
        cdef int[::1] ibuf
        cdef double normal[3]
        cdef SimParams* P
        cdef Work* W
        self.model = model
        self.n_env = n_env
        ncp = int(len(cp_radius))
        self.ncp, self.nq, self.nv = ncp, nq, nv
        floating = 1 if model.floating_base else 0
        self.na = nv - 6 * floating
        # per-environment parameter rows (n_env, .): a batch can sweep them
        keep = {
            "cp_body": np.ascontiguousarray(cp_body, dtype=np.int32),
            "cp_pos": np.ascontiguousarray(cp_pos, dtype=np.float64).reshape(ncp, 3),
            "cp_radius": np.ascontiguousarray(cp_radius, dtype=np.float64),
            "mu": np.empty((n_env, ncp)),
        }
        keep["mu"][:] = mu
        for k in _SERVO_ARRAYS + ("q_lo", "q_hi"):
            keep[k] = np.empty((n_env, self.na))  # writable copies, one row per environment
            keep[k][:] = servo_arrays[k]
        P = &self.P
        P.mode = p["mode"]
        P.integrator = p["integrator"]
        P.dt = p["dt"]
        P.nq, P.nv, P.na = nq, nv, self.na
        P.qa, P.va = 7 * floating, 6 * floating
        P.ncp = ncp
        ibuf = keep["cp_body"]
        P.cp_body = &ibuf[0] if ncp else NULL
        P.cp_pos = _ptr(keep["cp_pos"])
        P.cp_radius = _ptr(keep["cp_radius"])
        P.sign_band = p["sign_band"]
        P.stop_k = p["stop_k"]
        P.stop_d = p["stop_d"]
        for i in range(3):
            P.plane_point[i] = p["plane_point"][i]
            normal[i] = p["normal"][i]
            P.normal[i] = normal[i]
        plane_frame(normal, P.Rc)
        _set_law(&P.law, p["law"])
        P.baumgarte = p["baumgarte"]
        P.margin = p["margin"]
        P.lcp_tol = p["lcp_tol"]
        P.lcp_max_iter = p["lcp_max_iter"]
        P.lcp_cone = p["lcp_cone"]
        P.lcp_solver = p.get("lcp_solver", SOLVER_PGS)
        nl = 6 * ncp if P.lcp_solver == SOLVER_LEMKE else 0   # Lemke buffers only when used
        # per-environment Data and one scratch buffer each
        sizes = [("M", nv * nv), ("J", 3 * ncp * nv), ("MJ", 3 * ncp * nv),
                 ("W", 9 * ncp * ncp), ("b", 3 * ncp), ("lam_a", 3 * ncp), ("w", 3 * ncp),
                 ("mu_a", ncp), ("fext", 6 * nb), ("damp", nv), ("tau_s", nv), ("h", nv), ("rhs", nv),
                 ("ddq", nv), ("qs", nq), ("vs", nv), ("vk", nv), ("acc_a", nv), ("acc_v", nv),
                 ("tmp", 3 * nv), ("pc", 3 * ncp), ("vc", 3 * ncp), ("qn", nq),
                 ("lq", nl * nl), ("lr", nl), ("lz", nl), ("lw", nl), ("lt", nl * (2 * nl + 2))]
        total = sum(s for _, s in sizes) + 1
        self.force = np.zeros((n_env, ncp, 3))
        self.tau = np.zeros((n_env, nv))
        self.lam = np.zeros((n_env, 3 * ncp))
        self.gap = np.zeros((n_env, ncp))
        self.stats_array = np.zeros((n_env, 3))
        scratch = np.zeros((n_env, total))
        active = np.zeros((n_env, max(ncp, 1)), dtype=np.int32)
        lbasis = np.zeros((n_env, 3 * nl + 2), dtype=np.int32)
        self.fallbacks = np.zeros((n_env, 1))
        keep["scratch"] = scratch
        keep["active"] = active
        keep["lbasis"] = lbasis
        self._keep = keep
        self._datas = [Data(model) for _ in range(n_env)]
        self.datas = <DataC*>malloc(n_env * sizeof(DataC))
        self.works = <Work*>malloc(n_env * sizeof(Work))
        self.Ps = <SimParams*>malloc(n_env * sizeof(SimParams))
        if self.datas == NULL or self.works == NULL or self.Ps == NULL:
            raise MemoryError("SimCore: workspace")
        for i in range(n_env):
            self.Ps[i] = self.P
            P = &self.Ps[i]
            P.mu = _ptr(keep["mu"][i])
            P.kp = _ptr(keep["kp"][i])
            P.kd = _ptr(keep["kd"][i])
            P.kc = _ptr(keep["kc"][i])
            P.tau_max = _ptr(keep["tau_max"][i])
            P.armature = _ptr(keep["armature"][i])
            P.stall = _ptr(keep["stall"][i])
            P.emf = _ptr(keep["emf"][i])
            P.viscous = _ptr(keep["viscous"][i])
            P.off_damping = _ptr(keep["off_damping"][i])
            P.kv = _ptr(keep["kv"][i])
            P.drive = _ptr(keep["drive"][i])
            P.command = _ptr(keep["command"][i])
            P.q_lo = _ptr(keep["q_lo"][i])
            P.q_hi = _ptr(keep["q_hi"][i])
        offsets = {}
        off = 0
        for name, size in sizes:
            offsets[name] = off
            off += size
        for i in range(n_env):
            dat = self._datas[i]
            self.datas[i] = dat.c
            buf = scratch[i]
            W = &self.works[i]
            W.M = &buf[<Py_ssize_t>offsets["M"]]
            W.J = &buf[<Py_ssize_t>offsets["J"]]
            W.MJ = &buf[<Py_ssize_t>offsets["MJ"]]
            W.W = &buf[<Py_ssize_t>offsets["W"]]
            W.b = &buf[<Py_ssize_t>offsets["b"]]
            W.lam_a = &buf[<Py_ssize_t>offsets["lam_a"]]
            W.w = &buf[<Py_ssize_t>offsets["w"]]
            W.mu_a = &buf[<Py_ssize_t>offsets["mu_a"]]
            W.fext = &buf[<Py_ssize_t>offsets["fext"]]
            W.damp = &buf[<Py_ssize_t>offsets["damp"]]
            W.tau_s = &buf[<Py_ssize_t>offsets["tau_s"]]
            W.h = &buf[<Py_ssize_t>offsets["h"]]
            W.rhs = &buf[<Py_ssize_t>offsets["rhs"]]
            W.ddq = &buf[<Py_ssize_t>offsets["ddq"]]
            W.qs = &buf[<Py_ssize_t>offsets["qs"]]
            W.vs = &buf[<Py_ssize_t>offsets["vs"]]
            W.vk = &buf[<Py_ssize_t>offsets["vk"]]
            W.acc_a = &buf[<Py_ssize_t>offsets["acc_a"]]
            W.acc_v = &buf[<Py_ssize_t>offsets["acc_v"]]
            W.tmp = &buf[<Py_ssize_t>offsets["tmp"]]
            W.pc = &buf[<Py_ssize_t>offsets["pc"]]
            W.vc = &buf[<Py_ssize_t>offsets["vc"]]
            W.qn = &buf[<Py_ssize_t>offsets["qn"]]
            W.lq = &buf[<Py_ssize_t>offsets["lq"]]
            W.lr = &buf[<Py_ssize_t>offsets["lr"]]
            W.lz = &buf[<Py_ssize_t>offsets["lz"]]
            W.lw = &buf[<Py_ssize_t>offsets["lw"]]
            W.lt = &buf[<Py_ssize_t>offsets["lt"]]
            ibuf = lbasis[i]
            W.lbasis = &ibuf[0]
            W.fallbacks = _ptr(self.fallbacks[i])
            ibuf = active[i]
            W.active = &ibuf[0]
            W.force = _ptr(self.force[i])
            W.tau = _ptr(self.tau[i])
            W.lam = _ptr(self.lam[i])
            W.gap = _ptr(self.gap[i])
            W.stats.iterations = 0
            W.stats.residual = 0.0
            W.stats.complementarity = 0.0

    def servo_array(self, str name):
        """The live servo parameter ``name`` (one of _SERVO_ARRAYS), (n_env, na).

        Writes take effect at the next step (the kernel reads it in place).
        """
        if name not in _SERVO_ARRAYS:
            raise KeyError(f"SimCore.servo_array: no servo parameter {name!r}")
        return self._keep[name]

    def friction_array(self):
        """The live rigid-contact friction coefficients (n_env, ncp)."""
        return self._keep["mu"]

    def set_law(self, int env, dict law):
        """Replace environment ``env``'s compliant contact law (ContactLaw.as_kernel_dict())."""
        if not 0 <= env < self.n_env:
            raise IndexError(f"SimCore.set_law: environment {env} of {self.n_env}")
        _set_law(&self.Ps[env].law, law)

    def __dealloc__(self):
        if self.datas != NULL:
            free(self.datas)
        if self.works != NULL:
            free(self.works)
        if self.Ps != NULL:
            free(self.Ps)

    def step(self, double[:, ::1] q, double[:, ::1] v, const double[:, ::1] goal,
             const unsigned char[:, ::1] on, int n_steps, int env0=0):
        """Advance environments env0..env0+len(q)-1 by n_steps (GIL released).

        Returns 0, or 1 + the index of the first environment whose mass
        matrix was not positive definite (its state is left as it was then).
        """
        cdef int e, s, rc = 0, n = q.shape[0]
        cdef double[:, ::1] st = self.stats_array
        if env0 < 0 or env0 + n > self.n_env:
            raise IndexError(f"SimCore.step: environments {env0}..{env0 + n - 1} of {self.n_env}")
        with nogil:
            for e in range(n):
                for s in range(n_steps):
                    if _step(&self.Ps[env0 + e], &self.model.c, &self.datas[env0 + e], &self.works[env0 + e],
                             &q[e, 0], &v[e, 0], &goal[e, 0], &on[e, 0]) != 0:
                        rc = 1 + e
                        break
                st[env0 + e, 0] = self.works[env0 + e].stats.iterations
                st[env0 + e, 1] = self.works[env0 + e].stats.residual
                st[env0 + e, 2] = self.works[env0 + e].stats.complementarity
                if rc:
                    break
        return rc

    def run(self, double[::1] q, double[::1] v, const double[:, ::1] goals,
            const unsigned char[::1] on, double[:, ::1] q_log, double[:, ::1] force_log,
            int env=0):
        """Step environment ``env`` once per row of goals, logging q and contact forces.

        q_log (n, nq) receives q after each step, force_log (n, 3 ncp) the
        world contact forces of that step.  Returns 0 or 1 on failure.
        """
        cdef int s, n = goals.shape[0], rc = 0, k
        cdef Work* W
        if not 0 <= env < self.n_env:
            raise IndexError(f"SimCore.run: environment {env} of {self.n_env}")
        W = &self.works[env]
        with nogil:
            for s in range(n):
                if _step(&self.Ps[env], &self.model.c, &self.datas[env], W, &q[0], &v[0],
                         &goals[s, 0], &on[0]) != 0:
                    rc = 1
                    break
                memcpy(&q_log[s, 0], &q[0], self.nq * sizeof(double))
                for k in range(3 * self.ncp):
                    force_log[s, k] = W.force[k]
        return rc


cdef int _set_law(ContactLaw* c, dict law) except -1:
    c.stiffness = law["stiffness"]
    c.exponent = law["exponent"]
    c.damping_max = law["damping_max"]
    c.ramp_width = law["ramp_width"]
    c.mu_static = law["mu_static"]
    c.mu_dynamic = law["mu_dynamic"]
    c.v_static = law["v_static"]
    c.v_dynamic = law["v_dynamic"]
    c.cone = law["cone"]
    c.cone_scale_x = law["cone_scale_x"]
    c.cone_scale_y = law["cone_scale_y"]
    c.clamp_normal = law["clamp_normal"]
    c.tangent_stiffness = law.get("tangent_stiffness", 0.0)
    c.tangent_damping = law.get("tangent_damping", 0.0)
    return 0


cdef double* _ptr(object a) except NULL:
    cdef double[::1] m = a.reshape(-1)
    if m.shape[0] == 0:
        return <double*>1  # never dereferenced: zero-length
    return &m[0]
