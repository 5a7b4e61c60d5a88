"""Raw register integers <-> SI values, as pure functions of a :class:`Register`.

Three layers, each the inverse of the other:

- wire integer (unsigned, what the bytes little-endian say) <-> signed raw:
  :func:`decode_raw` / :func:`encode_raw` (two's complement over the
  register size, or the AX/MX sign-magnitude with direction bit 1024);
- signed raw <-> SI: :func:`to_si` / :func:`from_si`,
  ``si = (raw - zero_raw) * scale`` (rad, rad/s, rad/s^2, A, V, degC, s, ratio).

Positions are centred: 0 rad is raw 2048 on 4096-tick servos and raw 512 on
the AX (1024 ticks over 300 deg), so a servo at its factory centre reads 0.
Extended-position (multi-turn) values are plain signed 32-bit raw, so turns
beyond +-pi come out as they are, never wrapped.
"""

from __future__ import annotations

import math

import numpy as np

from servoloop.firmware_bridge.control_table import ControlTable, Register

__all__ = [
    "decode_raw",
    "encode_raw",
    "to_si",
    "from_si",
    "wire_to_si",
    "si_to_wire",
    "to_si_array",
    "torque_nm",
    "SIGN_MAGNITUDE_BIT",
]

SIGN_MAGNITUDE_BIT = 1024  # AX / MX(1.0) speed, load, goal torque: bit 10 = CW (negative)


def decode_raw(register: Register, wire: int) -> int:
    """Signed raw value from the unsigned little-endian integer on the wire."""
    bits = 8 * register.size
    wire = int(wire) & ((1 << bits) - 1)
    if register.encoding == "s":
        return wire - (1 << bits) if wire >> (bits - 1) else wire
    if register.encoding == "sm":
        magnitude = wire & (SIGN_MAGNITUDE_BIT - 1)
        return -magnitude if wire & SIGN_MAGNITUDE_BIT else magnitude
    return wire


def encode_raw(register: Register, raw: int) -> int:
    """Unsigned wire integer for a signed raw value; ValueError if it does not fit."""
    raw = int(raw)
    bits = 8 * register.size
    if register.encoding == "s":
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        if not lo <= raw <= hi:
            raise ValueError(f"{register.name}: raw {raw} outside {lo}..{hi} ({register.size} bytes)")
        return raw & ((1 << bits) - 1)
    if register.encoding == "sm":
        if not -(SIGN_MAGNITUDE_BIT - 1) <= raw <= SIGN_MAGNITUDE_BIT - 1:
            raise ValueError(f"{register.name}: raw {raw} outside -1023..1023 (sign-magnitude)")
        return (-raw | SIGN_MAGNITUDE_BIT) if raw < 0 else raw
    if not 0 <= raw < (1 << bits):
        raise ValueError(f"{register.name}: raw {raw} outside 0..{(1 << bits) - 1}")
    return raw


def to_si(register: Register, raw: int) -> float:
    """SI value of a signed raw value (see :func:`decode_raw`), in ``register.unit``."""
    return (int(raw) - register.zero_raw) * register.scale


def from_si(register: Register, value: float) -> int:
    """Nearest signed raw value for an SI value; ValueError for NaN/inf.

    Not clamped to ``min_raw``/``max_raw``: limits are the caller's policy
    (the safety layer clamps; the servo answers a range error otherwise).
    """
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{register.name}: cannot encode {value!r}")
    return int(round(value / register.scale)) + register.zero_raw


def wire_to_si(register: Register, wire: int) -> float:
    """SI value straight from the unsigned wire integer."""
    return to_si(register, decode_raw(register, wire))


def si_to_wire(register: Register, value: float) -> int:
    """Unsigned wire integer straight from an SI value (ValueError if it does not fit)."""
    return encode_raw(register, from_si(register, value))


def to_si_array(register: Register, wire: np.ndarray) -> np.ndarray:
    """Vectorised :func:`wire_to_si` over unsigned wire integers, float64 (n,)."""
    w = np.asarray(wire, dtype=np.int64) & ((1 << (8 * register.size)) - 1)
    if register.encoding == "s":
        bits = 8 * register.size
        w = np.where(w >> (bits - 1), w - (1 << bits), w)
    elif register.encoding == "sm":
        mag = w & (SIGN_MAGNITUDE_BIT - 1)
        w = np.where(w & SIGN_MAGNITUDE_BIT, -mag, mag)
    return (w - register.zero_raw) * register.scale


def torque_nm(table: ControlTable, register: Register, si_value: float) -> float:
    """Joint torque estimate, N*m, from a current (A) or load (ratio) reading.

    Current times the datasheet's stall torque / stall current; load (fraction
    of the maximum) times the stall torque.  Both are rough: AX/MX(1.0)
    "load" is PWM duty, not torque (FIELD-NOTES a9); calibration refines it.
    """
    if register.unit == "A":
        k = table.torque_constant_nm_per_a
        if k is None:
            raise ValueError(f"{table.name}: no torque constant in the table")
        return si_value * k
    if register.unit == "ratio" and register.name.endswith("load"):
        if not table.stall_torque_nm:
            raise ValueError(f"{table.name}: no stall torque in the table")
        return si_value * table.stall_torque_nm
    raise ValueError(f"{table.name}: {register.name} ({register.unit}) is not a current or a load")
