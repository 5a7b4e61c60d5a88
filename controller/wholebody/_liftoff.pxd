# cython: language_level=3
"""The force split's lift-off weights, the one compiled home of their arithmetic.

cimported by controller/wholebody/_force_split.pyx (:func:`liftoff_weights`, the
Python-callable form) and controller/wholebody/_gait.pyx (``TrotKernel.tick``, the
trot's tick without the GIL).  NumPy oracle: ``force_split.liftoff_weights``.
Inline functions in a .pxd compile into each module that cimports them: no module
of its own, so nothing to build first.
"""

from libc.math cimport copysign, fmod


cdef inline double mod1(double a) noexcept nogil:
    # np.mod(a, 1.0): the remainder with the divisor's sign (+0.0 for an exact multiple)
    cdef double m = fmod(a, 1.0)
    if m != 0.0:
        if m < 0.0:
            m += 1.0
    else:
        m = copysign(0.0, 1.0)
    return m


cdef inline void liftoff_weights_c(const double[::1] td, const unsigned char[::1] st, double t,
                                   double period, double duty, double dt, double horizon,
                                   double wmax, double[::1] w) noexcept nogil:
    # force_split.liftoff_weights, operation for operation: (feet,) weights into w, 1 rising
    # as (horizon / tau)^2 over the last horizon [s] before a stance foot's planned lift-off
    # (tau [s] left, at least dt; at most wmax).  td: the gait's touchdown phases; st: the
    # stance flags; t: gait time [s] (negative: standing before the trot); period [s]
    cdef Py_ssize_t i
    cdef double ahead = -t if t < 0.0 else 0.0
    cdef double tp = (t if t > 0.0 else 0.0) / period
    cdef double left, r
    for i in range(td.shape[0]):
        w[i] = 1.0
        if horizon <= 0.0 or not st[i]:
            continue
        # a foot lifts off (1 - duty) of a cycle before its touchdown phase; standing before
        # the trot (t < 0) the first lift-off is at t = 0 on.  The sign of an exact zero
        # remainder (np.mod's +0.0) does not reach ``left``
        left = mod1(mod1(td[i] - (1.0 - duty)) - tp) * period + ahead
        if left < dt:
            left = dt
        if left <= horizon + 1e-12:
            r = horizon / left
            w[i] = r * r if r * r < wmax else wmax
