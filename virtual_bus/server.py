"""The virtual bus as a real-time server on a pty (``servoloop virtual-bus``).

A reader thread drains the pty master as soon as bytes arrive, noting for
each chunk the host's baud rate (its termios) at that moment and the time:
a host that writes and at once reopens the port at another rate (a baud
change) is heard at the rate it wrote at, and a host-side output flush
(``tcflush(TCOFLUSH)``, pyserial's ``reset_output_buffer``, pypot before
every packet) finds nothing of ours left to drop.  The master runs in
packet mode (``TIOCPKT``) so a host input flush (``reset_input_buffer``)
is seen too; it is counted, and the replies still owed are sent anyway, as
real servos send them (a host must tell a late reply from a fresh one).  One loop does the
rest: wait for the reader (select), integrate the physics up to the
monotonic clock, answer, and send each reply when it is due.  Without wire timing a reply goes out at once (plus any injected
delay).  With wire timing the bus is modelled as the half-duplex line it
is: an instruction occupies the wire for its bytes at 10 bits per byte,
then each servo waits its Return Delay Time and sends its reply; the next
instruction waits for the line.  Each reply is written when it would be
off the wire (select to within ~0.2 ms, then a short busy wait), so the
host sees the timing of a real bus at that baud rate.  Replies 50 us apart
(4 Mbps) keep the process busy-waiting through a reply train: with wire
timing it uses most of a core while a host runs at full rate.  Writing a
train at once when its last reply is due was tried: the process then
sleeps and, on this loaded VM, wakes late (p99 3 ms).  Backpressure: a
host that sends faster than the line carries the replies (on a pty it
can) would queue replies further and further ahead; an instruction whose
replies would start more than ``_MAX_BACKLOG_S`` after it arrived is
answered by nobody (on a real half-duplex bus it would collide with the
replies still on the wire), so no stale reply arrives long after the host
stopped.  The pty's own latency (measured at start,
median of 25 one-way trips, capped at 0.1 ms) is taken off both ends, since
a real bus has no pty.  Polling the pty instead of sleeping between cycles
was tried and dropped: on this shared 2-core machine it made cycles slower.

Physics beside the replies (``physics="beside"``, the default): the reader
thread answers each instruction the moment it has read it, from the
servos' latest state (the control table as the last physics step left it,
present registers refreshed right after that step), and writes the replies
due at once; the main loop steps the physics up to the monotonic clock in
slices of at most ``_SLICE_S`` between requests and sends the replies that
are due later (wire timing, injected delays).  A lock keeps the two apart,
so a reply waits at most for one slice, never for the physics owed since
the last request, and crosses one thread instead of two.  The physics is
stepped right after each answer (the host is then busy with the reply, so
a step seldom holds up the next request) and every ``_IDLE_S`` when the
host is quiet: a reply carries the state as of the host's previous
request (plus the plant's own step), a write's goal acts from the step
after it arrived.  ``physics="inline"``
is the earlier design (the main loop integrates up to now, then answers),
kept for comparison (``servoloop bench bus --reply-latency``).

The compiled reply path (``fast=True``, with physics beside and no wire
timing; :mod:`.fastpath`, :mod:`._fastpath`): the reader is a C loop
that holds no GIL.  It answers the every-tick packets (Protocol 2.0 SYNC
READ, BULK READ, READ, PING; Protocol 1.0 READ, PING, BULK READ; SYNC WRITE
of goal registers, 2.0 and 1.0) at once from a
mirror of the control tables the main loop publishes after each physics
slice and each drain, and queues every chunk it reads; the main loop feeds
them all to the engine in order (so watchdog, statistics and state follow
every byte) and answers those C left alone, as above.  A reply then waits
neither for the GIL nor for a physics slice in progress.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import select
import signal
import sys
import termios
import threading
import time
from collections import deque

from servoloop.virtual_bus.fastpath import FastReplies
from servoloop.virtual_bus.pty import measure_pty_latency, open_pty, termios_baud

__all__ = ["PtyServer"]

_IDLE_S = 0.005          # physics keeps up with the clock even when nobody asks
_SPIN_S = 2e-4           # last stretch before a due reply is busy-waited (select wakes late)
_MAX_CATCH_UP_S = 0.5    # longest stretch of physics integrated in one go
_STALL_S = 0.02          # a partial packet older than this is line noise (servo inter-byte timeout)
_MAX_BACKLOG_S = 0.05    # replies due later than this after their instruction arrived are not sent
_SWITCH_S = 1e-4         # GIL switch interval while serving: the reader thread runs within 0.1 ms
_SLICE_S = 1e-3          # physics beside the replies: longest stretch integrated while holding the lock (one step of the built-in plants)
PHYSICS_MODES = ("beside", "inline")
_TIOCPKT_FLUSHREAD = 0x01
_TIOCPKT_FLUSHWRITE = 0x02


def _tight_timer_slack() -> None:
    """Ask for 1 us timer slack (default 50 us) so select wakes when asked."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(29, 1, 0, 0, 0)   # PR_SET_TIMERSLACK
    except (OSError, AttributeError):
        pass


