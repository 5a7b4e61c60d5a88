"""The wire-time arithmetic of ``servoloop bench bus`` (the issue's figures)."""

import pytest

from servoloop.bench.bus import cycle_bytes, wire_limit_hz


def test_twelve_servos_at_4_mbps():
    assert cycle_bytes(12) == 352
    assert 352 * 10 / 4e6 == pytest.approx(880e-6)
    assert wire_limit_hz(12, 4_000_000) == pytest.approx(1136.36, abs=0.01)


def test_bestmann_single_bus_formula():
    # FIELD-NOTES c2: 20 x MX-64, 4 B write + 10 B read: 568 bytes, 176 Hz at 1 Mbaud
    assert cycle_bytes(20) == 568
    assert wire_limit_hz(20, 1_000_000) == pytest.approx(176, abs=0.1)
