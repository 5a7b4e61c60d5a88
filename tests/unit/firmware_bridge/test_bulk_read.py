"""One BULK READ for servos and the IMU board: packet, values, late replies, failures.

The far side is :class:`PtyServos`, the pure-Python reference emulator built on
``protocol.py``, independent of the compiled codec and group reader under test;
the OpenCR board (ID 200) is added to it as one more device with its own table.
"""

import math

import numpy as np
import pytest

from servoloop.firmware_bridge import _codec
from servoloop.firmware_bridge import protocol as P
from servoloop.firmware_bridge.bulk import BulkReader
from servoloop.firmware_bridge.bus import Bus, ServoSpec
from servoloop.firmware_bridge.errors import BusTimeoutError
from servoloop.firmware_bridge.imu import IMU_REGISTERS, ImuReader, get_imu_table
from servoloop.firmware_bridge.sync import STALE_TAGS
from tests.unit.firmware_bridge.pty_servos import PtyServos
from tests.unit.firmware_bridge.test_fresh_feedback import LateReplies

IDS = [1, 2, 3]
NAMES = ["present_position", "present_velocity", "present_current"]
IMU = get_imu_table("OpenCR")


def _rig(add_imu=True):
    servos = PtyServos({i: "XM430-W350" for i in IDS})
    servos.tables[200] = IMU
    servos.mem[200] = PtyServos._defaults(IMU)
    bus = Bus(servos.port, 1_000_000, 2, [ServoSpec(i, "XM430-W350") for i in IDS],
              on_after_write=servos.pump, timeout_margin_s=0.003)
    bus.open()
    if add_imu:
        bus.add_device(200, IMU)
    return servos, bus


def _reader(bus):
    return BulkReader(bus, [(NAMES, IDS), (list(IMU_REGISTERS), [200], False)])


def _bulk_items(raw_packet):
    """(id, address, length) of every device a BULK READ packet asks, parsed by the reference."""
    pkt, _ = P.parse_packet(raw_packet, 2, status=False)
    assert pkt.instruction == 0x92 and pkt.servo_id == P.BROADCAST_ID
    p = pkt.params
    assert len(p) % 5 == 0
    return [(p[k], p[k + 1] | (p[k + 2] << 8), p[k + 3] | (p[k + 4] << 8)) for k in range(0, len(p), 5)]


def test_compiled_packet_is_the_reference_encoding():
    items = [(1, 126, 10), (2, 126, 10), (200, 32, 18), (7, 0x1234, 0x0102)]
    body = b"".join(bytes((i, a & 0xFF, a >> 8, n & 0xFF, n >> 8)) for i, a, n in items)
    packet = _codec.bulk_read(2, items)
    assert packet == P.build_instruction(2, P.BROADCAST_ID, 0x92, body)
    assert _bulk_items(packet) == items


def test_one_transaction_reads_each_device_at_its_own_address():
    servos, bus = _rig()
    r = _reader(bus)
    for k in range(5):
        for j, i in enumerate(IDS):
            servos.set_raw(i, "present_position", 2000 + 5 * k + j)
            servos.set_raw(i, "present_current", -10 * (j + 1))        # two's complement
        for m, name in enumerate(IMU_REGISTERS):
            servos.set_raw(200, name, (-1) ** m * (100 * m + k))
        before = len(servos.received)
        assert r.read()
        assert len(servos.received) == before + 1                      # one request on the wire
        assert [(i, a) for i, a, _ in _bulk_items(servos.received[-1])] == [(1, 126), (2, 126),
                                                                             (3, 126), (200, 32)]
        servo_part, imu_part = r.parts
        servo_part.check()
        imu_part.check()
        for j, i in enumerate(IDS):
            pos = bus.register(i, "present_position")
            cur = bus.register(i, "present_current")
            assert servo_part.values["present_position"][j] == pytest.approx(
                (2000 + 5 * k + j - pos.zero_raw) * pos.scale)
            assert servo_part.values["present_current"][j] == pytest.approx(-10 * (j + 1) * cur.scale)
        for m, name in enumerate(IMU_REGISTERS):
            assert imu_part.values[name][0] == pytest.approx((-1) ** m * (100 * m + k) * IMU[name].scale)
    bus.close()
    servos.close()


