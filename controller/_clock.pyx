# cython: language_level=3
"""Absolute-deadline sleeping on CLOCK_MONOTONIC, without the GIL.

``clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`` sleeps until an absolute
time, so a late wake-up never shifts the following deadlines (the drift that
``time.sleep(period - elapsed)`` loops accumulate).  The kernel wakes us
some tens of microseconds late (timer slack, scheduling); an optional busy
wait covers the last ``spin_ns`` before the deadline to trade one core's
time for lower jitter.
"""

from libc.errno cimport EINTR

__all__ = ["monotonic_ns", "sleep_until_ns", "set_timer_slack_ns"]


cdef extern from "<time.h>" nogil:
    ctypedef long time_t
    cdef struct timespec:
        time_t tv_sec
        long tv_nsec
    ctypedef int clockid_t
    int clock_gettime(clockid_t clk, timespec *tp)
    int clock_nanosleep(clockid_t clk, int flags, const timespec *req, timespec *rem)
    enum:
        CLOCK_MONOTONIC
        TIMER_ABSTIME

cdef extern from "<sys/prctl.h>" nogil:
    int prctl(int option, unsigned long arg2, unsigned long arg3,
              unsigned long arg4, unsigned long arg5)
    enum:
        PR_SET_TIMERSLACK


cdef inline long long _now_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <long long>ts.tv_sec * 1000000000LL + ts.tv_nsec


cdef long long _sleep_until(long long deadline_ns, long long spin_ns) noexcept nogil:
    cdef timespec ts
    cdef long long target = deadline_ns - spin_ns
    cdef int rc
    if target > _now_ns():
        ts.tv_sec = <time_t>(target // 1000000000LL)
        ts.tv_nsec = <long>(target % 1000000000LL)
        while True:
            # clock_nanosleep returns the error number (not -1/errno); a signal
            # (EINTR) leaves the absolute deadline valid, so just sleep again.
            rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL)
            if rc != EINTR:
                break
    cdef long long now = _now_ns()
    while now < deadline_ns:
        now = _now_ns()
    return now


def monotonic_ns():
    """Current CLOCK_MONOTONIC time.

    Returns
    -------
    int
        Nanoseconds since an arbitrary fixed point (same clock as
        ``time.monotonic_ns``).
    """
    return _now_ns()


def sleep_until_ns(long long deadline_ns, long long spin_ns=0):
    """Sleep, without the GIL, until CLOCK_MONOTONIC reaches ``deadline_ns``.

    Parameters
    ----------
    deadline_ns : int
        Absolute deadline, ns on CLOCK_MONOTONIC.  A deadline in the past
        returns at once.
    spin_ns : int
        Busy-wait the last ``spin_ns`` ns instead of sleeping (0: never spin).

    Returns
    -------
    int
        The wake-up time, ns on CLOCK_MONOTONIC (>= ``deadline_ns``).
    """
    cdef long long woke
    with nogil:
        woke = _sleep_until(deadline_ns, spin_ns)
    return woke


def set_timer_slack_ns(unsigned long slack_ns):
    """Set this thread's timer slack (Linux default 50 us; 1 ns for a real-time loop).

    Returns
    -------
    bool
        True when the kernel accepted it.
    """
    return prctl(PR_SET_TIMERSLACK, slack_ns, 0, 0, 0) == 0
