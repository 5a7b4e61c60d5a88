"""Raw <-> SI at the edges: two's complement, AX sign bit, multi-turn, tick scales."""

import math

import numpy as np
import pytest

from servoloop.firmware_bridge import units as U
from servoloop.firmware_bridge.control_table import get_table

X = get_table("XM430-W350")
AX = get_table("AX-12A")
MX1 = get_table("MX-64")


def test_twos_complement_edges():
    v = X["present_velocity"]
    assert U.decode_raw(v, 0xFFFFFFFF) == -1
    assert U.decode_raw(v, 0x80000000) == -(2**31)
    assert U.decode_raw(v, 0x7FFFFFFF) == 2**31 - 1
    assert U.encode_raw(v, -1) == 0xFFFFFFFF
    c = X["present_current"]
    assert U.decode_raw(c, 0xFFFF) == -1 and U.decode_raw(c, 0x8000) == -32768
    with pytest.raises(ValueError):
        U.encode_raw(c, 32768)
    with pytest.raises(ValueError):
        U.encode_raw(X["present_temperature"], -1)


def test_ax_speed_sign_bit_at_1024():
    s = AX["present_velocity"]
    assert U.decode_raw(s, 1023) == 1023
    assert U.decode_raw(s, 1024) == 0          # "0 and 1024 are equal"
    assert U.decode_raw(s, 1025) == -1
    assert U.decode_raw(s, 2047) == -1023
    assert U.encode_raw(s, -1) == 1025 and U.encode_raw(s, 5) == 5
    with pytest.raises(ValueError):
        U.encode_raw(s, 1024)
    rpm = U.wire_to_si(s, 300) * 60 / (2 * math.pi)
    assert rpm == pytest.approx(33.3)           # e-Manual: 300 -> about 33.3 rpm
    assert U.wire_to_si(s, 1024 + 300) == -U.wire_to_si(s, 300)


def test_position_scales_and_centres():
    p = X["present_position"]
    assert U.to_si(p, 2048) == 0.0
    assert U.to_si(p, 2048 + 1024) == pytest.approx(math.pi / 2)
    assert U.to_si(p, 2048 + 4096) == pytest.approx(2 * math.pi)       # 4096 ticks per turn
    a = AX["present_position"]
    assert U.to_si(a, 512) == 0.0
    assert U.to_si(a, 0) == pytest.approx(-math.radians(150))           # 1024 ticks over 300 deg
    assert U.to_si(a, 512 + 1024) - U.to_si(a, 512) == pytest.approx(math.radians(300))


def test_multi_turn_extended_position_is_not_wrapped():
    p = X["present_position"]
    wire = U.encode_raw(p, 2048 + 3 * 4096 + 7)
    assert U.wire_to_si(p, wire) == pytest.approx(3 * 2 * math.pi + 7 * 2 * math.pi / 4096)
    neg = U.encode_raw(p, -256 * 4096)
    assert U.wire_to_si(p, neg) == pytest.approx((-256 * 4096 - 2048) * 2 * math.pi / 4096)
    g = MX1["goal_position"]  # MX(1.0) multi-turn: two's complement 16-bit
    assert U.decode_raw(g, U.encode_raw(g, -28672)) == -28672


def test_units_of_current_voltage_temperature():
    assert U.wire_to_si(X["present_current"], 0xFFFF) == pytest.approx(-0.00269)
    assert U.wire_to_si(X["present_input_voltage"], 120) == pytest.approx(12.0)
    assert U.wire_to_si(X["present_temperature"], 45) == 45.0
    assert U.wire_to_si(MX1["present_current"], 2148) == pytest.approx(0.45)  # e-Manual example
    assert U.wire_to_si(X["return_delay_time"], 250) == pytest.approx(500e-6)
    assert U.wire_to_si(X["present_velocity"], 1) * 60 / (2 * math.pi) == pytest.approx(0.229)


def test_round_trip_every_register():
    rng = np.random.default_rng(0)
    for t in (X, AX, MX1, get_table("XL330-M288")):
        for r in t.registers.values():
            lo = -(1 << (8 * r.size - 1)) if r.encoding == "s" else (-1023 if r.encoding == "sm" else 0)
            hi = (1 << (8 * r.size - 1)) - 1 if r.encoding == "s" else (1023 if r.encoding == "sm" else (1 << (8 * r.size)) - 1)
            for raw in [lo, hi, 0, *rng.integers(lo, hi, size=5, endpoint=True)]:
                wire = U.encode_raw(r, int(raw))
                assert U.decode_raw(r, wire) == raw
                assert U.from_si(r, U.to_si(r, int(raw))) == raw


def test_from_si_rejects_nan_and_inf():
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="goal_position"):
            U.from_si(X["goal_position"], bad)


def test_vectorised_matches_scalar():
    r = AX["present_load"]
    wires = np.array([0, 1, 1023, 1024, 1025, 2047])
    np.testing.assert_allclose(U.to_si_array(r, wires), [U.wire_to_si(r, w) for w in wires])
    r = X["present_velocity"]
    wires = np.array([0, 1, 0xFFFFFFFF, 0x80000000])
    np.testing.assert_allclose(U.to_si_array(r, wires), [U.wire_to_si(r, int(w)) for w in wires])


def test_torque_estimates():
    assert U.torque_nm(X, X["present_current"], 2.3) == pytest.approx(4.1)
    xl = get_table("XL430-W250")
    assert U.torque_nm(xl, xl["present_load"], 0.5) == pytest.approx(0.75)
    with pytest.raises(ValueError):
        U.torque_nm(X, X["present_position"], 1.0)
