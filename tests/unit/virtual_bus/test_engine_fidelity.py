"""BusEngine in simulated time: mixed-protocol framing, reboot silence, wheel mode, indirect data, CLEAR."""

import pytest
import yaml

from servoloop.firmware_bridge import control_table
from servoloop.firmware_bridge import protocol as P
from servoloop.firmware_bridge.control_table import get_table, load_table
from servoloop.virtual_bus import BusEngine

XM = {n: r.address for n, r in get_table("XM430-W350").registers.items()}
AX = {n: r.address for n, r in get_table("AX-18A").registers.items()}
MX = {n: r.address for n, r in get_table("MX-28").registers.items()}


def statuses(engine, data: bytes) -> list:
    """(protocol, parsed status) of every reply to the packets in ``data``."""
    out = []
    for _, rs in engine.feed(data):
        for pkt, _, _ in rs:
            proto = 2 if pkt[:4] == b"\xff\xff\xfd\x00" else 1
            parsed, n = P.parse_packet(pkt, proto, status=True)
            assert n == len(pkt)
            out.append((proto, parsed))
    return out


def txrx(engine, proto, sid, inst, params=b""):
    r = statuses(engine, P.build_instruction(proto, sid, inst, params))
    return r[0][1] if r else None


def run(engine, seconds, dt=0.002):
    for _ in range(round(seconds / dt)):
        engine.advance(dt)


def u16(x):
    return x.to_bytes(2, "little")


def p1_read(e, sid, address, n):
    r = txrx(e, 1, sid, 0x02, bytes((address, n)))
    assert r is not None and r.error == 0
    return int.from_bytes(r.params, "little")


def test_mixed_bus_each_servo_hears_its_own_protocol_through_garbage():
    e = BusEngine("1:AX-18A,2:XM430-W350")
    assert e.mixed and e.protocol is None
    stream = (b"\x00\xff\x13" + P.build_instruction(1, 1, 0x01) + b"\xff" + P.build_instruction(2, 2, 0x01)
              + P.build_instruction(2, 1, 0x01) + P.build_instruction(1, 2, 0x01)
              + P.build_instruction(1, 1, 0x02, bytes((AX["model_number"], 2))))
    got = statuses(e, stream[:17]) + statuses(e, stream[17:])      # split mid-packet
    assert [(p, s.servo_id) for p, s in got] == [(1, 1), (2, 2), (1, 1)]
    assert int.from_bytes(got[2][1].params, "little") == 18            # AX-18A model number


def test_protocol_type_switches_an_x_servo_after_answering():
    e = BusEngine("1:XM430-W350")
    r = txrx(e, 2, 1, 0x03, u16(XM["protocol_type"]) + b"\x01")
    assert r.error == 0                                                 # answered in 2.0
    assert not e.mixed and e.protocol == 1
    assert txrx(e, 2, 1, 0x01) is None
    assert p1_read(e, 1, XM["protocol_type"], 1) == 1
    # Protocol 1.0 error bits: an EEPROM write with torque on is a range error (0x08)
    assert txrx(e, 1, 1, 0x03, bytes((XM["torque_enable"], 1))).error == 0
    assert txrx(e, 1, 1, 0x03, bytes((XM["return_delay_time"], 0))).error == 0x08
    assert txrx(e, 1, 1, 0x03, bytes((XM["torque_enable"], 0))).error == 0
    assert txrx(e, 1, 1, 0x03, bytes((XM["protocol_type"], 2))).error == 0
    assert e.protocol == 2 and txrx(e, 2, 1, 0x01).error == 0


def test_reboot_is_answered_then_silent_for_the_boot_time():
    e = BusEngine("1-2:XM430-W350", reboot_s=0.4)
    assert txrx(e, 2, 1, 0x08).error == 0
    silent = 0.0
    while txrx(e, 2, 1, 0x01) is None:
        assert txrx(e, 2, 2, 0x01) is not None                          # the other servo answers
        e.advance(0.01)
        silent += 0.01
        assert silent < 1.0
    assert silent == pytest.approx(0.4, abs=0.011)


