"""dynamixel_sdk as a client in the HIL tests: check a call's result."""

import dynamixel_sdk as dxl

__all__ = ["ok", "TxRxFailed"]


class TxRxFailed(AssertionError):
    """An SDK call that did not succeed; ``comm`` is its COMM_* result, ``err`` the status error."""

    def __init__(self, comm: int, err: int) -> None:
        super().__init__(f"comm={comm} err={err}")
        self.comm, self.err = comm, err


def ok(result):
    *value, comm, err = result if isinstance(result, tuple) and len(result) == 3 else (None, *result)
    if not (comm == dxl.COMM_SUCCESS and err == 0):
        raise TxRxFailed(comm, err)
    return value[0] if value else None