def test_imu_reader_attached_to_the_bulk_read_sends_nothing_of_its_own():
    servos, bus = _rig(add_imu=False)
    imu = ImuReader(bus, 200, IMU)          # puts the board on the bus
    r = _reader(bus)
    imu.attach(r.parts[1])
    servos.set_raw(200, "acc_z", 16384)
    n0 = len(servos.received)
    r.read()
    imu.read()
    assert len(servos.received) == n0 + 1 and imu.shared
    assert imu.accel[2] == pytest.approx(16384 * IMU["acc_z"].scale)
    servos.drop = {200}
    r.read()
    with pytest.raises(BusTimeoutError) as e:
        imu.read()
    assert e.value.failed_ids == (200,)
    assert np.isnan(imu.accel).all() and np.isnan(imu.gyro).all()     # never the last good value
    r.parts[0].check()                                                  # the servos are fine
    bus.close()
    servos.close()


@pytest.mark.parametrize("late_id", [2, 200])
def test_late_replies_are_discarded_per_device_and_counted(late_id):
    servos, bus = _rig()
    r = _reader(bus)
    late = LateReplies(servos, late_id)
    fresh = 0
    for k in range(30):
        for j, i in enumerate(IDS):
            servos.set_raw(i, "present_position", 1000 + 3 * k + j)
        servos.set_raw(200, "yaw", 10 * k)
        late.late = k % 3 != 2
        r.read()
        for part in r.parts:
            try:
                part.check()
            except BusTimeoutError as exc:
                assert exc.failed_ids == (late_id,)
        pos = r.parts[0].values["present_position"]
        for j, i in enumerate(IDS):
            reg = bus.register(i, "present_position")
            if not math.isnan(pos[j]):
                assert round(pos[j] / reg.scale + reg.zero_raw) == 1000 + 3 * k + j, (k, i)
        yaw = r.parts[1].values["yaw"][0]
        if not math.isnan(yaw):
            assert round(yaw / IMU["yaw"].scale) == 10 * k, k
        fresh += not math.isnan(pos[IDS.index(late_id)] if late_id in IDS else yaw)
    h = bus.health
    assert h[late_id].stale > 0
    assert all(h[i].stale == 0 and h[i].failures == 0 for i in [*IDS, 200] if i != late_id)
    assert fresh > 0
    bus.close()
    servos.close()


def test_request_variants_grow_at_the_front_where_a_table_ends_at_the_block():
    servos, bus = _rig()
    r = _reader(bus)
    room_after = IMU.size - (IMU["yaw"].address + 2)
    assert room_after < STALE_TAGS - 1          # the board's table ends close behind its block
    asked = []
    for k in range(2 * STALE_TAGS):
        servos.drop = {200} if k % 2 == 0 else set()      # every other exchange is unclean
        servos.set_raw(200, "roll", 7 * k)
        r.read()
        items = dict((i, (a, n)) for i, a, n in _bulk_items(servos.received[-1]))
        asked.append(items[200])
        if k % 2:
            r.parts[1].check()
            assert round(r.parts[1].values["roll"][0] / IMU["roll"].scale) == 7 * k
    # every variant asks for the block: longer, and from further in front once the end is reached
    starts = {a for a, _ in asked}
    assert min(starts) < IMU["gyro_x"].address and max(a + n for a, n in asked) <= IMU.size
    assert len({n for _, n in asked}) == STALE_TAGS
    bus.close()
    servos.close()


def test_a_silent_servo_fails_only_itself():
    servos, bus = _rig()
    r = _reader(bus)
    servos.drop = {3}
    assert not r.read()
    with pytest.raises(BusTimeoutError) as e:
        r.parts[0].check()
    assert e.value.failed_ids == (3,)
    assert np.isnan(r.parts[0].values["present_position"][2])
    assert np.isfinite(r.parts[0].values["present_position"][:2]).all()
    r.parts[1].check()
    assert np.isfinite(r.parts[1].values["acc_z"]).all()
    bus.close()
    servos.close()


def test_bad_groups_are_refused_naming_the_reason():
    servos, bus = _rig()
    with pytest.raises(ValueError, match="appears twice"):
        BulkReader(bus, [(NAMES, IDS), (NAMES, [3])])
    with pytest.raises(ValueError, match="at least one"):
        BulkReader(bus, [])
    bus.close()
    servos.close()
    ax = PtyServos({1: "AX-18A"}, protocol=1)
    with Bus(ax.port, 1_000_000, 1, [ServoSpec(1, "AX-18A")], on_after_write=ax.pump,
             timeout_margin_s=0.003) as bus1, pytest.raises(ValueError, match="Protocol 2.0"):
        BulkReader(bus1, [(["present_position"], [1])])
    ax.close()
