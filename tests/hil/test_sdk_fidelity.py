"""Issue 13 items 2-6 with dynamixel_sdk as the client, the way ROBOTIS's example scripts drive a servo.

Each test follows an example of DynamixelSDK's ``python/tests`` (named in the
test) against ``servoloop virtual-bus`` on a pty, over seconds of the
emulator's time; waits poll with a deadline.
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
import time
from pathlib import Path

import dynamixel_sdk as dxl
import pytest
import serial
import yaml

from servoloop.firmware_bridge import protocol as P
from servoloop.firmware_bridge.control_table import get_table, load_table
from tests.hil.sdk_helpers import ok

pytestmark = pytest.mark.hil

ROOT = Path(__file__).resolve().parents[2]

XM = {n: r.address for n, r in get_table("XM430-W350").registers.items()}
AX = {n: r.address for n, r in get_table("AX-18A").registers.items()}
MX = {n: r.address for n, r in get_table("MX-28").registers.items()}




# ---------------------------------------------------------------- item 2: wheel mode on Protocol 1.0
@pytest.mark.parametrize("model", ["AX-18A", "MX-28"])
def test_wheel_mode_turns_clockwise_with_the_direction_bit(virtual_bus, sdk_port, poll_until, model):
    a = AX if model.startswith("AX") else MX
    port = sdk_port(virtual_bus(servos=f"1:{model}"))
    ph = dxl.PacketHandler(1.0)
    # joint mode: Moving Speed is 0-1023 (e-Manual "Moving Speed")
    assert ph.write2ByteTxRx(port, 1, a["moving_speed"], 1024 + 300)[1] == 0x08       # range error bit
    ok(ph.write2ByteTxRx(port, 1, a["cw_angle_limit"], 0))
    ok(ph.write2ByteTxRx(port, 1, a["ccw_angle_limit"], 0))                             # wheel mode
    ok(ph.write1ByteTxRx(port, 1, a["torque_enable"], 1))
    ok(ph.write2ByteTxRx(port, 1, a["moving_speed"], 1024 + 300))                       # CW, 300 units
    seen = []

    def turning_cw():
        speed = ok(ph.read2ByteTxRx(port, 1, a["present_velocity"]))
        seen.append(ok(ph.read2ByteTxRx(port, 1, a["present_position"])))
        return speed & 1024 and (speed & 1023) > 200

    assert poll_until(turning_cw, timeout=10)
    if model == "MX-28":
        # one turn at ~34 rpm takes ~1.8 s: turn until the reading has wrapped (0 -> 4095)
        def wrapped():
            seen.append(ok(ph.read2ByteTxRx(port, 1, a["present_position"])))
            return any(later - earlier > 2048 for earlier, later in zip(seen, seen[1:], strict=False))

        assert poll_until(wrapped, timeout=20)
        assert all(0 <= p <= 4095 for p in seen)
    ok(ph.write2ByteTxRx(port, 1, a["moving_speed"], 300))                              # CCW again
    assert poll_until(lambda: not ok(ph.read2ByteTxRx(port, 1, a["present_velocity"])) & 1024, timeout=10)


def test_mx_multi_turn_mode_goes_beyond_one_turn(virtual_bus, sdk_port, poll_until):
    port = sdk_port(virtual_bus(servos="1:MX-28"))
    ph = dxl.PacketHandler(1.0)
    ok(ph.write2ByteTxRx(port, 1, MX["cw_angle_limit"], 4095))
    ok(ph.write2ByteTxRx(port, 1, MX["ccw_angle_limit"], 4095))        # multi-turn mode
    ok(ph.write1ByteTxRx(port, 1, MX["torque_enable"], 1))
    ok(ph.write2ByteTxRx(port, 1, MX["goal_position"], 4096 + 2048 + 500))
    assert poll_until(lambda: abs(ok(ph.read2ByteTxRx(port, 1, MX["present_position"])) - 6644) < 20, timeout=20)


# ---------------------------------------------------------------- item 3: indirect address
def _indirect_table(tmp_path):
    """XM430-W350's table plus the e-Manual's Indirect Address/Data block, unless it has them already."""
    base = get_table("XM430-W350")
    if "indirect_address_1" in base.registers:
        return base
    with open(base.source) as f:
        doc = yaml.safe_load(f)
    regs = doc["registers"]
    # e-Manual XM430-W350 control table: Indirect Address 1-28 at 168-222 (2 bytes, EEPROM,
    # default 224 + n - 1), Indirect Data 1-28 at 224-251; 29-56 at 578-632 and 634-661
    for first, a0, d0 in ((1, 168, 224), (29, 578, 634)):
        for k in range(28):
            n = first + k
            regs[f"indirect_address_{n}"] = [a0 + 2 * k, 2, "RW", "E", "u", "", 1, 0, d0 + k, 64, 661]
            regs[f"indirect_data_{n}"] = [d0 + k, 1, "RW", "R", "u", "", 1, 0, 0, 0, 255]
    doc["name"] = "XM430-W350-INDIRECT-FIXTURE"
    doc["model_number"] = 61020
    path = tmp_path / "xm430-w350-indirect.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_table(path)


_SERVE_WITH_TABLE = """
import sys
from servoloop.firmware_bridge import control_table
table = control_table.load_table(sys.argv[1])
if table.name not in control_table.MODELS:
    tables = control_table._all_tables() + (table,)
    control_table._all_tables = lambda: tables
