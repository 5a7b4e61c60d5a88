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

import time

import numpy as np

from servoloop.controller.bus_io import BusErrorCounts, JointReader, PartSwitch
from servoloop.controller.faults import Fault, FaultKind, FaultRaised
from servoloop.controller.wire_gate import WireGate
from servoloop.firmware_bridge.errors import (
    BridgeError,
    HardwareErrorStatus,
    PortError,
    ServoStatusError,
)

__all__ = ["ReadStage", "ImuStage", "WriteStage", "MonitorStage"]


def _has_status_error(exc: BridgeError) -> bool:
    return isinstance(exc, ServoStatusError) or any(
        isinstance(e, ServoStatusError) for e in (getattr(exc, "failures", None) or {}).values())


class ReadStage:
    """One sync read of position, velocity and effort of every servo (SI, config order).

    With ``read_ahead`` the read is split in two (``loop.read_ahead``): :meth:`request`
    at the end of a tick sends the next tick's instruction, and :meth:`run` at the start
    of that tick collects the replies (normally in the port's buffer already) instead of
    writing and waiting; the values are then sampled about one period before the tick
    that uses them.  :meth:`run` reads anew when nothing was requested (the first tick).

    Riding registers (:meth:`bind` ``extra``, the monitor's): a second preallocated reader,
    :attr:`wide`, reads the same registers plus those (for X-series present_current 126 ..
    present_temperature 146, one block of 21 bytes; AX 36 .. 43).  A tick told to
    (``run(wide=True)``, ``request(wide=True)`` for the next tick) makes its one read with
    it; its state values are copied into :attr:`reader`'s arrays (the ones the estimator
    holds), so the tick sees the same registers as any other.  :attr:`rode` then says this
    tick's :attr:`wide` values are fresh and :attr:`wide_error` holds the read's failure.

    Late replies (``late_read``, with read-ahead; ``loop.late_read``): the collect waits only
    until :attr:`until_ns` (the loop's budget within the tick, on its clock).  Replies not all
    in by then leave the tick *stale* (:attr:`stale`): the arrays keep the last reading (no
    NaN, nothing counted as failed), the request stays outstanding and no new one may go out
    (the loop sends none); the next tick's :meth:`run` takes the late replies first -- one
    period older then -- and uses them if they are all in, else is stale again.  Replies
    still owed once the read's reply timeout has passed since the request are lost: the
    collect then fails as any read does (timeouts, counted).  A simulated clock cannot time
    a wait on the port, so there the wait is the reply timeout on the wall clock and only
    replies the (simulated) bus holds back are late: lockstep runs stay deterministic.

    Parameters
    ----------
    errors : BusErrorCounts, shared with the other stages
    servo_faults : ServoFaultHandler
    read_ahead : bool, split the read (the bus read must be one exchange, see :meth:`bind`)
    late_read : bool, with ``read_ahead``: wait for the replies only until :attr:`until_ns`
    clock : the loop's Clock (``late_read``: times the budget and the reply timeout)

    Attributes
    ----------
    stale : bool, this tick's replies were not in by the budget (the arrays hold the last reading)
    reading_ok : bool, the last reading taken was complete (False after a failed read: a stale
        tick then has nothing to run on; the loop holds the goals, as on the failed tick)
    stale_reads : int, stale ticks so far
    late_collected : int, requests whose replies came after a stale tick and were collected
    until_ns : int, the budget of the next :meth:`run`'s wait, ns on the loop's clock
    gate : WireGate, when the owed replies are off the wire (a stale tick's write waits for it)
    """

    def __init__(self, errors: BusErrorCounts, servo_faults, read_ahead: bool = False,
                 late_read: bool = False, clock=None) -> None:
        self.errors, self.servo_faults = errors, servo_faults
        self.read_ahead = read_ahead
        self.late_read = bool(late_read and read_ahead)
        self.clock = clock
        self._simulated = bool(getattr(clock, "simulated", False))
        self.stale = False
        self.reading_ok = True    # the arrays hold a complete reading (no failed servo's NaN)
        self.stale_reads = self.late_collected = self.until_ns = 0
        self._late = False        # the outstanding request already left a tick stale
        self.gate = WireGate(clock)   # also when the outstanding request went out
        self._lost_ns = 0         # reply timeout: owed replies past it are lost, not late
        self.bus = None
        self.reader: JointReader | None = None
        self.wide: JointReader | None = None
        self.device_parts: list = []
        self.rode = False
        self.wide_error: BridgeError | None = None
        self._last: JointReader | None = None
        self._requested: JointReader | None = None
        self._copies: tuple = ()
        self.failed = np.zeros(0, dtype=bool)
        self.disabled = np.zeros(0, dtype=bool)
        self._index: dict = {}

    def bind(self, bus, ids, tables, free_turning=(), devices=(), extra=()) -> JointReader:
        """Make the group reader; returns it (``values`` holds the (n,) arrays read each tick).

        ``free_turning``: ids of servos in velocity (wheel) mode, whose Present Position wraps
        (read without the position plausibility check).  ``devices``: (names, ids) of other
        devices (the IMU board) to read in the same bulk read where the bus allows
        (:attr:`device_parts`; see :class:`~controller.bus_io.JointReader`).  ``extra``:
        registers to ride along on the ticks that ask (:attr:`wide`; None where no reply of
        the wide read could be told from the usual one's, or it would take more exchanges)."""
        names = ["present_position", "present_velocity"]
        self.reader = JointReader(bus, ids, tables, names, effort=True,
                                  free_turning=free_turning, devices=devices,
                                  one_transaction=self.read_ahead)
        if self.read_ahead and self.reader.exchanges != 1:   # config_checks refuses this robot first
            raise ValueError(f"loop.read_ahead: the read of servos {list(ids)} takes "
                             f"{self.reader.exchanges} bus exchanges per tick; read-ahead needs one")
        self.wide, self._copies, self.device_parts = None, (), list(self.reader.device_parts)
        self._last = self._requested = None
        self.bus, self._late = bus, False
        if extra:
            wide = JointReader(bus, ids, tables, names + list(extra), effort=True,
                               free_turning=free_turning, devices=devices,
                               one_transaction=self.read_ahead, twin_of=self.reader)
            if wide.exchanges == self.reader.exchanges and wide.tells_apart(self.reader):
                self.wide = wide
                v, w = self.reader.values, wide.values
                self._copies = tuple((v[k], w[k]) for k in (*names, "effort"))
                self.device_parts = [PartSwitch(a, b) for a, b in
                                     zip(self.reader.device_parts, wide.device_parts, strict=True)]
        if self.late_read:
            timeout = max(r.reply_timeout_s for r in (self.reader, self.wide) if r is not None)
            self._lost_ns = int(timeout * 1e9)
            self.gate.bind(bus, (self.reader, self.wide))
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

    def _exchange(self, wide: bool) -> None:
        """The tick's one read (collected, with read-ahead, when one was requested)."""
        r = self._requested
        if self.read_ahead and r is not None and r.requested:
            if self.late_read and not self._in(r):
                self.stale = True           # the request stays outstanding, its reader in place
                self.rode = False
                return
            self._requested = None
            collect = True
            if self._late:
                self._late = False
                self.late_collected += 1
        else:
            r = self.wide if wide and self.wide is not None else self.reader
            collect = False
            self._turn(r)
        rode = self.rode = r is self.wide
        for s in self.device_parts:
            if type(s) is PartSwitch:
                s.wide = rode
        try:
            if collect:
                r.collect()
            else:
                r.read()
        finally:
            if rode:   # failed servos: NaN copied too, never the last tick's values
                for dst, src in self._copies:
                    np.copyto(dst, src)

    def _in(self, r: JointReader) -> bool:
        """Wait for ``r``'s replies up to the budget; True when they are all in, or lost (the
        reply timeout has passed: the collect then fails as any read does)."""
        clock = self.clock
        if self._simulated:     # a simulated clock cannot time the wait: the reply timeout
            until = time.monotonic() + self._lost_ns * 1e-9
        else:
            until = self.until_ns * 1e-9
        if r.poll(until):
            return True
        return clock.now_ns() - self.gate.sent_ns >= self._lost_ns

    def _turn(self, r: JointReader) -> None:
        """Make ``r`` the reader whose request goes out next (one variant rotation for both)."""
        if r is not self._last:
            if self._last is not None:
                r.follow(self._last)
            self._last = r

    def run(self, wide: bool = False) -> bool:
        """Read every servo; False when some read failed (those servos read NaN, :attr:`failed`
        marks them).  Failures of servos turned off by ``disable_servo`` do not count.
        ``wide``: read with :attr:`wide` (when nothing was requested ahead; else the request
        decided).

        Raises
        ------
        FaultRaised
            The port is gone, or a servo's hardware error is a fault (see ServoFaultHandler).
        """
        if self.failed.any():
            self.failed[:] = False
        self.wide_error = None
        self.stale = False
        if self.late_read:
            self.bus.write_past_pending = False
        try:
            self._exchange(wide)
            if self.stale:
                self.stale_reads += 1
                self._late = True
                self.bus.write_past_pending = True    # this tick's goals go out all the same
                return True
            self.reading_ok = True
            return True
        except PortError as exc:
            self.errors.count(exc)
            self.failed[:] = True
            raise FaultRaised(Fault(FaultKind.PORT, f"bus port error: {exc}")) from exc
        except BridgeError as exc:
            self.reading_ok = False   # NaN where servos failed: a stale tick after it has no reading
            # the loop runs with the garbage collector off: the traceback's frames hold the
            # exception (a cycle through the group read's locals), so dropping it frees them
            exc.__traceback__ = None
            if self.rode:
                self.wide_error = exc
            only_disabled = self._mark_failed(exc)
            if only_disabled:
                return True  # a disabled servo keeps reporting its latched error: expected
            self.errors.count(exc)
            if _has_status_error(exc):
                self.servo_faults.handle(exc)
            return False

    def request(self, wide: bool = False) -> None:
        """Send the next tick's read instruction (read-ahead; the replies are taken by the
        next :meth:`run`, or by the bus before any other transaction).  A port error shows
        at that collect.  ``wide``: the request of :attr:`wide` (when there is one)."""
        r = self.wide if wide and self.wide is not None else self.reader
        self._turn(r)
        r.request()
        self._requested = r
        if self.late_read:
            self.gate.sent(r)


