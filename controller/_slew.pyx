# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The goal slew limit's window for torque-carrying goals (:mod:`controller.slew`), in C.

Per joint, exactly the NumPy expression it replaced (that expression is the oracle in
``tests/unit/controller/test_slew_window_compiled.py``), NaN semantics included: ``fmin`` /
``fmax`` skip a NaN (a failed reading drops out of the window), ``maximum`` / ``minimum``
(and so ``clip``) carry it.  Twenty-odd NumPy calls on 12 joints cost ~13 us a tick in
``trot``; this, well under one.
"""

from libc.math cimport fmax, fmin, isnan

__all__ = ["window"]


cdef inline double _maximum(double a, double b) noexcept nogil:
    if isnan(a) or isnan(b):
        return a + b
    return a if a >= b else b


cdef inline double _minimum(double a, double b) noexcept nogil:
    if isnan(a) or isnan(b):
        return a + b
    return a if a <= b else b


cdef inline double _clip(double x, double lo, double hi) noexcept nogil:
    return _minimum(_maximum(x, lo), hi)


def window(const double[::1] goal, const double[::1] present, double[::1] last,
           double[::1] step, const double[::1] max_step, const double[::1] max_offset,
           const double[::1] anchor_b, const unsigned char[::1] torque,
           const unsigned char[::1] held, double[::1] out):
    """``out`` := the window-limited goal (rad, (n,)); ``last`` := ``out``; ``step`` of the
    torque joints := the written step clipped to ``max_step``.  ``out`` may be ``goal``.

    Parameters
    ----------
    goal, present : (n,) rad, the clamped goal and the measured position
    last, step : (n,) rad, rad/tick, the limiter's state (``step``: this tick's ramp step)
    max_step : (n,) rad/tick
    max_offset, anchor_b : (n,) rad, the window (-inf / +inf off the torque joints)
    torque, held : (n,) bool as uint8
    out : (n,) rad
    """
    cdef Py_ssize_t i, n = goal.shape[0]
    for name, m in (("present", present.shape[0]), ("last", last.shape[0]),
                    ("step", step.shape[0]), ("max_step", max_step.shape[0]),
                    ("max_offset", max_offset.shape[0]), ("anchor_b", anchor_b.shape[0]),
                    ("torque", torque.shape[0]), ("held", held.shape[0]), ("out", out.shape[0])):
        if m != n:
            raise ValueError(f"slew window: {name} has {m} joints, the goal {n}")
    cdef double g, p, ms, a, r, lo, hi, o
    with nogil:
        for i in range(n):
            g = goal[i]
            p = present[i]
            ms = max_step[i]
            if torque[i]:
                # the ramp's anchor: the last goal, pulled back to within b of the joint
                a = fmax(fmin(last[i], p + anchor_b[i]), p - anchor_b[i])
                r = a + _clip(g - a, -ms, ms)
            else:
                r = last[i] + step[i]
            lo = fmin(p - max_offset[i], r)
            hi = fmax(p + max_offset[i], r)
            if held[i]:     # a disabled servo's joint holds its goal
                lo = last[i]
                hi = last[i]
            o = _minimum(_maximum(g, lo), hi)
            if torque[i]:
                step[i] = _clip(o - last[i], -ms, ms)
            last[i] = o
            out[i] = o
