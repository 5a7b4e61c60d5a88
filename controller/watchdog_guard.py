"""The servos' Bus Watchdog, seen from the loop: a gap in the bus traffic long enough to fire it.

The X-series Bus Watchdog (armed by :func:`~servoloop.controller.bringup.arm_bus_watchdog`
just before the first tick) stops a servo whose instruction packets stop for longer than the
set time (``safety.bus_watchdog_s``, 20 ms units): Bus Watchdog reads -1, and the goal
registers refuse writes until 0 is written to it.  That is the point when the host is gone.
When the host was only *stalled* (a swap-in, a VM pause, a garbage collection in the
process that embeds the daemon) and comes back, nothing tells it: a SYNC WRITE has no
reply, so every later goal is dropped in silence and the robot stays where it stopped
while the loop believes it moves.  (Found in the test suite: a full collection of a large
process's heap, 0.9 s, between arming and the first tick: the quadruped never stood up,
the loop ran 3 s of `wbc` on a robot lying on its belly.)

:class:`BusWatchdogGuard` closes that gap: the loop hands it the time since its last bus
transaction at the start of every tick; after a gap of at least half the watchdog time it
reads Bus Watchdog of every armed servo, and a servo that fired is cleared (0) and armed
again, with a warning and an event.  The tick's own goal write follows at once.  A gap that
long is rare (at 1 kHz ``safety.max_consecutive_missed`` faults after 100 missed ticks), so
the check costs nothing in a normal tick.
"""

from __future__ import annotations

import logging

from servoloop.controller.bringup import WATCHDOG_UNIT_S

__all__ = ["BusWatchdogGuard"]

log = logging.getLogger("servoloop.daemon")

#: fraction of the watchdog time a gap must reach before the servos are asked (a servo's
#: clock and where its packets fell in the gap are not ours to know exactly)
CHECK_FRACTION = 0.5


class BusWatchdogGuard:
    """Reads, clears and re-arms a Bus Watchdog that fired while the loop was stalled.

    Parameters
    ----------
    event : callable(kind, message), the daemon's event sink
    """

    def __init__(self, event) -> None:
        self.event = event
        self.ids: tuple[int, ...] = ()
        self.raw = 0
        self.limit_ns = 0          # 0: not armed (no check)
        self.trips = 0             # servo watchdogs found fired and cleared
        self.checks = 0            # gaps long enough to ask
        self.warnings: list[str] = []

    def arm(self, ids, raw: int) -> None:
        """The servos ``ids`` were armed with ``raw`` (20 ms units); 0 disarms the guard."""
        self.ids = tuple(int(i) for i in ids)
        self.raw = int(raw)
        self.limit_ns = int(CHECK_FRACTION * self.raw * WATCHDOG_UNIT_S * 1e9) if self.raw and self.ids else 0

    def disarm(self) -> None:
        """No check from now on (the watchdog was cleared, e.g. at shutdown)."""
        self.limit_ns = 0

    def check(self, bus, gap_ns: int, errors) -> list[int]:
        """After a gap of ``gap_ns`` [ns] without bus traffic: the servos found fired, now
        cleared and armed again ([] when the gap was short or none fired).

        ``errors`` : the loop's :class:`~servoloop.controller.bus_io.BusErrorCounts` (a failed
        read or write here is counted there and the servo tried again at the next long gap).
        """
        if not self.limit_ns or gap_ns < self.limit_ns:
            return []
        from servoloop.firmware_bridge.errors import BridgeError

        self.checks += 1
        fired, failed = [], []
        for sid in self.ids:
            try:
                v = bus.read_raw(sid, "bus_watchdog")
                if v < 0 or v >= 0x80:          # -1: Bus Watchdog Error
                    bus.write_raw(sid, "bus_watchdog", 0)          # clears it: goals writable
                    bus.write_raw(sid, "bus_watchdog", self.raw)   # and armed again
                    fired.append(sid)
            except BridgeError as exc:
                errors.count(exc)
                failed.append(sid)
        if fired:
            self.trips += len(fired)
            msg = (f"bus watchdog: servos {fired} stopped after {gap_ns / 1e6:.0f} ms without bus "
                   f"traffic (safety.bus_watchdog_s {self.raw * WATCHDOG_UNIT_S:g} s; the host stalled); "
                   "cleared and armed again, goals written from this tick on")
            log.warning("%s", msg)
            self.event("bus_watchdog", msg)
            if len(self.warnings) < 10:
                self.warnings.append(msg)
        if failed:
            log.warning("bus watchdog: could not check servos %s after a %.0f ms gap", failed, gap_ns / 1e6)
        return fired
