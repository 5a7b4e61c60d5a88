"""Fuzz the compiled receive loop: garbage and corrupted replies on a real pty.

Whatever precedes or damages the replies, a group read yields the right
value or NaN with an exception naming the servo -- never a wrong number.
"""

import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servoloop.firmware_bridge.bus import Bus, ServoSpec
from servoloop.firmware_bridge.errors import BridgeError
from tests.unit.firmware_bridge.pty_servos import PtyServos

IDS = [1, 2, 3]


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(garbage=st.binary(max_size=24),
       header_junk=st.sampled_from([b"", b"\xff\xff\xfd\x00", b"\xff\xff\xfd\x00\x02\xff\xff", b"\xff\xff"]),
       corrupt=st.sets(st.sampled_from(IDS), max_size=2),
       positions=st.lists(st.integers(-(2**31) + 4096, 2**31 - 4096), min_size=3, max_size=3),
       protocol=st.sampled_from([1, 2]))
def test_group_read_is_right_or_nan(garbage, header_junk, corrupt, positions, protocol):
    model = "XM430-W350" if protocol == 2 else "MX-28"
    servos = PtyServos({i: model for i in IDS}, protocol=protocol)
    try:
        if protocol == 1:
            positions = [p % 4096 for p in positions]
        for i, p in zip(IDS, positions, strict=True):
            servos.set_raw(i, "present_position", p)
        servos.garbage = header_junk + garbage
        servos.corrupt = set(corrupt)
        bus = Bus(servos.port, 1_000_000, protocol, [ServoSpec(i, model) for i in IDS],
                  on_after_write=servos.pump, timeout_margin_s=0.003)
        with bus:
            reader = bus.sync_reader(["present_position"])
            failed = ()
            try:
                reader.read()
            except BridgeError as exc:
                failed = exc.failed_ids
                assert failed, "a failed group read must name its servos"
            values = reader.values["present_position"]
            for k, sid in enumerate(IDS):
                if sid in failed:
                    assert math.isnan(values[k])
                else:
                    assert values[k] == (positions[k] - 2048) * 2 * math.pi / 4096
            assert set(failed) >= set(corrupt)
            assert np.isnan(values).sum() == len(failed)
    finally:
        servos.close()
