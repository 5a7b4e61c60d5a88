"""The servo bus: one serial file descriptor, typed registers, SI values in and out.

>>> with Bus("/dev/ttyUSB0", 1_000_000, 2, [ServoSpec(1, "XM430-W350")]) as bus:
...     bus.connect()
...     reader = bus.sync_reader(["present_position", "present_velocity", "present_current"])
...     reader.read()                       # one sync read, GIL released on the wire
...     reader.values["present_position"]   # rad, float64 (n,)

The port is opened and configured with pyserial (``/dev/ttyUSB*``,
``/dev/ttyACM*``, a pty); the hot path (:class:`~firmware_bridge.sync.SyncReader`,
:class:`~firmware_bridge.sync.SyncWriter`) writes and reads the descriptor from Cython.  Reply
timeouts are computed from the baud rate, the bytes on the wire and the
servos' return delay time, plus a margin for the host (the FTDI latency
timer on ttyUSB, a few ms elsewhere) -- never a fixed 16 ms.

Every failure raises a :mod:`firmware_bridge.errors` exception that names
the servo; a group read also sets the failed servos' values to NaN.

A **mixed** bus (``protocol="mixed"``) carries Protocol 1.0 and 2.0 servos on
one port, as a real chain of AX and X servos does: each servo is addressed
in its control table's protocol (a servo ignores packets of the other one),
so every instruction, group read and group write is built per protocol;
:class:`SyncReader`/:class:`SyncWriter` groups must not span both.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass

import numpy as np

from servoloop.firmware_bridge import _busio, _codec
from servoloop.firmware_bridge.bus_reports import ConnectReport, ServoHealth
from servoloop.firmware_bridge.control_table import ControlTable, Register, get_table, model_name
from servoloop.firmware_bridge.errors import (
    BridgeError,
    BusTimeoutError,
    ChecksumError,
    HardwareErrorStatus,
    MalformedPacketError,
    ModelMismatchError,
    PortError,
    ServoStatusError,
)
from servoloop.firmware_bridge.latency import read_latency_timer, write_latency_timer
from servoloop.firmware_bridge.status_bits import (
    decode_error,
    decode_hardware_error,
    is_hardware_error,
)
from servoloop.firmware_bridge.sync import SyncReader, SyncWriter, raise_group
from servoloop.firmware_bridge.units import decode_raw, encode_raw, from_si, to_si

__all__ = ["Bus", "ServoSpec", "ServoHealth", "ConnectReport", "SyncReader", "SyncWriter",
           "reply_timeout_s", "default_margin_s"]


# Servo firmware needs some time to turn around besides the return delay time:
# ~20-50 us measured on AX and MX (FIELD-NOTES c1); 100 us keeps us on the safe side.
SERVO_TURNAROUND_S = 100e-6
BROADCAST_ID = 0xFE
MIXED = "mixed"   # Bus(protocol=MIXED): Protocol 1.0 and 2.0 servos on one port


def reply_timeout_s(baud: int, tx_bytes: int, rx_bytes: int, n_replies: int,
                    return_delay_s: float, margin_s: float) -> float:
    """Seconds to wait for ``n_replies`` replies after writing ``tx_bytes``.

    Wire time of everything at 10 bits per byte, plus each reply's return
    delay and turnaround, plus the host ``margin_s``.
    """
    wire = (tx_bytes + rx_bytes) * 10.0 / baud
    return wire + n_replies * (return_delay_s + SERVO_TURNAROUND_S) + margin_s


def default_margin_s(port: str) -> float:
    """Host allowance for a reply: FTDI latency timer + 1 ms on ttyUSB; 20 ms on a pty
    (another process answers and must be scheduled); 3 ms otherwise (USB CDC-ACM)."""
    lt = read_latency_timer(port)
    if isinstance(lt, int):
        return (lt + 1) * 1e-3
    real = os.path.realpath(port)
    if real.startswith("/dev/pts/") or "pty" in os.path.basename(real):
        return 0.020
    return 0.003


@dataclass(frozen=True)
class ServoSpec:
    """One configured servo: bus id and model name (a key of the control tables)."""

    id: int
    model: str


class Bus:
    """A half-duplex Dynamixel bus on one serial port.

    Parameters
    ----------
    port : str
        Device or pty path.
    baud : int
        Bits per second.
    protocol : {1, 2, "mixed"}
        Dynamixel protocol version spoken on this bus; ``"mixed"``: each servo
        speaks its control table's protocol (1.0 and 2.0 on one port).
    servos : list of ServoSpec
        The servos this bus drives (ids unique).
    on_after_write : callable or None
        Called right after every write to the descriptor (lockstep mode
        pumps an in-process virtual bus there).
    timeout_margin_s : float or None
        Host-side allowance added to every computed reply timeout.  None:
        the FTDI latency timer + 1 ms on ttyUSB, 3 ms elsewhere.
    """

    def __init__(self, port: str, baud: int = 1_000_000, protocol: int | str = 2,
                 servos: list[ServoSpec] | None = None, on_after_write=None,
                 timeout_margin_s: float | None = None):
        if protocol not in (1, 2, MIXED):
            raise ValueError(f"protocol must be 1, 2 or {MIXED!r}, not {protocol!r}")
        self.port = str(port)
        self.baud = int(baud)
        self.protocol = protocol
        self.servos = list(servos or [])
        ids = [s.id for s in self.servos]
        if len(set(ids)) != len(ids):
            raise ValueError(f"duplicate servo ids in {ids}")
        for s in self.servos:
            if not 0 <= s.id <= 252:
                raise ValueError(f"servo id {s.id} out of range 0..252")
        self.tables: dict[int, ControlTable] = {s.id: get_table(s.model) for s in self.servos}
        for s in self.servos:
            if self.tables[s.id].protocol == 1 and protocol == 2:
                raise ValueError(f"servo {s.id} ({s.model}) speaks Protocol 1.0 only; bus is 2.0 "
                                 f"(protocol={MIXED!r} puts 1.0 and 2.0 servos on one port)")
        # the protocol each servo is addressed in (a mixed bus: its control table's)
        self._proto: dict[int, int] = {
            s.id: (self.tables[s.id].protocol if protocol == MIXED else protocol) for s in self.servos}
        self.on_after_write = on_after_write
        self._margin_override = timeout_margin_s
        self.timeout_margin_s = 0.003 if timeout_margin_s is None else float(timeout_margin_s)
        # factory Return Delay Time is 250 (500 us) until connect() reads the real one
        self.return_delay_s: dict[int, float] = {s.id: 500e-6 for s in self.servos}
        self._health_d: dict[int, ServoHealth] = {s.id: ServoHealth() for s in self.servos}
        # counted in compiled code by each group reader: (ids, good replies, stale replies)
        self._ok_sources: list[tuple[list[int], np.ndarray, np.ndarray]] = []
        # 1 when stale bytes may wait on the fd (the hot path then flushes before writing)
        self._dirty = np.ones(1, dtype=np.int64)
        # the group reader whose read request is on the wire (read-ahead), None: the bus is idle
        self._pending = None
        #: a goal write may go out while a read request's replies are still owed (set by a
        #: late-read loop on its stale ticks only, see ``loop.late_read``: the replies are
        #: held up on the host's side (adapter, pty), the servos done sending: docs/own-robot.md 5b)
        self.write_past_pending = False
        self.garbage_bytes = 0
        self._serial = None
        self.fd = -1

    def add_device(self, device_id: int, table: ControlTable) -> None:
        """A non-servo device on this bus (an IMU board, :mod:`firmware_bridge.imu`): table, protocol,
        return delay and health as a servo's, but not in :attr:`servos` (``connect`` and default
        group reads leave it out).  ValueError: id taken or out of range, or the wrong protocol."""
        if not 0 <= device_id <= 252 or device_id in self.tables:
            raise ValueError(f"device id {device_id} is out of range 0..252 or already used on {self.port}")
        if self.protocol not in (table.protocol, MIXED):
            raise ValueError(f"{table.name} (id {device_id}) speaks Protocol {table.protocol}.0; the bus "
                             f"{self.port} runs {self.protocol}.0 (protocol={MIXED!r} carries both)")
        self.tables[device_id], self._proto[device_id] = table, table.protocol
        self.return_delay_s[device_id], self._health_d[device_id] = 500e-6, ServoHealth()

    # ------------------------------------------------------------ port
    def open(self) -> Bus:
        import serial  # only firmware_bridge imports pyserial

        try:
            self._serial = serial.Serial(self.port, baudrate=self.baud, timeout=0,
                                         write_timeout=0, exclusive=True)
        except (serial.SerialException, OSError, ValueError) as exc:
            raise PortError(f"cannot open {self.port} at {self.baud} bps: {exc}") from exc
        self.fd = self._serial.fileno()
        flags = fcntl.fcntl(self.fd, fcntl.F_GETFL)
        fcntl.fcntl(self.fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)
        if self._margin_override is None:
            self.timeout_margin_s = default_margin_s(self.port)
        return self

    def close(self) -> None:
        if self._pending is not None:
            try:  # the replies still owed are taken (and dropped with the port): no raise here
                self.settle()
            except Exception:  # noqa: BLE001 - closing must go on
                self._pending = None
        if self._serial is not None:
            try:
                self._serial.close()
            finally:
                self._serial = None
                self.fd = -1

    def __enter__(self) -> Bus:
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def is_open(self) -> bool:
        return self._serial is not None

    def _require_open(self) -> None:
        if self.fd < 0:
            raise PortError(f"bus on {self.port} is not open")

    # ---------------------------------------------------- half duplex
    def settle(self) -> None:
        """Take the replies of a read request still on the wire into its reader, now.

        A read-ahead loop leaves one group read's request outstanding between ticks
        (:meth:`SyncReader.request <firmware_bridge.sync.SyncReader.request>`); on a
        half-duplex bus no other instruction may go out before its replies are in (they
        would collide).  Every transaction calls this first: the replies are decoded into
        the reader, whose next ``collect()`` returns them without waiting.  Nothing
        outstanding: no-op.
        """
        reader, self._pending = self._pending, None
        self.write_past_pending = False
        if reader is not None:
            reader._io.settle()

    @property
    def pending(self):
        """The group reader whose request is outstanding (None: none)."""
        return self._pending

    # ----------------------------------------------------------- helpers
    def table(self, servo_id: int) -> ControlTable:
        try:
            return self.tables[servo_id]
        except KeyError:
            raise KeyError(f"servo {servo_id} is not configured on {self.port}") from None

    def register(self, servo_id: int, name: str) -> Register:
        return self.table(servo_id)[name]

    def protocol_of(self, servo_id: int) -> int:
        """The protocol (1 or 2) ``servo_id`` is addressed in on this bus."""
        p = self._proto.get(servo_id)
        if p is not None:
            return p
        if self.protocol == MIXED:
            raise KeyError(f"servo {servo_id} is not configured on the mixed bus {self.port}: "
                           "its protocol is unknown")
        return self.protocol

    def group_protocol(self, ids, what: str) -> int:
        """The one protocol of ``ids``; ValueError naming the servos when they mix both."""
        protos = {self.protocol_of(i) for i in ids}
        if len(protos) != 1:
            p1 = [i for i in ids if self.protocol_of(i) == 1]
            raise ValueError(f"{what} on {self.port}: servos {p1} speak Protocol 1.0, the others "
                             "2.0; make one group per protocol")
        return protos.pop()

    def _rdt(self, ids) -> float:
        return max((self.return_delay_s.get(i, 500e-6) for i in ids), default=500e-6)

    def _timeout(self, tx_bytes: int, rx_bytes: int, n: int, ids=()) -> float:
        return reply_timeout_s(self.baud, tx_bytes, rx_bytes, n, self._rdt(ids), self.timeout_margin_s)

    @property
    def health(self) -> dict[int, ServoHealth]:
        """Per-servo counters {id: ServoHealth} (group-read successes folded in on access)."""
        for ids, counts, stale in self._ok_sources:
            for i, sid in enumerate(ids):
                if counts[i]:
                    self._health(sid).ok += int(counts[i])
                    counts[i] = 0
                if stale[i]:
                    self._health(sid).stale += int(stale[i])
                    stale[i] = 0
        return self._health_d

    def _health(self, servo_id: int) -> ServoHealth:
        return self._health_d.setdefault(servo_id, ServoHealth())

    def _transact(self, tx: bytes, ids, max_data: int, per_reply_bytes: int, protocol: int):
        """Write ``tx``, collect replies for ``ids`` in ``protocol``; failures to exceptions."""
        self._require_open()
        if self._pending is not None:
            self.settle()
        n = 253 if ids is None else len(ids)
        timeout = self._timeout(len(tx), n * per_reply_bytes, n, ids or ())
        self._dirty[0] = 1
        replies, garbage, port_error = _busio.transact(self.fd, protocol, tx, ids, timeout,
                                                       max_data, self.on_after_write)
        self.garbage_bytes += garbage
        if port_error:
            raise PortError(f"{self.port}: the port failed during a transaction (unplugged?)")
        return replies, timeout

    def _check_reply(self, servo_id: int, reply, timeout: float, expect_len: int | None,
                     what: str) -> bytes:
        """Params of a good reply; raises the right error (and counts it) otherwise."""
        code, err, params = reply
        h = self._health(servo_id)
        if code == _busio.SLOT_TIMEOUT:
            h.timeouts += 1
            raise BusTimeoutError(f"servo {servo_id} on {self.port}: no reply to {what} "
                                  f"within {timeout * 1e3:.2f} ms", servo_id, expect_len or 0,
                                  b"", timeout)
        if code == _busio.SLOT_CHECKSUM:
            h.checksum_errors += 1
            raise ChecksumError(f"servo {servo_id} on {self.port}: corrupt reply to {what} "
                                "(checksum/CRC mismatch)", b"", servo_id)
        if code == _busio.SLOT_IMPLAUSIBLE:
            h.implausible += 1
            raise ChecksumError(f"servo {servo_id} on {self.port}: implausible reply to {what}: "
                                "the position moved faster than the servo can (a corrupted "
                                "packet that passed the checksum)", b"", servo_id)
        if code == _busio.SLOT_MALFORMED:
            h.malformed += 1
            raise MalformedPacketError(f"servo {servo_id} on {self.port}: malformed reply to {what}")
        if err:
            self._raise_status(servo_id, err, what)
        if expect_len is not None and len(params) != expect_len:
            h.malformed += 1
            raise MalformedPacketError(f"servo {servo_id} on {self.port}: reply to {what} has "
                                       f"{len(params)} data bytes, expected {expect_len}", params)
        h.ok += 1
        return params

    def _raise_status(self, servo_id: int, err: int, what: str, hw_status: int | None = None):
        h = self._health(servo_id)
        h.error_bits += 1
        h.last_error_raw = err
        proto = self.protocol_of(servo_id) if servo_id in self._proto else (
            2 if self.protocol == MIXED else self.protocol)
        bits = decode_error(proto, err)
        if is_hardware_error(proto, err):
            h.hardware_errors += 1
            if proto == 2 and hw_status is None:
                hw_status = self._hardware_error_status(servo_id)
            if hw_status is not None:
                h.last_hardware_error_status = hw_status
                bits = bits + decode_hardware_error(hw_status)
            raise HardwareErrorStatus(
                f"servo {servo_id} on {self.port}: hardware error in reply to {what}: "
                f"{', '.join(bits)} (error byte 0x{err:02X}"
                + (f", hardware_error_status 0x{hw_status:02X})" if hw_status is not None else ")")
                + "; torque is off until reboot on X/MX(2.0)", servo_id, err, bits)
        raise ServoStatusError(f"servo {servo_id} on {self.port}: {what} refused: "
                               f"{', '.join(bits)} (error byte 0x{err:02X})", servo_id, err, bits)

    def _hardware_error_status(self, servo_id: int) -> int | None:
        """Hardware Error Status (the alert bit's reason), or None if unreadable."""
        table = self.tables.get(servo_id)
        if table is None or "hardware_error_status" not in table:
            return None
        reg = table["hardware_error_status"]
        try:
            replies, _ = self._transact(_codec.read(2, servo_id, reg.address, 1), [servo_id], 1, 12, 2)
        except PortError:
            return None
        code, _err, params = replies[servo_id]
        return params[0] if code == _busio.SLOT_OK and len(params) == 1 else None

    # ------------------------------------------------------ instructions
    def ping(self, servo_id: int) -> int:
        """Model number of ``servo_id`` (Protocol 1.0: read from address 0)."""
        return self.ping_info(servo_id)[0]

    def ping_info(self, servo_id: int) -> tuple[int, int | None]:
        """(model number, firmware version or None) of one servo."""
        if self.protocol_of(servo_id) == 2:
            replies, t = self._transact(_codec.ping(2, servo_id), [servo_id], 3, 14, 2)
            p = self._check_reply(servo_id, replies[servo_id], t, 3, "ping")
            return p[0] | (p[1] << 8), p[2]
        # Protocol 1.0 PING carries no data: ping, then read model number (0) and firmware (2)
        replies, t = self._transact(_codec.ping(1, servo_id), [servo_id], 0, 6, 1)
        self._check_reply(servo_id, replies[servo_id], t, 0, "ping")
        replies, t = self._transact(_codec.read(1, servo_id, 0, 3), [servo_id], 3, 9, 1)
        p = self._check_reply(servo_id, replies[servo_id], t, 3, "read model number")
        return p[0] | (p[1] << 8), p[2]

    def broadcast_ping(self, wait_s: float | None = None) -> dict[int, tuple[int, int]]:
        """Protocol 2.0 broadcast ping: {id: (model number, firmware)} of every servo that answers
        (on a mixed bus: the 2.0 servos)."""
        if self.protocol == 1:
            raise ValueError("broadcast ping needs Protocol 2.0; use per-id pings on 1.0")
        self._require_open()
        if self._pending is not None:
            self.settle()
        tx = _codec.ping(2, BROADCAST_ID)
        timeout = wait_s if wait_s is not None else self._timeout(len(tx), 253 * 14, 253)
        self._dirty[0] = 1
        replies, garbage, port_error = _busio.transact(self.fd, 2, tx, None, timeout, 3,
                                                       self.on_after_write)
        if port_error:
            raise PortError(f"{self.port}: the port failed during a broadcast ping")
        return {sid: (p[0] | (p[1] << 8), p[2]) for sid, (code, err, p) in replies.items()
                if code == _busio.SLOT_OK and len(p) == 3}

    def read_raw(self, servo_id: int, name: str) -> int:
        """Signed raw value of one register of one servo."""
        reg = self.register(servo_id, name)
        proto = self.protocol_of(servo_id)
        tx = _codec.read(proto, servo_id, reg.address, reg.size)
        replies, t = self._transact(tx, [servo_id], reg.size, 11 + reg.size, proto)
        p = self._check_reply(servo_id, replies[servo_id], t, reg.size, f"read {name}")
        return decode_raw(reg, int.from_bytes(p, "little"))

    def read(self, servo_id: int, name: str) -> float:
        """SI value of one register of one servo (rad, rad/s, A, V, degC, ...)."""
        return to_si(self.register(servo_id, name), self.read_raw(servo_id, name))

    def write_raw(self, servo_id: int, name: str, raw: int, *, reg_write: bool = False) -> None:
        """Write a signed raw value; waits for the status unless broadcast."""
        reg = self.register(servo_id, name) if servo_id != BROADCAST_ID else self._any_register(name)
        if not reg.writable:
            raise ValueError(f"register {name} of servo {servo_id} is read-only")
        data = encode_raw(reg, raw).to_bytes(reg.size, "little")
        build = _codec.reg_write if reg_write else _codec.write
        proto = self._broadcast_protocol() if servo_id == BROADCAST_ID else self.protocol_of(servo_id)
        tx = build(proto, servo_id, reg.address, data)
        ids = [] if servo_id == BROADCAST_ID else [servo_id]
        replies, t = self._transact(tx, ids, 0, 11, proto)
        if ids:
            self._check_reply(servo_id, replies[servo_id], t, None, f"write {name}")

    def write(self, servo_id: int, name: str, value: float, *, reg_write: bool = False) -> None:
        """Write an SI value (dimensionless registers take their raw integer)."""
        reg = self.register(servo_id, name) if servo_id != BROADCAST_ID else self._any_register(name)
        self.write_raw(servo_id, name, from_si(reg, value), reg_write=reg_write)

    def _broadcast_protocol(self) -> int:
        if self.protocol == MIXED:
            raise ValueError(f"a broadcast on the mixed bus {self.port} reaches one protocol's "
                             "servos only; address the servos one by one")
        return self.protocol

    def _any_register(self, name: str) -> Register:
        regs = {(r.address, r.size) for t in self.tables.values() if name in t for r in [t[name]]}
        if len(regs) != 1:
            raise ValueError(f"register {name} is not at one address on every servo of {self.port}")
        return next(t[name] for t in self.tables.values() if name in t)

    def action(self, servo_id: int = BROADCAST_ID) -> None:
        """Execute the instructions stored by ``write(..., reg_write=True)``."""
        ids = [] if servo_id == BROADCAST_ID else [servo_id]
        proto = self._broadcast_protocol() if servo_id == BROADCAST_ID else self.protocol_of(servo_id)
        replies, t = self._transact(_codec.action(proto, servo_id), ids, 0, 11, proto)
        if ids:
            self._check_reply(servo_id, replies[servo_id], t, None, "action")

    def reboot(self, servo_id: int) -> None:
        """Reboot one servo (clears a latched hardware error; RAM back to defaults).

        The reply still carries the alert bit of the error being cleared: only
        an error number fails the reboot.
        """
        proto = self.protocol_of(servo_id)
        replies, t = self._transact(_codec.reboot(proto, servo_id), [servo_id], 0, 11, proto)
        code, err, params = replies[servo_id]
        if proto == 2:
            err &= 0x7F
        elif err:
            err &= ~0x25  # 1.0: voltage / overheating / overload bits describe the old state
        self._check_reply(servo_id, (code, err, params), t, None, "reboot")

    def factory_reset(self, servo_id: int, option: int = 0x02, *, confirm: bool = False) -> None:
        """Factory reset (guarded: ``confirm=True``).  Default keeps ID and baud rate (2.0)."""
        proto = self.protocol_of(servo_id)
        tx = _codec.factory_reset(proto, servo_id, option, confirm=confirm)
        replies, t = self._transact(tx, [servo_id], 0, 11, proto)
        self._check_reply(servo_id, replies[servo_id], t, None, "factory reset")

    def bulk_read(self, items: list[tuple[int, str]]) -> dict[int, float]:
        """One BULK READ of one register per servo: {id: SI value}.

        Protocol 1.0 has Bulk Read on MX only (not AX); AX servos are read one by one.
        A mixed bus sends one bulk read per protocol.
        """
        if self.protocol == MIXED and len({self.protocol_of(s) for s, _ in items}) > 1:
            out, errors = {}, {}
            for proto in (2, 1):
                part = [(s, n) for s, n in items if self.protocol_of(s) == proto]
                try:
                    out.update(self.bulk_read(part))
                except BridgeError as exc:
                    out.update({s: float("nan") for s, _ in part})
                    errors.update(getattr(exc, "failures", None) or {})
            if errors:
                raise_group(errors, out)
            return out
        regs = {sid: self.register(sid, name) for sid, name in items}
        out: dict[int, float] = {}
        proto = self.group_protocol(list(regs), "bulk read")
        if proto == 1 and any(self.table(s).name.startswith("AX") for s in regs):
            for sid, name in items:
                out[sid] = self.read(sid, name)
            return out
        tx = _codec.bulk_read(proto, [(s, r.address, r.size) for s, r in regs.items()])
        ids = list(regs)
        replies, t = self._transact(tx, ids, max(r.size for r in regs.values()),
                                    11 + max(r.size for r in regs.values()), proto)
        errors = {}
        for sid, name in items:
            try:
                p = self._check_reply(sid, replies[sid], t, regs[sid].size, f"bulk read {name}")
                out[sid] = to_si(regs[sid], decode_raw(regs[sid], int.from_bytes(p, "little")))
            except BridgeError as exc:
                errors[sid] = exc.with_traceback(None)
                out[sid] = float("nan")
        if errors:
            raise_group(errors, out)
        return out

    def bulk_write(self, items: list[tuple[int, str, float]]) -> None:
        """One BULK WRITE (Protocol 2.0) of SI values: [(id, register, value), ...]."""
        if any(self.protocol_of(sid) != 2 for sid, _, _ in items):
            raise ValueError("bulk write needs Protocol 2.0 servos")
        packed = []
        for sid, name, value in items:
            reg = self.register(sid, name)
            packed.append((sid, reg.address, encode_raw(reg, from_si(reg, value)).to_bytes(reg.size, "little")))
        self._transact(_codec.bulk_write(packed), [], 0, 0, 2)

    # --------------------------------------------------------- hot path
    def sync_reader(self, names: list[str], ids: list[int] | None = None, *,
                    fast: bool = False, plausibility: bool = True) -> SyncReader:
        """A preallocated group read of ``names`` from ``ids`` (default: every servo).

        ``plausibility=False``: no check of the position's rate (servos turning continuously
        wrap their Present Position)."""
        return SyncReader(self, list(names), list(ids) if ids is not None else [s.id for s in self.servos],
                          fast=fast, plausibility=plausibility)

    def sync_writer(self, name: str, ids: list[int] | None = None) -> SyncWriter:
        """A preallocated sync write of register ``name`` to ``ids`` (default: every servo)."""
        return SyncWriter(self, name, list(ids) if ids is not None else [s.id for s in self.servos])

    # ----------------------------------------------------------- connect
    def connect(self, fix_latency_timer: bool = False, fix_return_delay: bool = False,
                return_delay_raw: int = 0) -> ConnectReport:
        """Ping every configured servo, check its model, report and optionally fix timing.

        Raises BusTimeoutError naming the first servo that does not answer and
        ModelMismatchError naming id, expected and found model.
        """
        self._require_open()
        rep = ConnectReport(self.port, self.baud, self.protocol)
        lt = read_latency_timer(self.port)
        rep.latency_timer_ms = lt
        if isinstance(lt, int) and lt > 1:
            if fix_latency_timer:
                ok, msg = write_latency_timer(self.port, 1)
                rep.latency_timer_fixed = ok
                if ok:
                    rep.latency_timer_ms = 1
                    if self._margin_override is None:
                        self.timeout_margin_s = 0.002
                else:
                    rep.warnings.append(msg)
            else:
                rep.warnings.append(f"FTDI latency timer of {self.port} is {lt} ms; every reply "
                                    "waits that long. Fix: connect(fix_latency_timer=True) or "
                                    f"echo 1 > /sys/bus/usb-serial/devices/{os.path.basename(os.path.realpath(self.port))}/latency_timer")
        for spec in self.servos:
            expected = self.tables[spec.id]
            number, firmware = self.ping_info(spec.id)
            if number != expected.model_number:
                raise ModelMismatchError(
                    f"servo {spec.id} on {self.port}: expected {expected.name} (model number "
                    f"{expected.model_number}), found {model_name(number)} (model number {number})")
            rdt = self.read_raw(spec.id, "return_delay_time")
            entry = {"id": spec.id, "model": expected.name, "model_number": number,
                     "firmware": firmware, "return_delay_time_raw": rdt, "return_delay_fixed": False}
            if fix_return_delay and rdt != return_delay_raw:
                try:
                    self.write_raw(spec.id, "return_delay_time", return_delay_raw)
                    rdt = return_delay_raw
                    entry["return_delay_fixed"] = True
                    entry["return_delay_time_raw"] = rdt
                except ServoStatusError as exc:
                    rep.warnings.append(f"servo {spec.id}: could not set return_delay_time "
                                        f"(EEPROM; torque must be off): {exc}")
            elif rdt > 50:
                rep.warnings.append(f"servo {spec.id}: return delay time {rdt * 2} us; "
                                    "connect(fix_return_delay=True) sets it to 0")
            self.return_delay_s[spec.id] = rdt * 2e-6
            rep.servos.append(entry)
        return rep
