"""The graded, time-based communication-fault policy (replaces the tick-count windows).

A lost or corrupt reply is normal on a real bus (1 % is common on a long
daisy chain); what hurts a robot is *releasing* it because of one.  So
the reaction grows with how long the bus has been bad, in seconds, never in
ticks or per servo count:

=========  ==============================================================
level      when, and what the loop does
=========  ==============================================================
ok         no failed read in the window
warn       more than ``safety.comm_warn_rate`` of the ticks of the last
           ``safety.comm_window_s`` had a failed read: event + log, go on
hold       no complete read for ``safety.comm_hold_s``: event; the servos
           keep their last goal (nothing is written without fresh
           feedback), reading goes on; the first complete read recovers
           by itself (event ``comm_recovered``), the goal continues from
           the held one through the slew limit
timeout    a servo without a good read for ``safety.comm_timeout_s``
           (default 0.5 s, ROBOTIS ros2_control's ``error_timeout_ms``):
           a ``comm`` fault; the daemon then stops per
           ``safety.comm_timeout_action`` (``torque_off`` | ``hold``)
=========  ==============================================================

Each servo has its own error count and last-good-read time, so the fault
names the servo that went silent.  Times are the loop's deadlines
(simulated time under lockstep), so a host stall counts as the time it
lasted, not as the ticks it skipped.
"""

from __future__ import annotations

import logging

import numpy as np

__all__ = ["CommPolicy", "LEVELS"]

log = logging.getLogger("servoloop.daemon")

LEVELS = ("ok", "warn", "hold", "timeout")
_OK, _WARN, _HOLD, _TIMEOUT = range(4)