class ImuStage:
    """The IMU board's gyro, accelerometer and orientation registers, once per tick.

    On a Protocol 2.0 bus the board rides in the servos' own transaction: one BULK
    READ with its own start address and length (:meth:`attach`; the read stage runs
    it, this stage takes the board's values and failures).  On a Protocol 1.0 or
    mixed bus (the humanoid: AX-18A on 1.0, OpenCR on 2.0) no single instruction
    reaches both, so the board gets its own SYNC READ after the servos' (~45 bytes,
    0.1 ms at 4 Mbps, plus a second round trip through the adapter).  A failed read is counted with the bus errors and leaves NaN in the arrays (the
    estimate is then marked invalid for that tick); it does not count against the servos'
    comm ladder.

    Parameters
    ----------
    imu : ImuConfig
    errors : BusErrorCounts

    Attributes
    ----------
    reader : firmware_bridge.imu.ImuReader (after :meth:`bind`); ``gyro``, ``accel``, ``rpy`` (3,)
    failed : int, ticks whose IMU read failed
    """

    def __init__(self, imu, errors: BusErrorCounts) -> None:
        from servoloop.firmware_bridge.imu import get_imu_table

        self.imu = imu
        self.table = get_imu_table(imu.model)
        self.errors = errors
        self.reader = None
        self.failed = 0
        self.info: dict = {}

    def bind(self, bus) -> None:
        """Add the board to ``bus``, ping it (model check) and make its own sync read.

        Raises
        ------
        BridgeError
            It does not answer, or another model does (a connect fault).
        """
        self.connect(bus)
        self.reader.bind()

    def devices(self) -> list[tuple[list[str], list[int]]]:
        """(registers, ids) of the board, for the read stage's bulk read."""
        from servoloop.firmware_bridge.imu import IMU_REGISTERS

        return [(list(IMU_REGISTERS), [self.imu.id])]

    def attach(self, part) -> None:
        """Take the board's values from ``part`` of the servos' bulk read (after
        :meth:`connect`); None: no bulk read on this bus, make the board's own sync read."""
        if part is None:
            self.reader.bind()
        else:
            self.reader.attach(part)

    def connect(self, bus) -> None:
        """Add the board to ``bus`` and ping it (model check); no reader made yet.

        Raises
        ------
        BridgeError
            It does not answer, or another model does (a connect fault).
        """
        from servoloop.firmware_bridge.errors import BusTimeoutError, ChecksumError
        from servoloop.firmware_bridge.imu import ImuReader

        self.reader = ImuReader(bus, self.imu.id, self.table)
        for attempt in range(3):    # as the servos' pings: one lost reply is not a dead board
            try:
                self.info = self.reader.connect()
                break
            except (BusTimeoutError, ChecksumError) as exc:
                self.errors.count(exc)
                if attempt == 2:
                    raise

    def run(self) -> bool:
        """Read the board; False when the read failed (counted).

        Raises
        ------
        FaultRaised
            The port is gone.
        """
        try:
            self.reader.read()
            return True
        except PortError as exc:
            self.errors.count(exc)
            raise FaultRaised(Fault(FaultKind.PORT, f"bus port error: {exc}")) from exc
        except BridgeError as exc:
            self.errors.count(exc)
            self.failed += 1
            # the loop runs with the garbage collector off: the traceback's frames hold the
            # exception (a cycle), so dropping it is what frees them
            exc.__traceback__ = None
            return False


