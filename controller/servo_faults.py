"""What happens on a servo fault: a servo's reply carries its error bits.

A reply whose error field is non-zero raises ``ServoStatusError`` in
``firmware_bridge``; the alert bit (``HardwareErrorStatus``) means the servo
latched a hardware error (overload, overheating, input voltage, encoder,
electrical shock) and X/MX 2.0 servos have turned their torque off.  For
each failing servo of the tick's read, :class:`ServoFaultHandler`:

1. reports it (telemetry event ``servo_error`` + log) with the error bits and,
   for a hardware error, the decoded Hardware Error Status register;
2. for a plain status error (instruction, range, ...): nothing more (the
   tick's read counts as failed and the comm window judges);
3. for a hardware error: a :class:`~servoloop.controller.faults.Fault` of kind
   ``hardware_error`` naming the servo and joint, unless
   ``safety.on_hardware_error: reboot`` and the servo has had fewer than
   ``safety.max_reboots`` reboots: then reboot it and restore what a reboot
   resets (operating mode, goal := present, torque on), start a fresh
   deadline grid and count the ticks the reboot took as missed; the loop's
   goal for that joint then ramps back from the present position through the
   slew limit (``on_restore``), never a step to the old goal.  With
   ``safety.on_hardware_error: disable_servo`` only that servo's torque goes
   off; it is left out of the comm judgement and the others keep running.
"""

from __future__ import annotations

import logging
import time

from servoloop.controller.faults import Fault, FaultKind, FaultRaised

__all__ = ["ServoFaultHandler", "OPERATING_MODES", "hardware_error_text"]

log = logging.getLogger("servoloop.daemon")

#: X-series Operating Mode register values for the config's servo modes
#: config servo mode -> X-series Operating Mode (extended_position: multi-turn, goals beyond +-pi)
OPERATING_MODES = {"current": 0, "velocity": 1, "position": 3, "extended_position": 4, "current_position": 5}

#: Hardware Error Status bits (X-series e-Manual)
_HW_BITS = {0: "input voltage", 2: "overheating", 3: "motor encoder", 4: "electrical shock", 5: "overload"}


def hardware_error_text(raw: int) -> str:
    """``0xNN (bit names)`` for a Hardware Error Status register value."""
    set_bits = [_HW_BITS.get(b, f"bit {b}") for b in range(8) if raw >> b & 1]
    return f"0x{raw:02x} ({', '.join(set_bits) or 'none'})"