from servoloop.cli import main
sys.exit(main(["virtual-bus", "--servos", "1:" + table.name, "--noise-ticks", "0"]))
"""


@pytest.fixture
def indirect_bus(tmp_path):
    """``servoloop virtual-bus`` (a process) over an XM430-W350 table with indirect registers -> pty path."""
    table = _indirect_table(tmp_path)
    path = table.source
    proc = subprocess.Popen([sys.executable, "-c", _SERVE_WITH_TABLE, str(path)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 30.0)
        assert ready, "virtual-bus printed no path"
        line = proc.stdout.readline().decode().strip()
        assert line.startswith("/dev/"), proc.stderr.read().decode()
        yield line
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def test_indirect_address_example(indirect_bus, sdk_port, poll_until):
    """DynamixelSDK ``protocol2_0/indirect_address.py``: LED + Goal Position written, Present Position
    + Moving read back, all through Indirect Data."""
    port = sdk_port(indirect_bus)
    ph = dxl.PacketHandler(2.0)
    w_addr, r_addr, w_data, r_data = 168, 178, 224, 229
    ok(ph.write1ByteTxRx(port, 1, XM["torque_enable"], 0))
    for k in range(4):
        ok(ph.write2ByteTxRx(port, 1, w_addr + 2 * k, XM["goal_position"] + k))
    ok(ph.write2ByteTxRx(port, 1, w_addr + 8, XM["led"]))
    for k in range(4):
        ok(ph.write2ByteTxRx(port, 1, r_addr + 2 * k, XM["present_position"] + k))
    ok(ph.write2ByteTxRx(port, 1, r_addr + 8, XM["moving"]))
    ok(ph.write1ByteTxRx(port, 1, XM["torque_enable"], 1))
    sw = dxl.GroupSyncWrite(port, ph, w_data, 5)
    sr = dxl.GroupSyncRead(port, ph, r_data, 5)
    assert sr.addParam(1)
    for goal, led in ((1000, 1), (3000, 0)):
        assert sw.addParam(1, list(goal.to_bytes(4, "little")) + [led])
        assert sw.txPacket() == dxl.COMM_SUCCESS
        sw.clearParam()
        assert ok(ph.read4ByteTxRx(port, 1, XM["goal_position"])) == goal    # the real registers moved
        assert ok(ph.read1ByteTxRx(port, 1, XM["led"])) == led

        def arrived(goal=goal):
            assert sr.txRxPacket() == dxl.COMM_SUCCESS
            assert sr.isAvailable(1, r_data, 4) and sr.isAvailable(1, r_data + 4, 1)
            return abs(sr.getData(1, r_data, 4) - goal) <= 20 and sr.getData(1, r_data + 4, 1) == 0

        assert poll_until(arrived, timeout=20)
        direct = ok(ph.read4ByteTxRx(port, 1, XM["present_position"]))
        assert abs(ok(ph.read4ByteTxRx(port, 1, r_data)) - direct) <= 2
    # mapped onto a read-only register: writing through Indirect Data is an access error
    assert ph.write1ByteTxRx(port, 1, r_data, 5)[1] == 7
    ok(ph.write1ByteTxRx(port, 1, XM["torque_enable"], 0))


# ---------------------------------------------------------------- item 4: CLEAR
def test_clear_multi_turn_example(virtual_bus, sdk_port, poll_until):
    """DynamixelSDK ``protocol2_0/clear_multi_turn.py``: extended position mode, turn, stop, clear."""
    port = sdk_port(virtual_bus(servos="1:XM430-W350", extra=["--noise-ticks", "0"]))
    ph = dxl.PacketHandler(2.0)
    ok(ph.write1ByteTxRx(port, 1, XM["operating_mode"], 4))
    ok(ph.write1ByteTxRx(port, 1, XM["torque_enable"], 1))
    ok(ph.write4ByteTxRx(port, 1, XM["goal_position"], 1048575))
    assert poll_until(lambda: ok(ph.read4ByteTxRx(port, 1, XM["present_position"])) > 2 * 4096 + 2048,
                      timeout=30)
    assert ph.clearMultiTurn(port, 1)[1] == 1                          # moving: Result Fail
    present = ok(ph.read4ByteTxRx(port, 1, XM["present_position"]))
    ok(ph.write4ByteTxRx(port, 1, XM["goal_position"], present))       # stop where it is

    def stopped():
        return ok(ph.read1ByteTxRx(port, 1, XM["moving"])) == 0 and \
            ok(ph.read4ByteTxRx(port, 1, XM["present_velocity"])) == 0

    assert poll_until(stopped, timeout=10)
    seen = {}

    def clear():
        # a holding servo can ring past its Moving Threshold for a tick after it read stopped;
        # a real one then refuses the clear (Result Fail) too, and the host asks again
        seen["before"] = ok(ph.read4ByteTxRx(port, 1, XM["present_position"]))
        return ph.clearMultiTurn(port, 1) == (dxl.COMM_SUCCESS, 0)

    assert poll_until(clear, timeout=2)
    before = seen["before"]
    assert before > 4095
    after = ok(ph.read4ByteTxRx(port, 1, XM["present_position"]))
    assert 0 <= after <= 4095 and abs(after - before % 4096) <= 2
    # it holds where it is: the goal moved by the same turns
    assert abs(ok(ph.read4ByteTxRx(port, 1, XM["goal_position"])) - present % 4096) <= 2
    assert poll_until(stopped, timeout=5)
    assert abs(ok(ph.read4ByteTxRx(port, 1, XM["present_position"])) - after) <= 4


# ---------------------------------------------------------------- item 5: reboot, baud, flush, backpressure
def test_reboot_answers_then_is_silent_while_booting(virtual_bus, sdk_port, poll_until):
    """DynamixelSDK ``protocol2_0/reboot.py``, then talking to the servo again."""
    port = sdk_port(virtual_bus(servos="1-2:XM430-W350"))
    ph = dxl.PacketHandler(2.0)
    ok(ph.write1ByteTxRx(port, 1, XM["led"], 1))
    ok(ph.reboot(port, 1))
    assert ph.ping(port, 1)[1] == dxl.COMM_RX_TIMEOUT                  # booting
    assert ok(ph.ping(port, 2)) == 1020                                # the other servo is not
    assert poll_until(lambda: ph.ping(port, 1)[1] == dxl.COMM_SUCCESS, timeout=10)
    assert ok(ph.read1ByteTxRx(port, 1, XM["led"])) == 0               # RAM back to defaults


@pytest.mark.parametrize("wire_timing", [False, True])
def test_baud_change_is_answered_at_the_old_rate_then_heard_at_the_new(virtual_bus, sdk_port, wire_timing):
    """SDK style (``factory_reset.py``): write the Baud Rate register, reopen at the new rate at once, ping.

    The WRITE is answered at the old rate, then the servo listens at the new one.
    (A WRITE sent without waiting for its answer and followed by a reopen within
    ~40 us is not replayed: whether the emulator reads it before the reopen is
    a race on the pty, see ``BusEngine.feed_at``.)
    """
    port = sdk_port(virtual_bus(servos="1:XM430-W350", baud=1_000_000, wire_timing=wire_timing))
    ph = dxl.PacketHandler(2.0)
    rates = {3: 1_000_000, 1: 57_600, 4: 2_000_000}
    now = 3
    for raw in (1, 4, 3, 1, 3, 4, 1, 3) * 2:
        if raw == now:
            continue
        # the answer comes at the old rate, before the servo switches
        ok(ph.write1ByteTxRx(port, 1, XM["baud_rate"], raw))
        assert port.setBaudRate(rates[raw])
        assert ok(ph.ping(port, 1)) == 1020, f"lost after {rates[now]} -> {rates[raw]}"
        now = raw


def _summary(proc) -> dict:
    proc.terminate()
    out, _ = proc.communicate(timeout=20)
    return json.loads(out.decode().strip().splitlines()[-1])


def test_host_output_flush_before_every_packet_loses_nothing(virtual_bus_process):
    """pypot flushes the port before every packet: 40 packets, each answered, none lost.

    (A flush that catches an *unanswered* packet still inside the kernel's pty
    buffer loses it before any reader can see it; see the module docstring of
    :mod:`servoloop.virtual_bus.server`.)
    """
    proc, path = virtual_bus_process(servos="1-2:XM430-W350", extra=["--json"])
    c = serial.Serial(path, 1_000_000, timeout=0)
    buf = bytearray()

    def answer():
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            ready, _, _ = select.select([c.fileno()], [], [], 0.05)
            if ready:
                buf.extend(c.read(4096))
            pkt, used = P.parse_packet(buf, 2, status=True) if P.find_header(buf, 2) == 0 else (None, 0)
            if pkt is not None:
                del buf[:used]
                return pkt
        return None

    try:
        for k in range(20):
            c.reset_output_buffer()
            c.write(P.build_instruction(2, 1 + k % 2, 0x03, XM["led"].to_bytes(2, "little") + bytes((k & 1,))))
            assert answer().error == 0
            c.reset_output_buffer()
            c.write(P.build_instruction(2, 1 + k % 2, 0x02, XM["led"].to_bytes(2, "little") + b"\x01\x00"))
            assert answer().params == bytes((k & 1,))
    finally:
        c.close()
    s = _summary(proc)
    assert s["instructions"] == 40 and s["replies"] == 40 and s["malformed"] == 0, s


def test_wire_timing_replies_do_not_pile_up(virtual_bus_process, pty_client):
    """A host that sends faster than the line can answer gets no stale replies long after it stopped."""
    proc, path = virtual_bus_process(servos="1:XM430-W350", baud=57_600, wire_timing=True, extra=["--json"])
    c = pty_client(path, protocol=2, baud=57_600)
    n = 400                 # ~4 ms of line per read at 57.6 kbps: ~1.6 s of replies if all were queued
    for _ in range(n):
        c.send(1, 0x02, XM["present_position"].to_bytes(2, "little") + (4).to_bytes(2, "little"))
    got = 0
    while c.status(timeout=0.5) is not None:
        got += 1
    s = _summary(proc)
    assert s["instructions"] == n
    assert 0 < got < n // 4 and got + s["backlog_dropped"] == n, (got, s)


def test_host_input_flush_is_seen_and_owed_replies_still_come(virtual_bus_process, pty_client):
    # a real servo does not see the host flush its input: the replies it owes still arrive
    # (the host's bus must tell them from fresh ones); the emulator counts the flush
    proc, path = virtual_bus_process(servos="1:XM430-W350", baud=57_600, wire_timing=True, extra=["--json"])
    c = pty_client(path, protocol=2, baud=57_600)
    for _ in range(8):
        c.send(1, 0x02, XM["present_position"].to_bytes(2, "little") + (4).to_bytes(2, "little"))
    assert c.status() is not None                 # the first one came
    c.port.reset_input_buffer()
    c.buf.clear()
    late = c.status()                             # one of the seven still owed
    assert late is not None and len(late.params) == 4
    assert _summary(proc)["host_input_flushes"] > 0


# ---------------------------------------------------------------- item 6: mixed protocols
def test_mixed_protocol_bus_and_protocol_type_switch(virtual_bus, sdk_port, poll_until):
    """DynamixelSDK ``protocol_combined.py``: a Protocol 1.0 and a 2.0 servo on one port."""
    port = sdk_port(virtual_bus(servos="1:AX-18A,2:XM430-W350,3:XM430-W350"))
    ph1, ph2 = dxl.PacketHandler(1.0), dxl.PacketHandler(2.0)
    assert ok(ph1.ping(port, 1)) == 0 or True          # Protocol 1.0 ping carries no model number
    assert ph2.ping(port, 1)[1] == dxl.COMM_RX_TIMEOUT  # the AX ignores Protocol 2.0
    assert ok(ph2.ping(port, 2)) == 1020
    assert ph1.ping(port, 2)[1] == dxl.COMM_RX_TIMEOUT  # the X ignores Protocol 1.0
    ids, comm = ph2.broadcastPing(port)
    assert comm == dxl.COMM_SUCCESS and sorted(ids) == [2, 3]
    ok(ph1.write1ByteTxRx(port, 1, AX["torque_enable"], 1))
    ok(ph2.write1ByteTxRx(port, 2, XM["torque_enable"], 1))
    ok(ph1.write2ByteTxRx(port, 1, AX["goal_position"], 700))
    ok(ph2.write4ByteTxRx(port, 2, XM["goal_position"], 3000))
    assert poll_until(lambda: abs(ok(ph1.read2ByteTxRx(port, 1, AX["present_position"])) - 700) < 10 and
                      abs(ok(ph2.read4ByteTxRx(port, 2, XM["present_position"])) - 3000) < 20, timeout=20)
    # Protocol Type = 1 (EEPROM): answered in 2.0, then the servo speaks 1.0 (as protocol_combined.py's
    # servos are set up), the X control table read and written with 1.0 packets
    ok(ph2.write1ByteTxRx(port, 3, XM["protocol_type"], 1))
    assert ph2.ping(port, 3)[1] == dxl.COMM_RX_TIMEOUT
    ok(ph1.ping(port, 3))
    assert ok(ph1.read1ByteTxRx(port, 3, XM["protocol_type"])) == 1
    ok(ph1.write1ByteTxRx(port, 3, XM["torque_enable"], 1))
    ok(ph1.write4ByteTxRx(port, 3, XM["goal_position"], 1000))
    assert poll_until(lambda: abs(ok(ph1.read4ByteTxRx(port, 3, XM["present_position"])) - 1000) < 20, timeout=20)
    assert ph1.write1ByteTxRx(port, 3, XM["return_delay_time"], 0)[1] == 0x08   # 1.0 error bits
    ids, comm = ph2.broadcastPing(port)
    assert sorted(ids) == [2]
    ok(ph1.write1ByteTxRx(port, 3, XM["torque_enable"], 0))
    ok(ph1.write1ByteTxRx(port, 3, XM["protocol_type"], 2))           # and back
    assert ok(ph2.ping(port, 3)) == 1020
