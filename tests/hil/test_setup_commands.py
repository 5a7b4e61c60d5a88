"""``servoloop setup`` against the virtual bus on a pty, as a user runs it on new servos."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.hil


def setup(*args):
    r = subprocess.run([sys.executable, "-m", "servoloop", "setup", *args], capture_output=True,
                       text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


def test_id_change_refuses_a_taken_id_then_moves_the_servo(virtual_bus):
    port = virtual_bus(servos="1:XM430-W350,2:XM430-W350", baud=57600)
    common = ["--port", port, "--baud", "57600"]
    rc, out, err = setup("id", *common, "--id", "1", "--new-id", "2")
    assert rc == 2 and "ID 2 is already taken" in err
    rc, out, err = setup("id", *common, "--id", "1", "--new-id", "2", "--alone")
    assert rc == 2 and "exactly one servo" in err
    rc, out, err = setup("id", *common, "--id", "1", "--new-id", "7", "--json")
    assert rc == 0, err
    assert json.loads(out) == {"id": 7, "model": "XM430-W350", "model_number": 1020, "firmware": 48,
                               "old_id": 1}
    rc, out, err = setup("read", *common, "--id", "7", "id", "--json")
    assert rc == 0 and json.loads(out)["raw"] == 7
    rc, out, err = setup("read", *common, "--id", "1", "id")
    assert rc == 3 and "servo 1" in err                     # nobody at the old ID


def test_baud_change_is_checked_at_the_new_rate(virtual_bus):
    port = virtual_bus(servos="1:XM430-W350", baud=57600)
    rc, out, err = setup("baud", "--port", port, "--baud", "57600", "--id", "1", "--new-baud",
                         "1000000", "--json")
    assert rc == 0, err
    assert json.loads(out)["verified"] is True
    rc, out, err = setup("read", "--port", port, "--baud", "1000000", "--id", "1", "baud_rate", "--json")
    assert rc == 0 and json.loads(out)["raw"] == 3          # 1 Mbps (e-Manual Baud Rate table)
    rc, out, err = setup("baud", "--port", port, "--baud", "1000000", "--id", "1", "--new-baud", "12345")
    assert rc == 2 and "12345" in err


def test_write_read_reboot_reset_and_bad_names(virtual_bus):
    port = virtual_bus(servos="3:AX-18A", protocol=1)
    common = ["--port", port, "--baud", "1000000", "--protocol", "1", "--id", "3"]
    rc, out, err = setup("write", *common, "return_delay_time", "0", "--raw", "--json")
    assert rc == 0 and json.loads(out)["raw"] == 0, err
    rc, out, err = setup("read", *common, "no_such_register")
    assert rc == 2 and "no register 'no_such_register'" in err and "present_position" in err
    rc, out, err = setup("write", *common, "torque_enable", "1", "--raw")
    assert rc == 0, err
    rc, out, err = setup("write", *common, "cw_angle_limit", "0", "--raw")   # EEPROM with torque on
    assert rc == 2 and "torque on" in err
    rc, out, err = setup("reset", *common)
    assert rc == 2 and "--yes" in err
    rc, out, err = setup("reset", *common, "--yes", "--json")
    assert rc == 0, err
    assert json.loads(out)["now_id"] == 1                   # Protocol 1.0 resets the ID too
    common[common.index("--id") + 1] = "1"
    rc, out, err = setup("read", *common, "return_delay_time", "--json")
    assert rc == 0 and json.loads(out)["raw"] == 250        # factory default again
