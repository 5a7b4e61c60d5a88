"""IMU boards on the servo bus: their control tables and the per-tick read.

A Dynamixel robot's IMU usually sits on the servos' own bus as one more
device: the ROBOTIS OP3's OpenCR board answers at ID 200 (Protocol 2.0) with
gyro, accelerometer and orientation registers in its control table
(``devices/opencr.yaml``, sources in the file).  Device tables live apart
from the servo tables (``tables/``): a board has no goal position, no motor
and no datasheet, and the servo listing (``servoloop models``) stays servos.

>>> reader = ImuReader(bus, 200, get_imu_table("OpenCR"))   # bus open
>>> reader.connect()          # ping, model number check, return delay
>>> reader.bind()             # the preallocated sync read
>>> reader.read()             # one SYNC READ of 18 bytes, GIL released on the wire

Or, on a Protocol 2.0 bus, in the servos' own transaction: ``reader.attach(part)``
with the board's :class:`~firmware_bridge.bulk.BulkPart` of a
:class:`~firmware_bridge.bulk.BulkReader`; :meth:`ImuReader.read` then only
takes the values that read brought (call it after the bulk read).
>>> reader.gyro, reader.accel, reader.rpy     # (3,) rad/s, m/s^2, rad in the board's axes

The board's registers are in its own axes; turning them into the robot's
base frame (the mounting rotation) is the estimator's business.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np

from servoloop.firmware_bridge.control_table import ControlTable, load_table
from servoloop.firmware_bridge.errors import ModelMismatchError, UnknownModelError

__all__ = ["DEVICE_DIR", "IMU_REGISTERS", "ImuReader", "get_imu_table", "imu_model_name", "imu_models"]

DEVICE_DIR = Path(__file__).with_name("devices")
#: what an IMU table must have, in the order of one contiguous block on the OpenCR
IMU_REGISTERS = ("gyro_x", "gyro_y", "gyro_z", "acc_x", "acc_y", "acc_z", "roll", "pitch", "yaw")


@cache
def _device_tables() -> tuple[ControlTable, ...]:
    return tuple(load_table(p) for p in sorted(DEVICE_DIR.glob("*.yaml")))


def imu_models() -> list[str]:
    """Names of the IMU boards with a control table."""
    return [t.name for t in _device_tables()]


def get_imu_table(model: str) -> ControlTable:
    """The control table of IMU board ``model`` (name or alias, any case).

    Raises
    ------
    UnknownModelError
        Naming the model and the known boards.
    """
    key = str(model).upper().replace("_", "-").replace(" ", "")
    for t in _device_tables():
        if key in {n.upper() for n in (t.name, *t.aliases)}:
            return t
    raise UnknownModelError(f"no IMU board {model!r}; known: {', '.join(imu_models())}")


def imu_model_name(model_number: int) -> str | None:
    """The IMU board with this model number (as a ping reports it), or None."""
    return next((t.name for t in _device_tables() if t.model_number == model_number), None)


class ImuReader:
    """The IMU board at ``imu_id``: connect check and one sync read per tick.

    Parameters
    ----------
    bus : firmware_bridge.bus.Bus (the servos' bus; the board is added to it)
    imu_id : int
    table : ControlTable, from :func:`get_imu_table`

    Attributes
    ----------
    gyro : (3,) rad/s, angular velocity in the board's axes
    accel : (3,) m/s^2, specific force (reads +g upward at rest) in the board's axes
    rpy : (3,) rad, the board's own orientation estimate (roll, pitch, yaw; ZYX)
    """

    def __init__(self, bus, imu_id: int, table: ControlTable) -> None:
        missing = [r for r in IMU_REGISTERS if r not in table]
        if missing:
            raise ValueError(f"{table.name} ({table.source}) lacks IMU registers {missing}")
        bus.add_device(imu_id, table)
        self.bus, self.id, self.table = bus, imu_id, table
        self.gyro = np.full(3, np.nan)
        self.accel = np.full(3, np.nan)
        self.rpy = np.full(3, np.nan)
        self._reader = None
        self._shared = False
        self._src: tuple = ()

    def connect(self) -> dict:
        """Ping the board, check its model number, read its return delay.

        Raises
        ------
        ModelMismatchError
            Something else answers at the id.
        BridgeError
            No answer (BusTimeoutError names the id).
        """
        number, firmware = self.bus.ping_info(self.id)
        if number != self.table.model_number:
            raise ModelMismatchError(
                f"IMU id {self.id} on {self.bus.port}: expected {self.table.name} (model number "
                f"{self.table.model_number}), found model number {number}")
        rdt = self.bus.read_raw(self.id, "return_delay_time")
        self.bus.return_delay_s[self.id] = rdt * 2e-6
        return {"id": self.id, "model": self.table.name, "model_number": number, "firmware": firmware,
                "return_delay_time_raw": rdt}

    def bind(self) -> None:
        """Make the preallocated sync read of :data:`IMU_REGISTERS` (the bus is open)."""
        self._reader = self.bus.sync_reader(list(IMU_REGISTERS), ids=[self.id], plausibility=False)
        v = self._reader.values
        self._src = tuple(v[n] for n in IMU_REGISTERS)

    def attach(self, part) -> None:
        """Take the board's values from ``part`` (its share of the servos' bulk read) instead
        of a read of its own."""
        self._reader = part
        self._shared = True
        v = part.values
        self._src = tuple(v[n] for n in IMU_REGISTERS)

    @property
    def shared(self) -> bool:
        """True when the board is read in the servos' bulk read (:meth:`attach`)."""
        return self._shared

    def read(self) -> None:
        """One sync read (attached: this tick's bulk read's values, no bus traffic); fills
        :attr:`gyro`, :attr:`accel`, :attr:`rpy` (NaN when it failed).

        Raises
        ------
        BridgeError
            The read failed (the arrays then hold NaN, never the last good value).
        """
        try:
            if self._shared:
                self._reader.check()
            else:
                self._reader.read()
        finally:
            s = self._src
            g, a, r = self.gyro, self.accel, self.rpy
            g[0], g[1], g[2] = s[0][0], s[1][0], s[2][0]
            a[0], a[1], a[2] = s[3][0], s[4][0], s[5][0]
            r[0], r[1], r[2] = s[6][0], s[7][0], s[8][0]
