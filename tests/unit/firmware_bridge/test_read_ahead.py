"""Read-ahead: a group read split into ``request()`` and ``collect()``, a tick apart.

The far side is :class:`PtyServos` (pumped inside every write, so a request's replies
wait in the pty when ``request()`` returns).  Half duplex: while a request is
outstanding, any other transaction first takes its replies into the reader; without
that, the transaction's input flush would throw them away and the collect would time
out.
"""

import math

import numpy as np
import pytest

from servoloop.firmware_bridge import protocol as P
from servoloop.firmware_bridge.bulk import BulkReader
from servoloop.firmware_bridge.bus import Bus, ServoSpec
from servoloop.firmware_bridge.errors import BusTimeoutError
from servoloop.firmware_bridge.imu import IMU_REGISTERS, get_imu_table
from tests.unit.firmware_bridge.pty_servos import PtyServos
from tests.unit.firmware_bridge.test_fresh_feedback import LateReplies

IDS = [1, 2, 3]
NAMES = ["present_position", "present_velocity"]
MODEL = "XM430-W350"


@pytest.fixture
def rig():
    servos = PtyServos({i: MODEL for i in IDS})
    bus = Bus(servos.port, 1_000_000, 2, [ServoSpec(i, MODEL) for i in IDS],
              on_after_write=servos.pump, timeout_margin_s=0.003)
    bus.open()
    yield servos, bus
    bus.close()
    servos.close()


def _set_positions(servos, bus, raw):
    for i in IDS:
        servos.set_raw(i, "present_position", raw + i)


def _raw_positions(bus, values):
    reg = bus.register(IDS[0], "present_position")
    return [round(v / reg.scale + reg.zero_raw) for v in values]


def _instructions(servos):
    return [P.parse_packet(raw, 2, status=False)[0].instruction for raw in servos.received]


def test_request_then_collect_reads_what_read_reads(rig):
    servos, bus = rig
    r = bus.sync_reader(NAMES)
    _set_positions(servos, bus, 2000)
    r.read()
    direct = r.values["present_position"].copy()
    _set_positions(servos, bus, 2010)        # a few ticks on: a move a servo can make
    r.request()
    assert bus.pending is r and r.requested
    r.collect()
    assert bus.pending is None and not r.requested
    assert _raw_positions(bus, direct) == [2001, 2002, 2003]
    assert _raw_positions(bus, r.values["present_position"]) == [2011, 2012, 2013]
    assert _instructions(servos) == [P.Instruction.SYNC_READ] * 2     # one instruction each
    assert all(h.ok == 2 for h in bus.health.values())


def test_collect_returns_the_state_sampled_at_the_request(rig):
    servos, bus = rig
    r = bus.sync_reader(NAMES)
    _set_positions(servos, bus, 1000)
    r.request()
    _set_positions(servos, bus, 1500)        # the servos move on after answering
    r.collect()
    assert _raw_positions(bus, r.values["present_position"]) == [1001, 1002, 1003]


def _ping(bus, other):
    bus.ping(2)


def _write_register(bus, other):
    bus.write_raw(3, "led", 1)


def _sync_write(bus, other):
    bus.sync_writer("goal_position").write(np.zeros(len(IDS)))


def _other_read(bus, other):
    other.read()


@pytest.mark.parametrize("transaction,instruction", [
    (_ping, P.Instruction.PING), (_write_register, P.Instruction.WRITE),
    (_sync_write, P.Instruction.SYNC_WRITE), (_other_read, P.Instruction.SYNC_READ)])
def test_a_transaction_while_a_request_is_outstanding_collects_it_first(rig, transaction, instruction):
    servos, bus = rig
    r = bus.sync_reader(NAMES)
    other = bus.sync_reader(["present_temperature"])
    _set_positions(servos, bus, 1000)
    r.request()
    _set_positions(servos, bus, 1500)
    transaction(bus, other)
    # the replies were taken off the wire before the other instruction went out ...
    assert bus.pending is None and r.requested
    assert _instructions(servos) == [P.Instruction.SYNC_READ, instruction]
    # ... so the collect has them, as sampled at the request, without a second exchange
    r.collect()
    assert _raw_positions(bus, r.values["present_position"]) == [1001, 1002, 1003]
    assert len(servos.received) == 2
    assert all(h.timeouts == 0 and h.ok >= 1 for h in bus.health.values())


def test_a_second_request_before_the_collect_settles_the_first(rig):
    servos, bus = rig
    r = bus.sync_reader(NAMES)
    _set_positions(servos, bus, 1000)
    r.request()
    _set_positions(servos, bus, 1010)
    r.request()                              # the first one's replies do not collide with it
    r.collect()
    assert _raw_positions(bus, r.values["present_position"]) == [1011, 1012, 1013]
    assert all(h.timeouts == 0 for h in bus.health.values())