class WriteStage:
    """One sync write per goal register and protocol: goal positions (position servos), goal
    currents (current servos), goal velocities (velocity / wheel mode servos).

    Servos are grouped by the register their goal goes to, where it sits (models differ: AX
    Goal Position is 2 bytes at 30, X 4 bytes at 116) and the protocol they speak (a mixed
    bus); each group is one preallocated sync write (on Protocol 1.0: SYNC WRITE 0x83).

    Parameters
    ----------
    goal_servo : (n,) rad, servo goals, filled by the joint map each tick
    current_servo : (n,) A, servo goal currents, filled by the joint map
    errors : BusErrorCounts
    velocity_servo : (n,) rad/s, servo goal velocities (velocity mode), filled by the loop
    """

    def __init__(self, goal_servo: np.ndarray, current_servo: np.ndarray, errors: BusErrorCounts,
                 velocity_servo: np.ndarray | None = None) -> None:
        self.goal_servo = goal_servo
        self.current_servo = current_servo
        self.velocity_servo = np.zeros_like(goal_servo) if velocity_servo is None else velocity_servo
        self.errors = errors
        # (writer, servo indices or None for all in order, source array, preallocated buffer)
        self.groups: list[tuple] = []
        self.velocity_groups: list[tuple] = []

    def _source(self, mode: str) -> np.ndarray:
        return {"current": self.current_servo, "velocity": self.velocity_servo}.get(mode, self.goal_servo)

    def bind(self, bus, servos) -> None:
        """Make the writers for the config's ``servos`` (one per register, layout and protocol)."""
        from servoloop.controller.velocity_mode import velocity_register

        keyed: dict[tuple, list[int]] = {}
        for i, s in enumerate(servos):
            t = bus.table(s.id)
            reg = {"current": "goal_current", "velocity": velocity_register(t)}.get(s.mode, "goal_position")
            r = t[reg]
            kind = s.mode if s.mode in ("current", "velocity") else "position"
            keyed.setdefault((kind, reg, r.address, r.size, r.encoding, bus.protocol_of(s.id)), []).append(i)
        n = len(servos)
        self._servos = [(s.id, s.joint) for s in servos]
        self.groups, self.velocity_groups = [], []
        for (kind, reg, *_), idx in keyed.items():
            ids = [servos[i].id for i in idx]
            writer = bus.sync_writer(reg, ids=ids)
            whole = idx == list(range(n))
            group = (writer, None if whole else np.array(idx, dtype=np.intp), self._source(kind),
                     None if whole else np.zeros(len(idx)))
            self.groups.append(group)
            if kind == "velocity":
                self.velocity_groups.append(group)

    @property
    def pos_writer(self):
        """The goal position writer of the first position group (None without one)."""
        return next((g[0] for g in self.groups if g[0].name == "goal_position"), None)

    @property
    def cur_writer(self):
        """The goal current writer of the first current group (None without one)."""
        return next((g[0] for g in self.groups if g[0].name == "goal_current"), None)

    @staticmethod
    def _write(groups) -> None:
        for writer, idx, src, buf in groups:
            if idx is None:
                writer.write(src)
            else:
                np.take(src, idx, out=buf)
                writer.write(buf)

    def send(self) -> bool:
        """Write this tick's goals; False when the write failed (counted).

        Raises
        ------
        FaultRaised
            The port is gone.
        """
        try:
            self._write(self.groups)
            return True
        except PortError as exc:
            self.errors.count(exc)
            raise FaultRaised(Fault(FaultKind.PORT, f"bus port error on write: {exc}")) from exc
        except BridgeError as exc:
            self.errors.count(exc)
            return False
        except ValueError as exc:
            # a goal the register cannot carry (NaN, inf, out of its range) is a controller bug:
            # a named fault, so the configured reaction (torque off / hold) follows, not a crash
            raise FaultRaised(self._unwritable(exc)) from None

    def _unwritable(self, exc: ValueError) -> Fault:
        """The fault naming the first servo whose goal could not be encoded."""
        for writer, idx, src, _buf in self.groups:
            rows = range(len(src)) if idx is None else idx
            for i in rows:
                x = float(src[i])
                if not np.isfinite(x):
                    sid, joint = self._servos[i]
                    return Fault(FaultKind.INTERNAL,
                                 f"the {writer.name} for servo {sid} (joint {joint!r}) is {x}: "
                                 "the controller produced a non-finite goal; nothing was written",
                                 sid, joint)
        return Fault(FaultKind.INTERNAL, f"a goal could not be written: {exc}")

    def stop_wheels(self) -> None:
        """Velocity goal 0 rad/s to every velocity-mode servo, now (shutdown, before torque off).

        Raises
        ------
        BridgeError
            The write failed.
        """
        self.velocity_servo[:] = 0.0
        self._write(self.velocity_groups)


