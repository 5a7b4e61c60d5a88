"""Connect: bring the bus up for the config's servos (not yet real time).

Ping every servo and check its model, set the FTDI latency timer and each
servo's Return Delay Time (unless read-only), then put each servo in the
config's operating mode.  Operating Mode is EEPROM: writable only with
torque off (field notes a7).
"""

from __future__ import annotations

import logging

from servoloop.controller.faults import Fault, FaultKind, FaultRaised
from servoloop.controller.servo_faults import OPERATING_MODES

__all__ = ["servo_tables", "connect_bus", "configure_modes", "connect_report_text"]

log = logging.getLogger("servoloop.daemon")


def servo_tables(cfg) -> list:
    """The control table of each configured servo (config order)."""
    from servoloop.firmware_bridge.control_table import get_table

    return [get_table(s.model) for s in cfg.servos]


def connect_bus(bus, cfg, readonly: bool, errors, tries: int = 3):
    """``bus.connect()``; a lost or corrupt reply while pinging is retried (counted in ``errors``).

    Returns
    -------
    the bus's connect report (servos that answered, latency timer, warnings) or None

    Raises
    ------
    BridgeError
        The last attempt's error (the caller turns it into a connect fault).
    """
    from servoloop.firmware_bridge.errors import BusTimeoutError, ChecksumError

    for attempt in range(tries):
        try:
            return bus.connect(fix_latency_timer=cfg.bus.fix_latency_timer and not readonly,
                               fix_return_delay=cfg.bus.fix_return_delay and not readonly)
        except (BusTimeoutError, ChecksumError) as exc:
            if attempt == tries - 1:
                raise
            log.warning("connect attempt %d failed (%s); retrying", attempt + 1, exc)
            errors.count(exc)
    return None


def configure_modes(bus, cfg, tables) -> None:
    """Set each servo's Operating Mode to the config's (torque off first where it changes).

    Raises
    ------
    FaultRaised
        A servo model without Operating Mode asked for another mode than position.
    BridgeError
        A read or write failed.
    """
    for s, t in zip(cfg.servos, tables, strict=False):
        if "operating_mode" not in t.registers:
            if s.mode != "position":
                raise FaultRaised(Fault(FaultKind.CONFIG, f"servo {s.id} ({s.joint}): model {s.model} has no "
                                        f"operating_mode; mode {s.mode!r} is not possible", s.id, s.joint))
            continue
        want = OPERATING_MODES[s.mode]
        have = int(round(bus.read(s.id, "operating_mode")))
        if have != want:
            log.warning("servo %d (%s): operating mode %d -> %d (torque off first)", s.id, s.joint, have, want)
            bus.write(s.id, "torque_enable", 0)
            bus.write(s.id, "operating_mode", want)


def connect_report_text(report) -> str:
    """One line for the ``connect`` telemetry event."""
    servos = getattr(report, "servos", None)
    if isinstance(servos, list):
        fixed = sum(1 for e in servos if e.get("return_delay_fixed"))
        models = sorted({e.get("model") for e in servos})
        return (f"{len(servos)} servos answered ({', '.join(map(str, models))}); latency timer "
                f"{getattr(report, 'latency_timer_ms', '?')} ms; return delay set to 0 on {fixed}")
    s = str(report)
    return s if len(s) < 2000 else s[:2000] + "..."
