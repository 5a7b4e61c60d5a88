"""BusEngine without a pty: framing, instructions, errors, faults, present-state registers."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servoloop.firmware_bridge import protocol as P
from servoloop.firmware_bridge.control_table import get_table
from servoloop.firmware_bridge.errors import ChecksumError
from servoloop.firmware_bridge.units import to_si_array
from servoloop.virtual_bus import (
    BusEngine,
    FaultSpecError,
    ServoSpecError,
    parse_faults,
    parse_servo_spec,
    robot_servos,
)
from servoloop.virtual_bus.crc import crc16

XM = get_table("XM430-W350")
A = {n: r.address for n, r in XM.registers.items()}


def u16(x):
    return x.to_bytes(2, "little")


def replies(engine, packet):
    """Status packets (parsed) the engine sends for one instruction packet."""
    out = []
    for _, rs in engine.feed(packet):
        for pkt, _, _ in rs:
            parsed, n = P.parse_packet(pkt, engine.protocol, status=True)
            assert n == len(pkt)
            out.append(parsed)
    return out


def one(engine, sid, inst, params=b""):
    (r,) = replies(engine, P.build_instruction(engine.protocol, sid, inst, params))
    return r


def read_int(engine, sid, name, signed=False):
    reg = XM[name]
    r = one(engine, sid, 0x02, u16(reg.address) + u16(reg.size))
    assert r.error == 0
    return int.from_bytes(r.params, "little", signed=signed)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_fast_crc_equals_the_reference(data):
    assert crc16(data) == P.crc16(data)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_never_crashes_and_a_good_packet_still_gets_through(noise):
    e = BusEngine("1:XM430-W350", noise_ticks=0)
    e.feed(noise)
    e.drop_partial()
    for _ in range(len(noise) + 1):     # as the server does when a partial packet stalls
        if not e.pending_bytes():
            break
        e.drop_partial()
    r = replies(e, P.build_instruction(2, 1, 0x01))
    assert [p.servo_id for p in r] == [1]


def test_split_packets_are_reassembled():
    e = BusEngine("1:XM430-W350")
    pkt = P.build_instruction(2, 1, 0x01)
    assert e.feed(pkt[:5]) == []
    (n, rs), = e.feed(pkt[5:])
    assert n == len(pkt) and len(rs) == 1


def test_stuffed_instruction_and_reply():
    e = BusEngine("1:XM430-W350", noise_ticks=0)
    # 0xFFFDFFFF... as profile velocity would not fit its range; use goal current bytes via bulk write
    # a write whose data contains FF FF FD is stuffed by the builder and unstuffed by the servo
    r = one(e, 1, 0x03, u16(A["profile_acceleration"]) + bytes((0xFF, 0xFF, 0xFD, 0x00)))
    assert r.error == 0x04                       # 0xFDFFFF is out of range, but it was parsed
    r = one(e, 1, 0x03, u16(A["homing_offset"]) + (-0x02FFFF01 & 0xFFFFFFFF).to_bytes(4, "little"))
    assert r.error == 0x04


def test_id_collision_corrupts_replies():
    e = BusEngine("1-2:XM430-W350", noise_ticks=0)
    assert one(e, 2, 0x03, u16(A["led"]) + b"\x01").error == 0
    e.feed(P.build_instruction(2, 2, 0x03, u16(A["id"]) + b"\x01"))   # now two servos with id 1
    (_, rs), = e.feed(P.build_instruction(2, 1, 0x02, u16(A["led"]) + u16(1)))
    (pkt, _, _), = rs
    with pytest.raises(ChecksumError):
        P.parse_packet(pkt, 2, status=True)      # the wire ANDs the two replies: LED 0 & 1, bad CRC


def test_present_registers_follow_the_plant_in_si():
    e = BusEngine("1:XM430-W350", noise_ticks=0)
    e.plant.set_state([0.7], [1.5])
    e.advance(0.0)
    regs = ("present_position", "present_velocity")
    vals = [to_si_array(XM[n], np.array([read_int(e, 1, n, signed=True)]))[0] for n in regs]
    assert vals[0] == pytest.approx(0.7, abs=XM["present_position"].scale)
    assert vals[1] == pytest.approx(1.5, abs=XM["present_velocity"].scale)


def test_drive_mode_reverse_and_homing_offset():
    e = BusEngine("1:XM430-W350", noise_ticks=0)
    e.plant.set_state([0.5])
    e.advance(0.0)
    p0 = read_int(e, 1, "present_position", signed=True)
    assert one(e, 1, 0x03, u16(A["homing_offset"]) + (100).to_bytes(4, "little", signed=True)).error == 0
    assert read_int(e, 1, "present_position", signed=True) == p0 + 100
    assert one(e, 1, 0x03, u16(A["drive_mode"]) + b"\x01").error == 0
    assert read_int(e, 1, "present_position", signed=True) == 2048 - (p0 - 2048) + 100


def test_torque_on_moves_the_servo_to_its_goal():
    e = BusEngine("1:XM430-W350", noise_ticks=0)
    one(e, 1, 0x03, u16(A["torque_enable"]) + b"\x01")
    one(e, 1, 0x03, u16(A["goal_position"]) + (2048 + 500).to_bytes(4, "little"))
    for _ in range(500):
        e.advance(0.002)
    assert abs(read_int(e, 1, "present_position", signed=True) - 2548) <= 3
    assert read_int(e, 1, "moving") == 0


def test_gain_register_changes_stiffness():
    e = BusEngine("1-2:XM430-W350", noise_ticks=0)
    one(e, 2, 0x03, u16(A["position_p_gain"]) + u16(80))       # a tenth of the default 800
    assert list(e.kp_scale) == [1.0, 0.1]


def test_broadcast_write_applies_to_all_without_reply():
    e = BusEngine("1-3:XM430-W350")
    assert replies(e, P.build_instruction(2, 0xFE, 0x03, u16(A["led"]) + b"\x01")) == []
    assert [read_int(e, i, "led") for i in (1, 2, 3)] == [1, 1, 1]


def test_fast_sync_read_with_a_dropped_servo_is_a_short_packet():
    e = BusEngine("1-3:XM430-W350", faults="drop:id=2")
    (_, rs), = e.feed(P.build_instruction(2, 0xFE, 0x8A, u16(A["id"]) + u16(1) + bytes((1, 2, 3))))
    (pkt, _, _), = rs
    assert int.from_bytes(pkt[5:7], "little") == 1 + 3 * 5
    assert len(pkt) == 7 + 1 + 2 * 5            # the host times out or sees a bad packet


def test_protocol1_errors_are_bits():
    e = BusEngine("1:AX-18A", protocol=1)
    ax = get_table("AX-18A")
    r = one(e, 1, 0x03, bytes((ax["goal_position"].address,)) + (2000).to_bytes(2, "little"))
    assert r.error == 0x08                                   # out of 0..1023: range
    one(e, 1, 0x03, bytes((ax["cw_angle_limit"].address,)) + (300).to_bytes(2, "little"))
    r = one(e, 1, 0x03, bytes((ax["goal_position"].address,)) + (200).to_bytes(2, "little"))
    assert r.error == 0x02                                   # below CW angle limit: angle limit


def test_hardware_error_on_protocol1_is_in_every_status():
    e = BusEngine("1:AX-18A", protocol=1, faults="hwerror:id=1:bits=overheat")
    e.advance(0.001)
    assert one(e, 1, 0x01).error == 0x04


def test_engine_rejects_mismatched_protocol_and_bad_overrides():
    with pytest.raises(ValueError, match="Protocol"):
        BusEngine("1:AX-18A", protocol=2)
    with pytest.raises(ValueError, match="ids \\[9\\]"):
        BusEngine("1:XM430-W350", actuators={9: {"kp": 1.0}})
    with pytest.raises(ValueError, match="unknown actuator"):
        BusEngine("1:XM430-W350", actuators={1: {"kq": 1.0}})
    e = BusEngine("1:XM430-W350", actuators={1: {"kp": 3.0}})
    assert e.plant.params[0].servo.kp_nm_per_rad == 3.0


def test_fault_grammar_parses_the_documented_example():
    spec = ("drop:id=3:p=0.05,corrupt:p=0.01,delay:id=2:us=2000,hwerror:id=4:bits=overload:at=2.0,"
            "vanish:id=5:at=3.0,powercycle:at=4.0,unplug:at=5.0")
    f = parse_faults(spec)
    assert [x.kind for x in f] == ["drop", "corrupt", "delay", "hwerror", "vanish", "powercycle", "unplug"]
    assert f[0].ids == (3,) and f[0].p == 0.05 and f[2].us == 2000 and f[3].bits == 0x20
    assert parse_faults("drop:id=1-3+7")[0].ids == (1, 2, 3, 7)
    assert parse_faults("hwerror:bits=overload+voltage")[0].bits == 0x21


@pytest.mark.parametrize("spec, needle", [
    ("explode", "unknown kind 'explode'"),
    ("drop:p=2", "p=2 out of range"),
    ("drop:id=x", "id must be"),
    ("delay:id=2", "delay needs us"),
    ("hwerror:bits=melted", "unknown hardware error bit 'melted'"),
    ("drop:p", "KEY=VALUE"),
    ("drop,,corrupt", "fault 2"),
    ("vanish:at=3:until=1", "until must be after at"),
    ("unplug:id=3", "unplug takes at"),
])
def test_fault_grammar_errors_name_the_token(spec, needle):
    with pytest.raises(FaultSpecError, match=needle.replace("(", r"\(")):
        parse_faults(spec)


def test_fault_ids_must_exist_and_bits_fit_the_protocol():
    with pytest.raises(FaultSpecError, match="no servo with id"):
        BusEngine("1:XM430-W350", faults="drop:id=4")
    with pytest.raises(FaultSpecError, match="Protocol 1.0"):
        BusEngine("1:AX-18A", faults="hwerror:bits=encoder")


def test_servo_spec():
    assert parse_servo_spec("1-3:XM430-W350,7:AX-18A") == [(1, "XM430-W350"), (2, "XM430-W350"),
                                                           (3, "XM430-W350"), (7, "AX-18A")]
    assert parse_servo_spec("1:MX-28-2.0") == [(1, "MX-28(2.0)")]
    for bad, needle in (("1-3", "IDS:MODEL"), ("1:XM1", "XM1"), ("1:AX-18A,1:AX-18A", "twice"),
                        ("3-1:AX-18A", "A <= B")):
        with pytest.raises(ServoSpecError, match=needle):
            parse_servo_spec(bad)


@pytest.mark.parametrize("name", ["bench", "arm", "quadruped", "humanoid"])
def test_built_in_robots_load(name):
    servos, bus = robot_servos(name)
    assert [sid for sid, _ in servos] == list(range(1, len(servos) + 1))
    protocol = bus.get("protocol")     # mixed: each servo speaks its own table's protocol (None)
    BusEngine(servos, protocol=None if protocol == "mixed" else protocol, baud=bus.get("baud"))


def test_actuator_spec():
    from servoloop.virtual_bus.spec import parse_actuator_spec

    assert parse_actuator_spec("1-2:kp=5:kd=0.1,2:inertia=0.01") == {
        1: {"kp": 5.0, "kd": 0.1}, 2: {"kp": 5.0, "kd": 0.1, "inertia": 0.01}}
    with pytest.raises(ServoSpecError, match="unknown field 'kq'"):
        parse_actuator_spec("1:kq=3")
    with pytest.raises(ServoSpecError, match="IDS:KEY=VALUE"):
        parse_actuator_spec("1")


def test_startup_torque_on_survives_reboot_and_blocks_eeprom_writes():
    e = BusEngine("1:XM430-W350", noise_ticks=0)
    assert one(e, 1, 0x03, u16(A["startup_configuration"]) + b"\x01").error == 0
    assert one(e, 1, 0x08).error == 0
    assert read_int(e, 1, "torque_enable") == 1
    assert one(e, 1, 0x03, u16(A["operating_mode"]) + b"\x04").error == 0x07   # FIELD-NOTES a7


def test_current_mode_drives_torque_and_velocity_mode_tracks_speed():
    e = BusEngine("1-2:XM430-W350", noise_ticks=0)
    assert one(e, 1, 0x03, u16(A["operating_mode"]) + b"\x00").error == 0      # current
    assert one(e, 2, 0x03, u16(A["operating_mode"]) + b"\x01").error == 0      # velocity
    for sid in (1, 2):
        assert one(e, sid, 0x03, u16(A["torque_enable"]) + b"\x01").error == 0
    assert one(e, 1, 0x03, u16(A["goal_current"]) + (200).to_bytes(2, "little", signed=True)).error == 0
    assert one(e, 2, 0x03, u16(A["goal_velocity"]) + (50).to_bytes(4, "little", signed=True)).error == 0
    for _ in range(5):
        e.advance(0.002)
    assert read_int(e, 1, "present_current", signed=True) == 200     # the motor gives what is asked
    for _ in range(95):
        e.advance(0.002)
    assert read_int(e, 1, "present_velocity", signed=True) > 50      # and the free load speeds up
    # ... until the back-EMF takes the current away: no faster than the 46 rpm no-load speed
    assert read_int(e, 1, "present_velocity", signed=True) <= round(46 / 0.229)
    assert read_int(e, 1, "present_current", signed=True) < 200
    assert abs(read_int(e, 2, "present_velocity", signed=True) - 50) <= 1
    assert list(e.mode) == [2, 1]


def test_mx_protocol1_present_current_is_offset_binary_2048_is_zero_amps():
    """MX (1.0) Present Current (address 68): I = 4.5 mA x (raw - 2048) (e-Manual MX-64/106
    control table); 0 A at rest reads 2048, never 0 (that would be -9.2 A)."""
    mx = get_table("MX-64")
    reg, goal = mx["present_current"], mx["goal_position"]
    assert (reg.address, reg.zero_raw, reg.scale) == (68, 2048, 0.0045)
    e = BusEngine("1:MX-64", protocol=1, noise_ticks=0)

    def current_raw():
        (r,) = [P.parse_packet(p, 1, status=True)[0] for _, rs in
                e.feed(P.build_instruction(1, 1, 0x02, bytes((reg.address, 2)))) for p, _, _ in rs]
        assert r.error == 0
        return int.from_bytes(r.params, "little")

    e.advance(0.01)
    assert abs(current_raw() - 2048) <= 1                                  # torque off: 0 A
    assert to_si_array(reg, np.array([current_raw()]))[0] == pytest.approx(0.0, abs=0.0046)
    # torque on, goal a quarter turn ahead: the motor pushes forwards (raw above 2048), and
    # no harder than the stall current
    now = int.from_bytes(next(P.parse_packet(p, 1, status=True)[0] for _, rs in e.feed(
        P.build_instruction(1, 1, 0x02, bytes((mx["present_position"].address, 2)))) for p, _, _ in rs).params,
        "little")
    for address, data in ((mx["torque_enable"].address, b"\x01"),
                          (goal.address, (now + 1024).to_bytes(2, "little"))):
        for _, rs in e.feed(P.build_instruction(1, 1, 0x03, bytes((address,)) + data)):
            assert all(P.parse_packet(p, 1, status=True)[0].error == 0 for p, _, _ in rs)
    e.advance(0.004)
    amps = to_si_array(reg, np.array([current_raw()]))[0]
    assert 0.1 < amps <= mx.datasheet.stall_current_a * 1.05
