"""An IMU board on the virtual bus (the OP3's OpenCR at ID 200), fed by the plant's base.

It answers PING, READ, WRITE, SYNC READ and BULK READ (Protocol 2.0) as the
OpenCR OP3 firmware does (no REBOOT, no fast sync/bulk read: that firmware
has neither), from a control-table image whose gyro, accelerometer and
roll/pitch/yaw registers are refreshed from the plant before each read:

- gyro: the base's angular velocity in the board's axes, + bias + noise;
- accelerometer: the specific force in the board's axes, ``R^T (a - g)``
  (reads +9.81 m/s^2 up at rest), + bias + noise;
- roll/pitch/yaw: the board's own orientation (ZYX) in the world, + noise;

each quantised to its register (0.061 deg/s, 0.6 mm/s^2, 0.1 deg) and
clamped to int16 (the accelerometer saturates at +-2 g, as the OP3's
conversion factor says it does).  The board sits on the base link turned by
``rotation_rpy``.  Noise is white per read, drawn from its own seeded
generator, so lockstep runs stay bit-reproducible.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from servoloop.firmware_bridge.control_table import baud_to_raw
from servoloop.firmware_bridge.imu import IMU_REGISTERS, get_imu_table
from servoloop.virtual_bus.memory import ERR

__all__ = ["ImuEmulation", "VirtualImu", "rpy_matrix", "matrix_rpy"]

_P2_CODES = {ERR.RESULT_FAIL: 0x01, ERR.INSTRUCTION: 0x02, ERR.CRC: 0x03, ERR.RANGE: 0x04,
             ERR.LENGTH: 0x05, ERR.LIMIT: 0x06, ERR.ACCESS: 0x07, ERR.ANGLE_LIMIT: 0x06}
GRAVITY = np.array([0.0, 0.0, -9.81])


def rpy_matrix(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """(3, 3) rotation Rz(yaw) Ry(pitch) Rx(roll)."""
    cr, sr, cp, sp, cy, sy = (math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch),
                              math.cos(yaw), math.sin(yaw))
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def matrix_rpy(R: np.ndarray) -> tuple[float, float, float]:
    """(roll, pitch, yaw) [rad] of a rotation, ZYX as :func:`rpy_matrix`."""
    pitch = math.asin(max(-1.0, min(1.0, -R[2, 0])))
    return math.atan2(R[2, 1], R[2, 2]), pitch, math.atan2(R[1, 0], R[0, 0])


@dataclass(frozen=True)
class ImuEmulation:
    """What the emulated board is and how imperfect.

    Attributes
    ----------
    id : bus id (OP3: 200)
    model : IMU board name (:func:`firmware_bridge.imu.get_imu_table`)
    rotation_rpy : (3,) rad, the board's axes in the base frame (roll, pitch, yaw)
    gyro_bias : (3,) rad/s, added to every gyro reading
    gyro_noise : rad/s, standard deviation per reading and axis
    accel_bias : (3,) m/s^2
    accel_noise : m/s^2, standard deviation per reading and axis
    rpy_noise : rad, standard deviation of the orientation registers
    seed : noise generator seed
    """

    id: int = 200
    model: str = "OpenCR"
    rotation_rpy: tuple = (0.0, 0.0, 0.0)
    gyro_bias: tuple = (0.0, 0.0, 0.0)
    gyro_noise: float = 0.0
    accel_bias: tuple = (0.0, 0.0, 0.0)
    accel_noise: float = 0.0
    rpy_noise: float = 0.0
    seed: int = 1

    @classmethod
    def from_config(cls, imu) -> ImuEmulation:
        """From a config's ``imu:`` section (:class:`controller.config.ImuConfig`)."""
        return cls(id=imu.id, model=imu.model, rotation_rpy=tuple(imu.rotation_rpy),
                   gyro_bias=tuple(imu.gyro_bias), gyro_noise=imu.gyro_noise,
                   accel_bias=tuple(imu.accel_bias), accel_noise=imu.accel_noise,
                   rpy_noise=imu.rpy_noise)


_LEVEL = (np.eye(3), np.zeros(3), np.zeros(3))


def _level():
    """A base that neither turns nor moves (plants without a floating base)."""
    return _LEVEL


class _Info:
    """The few facts about the board's table the Protocol 2.0 handlers look up."""

    def __init__(self, table):
        self.table, self.name, self.protocol = table, table.name, table.protocol
        self.reg = table.registers
        self.size = table.size
        self.codes = _P2_CODES
        self.ind_span = None
        self.a_regd = None          # no Registered Instruction register
        self.fast_read = False      # the OP3 firmware has no fast sync/bulk read
        self.reboot = False         # nor REBOOT
        self.a_id, self.a_baud = table["id"].address, table["baud_rate"].address
        self.a_rdt, self.a_srl = table["return_delay_time"].address, table["status_return_level"].address
        self.defaults = bytearray(self.size)
        for r in table.registers.values():
            if r.default is not None:
                self.defaults[r.address:r.address + r.size] = int(r.default).to_bytes(r.size, "little",
                                                                                       signed=r.signed)


