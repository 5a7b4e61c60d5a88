"""The virtual bus as a real-time server on a pty (``servoloop virtual-bus``).

One loop, no threads: wait on the pty master (select), integrate the
physics up to the monotonic clock, answer, and send each reply when it is
due.  Without wire timing a reply goes out at once (plus any injected
delay).  With wire timing the bus is modelled as the half-duplex line it
is: an instruction occupies the wire for its bytes at 10 bits per byte,
then each servo waits its Return Delay Time and sends its reply; the next
instruction waits for the line.  Each reply is written when it would be
off the wire (select to within ~0.2 ms, then a short busy wait), so the
host sees the timing of a real bus at that baud rate.  Replies 50 us apart
(4 Mbps) keep the process busy-waiting through a reply train: with wire
timing it uses most of a core while a host runs at full rate.  Writing a
train at once when its last reply is due was tried: the process then
sleeps and, on this loaded VM, wakes late (p99 3 ms).  The pty's own latency (measured at start,
median of 25 one-way trips, capped at 0.1 ms) is taken off both ends, since
a real bus has no pty.  Polling the pty instead of sleeping between cycles
was tried and dropped: on this shared 2-core machine it made cycles slower.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import time
from collections import deque

from servoloop.virtual_bus.pty import measure_pty_latency, open_pty, termios_baud

__all__ = ["PtyServer"]

_IDLE_S = 0.005          # physics keeps up with the clock even when nobody asks
_SPIN_S = 2e-4           # last stretch before a due reply is busy-waited (select wakes late)
_MAX_CATCH_UP_S = 0.5    # longest stretch of physics integrated in one go
_STALL_S = 0.02          # a partial packet older than this is line noise (servo inter-byte timeout)


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
    """

    def __init__(self, engine, wire_timing: bool = False):
        self.engine = engine
        self.wire_timing = wire_timing
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

    def stop(self, *_args) -> None:
        """Ask :meth:`serve` to return (signal-safe)."""
        self._stop = True

    def serve(self, duration: float | None = None) -> None:
        """Serve until :meth:`stop` (SIGTERM/SIGINT when installed) or ``duration`` s."""
        _tight_timer_slack()
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        old_wakeup = signal.set_wakeup_fd(wake_w)
        self.t0 = time.monotonic()
        end = None if duration is None else self.t0 + duration
        try:
            while not self._stop and (end is None or time.monotonic() < end):
                self._once(wake_r, end)
        finally:
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
            while time.monotonic() < self._queue[0][0]:
                pass
            self._send_due(time.monotonic())
            return
        fds = [wake_r] if engine.unplugged else [self.master, wake_r]
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
        if self.master in ready:
            data = self._read()
            if data:
                self._last_rx = now
                engine.set_client_baud(termios_baud(self.master))
                self._schedule(engine.feed(data), now)
        elif engine.pending_bytes() and now - self._last_rx >= _STALL_S:
            self._schedule(engine.drop_partial(), now)
            self._last_rx = now

    def _sync(self, now: float) -> None:
        dt = (now - self.t0) - self.engine.time_s
        if dt > _MAX_CATCH_UP_S:
            # the process was stopped or starved: let simulated time skip rather than
            # integrate a long gap in one go and stall every reply behind it
            self.t0 += dt - _MAX_CATCH_UP_S
            dt = _MAX_CATCH_UP_S
        if dt > 0:
            self.engine.advance(dt)

    def _read(self) -> bytes:
        chunks = []
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except (BlockingIOError, OSError):
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)

    def _schedule(self, exchanges, now: float) -> None:
        q = self._queue
        if not self.wire_timing:
            for _, replies in exchanges:
                for pkt, _, extra in replies:
                    q.append((now + extra, pkt))
            if q and q[0][0] <= now:
                self._send_due(now)
            return
        baud = self.engine.bus_baud or self.engine.client_baud or 1_000_000
        byte_s = 10.0 / baud
        t = max(now - self.latency_in_s, self._bus_free)
        for nbytes, replies in exchanges:
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
        if self.master >= 0:
            self._queue.clear()
            os.close(self.master)
            os.close(self.slave)
            self.master = self.slave = -1

    def close(self) -> None:
        """Close the pty if still open."""
        self._unplug()
