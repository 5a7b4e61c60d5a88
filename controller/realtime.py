"""Real-time settings for the loop thread: SCHED_FIFO, mlockall, CPU affinity, timer slack,
and the CPUs' wake-up latency (PM QoS).

Each one is asked for only when the config says so; when the system refuses
(no CAP_SYS_NICE, a container, a locked-memory limit) the loop still runs
and the refusal becomes a warning in the run summary.  On this class of
machine SCHED_FIFO is what takes p99 jitter from ~300 us to ~30 us at 1 kHz.

Linux applies scheduler, affinity and timer slack per thread: ``pid`` 0
below is the calling (loop) thread, and a process's other threads (the
virtual bus's reader) are reached through ``/proc/PID/task``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import os
import struct
import sys
from dataclasses import dataclass, field

__all__ = ["RealtimeReport", "apply_realtime", "restore_realtime", "raise_thread", "LoopEnvironment",
           "process_threads", "raise_process", "pin_process", "isolate_loop_cpu", "timer_slack_ns"]

log = logging.getLogger(__name__)

_MCL_CURRENT, _MCL_FUTURE, _MCL_ONFAULT = 1, 2, 4
_QOS_PATH = "/dev/cpu_dma_latency"


@dataclass
class RealtimeReport:
    """What was applied and what was refused (human-readable warnings)."""

    sched_fifo: bool = False
    mlockall: bool = False
    affinity: tuple[int, ...] | None = None
    cpu: int | None = None              # the CPU the loop thread has to itself (loop.cpu)
    timer_slack_ns: int | None = None   # the loop thread's timer slack (None: not known)
    cpu_latency_us: int | None = None   # the PM QoS wake-up latency held for the run (None: none)
    warnings: list[str] = field(default_factory=list)
    # what to put back in restore_realtime()
    _old_policy: int | None = None
    _old_param: int = 0
    _old_affinity: set[int] | None = None
    _qos_fd: int | None = None


def _libc():
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def apply_realtime(
    sched_fifo: bool = False,
    priority: int = 80,
    lock_memory: bool = False,
    cpus: tuple[int, ...] | list[int] | None = None,
    cpu_latency_us: int | None = None,
) -> RealtimeReport:
    """Apply the requested real-time settings to the calling process.

    Parameters
    ----------
    sched_fifo : bool
        Switch to SCHED_FIFO at ``priority`` (1-99).
    priority : int
        SCHED_FIFO priority.
    lock_memory : bool
        ``mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT)``: no page faults in
        the loop.  ONFAULT keeps untouched mappings out of the resident set.
    cpus : sequence of int or None
        Pin the process to these CPU indices.
    cpu_latency_us : int or None
        Hold a PM QoS request for this CPU wake-up latency (``/dev/cpu_dma_latency``, the
        request lasts while the file is open, as cyclictest does): 0 keeps idle CPUs in
        their polling state.

    Returns
    -------
    RealtimeReport
        Never raises: every refusal is logged and listed in ``warnings``.
    """
    rep = RealtimeReport()
    if cpus:
        try:
            rep._old_affinity = os.sched_getaffinity(0)
            os.sched_setaffinity(0, set(int(c) for c in cpus))
            rep.affinity = tuple(sorted(os.sched_getaffinity(0)))
        except (OSError, ValueError) as exc:
            rep.warnings.append(f"CPU affinity {list(cpus)} refused: {exc}")
    if lock_memory:
        try:
            libc = _libc()
            rc = libc.mlockall(_MCL_CURRENT | _MCL_FUTURE | _MCL_ONFAULT)
            if rc != 0:  # kernels before 4.4 have no MCL_ONFAULT
                rc = libc.mlockall(_MCL_CURRENT | _MCL_FUTURE)
            if rc != 0:
                err = ctypes.get_errno()
                raise OSError(err, os.strerror(err))
            rep.mlockall = True
        except OSError as exc:
            rep.warnings.append(f"mlockall refused: {exc} (raise `ulimit -l` or run as root)")
    if cpu_latency_us is not None:
        try:
            fd = os.open(_QOS_PATH, os.O_WRONLY)
            try:
                os.write(fd, struct.pack("i", int(cpu_latency_us)))
            except OSError:
                os.close(fd)
                raise
            rep._qos_fd, rep.cpu_latency_us = fd, int(cpu_latency_us)
        except OSError as exc:
            rep.warnings.append(f"CPU wake-up latency {cpu_latency_us} us refused ({_QOS_PATH}: "
                                f"{exc.strerror or exc}); the CPUs may sleep when idle")
    if sched_fifo:
        try:
            rep._old_policy = os.sched_getscheduler(0)
            rep._old_param = os.sched_getparam(0).sched_priority
            prio = max(1, min(int(priority), os.sched_get_priority_max(os.SCHED_FIFO)))
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(prio))
            rep.sched_fifo = True
        except (OSError, AttributeError) as exc:
            rep._old_policy = None
            rep.warnings.append(
                f"SCHED_FIFO refused: {exc} (needs CAP_SYS_NICE or rtprio in limits.conf); "
                "running at normal priority"
            )
    for w in rep.warnings:
        log.warning(w)
    return rep


def restore_realtime(rep: RealtimeReport) -> None:
    """Undo :func:`apply_realtime` (scheduler, affinity, memory lock); never raises."""
    if rep.sched_fifo and rep._old_policy is not None:
        try:
            os.sched_setscheduler(0, rep._old_policy, os.sched_param(rep._old_param))
        except OSError as exc:
            log.warning("could not restore the scheduler: %s", exc)
        rep._old_policy = None
    if rep._old_affinity is not None:
        try:
            os.sched_setaffinity(0, rep._old_affinity)
        except OSError as exc:
            log.warning("could not restore CPU affinity: %s", exc)
        rep._old_affinity = None
    if rep._qos_fd is not None:
        try:
            os.close(rep._qos_fd)       # closing the file withdraws the request
        except OSError:
            pass
        rep._qos_fd = None
    if rep.mlockall and not getattr(rep, "_unlocked", False):
        try:
            _libc().munlockall()
        except OSError:
            pass
        rep._unlocked = True


def raise_thread(native_id: int, priority: int) -> str | None:
    """SCHED_FIFO at ``priority`` for another thread of this process; a warning or None.

    The loop thread's helpers (telemetry writer, command socket, status line)
    must be real-time too, at a lower priority: a normal-priority thread
    preempted while it holds the GIL would stall the loop thread for as long
    as the machine's other work keeps it off the CPU (priority inversion;
    measured 4-8 ms tick stalls under load before this).
    """
    try:
        os.sched_setscheduler(native_id, os.SCHED_FIFO, os.sched_param(max(1, priority)))
        return None
    except (OSError, AttributeError) as exc:
        return f"SCHED_FIFO for helper thread {native_id} refused: {exc}"


_PR_GET_TIMERSLACK = 30


def timer_slack_ns() -> int | None:
    """The calling thread's timer slack, ns (None where prctl is not available)."""
    try:
        rc = _libc().prctl(_PR_GET_TIMERSLACK, 0, 0, 0, 0)
    except (OSError, AttributeError):
        return None
    return int(rc) if rc >= 0 else None


