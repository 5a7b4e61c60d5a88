"""Late replies from the virtual-bus process (a delay fault above the reply timeout):
not one value from an earlier request reaches the reader's arrays; each is counted stale."""

import math

import numpy as np
import pytest

from servoloop.firmware_bridge.bus import Bus, ServoSpec
from servoloop.firmware_bridge.errors import BridgeError

pytestmark = pytest.mark.hil

IDS = [1, 2, 3]
# profile_acceleration is a harmless RAM register: written with a new value before every
# request, it says which request a reply answers
NAMES = ["profile_acceleration", "present_position"]


def run(path, reads):
    bus = Bus(path, 1_000_000, 2, [ServoSpec(i, "XM430-W350") for i in IDS])
    with bus:                                     # no connect: every ping would be late too
        reader = bus.sync_reader(NAMES)
        writer = bus.sync_writer("profile_acceleration")
        reg = bus.register(1, "profile_acceleration")
        assert reader.timeout_s < 0.025          # the fault below really is later than the timeout
        fresh = wrong = 0
        for k in range(1, reads + 1):
            writer.write(np.full(len(IDS), k * reg.scale))
            try:
                reader.read()
            except BridgeError:
                pass
            for v in reader.values["profile_acceleration"]:
                if not math.isnan(v):
                    fresh += round(v / reg.scale) == k
                    wrong += round(v / reg.scale) != k
        return fresh, wrong, bus.health


def test_every_reply_late_no_value_and_all_counted(virtual_bus):
    # 40 ms, well past the ~23 ms timeout: a host stalled a few ms past its deadline (a loaded
    # machine) would otherwise still find a reply due 25 ms after the request and take it
    fresh, wrong, health = run(virtual_bus(servos="1-3:XM430-W350", faults="delay:us=40000"), 30)
    assert wrong == 0 and fresh == 0
    assert all(health[i].stale > 0 and health[i].timeouts > 0 for i in IDS)


def test_some_replies_late_fresh_values_only(virtual_bus):
    path = virtual_bus(servos="1-3:XM430-W350", faults="delay:p=0.3:us=25000", extra=["--seed", "5"])
    fresh, wrong, health = run(path, 80)
    assert wrong == 0
    assert fresh > 0
    assert sum(health[i].stale for i in IDS) > 0


def test_corrupted_bytes_never_give_a_wrong_position_protocol1():
    """Protocol 1.0's 8-bit checksum lets ~1/256 of corrupted packets through: the
    plausibility check must catch those that moved the position (lockstep, seeded)."""
    from servoloop.virtual_bus import InProcessVirtualBus

    vb = InProcessVirtualBus({i: "AX-18A" for i in IDS}, protocol=1,
                             faults="corrupt:p=0.25:bytes=2", seed=11)
    bus = Bus(vb.port, 1_000_000, 1, [ServoSpec(i, "AX-18A") for i in IDS],
              on_after_write=vb.pump, timeout_margin_s=0.002)
    worst = 0.0
    try:
        with bus:
            reader = bus.sync_reader(["present_velocity", "present_position"])
            for _ in range(2500):
                try:
                    reader.read()
                except BridgeError:
                    pass
                pos = reader.values["present_position"]
                truth = vb.engine.position
                ok = ~np.isnan(pos)
                if ok.any():
                    worst = max(worst, float(np.max(np.abs(pos[ok] - truth[ok]))))
                vb.advance(0.002)
            h = bus.health
    finally:
        vb.close()
    assert sum(h[i].checksum_errors for i in IDS) > 100      # the fault really corrupted
    assert worst < 0.06                                       # a few ticks of noise, never a jump
    assert sum(h[i].implausible for i in IDS) >= 1            # ...because those were caught
