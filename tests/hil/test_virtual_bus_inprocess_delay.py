"""``delay`` faults on the in-process (lockstep) virtual bus, as on the pty server.

The in-process bus answered a delayed reply at once (it dropped the delay the fault
injector gave it, while ``servoloop virtual-bus`` honoured it): a lockstep run with
``--faults delay:...`` saw no late reply.  Now the reply comes when simulated time has
passed the delay, the other servos are unaffected, and an instruction sent while the
delayed reply is on the wire collides with it, as on a half-duplex bus.
"""

import pytest

from servoloop.firmware_bridge import protocol as P
from servoloop.firmware_bridge.control_table import get_table
from servoloop.firmware_bridge.errors import ChecksumError
from servoloop.virtual_bus import InProcessVirtualBus

pytestmark = pytest.mark.hil

A = {n: r.address for n, r in get_table("XM430-W350").registers.items()}
BAUD = 1_000_000


def _u16(x: int) -> bytes:
    return x.to_bytes(2, "little")


def test_a_delayed_reply_comes_when_simulated_time_has_passed_the_delay(pty_client):
    with InProcessVirtualBus("1-2:XM430-W350", faults="delay:id=2:us=2000") as vb:
        c = pty_client(vb.port, baud=BAUD)
        c.send(2, P.Instruction.PING)
        vb.pump()
        assert c.quiet(0.05)                    # held: no simulated time has passed
        vb.advance(2.1e-3)
        assert c.quiet(0.05)                    # on the wire from 2 ms, 14 bytes at 1 Mbps: not yet
        vb.advance(0.05e-3)
        assert c.status(timeout=1.0).servo_id == 2
        c.send(1, P.Instruction.PING)           # the other servo answers at once
        vb.pump()
        assert c.status(timeout=1.0).servo_id == 1
        assert vb.stats == {"collisions": 0, "delayed": 1}


def test_an_instruction_sent_into_a_delayed_reply_collides(pty_client):
    """The goal write (16 bytes) sent 1.9 ms into a 2 ms delay, at 1 Mbps: it is still on
    the wire when the reply starts: the servo never takes the goal, the reply's CRC fails."""
    with InProcessVirtualBus("1-2:XM430-W350", faults="delay:id=2:us=2000") as vb:
        c = pty_client(vb.port, baud=BAUD)
        c.send(2, P.Instruction.PING)
        vb.pump()
        vb.advance(1.9e-3)
        c.send(1, P.Instruction.WRITE, _u16(A["goal_position"]) + (2500).to_bytes(4, "little"))
        vb.pump()
        vb.advance(0.3e-3)
        with pytest.raises(ChecksumError):
            c.status(timeout=1.0)
        assert vb.stats["collisions"] == 1
        c.buf.clear()                           # the rest of the garbled reply
        assert c.quiet(0.05)                    # the write was never heard: no status for it
        servo1 = next(s for s in vb.engine.servos if s.bus_id0 == 1)
        assert int.from_bytes(bytes(servo1.mem[A["goal_position"]:A["goal_position"] + 4]), "little") != 2500


def test_an_instruction_before_the_delayed_reply_goes_on_the_wire_is_answered_after_it(pty_client):
    """Sent 1 ms into the delay, the write ends long before the reply starts: no collision;
    its status follows the delayed reply (the line carries one reply at a time)."""
    with InProcessVirtualBus("1-2:XM430-W350", faults="delay:id=2:us=2000") as vb:
        c = pty_client(vb.port, baud=BAUD)
        c.send(2, P.Instruction.PING)
        vb.pump()
        vb.advance(1e-3)
        c.send(1, P.Instruction.WRITE, _u16(A["goal_position"]) + (2500).to_bytes(4, "little"))
        vb.pump()
        assert c.quiet(0.05)
        vb.advance(1.2e-3)
        assert c.status(timeout=1.0).servo_id == 2
        assert c.quiet(0.05)                    # the write's status is behind it: 2.14-2.25 ms
        vb.advance(0.1e-3)
        assert c.status(timeout=1.0).servo_id == 1
        assert vb.stats["collisions"] == 0
        servo1 = next(s for s in vb.engine.servos if s.bus_id0 == 1)
        assert int.from_bytes(bytes(servo1.mem[A["goal_position"]:A["goal_position"] + 4]), "little") == 2500