class PtyServer:
    """Serve a :class:`~virtual_bus.engine.BusEngine` on a new pty.

    Parameters
    ----------
    engine : BusEngine
    wire_timing : bool
        Delay replies by their wire time at the bus baud (10 bits/byte) plus
        Return Delay Time.
    physics : {"beside", "inline"}
        ``beside``: replies from the latest state at once, physics stepped in
        slices between requests; ``inline``: physics integrated up to now
        before each answer (see the module docstring).
    fast : bool
        With physics beside and no wire timing: answer the every-tick packets
        from the compiled reader (see the module docstring); False (default): the
        Python reader answers everything.  Off by default: without wire timing
        it answers a host that reads as fast as it gets replies every ~35 us,
        far faster than any real bus and than the physics (1 ms slices), so
        such a host (the actuator calibration) records mostly repeated states
        (93 % of positions equal to the previous one, against 61 % through
        the Python reader), and its identified gains scatter (BENCHMARKS.md).
    """

    def __init__(self, engine, wire_timing: bool = False, physics: str = "beside", fast: bool = False):
        if physics not in PHYSICS_MODES:
            raise ValueError(f"physics must be one of {PHYSICS_MODES}, got {physics!r}")
        self.engine = engine
        self.wire_timing = wire_timing
        self.physics = physics
        self._beside = physics == "beside"
        self._lock = threading.Lock()     # the engine and the reply queue: reader thread vs physics
        self._reader_waiting = False
        self.master, self.slave, self.port = open_pty()
        self._stop = False
        self._queue: deque = deque()      # (due time, bytes), in wire order
        self._bus_free = 0.0
        self.t0 = time.monotonic()
        self._last_rx = 0.0
        # The pty is not part of the emulated wire: with wire timing, an instruction is taken
        # to have started when the host wrote it (its transfer latency earlier than we see it)
        # and a reply is written that much before it is due, so it arrives on time.
        self.latency_in_s = self.latency_out_s = 0.0
        if wire_timing:
            lat_in, lat_out = measure_pty_latency(self.master, self.slave)
            self.latency_in_s, self.latency_out_s = min(lat_in, 1e-4), min(lat_out, 1e-4)
        try:
            fcntl.ioctl(self.master, termios.TIOCPKT, b"\x01\x00\x00\x00")
            self._packet_mode = True
        except OSError:
            self._packet_mode = False
        # (arrival time, host baud, its baud at the look before, bytes or None, packet-mode status)
        self._rxq: deque = deque()
        self._notify_r, self._notify_w = os.pipe()
        for fd in (self._notify_r, self._notify_w):
            os.set_blocking(fd, False)
        self._reader_stop = False
        self._reader: threading.Thread | None = None
        self.stats = {"backlog_dropped": 0, "host_input_flushes": 0, "host_output_flushes": 0,
                      "physics_slices": 0, "fast_reads": 0, "fast_writes": 0, "slow_chunks": 0}
        self._fast = None
        if fast and self._beside and not wire_timing:
            self._fast = FastReplies(engine, self.master, self._notify_w, self._packet_mode)

    def stop(self, *_args) -> None:
        """Ask :meth:`serve` to return (signal-safe)."""
        self._stop = True

    def serve(self, duration: float | None = None) -> None:
        """Serve until :meth:`stop` (SIGTERM/SIGINT when installed) or ``duration`` s."""
        _tight_timer_slack()
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        main = threading.current_thread() is threading.main_thread()
        old_wakeup = signal.set_wakeup_fd(wake_w) if main else None
        old_switch = sys.getswitchinterval()
        sys.setswitchinterval(_SWITCH_S)
        self.t0 = time.monotonic()
        end = None if duration is None else self.t0 + duration
        if self._fast is not None:
            self._fast.start()
        else:
            self._reader = threading.Thread(target=self._read_loop, name="virtual-bus-reader", daemon=True)
            self._reader.start()
        once = self._once_beside if self._beside else self._once
        try:
            while not self._stop and (end is None or time.monotonic() < end):
                once(wake_r, end)
        finally:
            sys.setswitchinterval(old_switch)
            if main:
                signal.set_wakeup_fd(old_wakeup)
            os.close(wake_r)
            os.close(wake_w)
            self.close()

    def _once(self, wake_r: int, end: float | None) -> None:
        engine = self.engine
        now = time.monotonic()
        self._send_due(now)
        timeout = _IDLE_S
        if self._queue:
            timeout = min(timeout, self._queue[0][0] - now)
        if engine.pending_bytes():
            timeout = min(timeout, self._last_rx + _STALL_S - now)
        ev = engine.faults.next_event_time
        if ev is not None:
            timeout = min(timeout, self.t0 + ev - now)
        if end is not None:
            timeout = min(timeout, end - now)
        if self._queue and self._queue[0][0] - now < _SPIN_S:
            due = self._queue[0][0]
            while time.monotonic() < due:
                os.sched_yield()        # releases the GIL: the reader thread is not held up by the spin
            self._send_due(time.monotonic())
            return
        fds = [wake_r] if engine.unplugged else [self._notify_r, wake_r]
        try:
            ready, _, _ = select.select(fds, [], [], max(0.0, timeout - (_SPIN_S if self._queue else 0.0)))
        except InterruptedError:
            return
        now = time.monotonic()
        if wake_r in ready:
            try:
                os.read(wake_r, 512)
            except BlockingIOError:
                pass
        self._sync(now)
        if engine.unplugged:
            self._unplug()
            return
        if self._notify_r in ready:
            try:
                os.read(self._notify_r, 4096)
            except BlockingIOError:
                pass
        if self._rxq:
            self._take(now)
        elif engine.pending_bytes() and now - self._last_rx >= _STALL_S:
            self._schedule(engine.drop_partial(), now)
            self._last_rx = now

    def _once_beside(self, wake_r: int, end: float | None) -> None:
        """Main loop, physics beside: send what is due, sleep until a request was answered (the
        reader says so), the next due reply, a stalled partial packet, a timed fault, ``end`` or
        ``_IDLE_S``, then step the physics owed."""
        engine = self.engine
        now = time.monotonic()
        with self._lock:
            self._send_due(now)
            head = self._queue[0][0] if self._queue else None
            pending = engine.pending_bytes()
            ev = engine.faults.next_event_time
        timeout = _IDLE_S
        if head is not None:
            if head - now < _SPIN_S:
                while time.monotonic() < head:
                    os.sched_yield()
                with self._lock:
                    self._send_due(time.monotonic())
                return
            timeout = min(timeout, head - now - _SPIN_S)
        if pending:
            timeout = min(timeout, self._last_rx + _STALL_S - now)
        if ev is not None:
            timeout = min(timeout, self.t0 + ev - now)
        if end is not None:
            timeout = min(timeout, end - now)
        fds = [wake_r] if engine.unplugged else [self._notify_r, wake_r]
        try:
            ready, _, _ = select.select(fds, [], [], max(0.0, timeout))
        except InterruptedError:
            return
        for fd in ready:
            try:
                os.read(fd, 4096)
            except BlockingIOError:
                pass
        if self._fast is not None:
            with self._lock:
                self._fast.drain(self)
        self._step_physics()
        if engine.unplugged:
            self._unplug()
            return
        now = time.monotonic()
        with self._lock:
            if engine.pending_bytes() and now - self._last_rx >= _STALL_S:
                self._schedule(engine.drop_partial(), now)
                self._last_rx = now
                if self._fast is not None:
                    self._fast.partial_dropped()

    def _step_physics(self) -> None:
        """Integrate up to the clock in slices of at most ``_SLICE_S``, the lock taken per slice
        (a request that comes meanwhile is answered between two slices)."""
        engine = self.engine
        while True:
            if self._reader_waiting:   # a lock is not fair: let the waiting answer in first
                time.sleep(0)
            with self._lock:
                if self._fast is not None:
                    # chunks C left to Python are answered between two slices, not after the
                    # whole stretch owed (a slow chunk waits at most one slice, as before)
                    self._fast.drain(self)
                dt = (time.monotonic() - self.t0) - engine.time_s
                if dt > _MAX_CATCH_UP_S:   # stopped or starved: skip simulated time (see _sync)
                    self.t0 += dt - _MAX_CATCH_UP_S
                    dt = _MAX_CATCH_UP_S
                if dt <= 0 or engine.unplugged:
                    return
                engine.advance(min(dt, _SLICE_S))
                engine.fresh_present()   # the next reply only copies registers
                self.stats["physics_slices"] += 1
                if self._fast is not None:
                    self._fast.sync()
                if dt <= _SLICE_S:
                    return

    def _answer_now(self, t: float, baud, prev, data, status: int) -> None:
        """Reader thread, physics beside: answer a chunk at once from the latest state."""
        self._reader_waiting = True
        with self._lock:
            self._reader_waiting = False
            if data is None:
                if status & _TIOCPKT_FLUSHREAD:   # counted, the replies owed still go (see _take)
                    self.stats["host_input_flushes"] += 1
                if status & _TIOCPKT_FLUSHWRITE:
                    self.stats["host_output_flushes"] += 1
                return
            if self.engine.unplugged:
                return
            self._last_rx = t
            self._schedule(self.engine.feed_at(data, baud, prev), t)
        # the main loop now steps the physics owed (the host is busy with the reply: the next
        # request is some way off, so stepping now rarely holds one up), sends what is due later,
        # and drops a stalled partial packet
        try:
            os.write(self._notify_w, b"\0")
        except (BlockingIOError, OSError):
            pass

    def _take(self, now: float) -> None:
        """Answer the chunks the reader thread queued, each at the baud and time it arrived at."""
        engine, rxq = self.engine, self._rxq
        while rxq:
            t, baud, prev, data, status = rxq.popleft()
            if data is None:
                if status & _TIOCPKT_FLUSHREAD:
                    # the host flushed its input: a real servo does not know and still sends the
                    # replies it owes (a late one then arrives after the flush, which the host's
                    # bus must recognise as stale): counted, never dropped here
                    self.stats["host_input_flushes"] += 1
                if status & _TIOCPKT_FLUSHWRITE:
                    self.stats["host_output_flushes"] += 1
                continue
            self._last_rx = now
            self._schedule(engine.feed_at(data, baud, prev), min(t, now))

    def _read_loop(self) -> None:
        """Reader thread: drain the master the moment bytes arrive; note the host's baud and the time."""
        master, rxq, packet, beside = self.master, self._rxq, self._packet_mode, self._beside
        seen = termios_baud(master)          # the host's rate at the last look (each wake, 5 ms idle)
        while not self._reader_stop:
            try:
                ready, _, _ = select.select([master], [], [], 0.005)
            except (OSError, ValueError):
                return
            prev = seen
            seen = baud = termios_baud(master)   # as early as possible: the rate the host wrote at
            if not ready:
                continue
            t = time.monotonic()
            try:
                chunk = os.read(master, 65536)
            except BlockingIOError:
                continue
            except OSError:
                return
            if not chunk:
                continue
            head = 0
            if packet:
                head, chunk = chunk[0], chunk[1:]
            if beside:
                self._answer_now(t, baud, prev, None if head else chunk, head)
                continue
            rxq.append((t, baud, prev, None, head) if head else (t, baud, prev, chunk, 0))
            try:
                os.write(self._notify_w, b"\0")
            except (BlockingIOError, OSError):
                pass

    def _sync(self, now: float) -> None:
        dt = (now - self.t0) - self.engine.time_s
        if dt > _MAX_CATCH_UP_S:
            # the process was stopped or starved: let simulated time skip rather than
            # integrate a long gap in one go and stall every reply behind it
            self.t0 += dt - _MAX_CATCH_UP_S
            dt = _MAX_CATCH_UP_S
        if dt > 0:
            self.engine.advance(dt)

    def _schedule(self, exchanges, now: float) -> None:
        q = self._queue
        if not self.wire_timing:
            for _, replies in exchanges:
                for pkt, _, extra in replies:
                    q.append((now + extra, pkt))
            if q and q[0][0] <= now:
                self._send_due(now)
            return
        # the line runs at the rate the host wrote this chunk at (a servo answers only at its own
        # rate, so a baud-change WRITE is answered at the old rate, the next packet at the new)
        baud = self.engine.client_baud or self.engine.bus_baud or 1_000_000
        byte_s = 10.0 / baud
        arrived = now - self.latency_in_s
        t = max(arrived, self._bus_free)
        for nbytes, replies in exchanges:
            if replies and t - arrived > _MAX_BACKLOG_S:
                # the line is still busy with replies long queued: this instruction would
                # collide with them on a real bus; nobody answers it (and nothing piles up)
                self.stats["backlog_dropped"] += len(replies)
                continue
            t += nbytes * byte_s
            for pkt, rdt, extra in replies:
                t += rdt + extra + len(pkt) * byte_s
                q.append((t - self.latency_out_s, pkt))
        self._bus_free = t

    def _send_due(self, now: float) -> None:
        q = self._queue
        if not q or q[0][0] > now:
            return
        out = []
        while q and q[0][0] <= now:
            out.append(q.popleft()[1])
        if self.engine.unplugged:
            return
        try:
            os.write(self.master, b"".join(out))
        except (BlockingIOError, OSError):
            pass    # nobody reading: the bytes are lost, as on a real bus

    def _unplug(self) -> None:
        self._reader_stop = True
        if self._fast is not None:
            self._fast.stop()
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(timeout=1.0)
        if self.master >= 0:
            self._queue.clear()
            os.close(self.master)
            os.close(self.slave)
            self.master = self.slave = -1
        if self._notify_r >= 0:
            os.close(self._notify_r)
            os.close(self._notify_w)
            self._notify_r = self._notify_w = -1

    def close(self) -> None:
        """Close the pty if still open."""
        self._unplug()
