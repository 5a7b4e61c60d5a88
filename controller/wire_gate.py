"""The late read's wire-time gate: a stale tick never transmits into a reply still owed.

On a half-duplex RS-485/TTL bus a write sent while a servo is still replying collides
with the reply: both fail their CRC and the servos never see the write.  A stale tick
(``loop.late_read``) writes its goals while the replies of the outstanding read request
are owed; the last of them is off the wire at the latest the request's send time plus
the read's wire time (request and replies at 10 bits a byte at the bus's baud, and per
reply the servo's return delay and turnaround: :func:`~firmware_bridge.bus.reply_timeout_s`
without the host margin).  The stale tick writes only after that: it waits when that
comes before its latest write time, else it writes nothing (the servos keep their last
goal) and counts it.  The time counts from the request's write: bytes an adapter holds
back (a full-speed USB frame) may shrink the gap, for which the bound has no allowance.
"""

from __future__ import annotations

__all__ = ["WireGate"]


class WireGate:
    """When the outstanding read request's replies are off the wire, and the gate on it.

    Parameters
    ----------
    clock : the loop's Clock

    Attributes
    ----------
    wire_ns : int, the tick's read's wire time (a monitor tick's wide read has its own), ns
    waits : int, stale ticks whose write waited for the wire
    wait_ns : int, the time they waited, ns in all
    skipped : int, stale ticks that wrote no goals: the wire was not free in time
    sent_ns : int, when the last request was written, ns on the loop's clock
    """

    def __init__(self, clock) -> None:
        self.clock = clock
        self.simulated = bool(getattr(clock, "simulated", False))
        self.wire_ns = self.waits = self.wait_ns = self.skipped = 0
        self._wire: dict = {}
        self._sent = None          # the reader whose request is out
        self.sent_ns = 0           # when it was written, loop clock
        self._sent_wire_ns = 0

    def bind(self, bus, readers) -> None:
        """The wire time of each reader's one transaction (``readers[0]``: the tick's read)."""
        # each read's reply timeout is its wire time plus the host's margin (adapter latency)
        self._wire = {id(r): int(max(0.0, r.reply_timeout_s - bus.timeout_margin_s) * 1e9)
                      for r in readers if r is not None}
        self.wire_ns = self._wire[id(readers[0])]
        self._sent = None

    def sent(self, reader) -> None:
        """``reader``'s request has just been written (the bytes are out by now)."""
        self._sent, self.sent_ns = reader, self.clock.now_ns()
        self._sent_wire_ns = self._wire.get(id(reader), self.wire_ns)

    @property
    def free_ns(self) -> int:
        """When the outstanding request's last reply is off the wire at the latest, ns on the
        loop's clock (0: nothing outstanding)."""
        r = self._sent
        if r is None or not r.requested:
            return 0
        return self.sent_ns + self._sent_wire_ns

    def clear(self, latest_ns: int) -> bool:
        """Wait, if need be, until no reply of the outstanding request can be on the wire;
        False (counted in :attr:`skipped`) when that is after ``latest_ns`` (ns, loop
        clock): the caller then transmits nothing."""
        free = self.free_ns
        now = self.clock.now_ns()
        if now >= free:
            return True
        if free > latest_ns:
            self.skipped += 1
            return False
        self.clock.sleep_until(free)
        self.waits += 1
        self.wait_ns += free - now
        return True

    def quiesce(self, bus) -> None:
        """Take the outstanding request's replies off ``bus`` once none can be on the wire.
        On a real clock the bus's settle does it (it waits for the replies up to the reply
        timeout, longer than the wire time); a simulated clock is first moved past the wire
        time, since the simulated bus holds late replies until then.  Nothing outstanding:
        no-op.  Raises as :meth:`Bus.settle <firmware_bridge.bus.Bus.settle>`."""
        if bus is None or bus.pending is None:
            return
        free = self.free_ns
        if self.simulated and free and self.clock.now_ns() < free:
            self.clock.sleep_until(free)
        bus.settle()

    def summary(self) -> dict:
        """``waits``, ``wait_us`` (in all), ``skipped``, ``wire_us`` (the tick's read's bound)."""
        return {"waits": self.waits, "wait_us": round(self.wait_ns * 1e-3, 1),
                "skipped": self.skipped, "wire_us": round(self.wire_ns * 1e-3, 1)}

