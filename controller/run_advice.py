"""What ``servoloop run`` tells the user about the rate it was asked for: before the run, whether
one tick's bus traffic fits in one period at the configured baud; after it, what to do about
missed ticks.

Wire time of one tick (8N1: 10 bits per byte), from the control tables:

* Protocol 2.0: one Sync Read instruction (14 + n bytes) and n status packets
  (11 + span bytes, the span from Present Current/Load to Present Position), one
  Sync Write of Goal Position (14 + 5 n bytes);
* Protocol 1.0 (AX / MX 1.0, no Sync Read): n Read instructions (8 bytes) and
  n status packets (6 + span bytes), one Sync Write (8 + 3 n bytes);
* plus each reply's Return Delay Time: 0 when ``bus.fix_return_delay`` sets it,
  else the factory 500 us per servo (field notes a2).

It is a lower bound: USB latency (the FTDI timer, 1 ms at best) comes on top.
"""

from __future__ import annotations

__all__ = ["wire_time_per_tick_s", "rate_fit_warning", "missed_ticks_advice"]

_READ = ("present_current", "present_load", "present_velocity", "present_position")
_BITS_PER_BYTE = 10
FACTORY_RETURN_DELAY_S = 500e-6
HEADROOM = 0.8  # the rate that fits leaves 20 % of the period for USB and the host


def _span(table) -> int:
    regs = [table[r] for r in _READ if r in table.registers]
    return max(r.address + r.size for r in regs) - min(r.address for r in regs)


def wire_time_per_tick_s(cfg) -> float:
    """Seconds of bus time one tick needs (read every servo, write every goal) at ``bus.baud``."""
    from servoloop.firmware_bridge.control_table import get_table

    tables = [get_table(s.model) for s in cfg.servos]
    n = len(tables)
    span = sum(_span(t) for t in tables)
    goal = sum(t["goal_position"].size for t in tables)
    if cfg.bus.protocol == 2:
        nbytes = (14 + n) + (11 * n + span) + (14 + n + goal)
    else:
        nbytes = 8 * n + (6 * n + span) + (8 + n + goal)
    delay = 0.0 if cfg.bus.fix_return_delay else FACTORY_RETURN_DELAY_S * n
    return nbytes * _BITS_PER_BYTE / cfg.bus.baud + delay


def rate_fit_warning(cfg) -> str | None:
    """One line when ``loop.rate_hz`` cannot fit the wire time at ``bus.baud`` (else None)."""
    t = wire_time_per_tick_s(cfg)
    period = 1.0 / cfg.loop.rate_hz
    if t <= period:
        return None
    fits = HEADROOM / t
    fits = int(fits // 10 * 10) if fits >= 20 else round(fits, 1)
    return (f"loop.rate_hz {cfg.loop.rate_hz:g} Hz cannot fit bus.baud {cfg.bus.baud} bps: one tick's read "
            f"and write of {cfg.n} servos take {t * 1e3:.2f} ms on the wire, the period is {period * 1e3:.2f} ms. "
            f"About {fits} Hz fits at this baud (--rate {fits}); or raise the servos' baud rate "
            "(servoloop setup baud) and bus.baud")


def missed_ticks_advice(summary: dict, rate_hz: float) -> str | None:
    """Advice when more than 1 % of the ticks were missed (late and skipped), else None."""
    missed = int(summary.get("missed") or 0)
    # the startup's ticks too (a run that faulted in its startup has no run ticks)
    ticks = int(summary.get("total_ticks") or summary.get("ticks") or 0) + missed
    if ticks == 0 or missed <= 0.01 * ticks:
        return None
    done = summary.get("rate_hz") or rate_hz * (ticks - missed) / ticks
    lower = int(max(done * 0.8, 1.0) // 10 * 10) or 1
    text = (f"{missed} of {ticks} ticks were missed ({100 * missed / ticks:.0f} %): this machine and bus do not "
            f"keep {rate_hz:g} Hz. Try a lower rate (--rate {lower}), loop.sched_fifo: true with "
            "loop.cpu (the loop alone on a quiet core), and on an FTDI adapter a latency timer of 1 ms "
            "(`servoloop scan` reports it)")
    causes = summary.get("missed_by_cause") or {}
    if causes:
        worst = max(("compute", "bus", "wakeup"), key=lambda k: causes.get(k, 0))
        why = {"compute": "the tick's own work (controller, estimator) overran the period",
               "bus": "waiting for the servos' replies overran the period",
               "wakeup": "the loop woke late (scheduling: SCHED_FIFO, loop.cpu; "
                         "`servoloop bench loop --wakeup --policy fifo` measures what a loop that only "
                         "sleeps gets on this machine)"}[worst]
        text += f". Most ({causes.get(worst, 0)}) were missed because {why}"
    return text