class CommPolicy:
    """Per-servo comm error counters and the ok -> warn -> hold -> timeout ladder.

    Parameters
    ----------
    ids, joint_names : sequences (n), config order
    safety : SafetyConfig (``comm_timeout_s``, ``comm_hold_s``, ``comm_window_s``, ``comm_warn_rate``)
    rate_hz : float, loop rate (sizes the window ring: ``comm_window_s`` of ticks)
    event : callable(kind, message), the daemon's event log

    Attributes
    ----------
    level : int, index into :data:`LEVELS`
    errors : (n,) int64, failed reads per servo
    last_ok_ns : (n,) int64, deadline of each servo's last good read (0: none yet)
    steps : list of dict, every level change (``t_s``, ``level``, ``message``), for status / summary
    """

    def __init__(self, ids, joint_names, safety, rate_hz: float, event) -> None:
        self.ids = tuple(ids)
        self.joint_names = tuple(joint_names)
        n = len(self.ids)
        self.timeout_ns = int(round(safety.comm_timeout_s * 1e9))
        self.hold_ns = int(round(safety.comm_hold_s * 1e9))
        self.warn_rate = float(safety.comm_warn_rate)
        self.window = max(1, int(round(safety.comm_window_s * rate_hz)))
        self.event = event
        self.level = _OK
        self.errors = np.zeros(n, dtype=np.int64)
        self.last_ok_ns = np.zeros(n, dtype=np.int64)
        self.disabled = np.zeros(n, dtype=bool)
        self._enabled = np.ones(n, dtype=bool)
        self._good = np.zeros(n, dtype=bool)
        self.last_tick_ok_ns = 0
        self.failed_ticks = 0
        self._ring = np.zeros(self.window, dtype=np.uint8)
        self._i = 0
        self.filled = 0
        self.in_window = 0
        self._bad = np.zeros(n, dtype=bool)
        self._silent = np.zeros(n, dtype=bool)
        self.steps: list[dict] = []
        self._t0_ns = 0

    def start(self, now_ns: int) -> None:
        """Every servo counts as good at ``now_ns`` (its startup read succeeded)."""
        self.last_ok_ns[:] = now_ns
        self.last_tick_ok_ns = now_ns
        self._t0_ns = now_ns

    @property
    def level_name(self) -> str:
        return LEVELS[self.level]

    def window_rate(self) -> float:
        """Fraction of the window's ticks with a failed read (0 before the first tick)."""
        return self.in_window / self.filled if self.filled else 0.0

    def disable(self, i: int) -> None:
        """Servo ``i`` no longer counts (``on_hardware_error: disable_servo`` turned it off)."""
        self.disabled[i] = True
        np.logical_not(self.disabled, out=self._enabled)

    def _step(self, level: int, now_ns: int, message: str, kind: str | None = None) -> None:
        # a level change: rare, so a dict and an event are fine here
        self.level = level
        t = (now_ns - self._t0_ns) * 1e-9
        self.steps.append({"t_s": round(t, 6), "level": LEVELS[level], "message": message})
        if len(self.steps) > 200:  # bounded: a flapping bus must not grow memory
            del self.steps[:100]
        self.event(kind or "comm_" + LEVELS[level], message)
        (log.warning if level >= _WARN else log.info)("comm %s: %s", LEVELS[level], message)

    def record(self, ok: bool, failed: np.ndarray, now_ns: int, stale: bool = False) -> str | None:
        """Judge one tick: ``ok`` (the whole read and write succeeded), ``failed`` (n,) bool
        (servos whose read failed), ``now_ns`` the tick's deadline.  ``stale``: the tick ran on
        the last reading, its replies late (``loop.late_read``): no failure, but no good read
        either -- a run of them climbs to hold and timeout as a silent bus does.

        Returns
        -------
        str or None
            The fault message once some servo has had no good read for ``comm_timeout_s``.
        """
        bad = self._bad
        if ok:
            bad[:] = False
        else:
            np.logical_and(failed, self._enabled, out=bad)
            if not bad.any() and not failed.any():
                bad[:] = self._enabled  # a failed write: no per-servo cause, all count
        tick_bad = bool(bad.any())
        # the window (in seconds of ticks) for the warn level
        i = self._i
        self.in_window += int(tick_bad) - int(self._ring[i])
        self._ring[i] = tick_bad
        self._i = i + 1 if i + 1 < self.window else 0
        if self.filled < self.window:
            self.filled += 1
        gap_s = (now_ns - self.last_tick_ok_ns) * 1e-9
        if tick_bad:
            self.failed_ticks += 1
            self.errors += bad
            np.logical_not(bad, out=self._good)
            np.copyto(self.last_ok_ns, now_ns, where=self._good)
        elif not stale:
            self.last_ok_ns[:] = now_ns
            self.last_tick_ok_ns = now_ns
        level = self.level
        if tick_bad or stale:
            silent = self._silent
            np.less_equal(self.last_ok_ns, now_ns - self.timeout_ns, out=silent)
            silent &= self._enabled
            if silent.any():
                k = int(np.argmax(silent))
                names = ", ".join(f"{self.ids[j]} ({self.joint_names[j]})" for j in np.flatnonzero(silent))
                msg = (f"no good reply from servo {names} for {(now_ns - self.last_ok_ns[k]) * 1e-9:.3f} s "
                       f"(safety.comm_timeout_s = {self.timeout_ns * 1e-9:g} s); "
                       f"errors per servo: {self.error_counts()}")
                self._step(_TIMEOUT, now_ns, msg)
                self.timeout_index = k
                return msg
            if level < _HOLD and now_ns - self.last_tick_ok_ns >= self.hold_ns:
                self._step(_HOLD, now_ns, f"no complete read for {gap_s:.3f} s: "
                                          "holding the last goals, still reading")
                return None
        elif level == _HOLD:
            self._step(_WARN, now_ns, f"bus back after {gap_s:.3f} s: "
                                      "control resumes from the held goals", "comm_recovered")
            return None
        rate = self.in_window / self.filled
        if level == _OK and tick_bad and rate > self.warn_rate and self.filled * 10 >= self.window:
            self._step(_WARN, now_ns, f"{rate:.1%} of the ticks of the last {self.window} "
                                      f"had a failed read (safety.comm_warn_rate {self.warn_rate:.1%}); "
                                      f"errors per servo: {self.error_counts()}")
        elif level == _WARN and self.filled == self.window and rate <= 0.5 * self.warn_rate:
            self._step(_OK, now_ns, f"failed reads down to {rate:.1%} of the last {self.window} ticks")
        return None

    def error_counts(self) -> dict:
        """{servo id: failed reads} of the servos with any."""
        return {int(self.ids[j]): int(self.errors[j]) for j in np.flatnonzero(self.errors)}

    def status(self) -> dict:
        """JSON-able view for ``servoloop status`` and the run summary."""
        return {"level": self.level_name, "failed_ticks": int(self.failed_ticks),
                "window_rate": round(self.window_rate(), 6), "errors_per_servo": self.error_counts(),
                "disabled": [int(self.ids[j]) for j in np.flatnonzero(self.disabled)],
                "steps": list(self.steps[-20:])}
