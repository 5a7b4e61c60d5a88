"""Setting servos up: change an ID or a baud rate, reboot, factory-reset, read and write registers.

Every new robot starts with all servos at ID 1 and 57600 bps.  These
operations work on one servo of an open :class:`~firmware_bridge.bus.Bus`
whose model need not be configured: the servo is pinged first and its
control table found from the model number it reports.

Safety rules, each from a way a real bus goes wrong:

- an ID change is refused when another servo already answers at the new ID
  (two servos on one ID answer together and corrupt each other's replies);
- with ``alone=True`` the change is refused unless exactly one servo
  answers on the whole bus (the "connect one at a time" workflow);
- EEPROM registers (ID, baud rate, limits, operating mode) are only
  writable with torque off: a servo with torque on is reported, not
  silently switched off;
- every change is read back (at the new ID or baud rate) before it is
  reported done.
"""

from __future__ import annotations

from dataclasses import dataclass

from servoloop.firmware_bridge.control_table import ControlTable, baud_to_raw, get_table, model_name
from servoloop.firmware_bridge.errors import BridgeError, BusTimeoutError, UnknownModelError

__all__ = ["SetupError", "ServoInfo", "identify", "answering_ids", "change_id", "change_baud",
           "reboot", "factory_reset", "read_register", "write_register", "RESET_OPTIONS"]

#: Protocol 2.0 FACTORY RESET options (e-Manual): what survives the reset
RESET_OPTIONS = {"all": 0xFF, "keep-id": 0x01, "keep-id-baud": 0x02}


class SetupError(BridgeError, ValueError):
    """A setup operation refused for a reason the user can fix (the message says how)."""


@dataclass(frozen=True)
class ServoInfo:
    """One servo as found on the bus."""

    id: int
    model: str
    model_number: int
    firmware: int | None

    def as_dict(self) -> dict:
        return {"id": self.id, "model": self.model, "model_number": self.model_number,
                "firmware": self.firmware}


def identify(bus, servo_id: int) -> ServoInfo:
    """Ping ``servo_id``, find its control table and make its registers usable on ``bus``.

    Raises BusTimeoutError when nothing answers, SetupError for a model
    number no table knows.
    """
    number, firmware = bus.ping_info(servo_id)
    try:
        name = model_name(number)
    except UnknownModelError:
        raise SetupError(f"servo {servo_id} on {bus.port} reports model number {number}, which no "
                         "control table knows (see `servoloop models`)") from None
    table: ControlTable = get_table(name)
    bus.tables[servo_id] = table
    bus.return_delay_s.setdefault(servo_id, 500e-6)
    return ServoInfo(servo_id, name, number, firmware)


def _answers(bus, servo_id: int) -> bool:
    try:
        bus.ping_info(servo_id)
    except BusTimeoutError:
        return False
    except BridgeError:
        return True            # something answered, if badly: the ID is not free
    return True


def answering_ids(bus, ids=range(0, 253)) -> list[int]:
    """IDs that answer a ping (Protocol 2.0: one broadcast ping; 1.0: one ping per ID)."""
    if bus.protocol == 2:
        return sorted(bus.broadcast_ping())
    return [i for i in ids if _answers(bus, i)]


def _require_alone(bus, servo_id: int) -> None:
    ids = answering_ids(bus)
    if ids != [servo_id]:
        raise SetupError(f"{bus.port}: --alone asks for exactly one servo on the bus, found IDs {ids}; "
                         "connect the servo to set up by itself")


def _require_torque_off(bus, info: ServoInfo, what: str) -> None:
    if bus.read_raw(info.id, "torque_enable"):
        raise SetupError(f"servo {info.id} ({info.model}) has torque on: {what} is an EEPROM write, "
                         f"which the servo refuses with torque on; turn it off first "
                         f"(servoloop setup write --id {info.id} torque_enable 0)")


