"""Changing a servo's ID with dynamixel_sdk, as LeRobot's ``setup_motor`` and the SDK examples do.

A real servo answers the WRITE to its ID register from the ID the
instruction was addressed to, then listens on the new one; the SDK (and
LeRobot, rustypot, ``dynamixel``) reject a status packet from any other ID.
"""

import dynamixel_sdk as dxl
import pytest

from servoloop.firmware_bridge.control_table import get_table

pytestmark = pytest.mark.hil


@pytest.mark.parametrize(("protocol", "model"), [(2.0, "XM430-W350"), (1.0, "AX-18A")])
def test_id_change_is_answered_from_the_old_id(virtual_bus, protocol, model):
    id_addr = get_table(model).registers["id"].address
    port = dxl.PortHandler(virtual_bus(servos=f"1:{model},2:{model}"))
    assert port.openPort() and port.setBaudRate(1_000_000)
    try:
        ph = dxl.PacketHandler(protocol)
        comm, err = ph.write1ByteTxRx(port, 1, id_addr, 7)
        assert (comm, err) == (dxl.COMM_SUCCESS, 0), ph.getTxRxResult(comm)
        _, comm, _ = ph.ping(port, 7)
        assert comm == dxl.COMM_SUCCESS
        _, comm, _ = ph.ping(port, 1)
        assert comm == dxl.COMM_RX_TIMEOUT          # nobody answers at the old ID any more
        value, comm, err = ph.read1ByteTxRx(port, 7, id_addr)
        assert (value, comm, err) == (7, dxl.COMM_SUCCESS, 0)
    finally:
        port.closePort()