def process_threads(pid: int) -> list[int]:
    """Thread ids of process ``pid`` (``/proc/PID/task``; just ``pid`` where that is missing)."""
    try:
        return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return [pid]


def raise_process(pid: int, priority: int) -> str | None:
    """SCHED_FIFO at ``priority`` for every thread of process ``pid``; a warning or None.

    ``sched_setscheduler(pid)`` alone changes only its main thread: the
    virtual bus's reader thread, which answers the loop, would stay at
    normal priority.
    """
    for tid in process_threads(pid):
        try:
            os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(max(1, min(99, priority))))
        except ProcessLookupError:
            continue      # a thread that ended meanwhile
        except (OSError, AttributeError) as exc:
            return f"SCHED_FIFO for process {pid} refused: {exc}"
    return None


def pin_process(pid: int, cpus) -> str | None:
    """Every thread of process ``pid`` onto ``cpus``; a warning or None."""
    for tid in process_threads(pid):
        try:
            os.sched_setaffinity(tid, set(cpus))
        except ProcessLookupError:
            continue
        except (OSError, ValueError) as exc:
            return f"CPU affinity {sorted(cpus)} for process {pid} refused: {exc}"
    return None


def isolate_loop_cpu(cpu: int, helper_tids=(), rep: RealtimeReport | None = None) -> list[str]:
    """The calling (loop) thread onto ``cpu`` alone, the ``helper_tids`` onto the other CPUs
    it was allowed; returns warnings.  ``rep``: where to keep the old affinity and the CPU."""
    warns = []
    try:
        allowed = os.sched_getaffinity(0)
        if cpu not in allowed:
            return [f"loop.cpu {cpu} is not one this process may use {sorted(allowed)}; not pinned"]
        if rep is not None and rep._old_affinity is None:
            rep._old_affinity = allowed
        os.sched_setaffinity(0, {cpu})
        if rep is not None:
            rep.cpu = cpu
        others = allowed - {cpu}
    except (OSError, ValueError) as exc:
        return [f"loop.cpu {cpu} refused: {exc}"]
    if not others:
        return [f"loop.cpu {cpu}: no other CPU for the helper threads; they share it"]
    for tid in helper_tids:
        try:
            os.sched_setaffinity(tid, others)
        except ProcessLookupError:
            continue
        except OSError as exc:
            warns.append(f"CPU affinity for helper thread {tid} refused: {exc}")
    return warns


