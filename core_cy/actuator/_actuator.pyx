# cython: language_level=3
"""Compiled servo + pendulum simulation (see core_cy/actuator/layout.py).

One call simulates one log: n steps, no allocation, GIL released.  The
NumPy reference is core_cy/actuator/reference.py; core_cy/actuator/simulate.py is
the checked Python entry point.
"""

from libc.math cimport sin, exp, fabs, pow, isfinite, tanh

cimport cython

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
    NP_ = 27

NP = NP_


cdef inline double _clip(double x, double lo, double hi) noexcept nogil:
    return lo if x < lo else (hi if x > hi else x)


cdef inline double _sign(double x) noexcept nogil:
    # np.sign semantics: sign(0) = 0 (a resting, unloaded joint gets no friction)
    return 1.0 if x > 0.0 else (-1.0 if x < 0.0 else 0.0)


cdef inline double motor_torque(const double[::1] p, double goal, double q, double qd,
                                double vin, bint on) noexcept nogil:
    cdef double err, duty, span, center, tau
    if not on:
        return 0.0
    err = goal - q
    if p[P_MODE] == 0.0:
        tau = _clip(p[P_GAIN] * p[P_KP_FW] * err - p[P_KD] * qd, -p[P_LIMIT], p[P_LIMIT])
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
    cdef double q = q0, qd = qd0, te, tm = 0.0, f, net, tau_stop, acc, stop
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
            tm = motor_torque(p, goal[k], q, qd, vin[k], torque_on[k] != 0)
            f = friction_budget(p, tm, te, qd) + p[P_VISC] * fabs(qd)
            net = tm + te
            # friction clips the torque that would stop the joint within h (BAM)
            tau_stop = (inertia / h) * qd + net
            stop = fabs(tau_stop)
            net -= _sign(tau_stop) * (stop if stop < f else f)
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
