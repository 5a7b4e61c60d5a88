"""Fresh feedback only: late replies are never taken for the next request's, and
positions that no servo can reach are corrupted reads (servos on a pty, lockstep)."""

import math

import numpy as np
import pytest

from servoloop.firmware_bridge import protocol as P
from servoloop.firmware_bridge.bus import Bus, ServoSpec
from servoloop.firmware_bridge.errors import BridgeError, BusTimeoutError, ChecksumError
from servoloop.firmware_bridge.sync import PLAUSIBLE_SPEED_MARGIN, STALE_TAGS
from tests.unit.firmware_bridge.pty_servos import PtyServos

NAMES = ["present_velocity", "present_position"]


def _bus(servos, ids, model, protocol):
    return Bus(servos.port, 1_000_000, protocol, [ServoSpec(i, model) for i in ids],
               on_after_write=servos.pump, timeout_margin_s=0.003)


class LateReplies:
    """Hold servo ``sid``'s replies back and send each one *after* the next request
    (after the host's flush): the late answer arrives first, as on a slow bus."""

    def __init__(self, servos, sid):
        self.held = None
        self.late = True
        servos.mangle[sid] = self

    def __call__(self, pkt):
        old, self.held = self.held, pkt
        if not self.late:
            self.held = None
            return (old or b"") + pkt          # the stale one first, then the fresh one
        return old or b""                      # this request's reply comes one request late


@pytest.mark.parametrize("model,protocol", [("XM430-W350", 2), ("AX-18A", 1)])
def test_late_replies_are_discarded_and_counted_never_a_value(model, protocol):
    ids = [1, 2, 3]
    servos = PtyServos({i: model for i in ids}, protocol=protocol)
    late = LateReplies(servos, 2)
    with _bus(servos, ids, model, protocol) as bus:
        r = bus.sync_reader(NAMES)
        fresh = 0
        for k in range(40):
            # every request sees a new position; a value from an earlier request would show
            for i in ids:
                servos.set_raw(i, "present_position", 100 + 7 * k + i)
            late.late = k % 3 != 2           # two late replies, then a stale + fresh pair
            try:
                r.read()
            except BusTimeoutError as exc:
                assert exc.failed_ids == (2,)
            pos = r.values["present_position"]
            for j, i in enumerate(ids):
                scale = bus.register(i, "present_position").scale
                zero = bus.register(i, "present_position").zero_raw
                if not math.isnan(pos[j]):
                    assert round(pos[j] / scale + zero) == 100 + 7 * k + i, (k, i)
            fresh += not math.isnan(pos[1])
        h = bus.health
        assert h[2].stale > 0 and h[1].stale == h[3].stale == 0
        assert h[1].failures == h[3].failures == 0
        assert fresh > 0        # after a stale reply the fresh one is still taken
    servos.close()


def test_request_variant_changes_only_after_an_unclean_exchange():
    servos = PtyServos({1: "XM430-W350"})
    with _bus(servos, [1], "XM430-W350", 2) as bus:
        r = bus.sync_reader(NAMES)
        lengths = []
        for k in range(6):
            servos.drop = {1} if k == 2 else set()
            try:
                r.read()
            except BusTimeoutError:
                pass
            pkt = P.parse_packet(servos.received[-1], 2, status=False)[0]
            lengths.append(pkt.params[2] | (pkt.params[3] << 8))
    servos.close()
    assert lengths == [8, 8, 8, 9, 9, 9]
    assert STALE_TAGS >= 3


@pytest.mark.parametrize("model,protocol", [("XM430-W350", 2), ("AX-18A", 1)])
def test_a_position_jump_faster_than_the_servo_is_a_corrupted_read(model, protocol):
    ids = [1, 2]
    servos = PtyServos({i: model for i in ids}, protocol=protocol)
    with _bus(servos, ids, model, protocol) as bus:
        r = bus.sync_reader(NAMES)
        reg = bus.register(1, "present_position")
        for i in ids:
            servos.set_raw(i, "present_position", 500)
        r.read()
        good = r.values["present_position"].copy()
        # one byte flipped in a way the checksum did not see: +256 ticks at once
        servos.set_raw(2, "present_position", 500 + 256)
        with pytest.raises(ChecksumError, match="servo 2.*implausible") as ei:
            r.read()
        assert ei.value.failed_ids == (2,)
        assert math.isnan(r.values["present_position"][1]) and math.isnan(r.values["present_velocity"][1])
        assert r.values["present_position"][0] == good[0]
        assert bus.health[2].implausible == 1 and bus.health[1].implausible == 0
        # back to the truth: taken at once
        servos.set_raw(2, "present_position", 501)
        r.read()
        assert r.values["present_position"][1] == pytest.approx(good[1] + reg.scale)
        # a servo that really is elsewhere (rebooted, moved by hand): taken after 3 consistent reads
        servos.set_raw(2, "present_position", 900)
        seen = []
        for _ in range(4):
            try:
                r.read()
            except BridgeError:
                pass
            seen.append(r.values["present_position"][1])
        assert np.isnan(seen[:2]).all() and not np.isnan(seen[2:]).any()
        assert bus.health[2].implausible == 3
    servos.close()


def test_plausible_motion_at_the_no_load_speed_is_kept():
    servos = PtyServos({1: "XM430-W350"})
    with _bus(servos, [1], "XM430-W350", 2) as bus:
        r = bus.sync_reader(NAMES)
        reg = bus.register(1, "present_position")
        speed = bus.table(1).datasheet.no_load_speed_rad_s
        assert PLAUSIBLE_SPEED_MARGIN > 1.0
        raw = 1000
        servos.set_raw(1, "present_position", raw)
        r.read()
        for _ in range(20):
            # about one timeout's worth of travel at the no-load speed per read: never rejected
            raw += max(1, int(speed * 0.003 / reg.scale))
            servos.set_raw(1, "present_position", raw)
            r.read()
        assert bus.health[1].implausible == 0
    servos.close()