def test_lost_replies_are_counted_as_in_a_read(rig):
    servos, bus = rig
    r = bus.sync_reader(NAMES)
    servos.drop = {2}
    r.request()
    with pytest.raises(BusTimeoutError) as exc:
        r.collect()
    assert exc.value.failed_ids == (2,)
    pos = r.values["present_position"]
    assert math.isnan(pos[1]) and not math.isnan(pos[0]) and not math.isnan(pos[2])
    h = bus.health
    assert h[2].timeouts == 1 and h[1].timeouts == h[3].timeouts == 0
    servos.drop = set()
    r.request()
    r.collect()                              # and the next exchange is whole again
    assert not np.isnan(r.values["present_position"]).any()


def test_late_replies_of_an_old_request_are_told_apart():
    """Servo 2 answers one request late (its reply to request k arrives after request k+1):
    with requests a tick ahead, a late reply is still discarded, never taken as fresh."""
    servos = PtyServos({i: MODEL for i in IDS})
    late = LateReplies(servos, 2)
    with Bus(servos.port, 1_000_000, 2, [ServoSpec(i, MODEL) for i in IDS],
             on_after_write=servos.pump, timeout_margin_s=0.003) as bus:
        r = bus.sync_reader(NAMES)
        fresh = 0
        for k in range(30):
            _set_positions(servos, bus, 100 + 7 * k)
            late.late = k % 3 != 2
            r.request()
            if k % 4 == 1:
                bus.ping(1)                  # settles the request early, mid-"tick"
            try:
                r.collect()
            except BusTimeoutError as exc:
                assert exc.failed_ids == (2,)
            for j, raw in enumerate(_raw_positions(bus, np.nan_to_num(r.values["present_position"]))):
                if not math.isnan(r.values["present_position"][j]):
                    assert raw == 100 + 7 * k + IDS[j], (k, j)
            fresh += not math.isnan(r.values["present_position"][1])
        h = bus.health
        assert h[2].stale > 0 and h[1].stale == h[3].stale == 0
        assert h[1].failures == h[3].failures == 0
        assert fresh > 0
    servos.close()


def test_collect_without_a_request_is_refused(rig):
    _, bus = rig
    r = bus.sync_reader(NAMES)
    with pytest.raises(RuntimeError, match="no request outstanding"):
        r.collect()
    r.request()
    r.collect()
    with pytest.raises(RuntimeError, match="no request outstanding"):
        r.collect()


def test_closing_the_bus_with_a_request_outstanding_does_not_raise(rig):
    _, bus = rig
    r = bus.sync_reader(NAMES)
    r.request()
    bus.close()
    assert bus.pending is None and not bus.is_open


def test_protocol_1_split_read_is_a_read():
    """Protocol 1.0 reads one servo per exchange: ``request`` sends the first, ``collect`` the
    rest (not a read-ahead, the loop refuses it), with the values of a plain read."""
    servos = PtyServos({i: "AX-18A" for i in IDS}, protocol=1)
    with Bus(servos.port, 1_000_000, 1, [ServoSpec(i, "AX-18A") for i in IDS],
             on_after_write=servos.pump, timeout_margin_s=0.003) as bus:
        r = bus.sync_reader(NAMES)
        assert r.exchanges == len(IDS)
        _set_positions(servos, bus, 300)
        r.request()
        assert len(servos.received) == 1
        r.collect()
        assert len(servos.received) == 3
        assert _raw_positions(bus, r.values["present_position"]) == [301, 302, 303]
    servos.close()


def test_bulk_read_of_servos_and_imu_splits_the_same_way():
    imu = get_imu_table("OpenCR")
    servos = PtyServos({i: MODEL for i in IDS})
    servos.tables[200] = imu
    servos.mem[200] = PtyServos._defaults(imu)
    with Bus(servos.port, 1_000_000, 2, [ServoSpec(i, MODEL) for i in IDS],
             on_after_write=servos.pump, timeout_margin_s=0.003) as bus:
        bus.add_device(200, imu)
        bulk = BulkReader(bus, [(NAMES, IDS), (list(IMU_REGISTERS), [200], False)])
        servos.set_raw(200, "gyro_x", 123)
        _set_positions(servos, bus, 900)
        bulk.request()
        assert bus.pending is bulk and bulk.requested
        _set_positions(servos, bus, 950)
        bus.ping(1)                                  # settles the bulk read first
        assert bus.pending is None
        assert bulk.collect()
        servo_part, imu_part = bulk.parts
        servo_part.check()
        imu_part.check()
        assert _raw_positions(bus, servo_part.values["present_position"]) == [901, 902, 903]
        assert not math.isnan(imu_part.values["gyro_x"][0])
        servos.drop = {200}
        bulk.request()
        assert not bulk.collect()                    # the board's lost reply: its part fails
        servo_part.check()
        with pytest.raises(BusTimeoutError):
            imu_part.check()
        assert bus.health[200].timeouts == 1
    servos.close()
