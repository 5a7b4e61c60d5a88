# cython: language_level=3
"""Compiled servo kernels on the one servo law (core_cy/actuator/_law.pxd).

``simulate``: a servo + pendulum from a logged run (see
core_cy/actuator/layout.py); one call simulates one log, n steps, no
allocation, GIL released.  ``step_independent``: the virtual bus's joints,
one rigid load per servo.  ``servo_torque_batch``: the law on arrays (tests).
The NumPy references are core_cy/actuator/reference.py; the checked Python
entry points core_cy/actuator/simulate.py and core_cy/actuator/independent.py.
"""

from libc.math cimport sin, exp, fabs, pow, isfinite, tanh, INFINITY

cimport cython

from servoloop.core_cy.actuator._law cimport (
    DRIVE_POSITION, friction_stop, law_clip, law_sign, motor_torque, passive_damping, servo_torque,
)

cdef enum:
    P_MODE = 0
    P_KP_FW = 1
    P_GAIN = 2
    P_LIMIT = 3
    P_KT = 4
    P_R = 5
    P_KD = 6
    P_ARMATURE = 7
    P_Q_OFFSET = 8
    P_MAX_CURRENT = 9
    P_FB = 10
    P_FS = 11
    P_LFM = 12
    P_LFE = 13
    P_LFMS = 14
    P_LFES = 15
    P_LFMQ = 16
    P_LFEQ = 17
    P_VS = 18
    P_ALPHA = 19
    P_VISC = 20
    P_INTEGRATOR = 21
    P_SUBSTEPS = 22
    P_ASYM = 23
    P_DUTY0 = 24
    P_DUTY0_ERR = 25
    P_KE = 26
    P_STALL = 27
    P_EMF = 28
    P_V_RATED = 29
    P_OFF_DAMP = 30
    NP_ = 31

NP = NP_


cdef inline double _clip(double x, double lo, double hi) noexcept nogil:
    return law_clip(x, lo, hi)


cdef inline double _sign(double x) noexcept nogil:
    return law_sign(x)


cdef inline double bench_motor_torque(const double[::1] p, double goal, double q, double qd,
                                double vin, bint on) noexcept nogil:
    cdef double err, duty, span, center, tau, ratio
    cdef double slope = 0.0
    if not on:
        return 0.0
    err = goal - q
    if p[P_MODE] == 0.0:
        # the one servo law: PD demand, motor line at vin, torque limit
        ratio = vin / p[P_V_RATED] if p[P_V_RATED] > 0.0 else 1.0
        # P_STALL 0 (a zeroed vector): no motor line
        tau = servo_torque(DRIVE_POSITION, on, p[P_GAIN] * p[P_KP_FW], p[P_KD], 0.0,
                           p[P_STALL] * ratio if p[P_STALL] > 0.0 else INFINITY, p[P_EMF],
                           p[P_LIMIT], goal, q, qd, 0.0, &slope)
        return tau * (1.0 + p[P_ASYM] * _sign(tau))
    duty = err * p[P_KP_FW] * p[P_GAIN]
    if p[P_DUTY0] != 0.0:
        # dead-zone compensation: a duty floor that does not scale with the gain
        duty += p[P_DUTY0] * tanh(err / p[P_DUTY0_ERR])
    if isfinite(p[P_MAX_CURRENT]):
        # firmware current limiter as BAM models it: a duty window keeping |I| <= Imax
        span = p[P_R] * p[P_MAX_CURRENT] / vin
        center = p[P_KE] * qd / vin
        duty = _clip(duty, center - span, center + span)
    duty = _clip(duty, -p[P_LIMIT], p[P_LIMIT])
    # tau = kt*(V - ke*qd)/R; ke > kt when the gearbox loses torque but not speed
    tau = p[P_KT] * (vin * duty - p[P_KE] * qd) / p[P_R]
    # the drive is not symmetric on real XL330s (they lift ~15 % more one way)
    return tau * (1.0 + p[P_ASYM] * _sign(tau))


cdef inline double friction_budget(const double[::1] p, double tm, double te,
                                   double qd) noexcept nogil:
    cdef double s = exp(-pow(fabs(qd / p[P_VS]), p[P_ALPHA]))
    cdef double f = p[P_FB] + p[P_FS] * s
    f += fabs(te * p[P_LFE] - tm * p[P_LFM])
    f += s * fabs(te * p[P_LFES] - tm * p[P_LFMS])
    if _sign(te) != _sign(tm):
        if fabs(te) < fabs(tm):
            f += s * p[P_LFEQ] * te * te
        elif fabs(te) > fabs(tm):
            f += s * p[P_LFMQ] * tm * tm
    return f


@cython.boundscheck(False)
@cython.wraparound(False)
cdef void simulate_kernel(const double[::1] p, const double[::1] goal,
                          const unsigned char[::1] torque_on, const double[::1] vin,
                          double dt, double q0, double qd0, double load_inertia,
                          double load_mgl, double[::1] q_out, double[::1] qd_out,
                          double[::1] tau_out) noexcept nogil:
    cdef Py_ssize_t k, j, n = goal.shape[0]
    cdef double q = q0, qd = qd0, te, tm = 0.0, f, net, acc
    cdef double inertia = load_inertia + p[P_ARMATURE]
    cdef bint half_acc = p[P_INTEGRATOR] != 0.0
    cdef Py_ssize_t m = <Py_ssize_t>p[P_SUBSTEPS]
    if m < 1:
        m = 1
    cdef double h = dt / m
    for k in range(n):
        q_out[k] = q
        qd_out[k] = qd
        for j in range(m):
            te = -load_mgl * sin(q + p[P_Q_OFFSET])
            tm = bench_motor_torque(p, goal[k], q, qd, vin[k], torque_on[k] != 0)
            f = friction_budget(p, tm, te, qd) + passive_damping(
                p[P_VISC], p[P_OFF_DAMP], torque_on[k] != 0) * fabs(qd)
            net = tm + te
            # friction clips the torque that would stop the joint within h (BAM)
            net = friction_stop(net, qd, inertia / h, f)
            acc = net / inertia
            qd = _clip(qd + acc * h, -100.0, 100.0)
            q += qd * h
            if half_acc:
                q += 0.5 * acc * h * h
        tau_out[k] = tm


