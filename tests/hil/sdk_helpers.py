"""dynamixel_sdk as a client in the HIL tests: check a call's result."""

import dynamixel_sdk as dxl

__all__ = ["ok"]


def ok(result):
    *value, comm, err = result if isinstance(result, tuple) and len(result) == 3 else (None, *result)
    assert comm == dxl.COMM_SUCCESS and err == 0, f"comm={comm} err={err}"
    return value[0] if value else None
