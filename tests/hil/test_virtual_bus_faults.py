"""Every injected fault kind is observable from the host side of the pty."""

import os
import time

import pytest

from servoloop.firmware_bridge import protocol as P
from servoloop.firmware_bridge.control_table import get_table
from servoloop.firmware_bridge.errors import ChecksumError

pytestmark = pytest.mark.hil

A = {n: r.address for n, r in get_table("XM430-W350").registers.items()}


def u16(x):
    return x.to_bytes(2, "little")


def test_drop_only_the_named_servo(virtual_bus, pty_client):
    c = pty_client(virtual_bus(servos="1-2:XM430-W350", faults="drop:id=2"))
    assert c.txrx(1, P.Instruction.PING) is not None
    c.send(2, P.Instruction.PING)
    assert c.quiet()


def test_drop_probability_is_a_fraction(virtual_bus, pty_client):
    c = pty_client(virtual_bus(servos="1:XM430-W350", faults="drop:p=0.5", extra=["--seed", "3"]))
    answered = sum(c.txrx(1, P.Instruction.PING, timeout=0.1) is not None for _ in range(40))
    assert 5 < answered < 35


def test_corrupt_gives_a_bad_crc(virtual_bus, pty_client):
    c = pty_client(virtual_bus(servos="1:XM430-W350", faults="corrupt:p=1"))
    crc_errors = good = 0
    for _ in range(8):
        c.read_bytes(4096, timeout=0.05)          # drop what is left of the previous reply
        c.buf.clear()
        c.send(1, P.Instruction.READ, u16(A["model_number"]) + u16(2))
        try:
            pkt = c.status(timeout=0.3)
        except ChecksumError:
            crc_errors += 1
            continue
        except Exception:     # a flipped header or length byte: malformed, also never a value
            continue
        good += pkt is not None and pkt.error == 0 and pkt.params == (1020).to_bytes(2, "little")
    assert good == 0 and crc_errors >= 1


def test_delay_holds_the_reply_back(virtual_bus, pty_client):
    c = pty_client(virtual_bus(servos="1-2:XM430-W350", faults="delay:id=2:us=80000"))
    c.send(2, P.Instruction.PING)
    assert c.quiet(0.03)                         # not yet, well before 80 ms
    assert c.status(timeout=2.0).servo_id == 2   # but it comes
    t = time.monotonic()
    assert c.txrx(1, P.Instruction.PING) is not None
    assert time.monotonic() - t < 2.0            # other servos unaffected


def test_hardware_error_sets_alert_and_turns_torque_off(virtual_bus, pty_client, poll_until):
    c = pty_client(virtual_bus(servos="1-2:XM430-W350", faults="hwerror:id=2:bits=overload:at=0.3"))
    assert c.write(2, A["torque_enable"], b"\x01").error == 0
    pkt = poll_until(lambda: (lambda p: p if p.error & 0x80 else None)(c.read(2, A["hardware_error_status"], 1)))
    assert pkt is not None and pkt.params == b"\x20"
    assert c.read_int(2, A["torque_enable"], 1) == 0
    assert c.write(2, A["torque_enable"], b"\x01").error & 0x80
    assert c.read_int(2, A["torque_enable"], 1) == 0          # stays off until reboot
    assert c.txrx(2, P.Instruction.REBOOT).error == 0x80      # answered before restarting
    assert poll_until(lambda: c.txrx(2, P.Instruction.PING, timeout=0.1))   # silent while it boots
    assert c.read(2, A["hardware_error_status"], 1).error == 0
    assert c.read(1, A["hardware_error_status"], 1).error == 0


def test_vanish_and_return(virtual_bus, pty_client, poll_until):
    c = pty_client(virtual_bus(servos="1-2:XM430-W350", faults="vanish:id=1:at=0.2:until=0.8"))
    assert poll_until(lambda: c.txrx(1, P.Instruction.PING, timeout=0.05) is None, timeout=5)
    assert c.txrx(2, P.Instruction.PING) is not None
    assert poll_until(lambda: c.txrx(1, P.Instruction.PING, timeout=0.05) is not None, timeout=5)


def test_power_cycle_resets_ram(virtual_bus, pty_client, poll_until):
    c = pty_client(virtual_bus(servos="1:XM430-W350", faults="powercycle:at=0.4:down=0.2"))
    assert c.write(1, A["torque_enable"], b"\x01").error == 0
    assert c.write(1, A["led"], b"\x01").error == 0
    # silent while unpowered, then back with RAM at defaults
    assert poll_until(lambda: c.txrx(1, P.Instruction.PING, timeout=0.05) is None, timeout=5)
    assert poll_until(lambda: c.txrx(1, P.Instruction.PING, timeout=0.05) is not None, timeout=5)
    assert c.read_int(1, A["torque_enable"], 1) == 0
    assert c.read_int(1, A["led"], 1) == 0


def test_unplug_closes_the_port(virtual_bus, pty_client, poll_until):
    c = pty_client(virtual_bus(servos="1:XM430-W350", faults="unplug:at=0.3"))
    assert c.txrx(1, P.Instruction.PING) is not None

    def gone():
        try:
            os.write(c.fd, P.build_instruction(2, 1, P.Instruction.PING))
            ready = c.read_bytes(1, timeout=0.05)
            return False if ready else None
        except OSError:
            return True

    assert poll_until(gone, timeout=5) is True