def simulate(const double[::1] p, const double[::1] goal, const unsigned char[::1] torque_on,
             const double[::1] vin, double dt, double q0, double qd0, double load_inertia,
             double load_mgl, double[::1] q_out, double[::1] qd_out, double[::1] tau_out):
    """Unchecked kernel entry; use core_cy.actuator.simulate.simulate."""
    with nogil:
        simulate_kernel(p, goal, torque_on, vin, dt, q0, qd0, load_inertia, load_mgl,
                        q_out, qd_out, tau_out)


def simulate_many(const double[:, ::1] P, const double[:, ::1] goal,
                  const unsigned char[:, ::1] torque_on, const double[:, ::1] vin,
                  const double[::1] dt, const double[::1] q0, const double[::1] qd0,
                  const double[::1] load_inertia, const double[::1] load_mgl,
                  const Py_ssize_t[::1] length,
                  double[:, ::1] q_out, double[:, ::1] qd_out, double[:, ::1] tau_out):
    """Unchecked batch entry (rows padded to a common width, ``length`` per row)."""
    cdef Py_ssize_t i
    with nogil:
        for i in range(P.shape[0]):
            simulate_kernel(P[i], goal[i, :length[i]], torque_on[i, :length[i]],
                            vin[i, :length[i]], dt[i], q0[i], qd0[i], load_inertia[i],
                            load_mgl[i], q_out[i, :length[i]], qd_out[i, :length[i]],
                            tau_out[i, :length[i]])


# ---------------------------------------------------------------- independent servos
# Columns of the (n, NS) parameter matrix of step_independent (core_cy/actuator/independent.py).
cdef enum:
    S_KP = 0          # position stiffness, gain registers applied [N m/rad]
    S_KD = 1          # [N m s/rad]
    S_KV = 2          # velocity loop gain [N m s/rad]
    S_STALL = 3       # stall torque at the supply voltage [N m]
    S_EMF = 4         # motor line slope [N m s/rad]
    S_LIMIT = 5       # torque limit [N m]
    S_COULOMB = 6     # [N m]
    S_VISC = 7        # [N m s/rad]
    S_OFF = 8         # torque-off damping [N m s/rad]
    S_INERTIA = 9     # load + armature [kg m^2]
    S_MGL = 10        # gravity torque amplitude [N m]
    S_QDOWN = 11      # hanging angle [rad]
    NS_ = 12

NS = NS_


@cython.boundscheck(False)
@cython.wraparound(False)
cdef void _step_independent(const double[:, ::1] S, const double[::1] goal,
                            const unsigned char[::1] on, const signed char[::1] drive,
                            const double[::1] command, Py_ssize_t n_sub, double h,
                            double[::1] q, double[::1] qd, double[::1] tau) noexcept nogil:
    cdef Py_ssize_t i, k
    cdef double tm, net, f, slope = 0.0, inertia, x, v
    cdef bint is_on
    for i in range(S.shape[0]):
        x, v = q[i], qd[i]
        inertia = S[i, S_INERTIA]
        is_on = on[i] != 0
        tm = 0.0
        for k in range(n_sub):
            tm = servo_torque(drive[i], is_on, S[i, S_KP], S[i, S_KD], S[i, S_KV], S[i, S_STALL],
                              S[i, S_EMF], S[i, S_LIMIT], goal[i], x, v, command[i], &slope)
            net = tm
            if S[i, S_MGL] != 0.0:
                net -= S[i, S_MGL] * sin(x - S[i, S_QDOWN])
            f = S[i, S_COULOMB] + passive_damping(S[i, S_VISC], S[i, S_OFF], is_on) * fabs(v)
            net = friction_stop(net, v, inertia / h, f)
            # semi-implicit Euler
            v += net / inertia * h
            x += v * h
        q[i], qd[i] = x, v
        tau[i] = tm


def step_independent(const double[:, ::1] S, const double[::1] goal,
                     const unsigned char[::1] on, const signed char[::1] drive,
                     const double[::1] command, Py_ssize_t n_sub, double h,
                     double[::1] q, double[::1] qd, double[::1] tau):
    """Unchecked: advance every joint n_sub substeps of h [s]; see core_cy/actuator/independent.py."""
    with nogil:
        _step_independent(S, goal, on, drive, command, n_sub, h, q, qd, tau)


@cython.boundscheck(False)
@cython.wraparound(False)
def servo_torque_batch(const signed char[::1] drive, const unsigned char[::1] on,
                       const double[::1] kp, const double[::1] kd, const double[::1] kv,
                       const double[::1] stall, const double[::1] emf, const double[::1] limit,
                       const double[::1] goal, const double[::1] q, const double[::1] qd,
                       const double[::1] command, double[::1] tau_out, double[::1] slope_out):
    """The compiled law (_law.pxd servo_torque) on arrays (n,), for tests against the reference."""
    cdef Py_ssize_t i
    cdef double slope = 0.0
    with nogil:
        for i in range(drive.shape[0]):
            tau_out[i] = servo_torque(drive[i], on[i] != 0, kp[i], kd[i], kv[i], stall[i], emf[i],
                                      limit[i], goal[i], q[i], qd[i], command[i], &slope)
            slope_out[i] = slope