class ServoFaultHandler:
    """Reacts to the servo status errors of one tick's read (see the module docstring).

    Parameters
    ----------
    servos : sequence of ServoConfig (config order)
    safety : SafetyConfig (``on_hardware_error``, ``max_reboots``)
    rate : FixedRate, re-anchored after a reboot
    event : callable(kind, message, fault=None), the daemon's event log
    """

    def __init__(self, servos, safety, rate, event) -> None:
        self.servos = tuple(servos)
        self.ids = tuple(s.id for s in self.servos)
        self.safety = safety
        self.rate = rate
        self.event = event
        self.bus = None
        self.tables: list = []
        self.readonly = False
        self.reboots: dict[int, int] = {}
        self.disabled_ids: set[int] = set()
        # set by the loop: on_restore(i, present_servo_rad, now_ns) after a reboot, on_disable(i)
        self.on_restore = None
        self.on_disable = None

    def bind(self, bus, tables, readonly: bool) -> None:
        """The open bus and each servo's control table (config order)."""
        self.bus, self.tables, self.readonly = bus, list(tables), readonly

    def joint_of(self, sid) -> str:
        """Joint name of servo ``sid`` (``?`` when it is not configured)."""
        try:
            return self.servos[self.ids.index(sid)].joint
        except ValueError:
            return "?"

    def handle(self, exc) -> None:
        """React to ``exc`` (a ServoStatusError, or a group error whose ``failures`` hold some).

        Raises
        ------
        FaultRaised
            A hardware error that is not (or can no longer be) cured by a reboot.
        """
        from servoloop.firmware_bridge.errors import HardwareErrorStatus, ServoStatusError

        failures = getattr(exc, "failures", None) or {getattr(exc, "servo_id", None): exc}
        for sid, e in failures.items():
            if not isinstance(e, ServoStatusError) or sid in self.disabled_ids:
                continue
            joint = self.joint_of(sid)
            hardware = isinstance(e, HardwareErrorStatus)
            bits = ", ".join(getattr(e, "bits", ()) or ()) or f"0x{getattr(e, 'error_raw', 0):02x}"
            what = f"servo {sid} ({joint}): {'hardware error' if hardware else 'status error'} {bits}"
            hw = self._read_hardware_error(sid) if hardware else None
            if hw:
                what += f"; hardware_error_status {hw}"
            fault = Fault(FaultKind.HARDWARE_ERROR, what, sid, joint)
            self.event("servo_error", what)
            log.error(what)
            if not hardware:
                continue
            if (self.safety.on_hardware_error == "reboot" and not self.readonly
                    and self.reboots.get(sid, 0) < self.safety.max_reboots):
                self.reboots[sid] = self.reboots.get(sid, 0) + 1
                self.reboot_and_restore(sid, what)
            elif self.safety.on_hardware_error == "disable_servo" and not self.readonly and sid in self.ids:
                self.disable(sid, what)
            else:
                raise FaultRaised(fault)

    def disable(self, sid: int, why: str) -> None:
        """Torque off servo ``sid`` alone; the loop goes on without it (``disable_servo``)."""
        from servoloop.firmware_bridge.errors import BridgeError, HardwareErrorStatus

        i = self.ids.index(sid)
        self.disabled_ids.add(sid)
        try:
            self.bus.write(sid, "torque_enable", 0)
        except HardwareErrorStatus:
            pass  # the reply still carries the alert: the write was done
        except BridgeError as exc:
            log.error("servo %s: torque off after its hardware error failed: %s", sid, exc)
        if self.on_disable is not None:
            self.on_disable(i)
        self.event("disable_servo", f"servo {sid} ({self.servos[i].joint}): torque off after {why}; "
                                    "the other servos keep running")

    def _read_hardware_error(self, sid) -> str | None:
        try:
            raw = int(self.bus.read_raw(sid, "hardware_error_status"))
        except Exception:  # noqa: BLE001 - diagnosis only
            return None
        return hardware_error_text(raw)

    def reboot_and_restore(self, sid: int, why: str) -> None:
        """Reboot one servo, then restore what a reboot resets: mode, goal := present, torque.

        Raises
        ------
        FaultRaised
            The servo did not come back (2 s) or a restoring write failed.
        """
        from servoloop.firmware_bridge.errors import BridgeError, ServoStatusError

        i = self.ids.index(sid)
        s = self.servos[i]
        bus = self.bus
        self.event("reboot", f"servo {sid} ({s.joint}): reboot after {why}")
        try:
            try:
                bus.reboot(sid)
            except ServoStatusError:
                pass  # the reply to REBOOT still carries the alert bit: the servo reboots after it
            deadline = time.monotonic() + 2.0
            while True:
                try:
                    bus.ping(sid)
                    break
                except BridgeError:
                    if time.monotonic() > deadline:
                        raise
            if "operating_mode" in self.tables[i].registers:
                bus.write(sid, "operating_mode", OPERATING_MODES[s.mode])
            present = bus.read(sid, "present_position")
            if s.mode == "velocity":        # a wheel comes back at rest
                bus.write(sid, "goal_velocity" if "goal_velocity" in self.tables[i].registers
                          else "moving_speed", 0.0)
            elif s.mode != "current":
                bus.write(sid, "goal_position", present)
            bus.write(sid, "torque_enable", 1)
            # a reboot resets the Bus Watchdog to 0: arm it again for this servo
            if "bus_watchdog" in self.tables[i].registers:
                from servoloop.controller.bringup import watchdog_raw

                raw = watchdog_raw(self.safety.bus_watchdog_s)
                if raw:
                    bus.write_raw(sid, "bus_watchdog", raw)
        except BridgeError as exc:
            raise FaultRaised(Fault(FaultKind.HARDWARE_ERROR, f"{why}; reboot of servo {sid} failed: {exc}",
                                    sid, s.joint)) from exc
        # the reboot took many periods: start a fresh deadline grid, count what was skipped
        rate = self.rate
        now = rate.clock.now_ns()
        lost = max(0, (now - rate.next_deadline_ns) // rate.period_ns + 1)
        rate.missed += int(lost)
        rate.start(now)
        if self.on_restore is not None:  # the loop's goal restarts at present, then slews
            self.on_restore(i, float(present), now)
        self.event("reboot", f"servo {sid} ({s.joint}): restored; {lost} ticks skipped")
