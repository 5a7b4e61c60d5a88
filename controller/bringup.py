"""Connect: bring the bus up for the config's servos (not yet real time).

Ping every servo and check its model, set the FTDI latency timer and each
servo's Return Delay Time (unless read-only), then put each servo in the
config's operating mode and write the config's registers (read back and checked).  Operating Mode is EEPROM: writable only with
torque off (field notes a7).

The Bus Watchdog (X series and MX 2.0, address 98, unit 20 ms) is the
servos' own guard against a dead host (USB unplugged, kill -9, OOM, a
hang).  The e-Manual: while Torque Enable is 1 the servo measures the
interval between instruction packets; when it exceeds the set value the
servo stops, Bus Watchdog reads -1 (Bus Watchdog Error) and the goal
registers (Goal PWM, Goal Current, Goal Velocity, Goal Position) become
read-only -- writing one returns a Range Error -- until 0 is written to Bus
Watchdog, which clears the error (0 also disables the watchdog).  So it is
armed after torque on, right before the loop's first deadline, with nothing slow
between (:func:`arm_bus_watchdog`; a loop stall later is handled by
:mod:`.watchdog_guard`), cleared at
shutdown (:func:`clear_bus_watchdog`) and, at connect, a tripped one left by
a host that died is cleared (:func:`prepare_bus_watchdog`): otherwise the
next run's goal := present would be refused.
"""

from __future__ import annotations

import logging

from servoloop.controller.faults import Fault, FaultKind, FaultRaised
from servoloop.controller.servo_faults import OPERATING_MODES
from servoloop.controller.velocity_mode import leave_wheel_mode, set_wheel_mode

__all__ = ["servo_tables", "connect_bus", "configure_modes", "write_config_registers", "connect_report_text",
           "watchdog_ids", "prepare_bus_watchdog", "arm_bus_watchdog", "clear_bus_watchdog"]

WATCHDOG_UNIT_S = 0.02     # Bus Watchdog(98): 1..127 units of 20 ms

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
        if "operating_mode" not in t.registers and "cw_angle_limit" in t.registers:  # AX / MX 1.0
            if s.mode == "velocity":
                set_wheel_mode(bus, s.id, s.joint)
                continue
            leave_wheel_mode(bus, s.id, s.joint, t)   # a previous velocity run left it turning freely
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
    write_config_registers(bus, cfg, tables)


def write_config_registers(bus, cfg, tables) -> int:
    """Write the config's registers (``servos[].registers`` over ``register_defaults``), then
    read each back.  Runs at connect, before startup's goal := present and torque on; an
    EEPROM register that differs is written with torque off (EEPROM is locked while torque
    is on).  A register that already holds the value is not written (EEPROM wears).

    Returns
    -------
    int
        How many registers were written.

    Raises
    ------
    FaultRaised
        A ``connect`` fault naming the servo, the register, the value written and the value
        read back, when the servo did not keep it.
    BridgeError
        A read or write failed.
    """
    from servoloop.controller.config_checks import register_plan

    table_of = {s.id: t for s, t in zip(cfg.servos, tables, strict=False)}
    joint_of = {s.id: s.joint for s in cfg.servos}
    written = 0
    for sid, name, raw, value in register_plan(cfg):
        reg = table_of[sid][name]
        if bus.read_raw(sid, name) == raw:
            continue
        if reg.eeprom and bus.read_raw(sid, "torque_enable"):
            bus.write_raw(sid, "torque_enable", 0)
        bus.write_raw(sid, name, raw)
        written += 1
        back = bus.read_raw(sid, name)
        if back != raw:
            raise FaultRaised(Fault(FaultKind.CONNECT, f"connect: servo {sid} ({joint_of[sid]}): register {name} "
                                    f"written {_shown(reg, raw)} but reads back {_shown(reg, back)}",
                                    sid, joint_of[sid]))
        log.info("servo %d (%s): %s := %s", sid, joint_of[sid], name, value)
    return written


def _shown(reg, raw: int) -> str:
    """A register value as the config gives it: SI with the raw in brackets, or the raw."""
    from servoloop.firmware_bridge.units import to_si

    return f"{to_si(reg, raw):g} {reg.unit} (raw {raw})" if reg.unit else str(raw)


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


def watchdog_ids(cfg, tables) -> list[int]:
    """Ids of the configured servos whose control table has a Bus Watchdog."""
    return [s.id for s, t in zip(cfg.servos, tables, strict=False) if "bus_watchdog" in t.registers]


def watchdog_raw(seconds: float | None) -> int:
    """Register value (20 ms units, 1..127) for ``seconds``; 0 = off (None or <= 0)."""
    if seconds is None or seconds <= 0:
        return 0
    return max(1, min(127, int(round(seconds / WATCHDOG_UNIT_S))))


def prepare_bus_watchdog(bus, cfg, tables) -> str | None:
    """At connect: clear a watchdog a dead host left tripped; the line about servos without one.

    Returns
    -------
    str or None
        One line naming the servos (and models) that have no Bus Watchdog
        and so keep their last goal with torque on if this host dies; None
        when every servo has one or the watchdog is off in the config.
    """
    for sid in watchdog_ids(cfg, tables):
        raw = bus.read_raw(sid, "bus_watchdog")
        if raw != 0:
            if raw < 0:
                log.warning("servo %d: Bus Watchdog had fired (a previous host stopped talking); "
                            "cleared, goal registers writable again", sid)
            bus.write_raw(sid, "bus_watchdog", 0)
    if watchdog_raw(cfg.safety.bus_watchdog_s) == 0:
        return None
    missing = [(s.id, s.model) for s, t in zip(cfg.servos, tables, strict=False)
               if "bus_watchdog" not in t.registers]
    if not missing:
        return None
    models = sorted({m for _, m in missing})
    return (f"no Bus Watchdog on {', '.join(models)} (servos {[i for i, _ in missing]}): "
            "if this host dies they keep their last goal with torque on")


def arm_bus_watchdog(bus, cfg, tables) -> int:
    """Arm the Bus Watchdog of every servo that has one (after torque on, right before the
    first deadline); returns the raw value."""
    raw = watchdog_raw(cfg.safety.bus_watchdog_s)
    if raw:
        for sid in watchdog_ids(cfg, tables):
            bus.write_raw(sid, "bus_watchdog", raw)
    return raw


def clear_bus_watchdog(bus, cfg, tables) -> list[int]:
    """Write 0 (off; clears a fired watchdog) to every servo that has one; the ids that failed."""
    from servoloop.firmware_bridge.errors import BridgeError

    failed = []
    for sid in watchdog_ids(cfg, tables):
        try:
            bus.write_raw(sid, "bus_watchdog", 0)
        except BridgeError as exc:
            log.warning("servo %d: clearing the Bus Watchdog failed: %s", sid, exc)
            failed.append(sid)
    return failed
