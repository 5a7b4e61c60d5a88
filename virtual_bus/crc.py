"""CRC-16 of Protocol 2.0, two bytes per step, for the virtual bus's hot path.

The reference :func:`firmware_bridge.protocol.crc16` walks one byte per
Python iteration (~2 us for a 21-byte status packet).  A 16-bit CRC
register fed 16 bits at a time depends only on ``crc ^ word``, so one
65536-entry table lookup per word halves the iterations; keeping the state
byte-swapped lets ``memoryview.cast("H")`` feed native little-endian words
with no per-byte work.  Measured here: 0.84 us vs 1.97 us for 21 bytes,
1.75 us vs 6.9 us for 74 bytes.  Tested against the reference.
"""

from __future__ import annotations

import sys

from servoloop.firmware_bridge.protocol import CRC_TABLE

__all__ = ["crc16", "crc16_continue", "crc16_state", "state_to_crc", "crc_to_state"]


def _swap(x: int) -> int:
    return ((x & 0xFF) << 8) | (x >> 8)


def _build_word_table() -> list[int]:
    t8 = CRC_TABLE
    table = [0] * 65536
    little = sys.byteorder == "little"
    for word in range(65536):
        # word as it sits in memory: first byte b0, second byte b1
        b0, b1 = (word & 0xFF, word >> 8) if little else (word >> 8, word & 0xFF)
        c = t8[b0]
        c = ((c << 8) & 0xFFFF) ^ t8[(c >> 8) ^ b1]
        # state kept byte-swapped on little-endian hosts so ``state ^ word`` lines up
        table[word] = _swap(c) if little else c
    return table


_LITTLE = sys.byteorder == "little"
_WORD_TABLE = _build_word_table()


def crc16_state(data, state: int = 0) -> int:
    """Internal CRC state after ``data`` (even length), starting from ``state``.

    The state is the CRC byte-swapped on little-endian hosts; convert with
    :func:`state_to_crc`.  Used to precompute the CRC of a fixed packet prefix.
    """
    t = _WORD_TABLE
    for w in memoryview(data).cast("B").cast("H"):
        state = t[state ^ w]
    return state


def state_to_crc(state: int) -> int:
    """The CRC value of an internal state."""
    return _swap(state) if _LITTLE else state


def crc16_continue(state: int, data) -> int:
    """CRC of (the prefix that gave ``state``) + ``data``; ``data`` of any length."""
    n = len(data)
    t = _WORD_TABLE
    if n >= 2:
        mv = memoryview(data)
        for w in (mv if n % 2 == 0 else mv[: n - 1]).cast("H"):
            state = t[state ^ w]
    crc = _swap(state) if _LITTLE else state
    if n & 1:
        crc = ((crc << 8) & 0xFFFF) ^ CRC_TABLE[(crc >> 8) ^ data[n - 1]]
    return crc


def crc_to_state(crc: int) -> int:
    """Internal state that continues from the CRC value ``crc`` (any prefix length)."""
    return _swap(crc) if _LITTLE else crc


def crc16(data) -> int:
    """CRC-16 (polynomial 0x8005, init 0) of ``data``; equals ``protocol.crc16``."""
    return crc16_continue(0, data)
