"""The tick's two bus stages (one group read, one group write) and the slow monitor read.

Each stage is built before the loop and bound to the open bus at connect
(:meth:`bind`); a tick then only calls :meth:`run` / :meth:`send`, which
work on arrays the bus readers and writers own, in place.

Errors: a port error (adapter unplugged) is a fault on the tick that sees
it; any other bus error is counted by kind (:class:`BusErrorCounts`) and
makes the tick's read or write count as failed (the safety stage's comm
window decides when that is a fault); a servo status error also goes to the
:class:`~servoloop.controller.servo_faults.ServoFaultHandler`.
"""

from __future__ import annotations

import numpy as np

from servoloop.controller.bus_io import BusErrorCounts, JointReader
from servoloop.controller.faults import Fault, FaultKind, FaultRaised
from servoloop.firmware_bridge.errors import (
    BridgeError,
    HardwareErrorStatus,
    PortError,
    ServoStatusError,
)

__all__ = ["ReadStage", "WriteStage", "MonitorStage"]


def _has_status_error(exc: BridgeError) -> bool:
    return isinstance(exc, ServoStatusError) or any(
        isinstance(e, ServoStatusError) for e in (getattr(exc, "failures", None) or {}).values())


class ReadStage:
    """One sync read of position, velocity and effort of every servo (SI, config order).

    Parameters
    ----------
    errors : BusErrorCounts, shared with the other stages
    servo_faults : ServoFaultHandler
    """

    def __init__(self, errors: BusErrorCounts, servo_faults) -> None:
        self.errors = errors
        self.servo_faults = servo_faults
        self.reader: JointReader | None = None
        self.failed = np.zeros(0, dtype=bool)
        self.disabled = np.zeros(0, dtype=bool)
        self._index: dict = {}

    def bind(self, bus, ids, tables) -> JointReader:
        """Make the group reader; returns it (``values`` holds the (n,) arrays read each tick)."""
        self.reader = JointReader(bus, ids, tables, ["present_position", "present_velocity"], effort=True)
        n = len(ids)
        self.failed = np.zeros(n, dtype=bool)
        if self.disabled.shape[0] != n:
            self.disabled = np.zeros(n, dtype=bool)
        self._index = {sid: i for i, sid in enumerate(ids)}
        return self.reader

    def _mark_failed(self, exc: BridgeError) -> bool:
        """Fill :attr:`failed` from ``exc``; True when only disabled servos failed."""
        failed = self.failed
        ids = getattr(exc, "failed_ids", None) or tuple(getattr(exc, "failures", None) or ())
        sid = getattr(exc, "servo_id", None)
        if not ids and sid is not None:
            ids = (sid,)
        if not ids:
            failed[:] = True
            return False
        only_disabled = True
        for sid in ids:
            i = self._index.get(sid)
            if i is None:
                continue
            failed[i] = True
            only_disabled = only_disabled and bool(self.disabled[i])
        return only_disabled

    def run(self) -> bool:
        """Read every servo; False when some read failed (those servos read NaN, :attr:`failed`
        marks them).  Failures of servos turned off by ``disable_servo`` do not count.

        Raises
        ------
        FaultRaised
            The port is gone, or a servo's hardware error is a fault (see ServoFaultHandler).
        """
        if self.failed.any():
            self.failed[:] = False
        try:
            self.reader.read()
            return True
        except PortError as exc:
            self.errors.count(exc)
            self.failed[:] = True
            raise FaultRaised(Fault(FaultKind.PORT, f"bus port error: {exc}")) from exc
        except BridgeError as exc:
            only_disabled = self._mark_failed(exc)
            if only_disabled:
                return True  # a disabled servo keeps reporting its latched error: expected
            self.errors.count(exc)
            if _has_status_error(exc):
                self.servo_faults.handle(exc)
            return False