class MonitorStage:
    """Temperature and input voltage of every servo (every ``monitor_every`` ticks), and each
    servo's latched hardware error (0 when its reply had no alert bit).

    The registers ride in the tick's own read (:meth:`bind` ``ride``): on a monitor tick the
    read stage reads them with the state (:attr:`ReadStage.wide`; with read-ahead the
    request sent at the end of the tick before), and this stage only judges what came, with
    no bus traffic of its own.  Where the wider read cannot be made -- the read stage found
    no wider request whose replies it could tell from the usual read's (control tables
    ending too early) -- or a tick's read was not the wide one, it falls back to its own
    sync read of the two registers after the goal write.  The wide read's failure was
    counted by the read stage (one transaction, counted once); here it only means no new
    values (those held stay, with the hardware error bits the alert replies carried).

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
        self.ride: ReadStage | None = None
        self._index: dict = {}

    @classmethod
    def registers(cls, tables) -> list[str]:
        """The monitored registers every servo's table has (none: no monitoring)."""
        return [r for r in cls.REGISTERS if all(r in t.registers for t in tables)]

    def bind(self, bus, ids, tables, ride: ReadStage | None = None) -> None:
        """Read the registers every servo's table has (none: no monitoring).  ``ride``: the
        read stage whose wide read carries them (its :attr:`~ReadStage.wide` None: this stage
        reads on its own)."""
        regs = self.registers(tables)
        self.bus, self._index = bus, {sid: i for i, sid in enumerate(ids)}
        self.reader = JointReader(bus, ids, tables, regs) if regs else None
        self.ride = ride if ride is not None and ride.wide is not None and regs else None

    @property
    def rides(self) -> bool:
        """True when the registers travel in the tick's own read (no read of this stage's)."""
        return self.ride is not None

    def run(self) -> Fault | None:
        """Read (unless the tick's read carried the registers) and judge; a fault, or None
        (a failed read is counted, not a fault)."""
        ride = self.ride
        if ride is not None and ride.rode:
            exc = ride.wide_error
            if exc is not None:      # counted by the read stage already
                self._note_hardware_errors(exc)
                return None
            return self._judge(ride.wide.values)
        try:
            self.reader.read()
        except PortError as exc:
            self.errors.count(exc)
            return Fault(FaultKind.PORT, f"bus port error: {exc}")
        except BridgeError as exc:
            self.errors.count(exc)
            self._note_hardware_errors(exc)
            return None
        return self._judge(self.reader.values)

    def _judge(self, v: dict) -> Fault | None:
        """Hold the values read (``v``: name -> (n,)) and judge them."""
        # every reply came without the alert bit: no servo has a hardware error latched (telling
        # telemetry so costs no bus time, where reading the register would widen this read from
        # 3 to 77 bytes per servo)
        self.hardware_error[:] = 0.0
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
