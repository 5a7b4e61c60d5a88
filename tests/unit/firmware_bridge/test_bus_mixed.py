"""A mixed Protocol 1.0 / 2.0 bus: each servo addressed in its control table's protocol."""

import pytest

from servoloop.firmware_bridge.bus import MIXED, Bus, ServoSpec

SERVOS = [ServoSpec(1, "AX-18A"), ServoSpec(2, "XM430-W350"), ServoSpec(3, "MX-28")]


def test_each_servo_speaks_its_tables_protocol():
    bus = Bus("/dev/null", protocol=MIXED, servos=SERVOS)
    assert [bus.protocol_of(s.id) for s in SERVOS] == [1, 2, 1]
    assert bus.group_protocol([1, 3], "sync read") == 1
    with pytest.raises(ValueError, match=r"sync read on /dev/null: servos \[1\] speak Protocol 1.0"):
        bus.group_protocol([1, 2], "sync read")
    with pytest.raises(KeyError, match="servo 9 is not configured on the mixed bus"):
        bus.protocol_of(9)
    with pytest.raises(ValueError, match="broadcast on the mixed bus"):
        bus._broadcast_protocol()


def test_single_protocol_buses_unchanged():
    assert Bus("/dev/null", protocol=2, servos=[SERVOS[1]]).protocol_of(2) == 2
    # an X servo may be switched to Protocol 1.0 (Protocol Type 1): the bus protocol wins
    assert Bus("/dev/null", protocol=1, servos=[SERVOS[1]]).protocol_of(2) == 1
    with pytest.raises(ValueError, match="AX-18A.*Protocol 1.0 only.*'mixed'"):
        Bus("/dev/null", protocol=2, servos=SERVOS[:2])
    with pytest.raises(ValueError, match="protocol must be 1, 2 or 'mixed'"):
        Bus("/dev/null", protocol=3)