class VirtualImu:
    """The board on a :class:`~virtual_bus.engine.BusEngine` (duck-typed like a servo for the
    Protocol 2.0 handlers).

    Parameters
    ----------
    spec : ImuEmulation
    plant : a plant with ``base_motion()`` (:class:`~virtual_bus.robot_plant.RobotPlant`); any
        other plant: the board lies level and still (it reads gravity, bias and noise only)
    baud : int or None, the bus's rate (its Baud Rate register)
    """

    protocol = 2

    def __init__(self, spec: ImuEmulation, plant, baud: int | None = None) -> None:
        table = get_imu_table(spec.model)
        self.spec = spec
        # a plant without a floating base (one load per servo): the board lies level and still
        self._motion = getattr(plant, "base_motion", None) or _level
        self.info = _Info(table)
        self.mem = bytearray(self.info.defaults)
        self.mem[self.info.a_id] = spec.id
        if baud is not None:
            self.mem[self.info.a_baud] = baud_to_raw(table, baud)
        # not a target of --faults (they name servos; a device's replies stay clean, so a fault
        # run draws the same random sequence with or without the board on the bus)
        self.bus_id0 = None
        self.vanished = self.unpowered = False
        self.booting_until = -1.0
        self.last_rx_s = 0.0
        self.registered = None
        self.reads = 0
        self._mount = rpy_matrix(*spec.rotation_rpy)       # board axes -> base frame
        self._rng = np.random.default_rng(spec.seed)
        self._regs = [table[n] for n in IMU_REGISTERS]
        self._gyro_bias = np.asarray(spec.gyro_bias, dtype=float)
        self._accel_bias = np.asarray(spec.accel_bias, dtype=float)
        self._t = None

    # identity, as the engine and handlers see a servo
    @property
    def id(self) -> int:
        return self.mem[self.info.a_id]

    @property
    def baud_raw(self) -> int:
        return self.mem[self.info.a_baud]

    @property
    def status_return_level(self) -> int:
        return self.mem[self.info.a_srl]

    @property
    def return_delay_s(self) -> float:
        return self.mem[self.info.a_rdt] * 2e-6

    def status_bits(self, err: int) -> int:
        return self.info.codes[err] if err else 0

    def boot(self) -> None:
        """Power-on: RAM back to defaults (the OP3 firmware keeps EEPROM)."""

    def factory_reset(self, option: int) -> None:
        """The OP3 firmware has no FACTORY RESET instruction handler: nothing changes."""

    # the values
    def refresh(self, time_s: float) -> None:
        """Write gyro, accelerometer and orientation registers from the plant (once per time)."""
        if self._t == time_s:
            return
        self._t = time_s
        R_wb, omega_b, acc_w = self._motion()
        M = self._mount
        R_wi = R_wb @ M
        gyro = M.T @ omega_b + self._gyro_bias
        accel = R_wi.T @ (acc_w - GRAVITY) + self._accel_bias
        rpy = np.array(matrix_rpy(R_wi))
        s = self.spec
        rng = self._rng
        if s.gyro_noise > 0:
            gyro += rng.standard_normal(3) * s.gyro_noise
        if s.accel_noise > 0:
            accel += rng.standard_normal(3) * s.accel_noise
        if s.rpy_noise > 0:
            rpy += rng.standard_normal(3) * s.rpy_noise
        mem = self.mem
        for k, value in enumerate((*gyro, *accel, *rpy)):
            r = self._regs[k]
            raw = int(round(value / r.scale)) + r.zero_raw
            raw = -32768 if raw < -32768 else 32767 if raw > 32767 else raw
            mem[r.address:r.address + 2] = raw.to_bytes(2, "little", signed=True)

    # the instructions
    def read(self, address: int, length: int):
        """(error kind, bytes or None) for a READ of ``length`` bytes at ``address``."""
        if address + length > self.info.size or length <= 0:
            return ERR.ACCESS, None
        self.reads += 1
        return ERR.OK, bytes(self.mem[address:address + length])

    def write(self, address: int, data) -> int:
        """A WRITE: only whole writable registers (the firmware skips read-only bytes; refusing
        them says so to the host)."""
        end = address + len(data)
        if end > self.info.size or not data:
            return ERR.ACCESS
        for a in range(address, end):
            r = self.info.table.at(a) or next((x for x in self.info.reg.values()
                                               if x.address <= a < x.address + x.size), None)
            if r is None or not r.writable:
                return ERR.ACCESS
        self.mem[address:end] = bytes(data)
        return ERR.OK