def change_id(bus, old_id: int, new_id: int, *, alone: bool = False) -> dict:
    """Give the servo at ``old_id`` the ID ``new_id``; refuse if ``new_id`` is taken.

    Returns the servo as found at its new ID (``ServoInfo.as_dict``).
    """
    if not 0 <= new_id <= 252:
        raise SetupError(f"new ID {new_id} is out of range 0..252")
    if new_id == old_id:
        raise SetupError(f"servo {old_id} already has ID {new_id}")
    info = identify(bus, old_id)
    if alone:
        _require_alone(bus, old_id)
    if _answers(bus, new_id):
        raise SetupError(f"{bus.port}: ID {new_id} is already taken by another servo; choose a free ID "
                         "(servoloop scan lists them)")
    _require_torque_off(bus, info, "an ID change")
    bus.write_raw(old_id, "id", new_id)
    bus.tables.pop(old_id, None)
    moved = identify(bus, new_id)
    return {**moved.as_dict(), "old_id": old_id}


def change_baud(bus, servo_id: int, new_baud: int, *, reopen=None) -> dict:
    """Set the servo's Baud Rate register so it talks at ``new_baud``; check it at the new rate.

    ``reopen(baud)`` must return a bus open on the same port at ``baud``
    (the caller owns both buses); without it the change is not verified.
    """
    info = identify(bus, servo_id)
    table = get_table(info.model)
    try:
        raw = baud_to_raw(table, new_baud)
    except (KeyError, ValueError) as exc:
        raise SetupError(f"{info.model} cannot run at {new_baud} bps: {exc}") from None
    _require_torque_off(bus, info, "a baud rate change")
    bus.write_raw(servo_id, "baud_rate", raw)
    out = {**info.as_dict(), "baud": new_baud, "baud_raw": raw, "verified": False}
    if reopen is not None:
        other = reopen(new_baud)
        identify(other, servo_id)
        out["verified"] = True
    return out


def reboot(bus, servo_id: int) -> dict:
    """Reboot one servo (clears a latched hardware error; RAM back to defaults, torque off)."""
    info = identify(bus, servo_id)
    bus.reboot(servo_id)
    return info.as_dict()


def factory_reset(bus, servo_id: int, keep: str = "keep-id-baud") -> dict:
    """Factory reset; ``keep`` one of :data:`RESET_OPTIONS` (Protocol 1.0 resets everything)."""
    if keep not in RESET_OPTIONS:
        raise SetupError(f"reset: keep must be one of {', '.join(RESET_OPTIONS)}, not {keep!r}")
    info = identify(bus, servo_id)
    option = RESET_OPTIONS[keep] if bus.protocol == 2 else 0xFF
    bus.factory_reset(servo_id, option, confirm=True)
    keeps_id = bus.protocol == 2 and keep != "all"
    return {**info.as_dict(), "kept": keep if bus.protocol == 2 else "nothing (Protocol 1.0)",
            "now_id": servo_id if keeps_id else 1}


def _register(bus, info: ServoInfo, name: str):
    table = bus.tables[info.id]
    key = name.strip().lower().replace(" ", "_").replace("-", "_")
    if key not in table:
        known = ", ".join(sorted(table.registers))
        raise SetupError(f"{info.model} has no register {name!r}; its registers: {known}")
    return key, table[key]


def read_register(bus, servo_id: int, name: str) -> dict:
    """One register: {"register", "raw", "value", "unit"} (value in SI units where it has one)."""
    info = identify(bus, servo_id)
    key, reg = _register(bus, info, name)
    raw = bus.read_raw(servo_id, key)
    from servoloop.firmware_bridge.units import to_si

    return {"id": servo_id, "model": info.model, "register": key, "raw": raw,
            "value": to_si(reg, raw), "unit": reg.unit}


def write_register(bus, servo_id: int, name: str, value: float, *, raw: bool = False) -> dict:
    """Write one register (SI value, or the raw integer with ``raw=True``), then read it back."""
    info = identify(bus, servo_id)
    key, reg = _register(bus, info, name)
    if not reg.writable:
        raise SetupError(f"register {key} of {info.model} is read-only")
    if reg.eeprom:
        _require_torque_off(bus, info, f"writing {key}")
    try:
        if raw:
            if float(value) != int(value):
                raise SetupError(f"--raw {key}: {value!r} is not an integer")
            bus.write_raw(servo_id, key, int(value))
        else:
            bus.write(servo_id, key, float(value))
    except ValueError as exc:
        if isinstance(exc, SetupError):
            raise
        raise SetupError(f"{key} of {info.model}: {exc}") from None
    return read_register(bus, servo_id, key)
