"""The AX / MX (Protocol 1.0) Lock register, with dynamixel_sdk as the client.

e-Manual AX-12A, "Lock" (47; the MX-28 1.0 page says the same): once it is 1 only
addresses 24-35 (Torque Enable to Torque Limit) take a WRITE, and only turning the
power off unlocks it.  A user's script that locks its servos (a robot shipped to a
classroom) must see the emulator refuse what the servo refuses: before, the virtual
bus kept Lock as a plain register, took every write and let 0 unlock it.
"""

from __future__ import annotations

import dynamixel_sdk as dxl
import pytest

from servoloop.firmware_bridge.control_table import get_table
from tests.hil.sdk_helpers import TxRxFailed, ok

pytestmark = pytest.mark.hil

RANGE_ERROR = 0x08          # Protocol 1.0 status error bit 3: what a locked DX-116 answers a
                            # write to Punch with (its manual's example of Lock)


@pytest.mark.parametrize("model", ["AX-12A", "MX-28"])
def test_lock_leaves_only_torque_enable_to_torque_limit_writable_until_power_off(
        virtual_bus, sdk_port, poll_until, model):
    a = {n: r.address for n, r in get_table(model).registers.items()}
    assert (a["lock"], a["torque_enable"], a["torque_limit"]) == (47, 24, 34)
    port = sdk_port(virtual_bus(servos=f"1:{model}", faults="powercycle:at=6.0:down=0.2"))
    ph = dxl.PacketHandler(1.0)

    ok(ph.write1ByteTxRx(port, 1, a["return_delay_time"], 10))      # unlocked: EEPROM takes it
    ok(ph.write1ByteTxRx(port, 1, a["lock"], 1))
    assert ok(ph.read1ByteTxRx(port, 1, a["lock"])) == 1

    refused = [("return_delay_time", 1, 20),          # EEPROM, torque off
               ("punch", 2, 40),                      # RAM past Torque Limit
               ("lock", 1, 0)]                        # Lock cannot undo itself
    for name, size, value in refused:
        write = ph.write1ByteTxRx if size == 1 else ph.write2ByteTxRx
        with pytest.raises(TxRxFailed) as exc:
            ok(write(port, 1, a[name], value))
        assert exc.value.comm == dxl.COMM_SUCCESS and exc.value.err == RANGE_ERROR, name
    assert ok(ph.read1ByteTxRx(port, 1, a["return_delay_time"])) == 10
    assert ok(ph.read1ByteTxRx(port, 1, a["lock"])) == 1

    # what a locked servo is still driven by
    ok(ph.write1ByteTxRx(port, 1, a["torque_enable"], 1))
    ok(ph.write2ByteTxRx(port, 1, a["goal_position"], 600))
    ok(ph.write2ByteTxRx(port, 1, a["torque_limit"], 800))
    assert ok(ph.read2ByteTxRx(port, 1, a["torque_limit"])) == 800
    ok(ph.write1ByteTxRx(port, 1, a["torque_enable"], 0))

    def unlocked():
        lock, comm, err = ph.read1ByteTxRx(port, 1, a["lock"])
        return comm == dxl.COMM_SUCCESS and err == 0 and lock == 0

    assert poll_until(unlocked, timeout=15.0)          # the power cycle at 6 s
    ok(ph.write1ByteTxRx(port, 1, a["return_delay_time"], 20))
    assert ok(ph.read1ByteTxRx(port, 1, a["return_delay_time"])) == 20
