"""Names for the error byte of a status packet and for Hardware Error Status.

Protocol 1.0 and 2.0 use the error byte differently:

- 1.0: a bit field (voltage, angle limit, overheating, range, checksum,
  overload, instruction);
- 2.0: bit 7 is the *alert* (look at Hardware Error Status, address 70 on X
  and MX(2.0)), bits 0..6 are one error *number* (result fail, instruction,
  CRC, data range, data length, data limit, access).
"""

from __future__ import annotations

__all__ = [
    "V1_ERROR_BITS",
    "V2_ERROR_NUMBERS",
    "V2_ALERT",
    "HARDWARE_ERROR_BITS",
    "decode_error",
    "decode_hardware_error",
    "is_hardware_error",
]

V1_ERROR_BITS = {
    0: "input_voltage",
    1: "angle_limit",
    2: "overheating",
    3: "range",
    4: "checksum",
    5: "overload",
    6: "instruction",
}
# bits of a 1.0 error byte that report the servo's condition rather than the packet's
_V1_HARDWARE_MASK = (1 << 0) | (1 << 2) | (1 << 5)

V2_ALERT = 0x80
V2_ERROR_NUMBERS = {
    1: "result_fail",
    2: "instruction_error",
    3: "crc_error",
    4: "data_range_error",
    5: "data_length_error",
    6: "data_limit_error",
    7: "access_error",
}

# Hardware Error Status (70) / Shutdown (63) bits on X and MX(2.0)
HARDWARE_ERROR_BITS = {
    0: "input_voltage",
    2: "overheating",
    3: "motor_encoder",
    4: "electrical_shock",
    5: "overload",
}


def decode_error(protocol: int, error: int) -> tuple[str, ...]:
    """Names of what the error byte of a status packet says, in bit order."""
    error = int(error) & 0xFF
    if protocol == 1:
        names = [n for b, n in V1_ERROR_BITS.items() if error & (1 << b)]
        if error & 0x80:
            names.append("bit7")
        return tuple(names)
    names = []
    number = error & 0x7F
    if number:
        names.append(V2_ERROR_NUMBERS.get(number, f"error_{number}"))
    if error & V2_ALERT:
        names.append("alert")
    return tuple(names)


def decode_hardware_error(status: int) -> tuple[str, ...]:
    """Names of the bits set in Hardware Error Status."""
    status = int(status) & 0xFF
    names = [n for b, n in HARDWARE_ERROR_BITS.items() if status & (1 << b)]
    return tuple(names + [f"bit{b}" for b in (1, 6, 7) if status & (1 << b)])


def is_hardware_error(protocol: int, error: int) -> bool:
    """True when the error byte reports the servo's hardware, not the packet."""
    if protocol == 1:
        return bool(error & _V1_HARDWARE_MASK)
    return bool(error & V2_ALERT)