class LoopEnvironment:
    """The loop thread's surroundings for one run: real-time settings and the paused collector.

    Parameters
    ----------
    loop_cfg : LoopConfig (sched_fifo, priority, lock_memory, cpus, cpu, cpu_latency_us)
    enabled : bool, apply the real-time settings at all (False with a simulated clock)

    Attributes
    ----------
    report : RealtimeReport or None (None until :meth:`begin_realtime` applied something)
    warnings : list of str, refusals for the run summary
    """

    def __init__(self, loop_cfg, enabled: bool) -> None:
        self.cfg = loop_cfg
        self.enabled = enabled
        self.report: RealtimeReport | None = None
        self.warnings: list[str] = []
        self._old_switch = sys.getswitchinterval()
        self._gc_paused = False
        self._gc_was_enabled = True

    def begin_realtime(self, helper_threads) -> None:
        """Apply the settings; ``helper_threads`` (alive threads that take the GIL) go just below."""
        if not self.enabled or self.report is not None:
            return
        lp = self.cfg
        self.report = apply_realtime(lp.sched_fifo, lp.priority, lp.lock_memory, lp.cpus,
                                     getattr(lp, "cpu_latency_us", None))
        self.warnings.extend(self.report.warnings)
        helpers = [th.native_id for th in helper_threads if th.is_alive() and th.native_id]
        if self.report.sched_fifo:
            for tid in helpers:
                w = raise_thread(tid, lp.priority - 10)
                if w:
                    self.warnings.append(w)
        cpu = getattr(lp, "cpu", None)
        if cpu is not None:
            self.warnings.extend(isolate_loop_cpu(cpu, helpers, self.report))
        self.report.timer_slack_ns = timer_slack_ns()
        # the loop thread must get the GIL back quickly after each sleep
        self._old_switch = sys.getswitchinterval()
        sys.setswitchinterval(0.0005)

    def end_realtime(self) -> None:
        """Undo :meth:`begin_realtime`; never raises."""
        if self.report is not None:
            restore_realtime(self.report)
            sys.setswitchinterval(self._old_switch)

    def pause_gc(self) -> None:
        """Collect once, freeze what survives, and keep the cyclic collector off.

        A tick creates no reference cycles, so nothing is lost; a full
        collection of this process's heap (NumPy, the dynamics model, ...)
        measured ~37 ms, i.e. 37 missed ticks at 1 kHz, if it ran inside
        the loop.  Done once before the first deadline, not per run block.
        Idempotent; :meth:`resume_gc` undoes it.
        """
        if self._gc_paused:
            return
        self._gc_was_enabled = gc.isenabled()
        gc.collect()
        gc.freeze()  # survivors go to the permanent generation: later collections skip them
        gc.disable()
        self._gc_paused = True

    def resume_gc(self) -> None:
        """Undo :meth:`pause_gc`."""
        if not self._gc_paused:
            return
        gc.unfreeze()
        if self._gc_was_enabled:
            gc.enable()
        self._gc_paused = False