class WriteStage:
    """One sync write of goal positions (position servos) and goal currents (current servos).

    Parameters
    ----------
    goal_servo : (n,) rad, servo goals, filled by the joint map each tick
    current_servo : (n,) A, servo goal currents, filled by the joint map
    errors : BusErrorCounts
    """

    def __init__(self, goal_servo: np.ndarray, current_servo: np.ndarray, errors: BusErrorCounts) -> None:
        self.goal_servo = goal_servo
        self.current_servo = current_servo
        self.errors = errors
        self.pos_writer = None
        self.cur_writer = None

    def bind(self, bus, servos) -> None:
        """Make the writers for the config's ``servos`` (position and current-mode ones)."""
        n = len(servos)
        pos = [i for i, s in enumerate(servos) if s.mode != "current"]
        cur = [i for i, s in enumerate(servos) if s.mode == "current"]
        self._pos_index = np.array(pos, dtype=np.intp)
        self._cur_index = np.array(cur, dtype=np.intp)
        self._pos_buf = np.zeros(len(pos))
        self._cur_buf = np.zeros(len(cur))
        self.pos_writer = self._writer(bus, "goal_position", [servos[i].id for i in pos], n) if pos else None
        self.cur_writer = self._writer(bus, "goal_current", [servos[i].id for i in cur], n) if cur else None

    @staticmethod
    def _writer(bus, register: str, ids: list[int], n: int):
        if len(ids) == n:
            return bus.sync_writer(register)
        return bus.sync_writer(register, ids=ids)

    def send(self) -> bool:
        """Write this tick's goals; False when the write failed (counted).

        Raises
        ------
        FaultRaised
            The port is gone.
        """
        try:
            if self.pos_writer is not None:
                if self.cur_writer is None:
                    self.pos_writer.write(self.goal_servo)
                else:
                    np.take(self.goal_servo, self._pos_index, out=self._pos_buf)
                    self.pos_writer.write(self._pos_buf)
            if self.cur_writer is not None:
                np.take(self.current_servo, self._cur_index, out=self._cur_buf)
                self.cur_writer.write(self._cur_buf)
            return True
        except PortError as exc:
            self.errors.count(exc)
            raise FaultRaised(Fault(FaultKind.PORT, f"bus port error on write: {exc}")) from exc
        except BridgeError as exc:
            self.errors.count(exc)
            return False


class MonitorStage:
    """Temperature and input voltage of every servo (one sync read every ``monitor_every`` ticks),
    and each servo's latched hardware error (0 when its reply had no alert bit).

    Parameters
    ----------
    safety : SafetyStage, judges the values read
    errors : BusErrorCounts
    n : int, servos
    """

    REGISTERS = ("present_input_voltage", "present_temperature")

    def __init__(self, safety, errors: BusErrorCounts, n: int) -> None:
        self.safety = safety
        self.errors = errors
        self.reader: JointReader | None = None
        self.voltage = np.full(n, np.nan)
        self.temperature = np.full(n, np.nan)
        self.hardware_error = np.full(n, np.nan)  # raw bits, for telemetry and the live view
        self.bus = None
        self._index: dict = {}

    def bind(self, bus, ids, tables) -> None:
        """Read the registers every servo's table has (none: no monitoring)."""
        regs = [r for r in self.REGISTERS if all(r in t.registers for t in tables)]
        self.bus, self._index = bus, {sid: i for i, sid in enumerate(ids)}
        self.reader = JointReader(bus, ids, tables, regs) if regs else None

    def run(self) -> Fault | None:
        """Read and judge; a fault, or None (a failed read is counted, not a fault)."""
        try:
            self.reader.read()
        except PortError as exc:
            self.errors.count(exc)
            return Fault(FaultKind.PORT, f"bus port error: {exc}")
        except BridgeError as exc:
            self.errors.count(exc)
            self._note_hardware_errors(exc)
            return None
        # every reply came without the alert bit: no servo has a hardware error latched (telling
        # telemetry so costs no bus time, where reading the register would widen this read from
        # 3 to 77 bytes per servo)
        self.hardware_error[:] = 0.0
        v = self.reader.values
        temperature = voltage = None
        if "present_temperature" in v:
            self.temperature[:] = v["present_temperature"]
            temperature = self.temperature
        if "present_input_voltage" in v:
            self.voltage[:] = v["present_input_voltage"]
            voltage = self.voltage
        return self.safety.check_monitor(temperature, voltage)

    def _note_hardware_errors(self, exc: BridgeError) -> None:
        """Hardware Error Status of each servo that raised the alert: the bus read it already
        when it made the error (no bus time here); the error byte where it could not."""
        health = None
        for sid, e in (getattr(exc, "failures", None) or {getattr(exc, "servo_id", None): exc}).items():
            i = self._index.get(sid)
            if i is None or not isinstance(e, HardwareErrorStatus):
                continue
            if health is None:
                health = getattr(self.bus, "health", None) or {}
            h = health.get(sid)
            status = getattr(h, "last_hardware_error_status", None)
            self.hardware_error[i] = float(status if status else (e.error_raw or 1))
