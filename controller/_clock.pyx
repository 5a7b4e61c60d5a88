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

__all__ = ["monotonic_ns", "sleep_until_ns", "set_timer_slack_ns", "bare_loop"]


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


def bare_loop(long long period_ns, long long[::1] late_ns):
    """The floor: a loop that only sleeps to absolute deadlines, whole in C, without the GIL.

    What any loop on this machine gets from the kernel (and, in a virtual machine,
    from the host): no work, no Python, no bus; the same skip rule as
    :class:`controller.clock.FixedRate` (a tick woken a whole period or more late
    is missed, and the deadlines it passed are skipped, never caught up).  The
    calling thread's scheduling policy, priority, timer slack and CPU affinity
    apply, so set them first.  ``servoloop bench loop --wakeup`` runs it as the
    anchor that our clock's missed ticks are measured against.

    Parameters
    ----------
    period_ns : int
        Loop period, ns.
    late_ns : int64 array
        One entry per tick to run: filled with each tick's wake-up lateness,
        ns (after skipping, so < ``period_ns``).

    Returns
    -------
    int
        Deadlines missed (woken a whole period or more after them).
    """
    cdef Py_ssize_t i, n = late_ns.shape[0]
    cdef long long deadline, late, k, missed = 0
    if period_ns <= 0:
        raise ValueError(f"bare_loop: period_ns must be > 0, got {period_ns}")
    with nogil:
        deadline = _now_ns() + period_ns
        for i in range(n):
            late = _sleep_until(deadline, 0) - deadline
            if late >= period_ns:
                k = late // period_ns
                missed += k
                deadline += k * period_ns
                late -= k * period_ns
            late_ns[i] = late
            deadline += period_ns
    return missed