@pytest.mark.parametrize("model", ["AX-18A", "MX-28"])
def test_wheel_mode_direction_bit_and_wrapping_present_position(model):
    a = AX if model.startswith("AX") else MX
    e = BusEngine(f"1:{model}", noise_ticks=0)
    w = lambda name, v, n=2: txrx(e, 1, 1, 0x03, bytes((a[name],)) + v.to_bytes(n, "little")).error  # noqa: E731
    assert w("moving_speed", 1024 + 400) == 0x08                         # joint mode: 0-1023 only
    assert w("cw_angle_limit", 0) == 0 and w("ccw_angle_limit", 0) == 0
    assert w("torque_enable", 1, 1) == 0
    assert w("moving_speed", 1024 + 400) == 0                            # wheel mode: CW
    positions = []
    for _ in range(200):                                                 # 4 s: MX-28 ~45 rpm = 3 turns
        run(e, 0.02)
        positions.append(p1_read(e, 1, a["present_position"], 2))
    speed = p1_read(e, 1, a["present_velocity"], 2)
    assert speed & 1024 and abs((speed & 1023) - 400) < 40               # turning CW at ~the speed asked
    top = 4095 if model == "MX-28" else 1023
    assert all(0 <= p <= top for p in positions)
    jumps = sum(1 for x, y in zip(positions, positions[1:], strict=False) if y - x > top // 2)
    assert jumps >= 2                                                    # wrapped turn after turn, going down
    assert w("moving_speed", 2048) == 0x08                               # beyond the direction bit: range


def _indirect_table(tmp_path):
    if "indirect_address_1" in get_table("XM430-W350").registers:
        return get_table("XM430-W350")          # the generated tables carry the e-Manual block
    with open(get_table("XM430-W350").source) as f:
        doc = yaml.safe_load(f)
    for k in range(6):
        doc["registers"][f"indirect_address_{k + 1}"] = [168 + 2 * k, 2, "RW", "E", "u", "", 1, 0, 224 + k, 64, 661]
        doc["registers"][f"indirect_data_{k + 1}"] = [224 + k, 1, "RW", "R", "u", "", 1, 0, 0, 0, 255]
    doc["name"], doc["model_number"] = "XM430-W350-INDIRECT-UNIT", 61021
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_table(path)


def test_indirect_data_reads_and_writes_the_mapped_bytes(monkeypatch, tmp_path):
    table = _indirect_table(tmp_path)
    if table.name not in control_table.MODELS:
        tables = control_table._all_tables() + (table,)
        monkeypatch.setattr(control_table, "_all_tables", lambda: tables)
    e = BusEngine(f"1:{table.name}", noise_ticks=0)
    g = XM["goal_position"]
    for k, target in enumerate((g, g + 1, g + 2, g + 3, XM["led"], XM["present_temperature"])):
        assert txrx(e, 2, 1, 0x03, u16(168 + 2 * k) + u16(target)).error == 0
    assert txrx(e, 2, 1, 0x03, u16(XM["torque_enable"]) + b"\x01").error == 0
    # half a Goal Position through Indirect Data is still half a register: Data Length Error
    assert txrx(e, 2, 1, 0x03, u16(224) + u16(2500)).error == 0x05
    assert txrx(e, 2, 1, 0x03, u16(224) + (2500).to_bytes(4, "little") + b"\x01").error == 0
    r = txrx(e, 2, 1, 0x02, u16(XM["goal_position"]) + u16(4))
    assert int.from_bytes(r.params, "little") == 2500
    assert txrx(e, 2, 1, 0x02, u16(XM["led"]) + u16(1)).params == b"\x01"
    assert txrx(e, 2, 1, 0x02, u16(229) + u16(1)).params == bytes((32,))   # Present Temperature, degC
    assert txrx(e, 2, 1, 0x03, u16(229) + b"\x05").error == 0x07           # read-only target: access
    run(e, 2.0)
    r = txrx(e, 2, 1, 0x02, u16(XM["present_position"]) + u16(4))
    assert abs(int.from_bytes(r.params, "little") - 2500) < 10


def test_clear_takes_whole_turns_off_a_stopped_servo_only():
    e = BusEngine("1:XM430-W350", noise_ticks=0)
    clear = P.build_instruction(2, 1, 0x10, b"\x01DXL\x22")
    assert txrx(e, 2, 1, 0x03, u16(XM["operating_mode"]) + b"\x04").error == 0
    assert txrx(e, 2, 1, 0x03, u16(XM["torque_enable"]) + b"\x01").error == 0
    goal = 3 * 4096 + 1234
    assert txrx(e, 2, 1, 0x03, u16(XM["goal_position"]) + goal.to_bytes(4, "little")).error == 0
    run(e, 0.5)
    assert statuses(e, clear)[0][1].error == 0x01                      # moving: Result Fail
    run(e, 8.0)
    r = txrx(e, 2, 1, 0x02, u16(XM["present_position"]) + u16(4))
    assert abs(int.from_bytes(r.params, "little") - goal) < 5
    assert statuses(e, clear)[0][1].error == 0
    r = txrx(e, 2, 1, 0x02, u16(XM["present_position"]) + u16(4))
    assert abs(int.from_bytes(r.params, "little") - 1234) < 5
    run(e, 2.0)                                                        # and it holds there
    r = txrx(e, 2, 1, 0x02, u16(XM["present_position"]) + u16(4))
    assert abs(int.from_bytes(r.params, "little") - 1234) < 5


def test_chunk_read_after_a_quick_reopen_takes_its_earlier_packets_at_the_old_rate():
    e = BusEngine("1:XM430-W350", baud=57_600)
    write = P.build_instruction(2, 1, 0x03, u16(XM["baud_rate"]) + b"\x03")      # -> 1 Mbps
    ping = P.build_instruction(2, 1, 0x01)
    out = e.feed_at(write + ping, 1_000_000, prev_baud=57_600)
    # the WRITE was heard at 57600 (its answer, at 57600, is lost on a host now at 1M); the PING at 1M
    assert [len(r) for _, r in out] == [0, 1]
    assert e.stats["wrong_rate_replies"] == 1
    # one packet after a rate change is the new rate's (a scanner trying rates)
    assert [len(r) for _, r in e.feed_at(ping, 57_600, prev_baud=1_000_000)] == [0]
    assert [len(r) for _, r in e.feed_at(ping, 1_000_000, prev_baud=57_600)] == [1]
