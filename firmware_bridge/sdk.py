"""The one module that imports ``dynamixel_sdk``: scanning and configuration helpers.

The SDK is the reference second client (tests, benchmarks) and handy for
scanning, but it returns result codes and a plausible 0 on failed reads and
waits ``2 * 16 + 2`` ms for every missing reply.  Here every result code is
translated into a :mod:`firmware_bridge.errors` exception, and the port
handler's packet timeout is computed from the baud rate and the packet size
(:class:`TimedPortHandler`) instead of the SDK's 16 ms latency constant.
"""

from __future__ import annotations

from dataclasses import dataclass

import dynamixel_sdk as dxl

from servoloop.firmware_bridge.control_table import get_table, model_name
from servoloop.firmware_bridge.errors import (
    BridgeError,
    BusTimeoutError,
    ChecksumError,
    HardwareErrorStatus,
    MalformedPacketError,
    PortError,
    ServoStatusError,
)
from servoloop.firmware_bridge.status_bits import decode_error, is_hardware_error

__all__ = [
    "TimedPortHandler",
    "SdkClient",
    "ScanHit",
    "scan",
    "check_result",
    "open_port",
    "packet_handler",
    "sdk",
]

sdk = dxl  # the module itself, for tests and benchmarks that drive the SDK directly


class TimedPortHandler(dxl.PortHandler):
    """SDK PortHandler whose packet timeout is wire time + ``margin_ms`` (not 2 x 16 ms)."""

    def __init__(self, port_name: str, margin_ms: float = 3.0):
        super().__init__(port_name)
        self.margin_ms = margin_ms

    def setPacketTimeout(self, packet_length):  # noqa: N802 (SDK's name)
        self.packet_start_time = self.getCurrentTime()
        self.packet_timeout = self.tx_time_per_byte * packet_length + 1.0 + self.margin_ms


def open_port(port: str, baud: int, timed: bool = True, margin_ms: float = 3.0):
    """An opened SDK port handler at ``baud``; PortError if it cannot be opened."""
    handler = TimedPortHandler(port, margin_ms) if timed else dxl.PortHandler(port)
    try:
        ok = handler.openPort()
    except Exception as exc:  # pyserial raises SerialException / OSError
        raise PortError(f"cannot open {port}: {exc}") from exc
    if not ok:
        raise PortError(f"cannot open {port}")
    if not handler.setBaudRate(baud):
        handler.closePort()
        raise PortError(f"{port}: baud rate {baud} not accepted")
    return handler


def packet_handler(protocol: int):
    """The SDK packet handler for Protocol 1.0 or 2.0."""
    if protocol not in (1, 2):
        raise ValueError(f"protocol must be 1 or 2, not {protocol!r}")
    return dxl.PacketHandler(float(protocol))


def check_result(protocol: int, result: int, error: int, servo_id, what: str) -> None:
    """Raise the firmware_bridge exception for an SDK (result, error) pair; return if fine."""
    if result == dxl.COMM_SUCCESS:
        if error:
            bits = decode_error(protocol, error)
            cls = HardwareErrorStatus if is_hardware_error(protocol, error) else ServoStatusError
            raise cls(f"servo {servo_id}: {what}: {', '.join(bits)} (error byte 0x{error:02X})",
                      servo_id, error, bits)
        return
    if result == dxl.COMM_RX_TIMEOUT:
        raise BusTimeoutError(f"servo {servo_id}: {what}: no status packet", servo_id)
    if result == dxl.COMM_RX_CORRUPT:
        raise ChecksumError(f"servo {servo_id}: {what}: incorrect status packet", b"", servo_id)
    if result in (dxl.COMM_TX_FAIL, dxl.COMM_PORT_BUSY):
        raise PortError(f"{what}: the SDK could not transmit (result {result})")
    if result == dxl.COMM_TX_ERROR:
        raise MalformedPacketError(f"{what}: the SDK rejected the instruction packet")
    raise BridgeError(f"servo {servo_id}: {what}: SDK result {result}")


@dataclass(frozen=True)
class ScanHit:
    """One servo found by :func:`scan`."""

    id: int
    model_number: int
    model: str
    protocol: int
    baud: int
    firmware: int | None = None

    def as_dict(self) -> dict:
        return {"id": self.id, "model_number": self.model_number, "model": self.model,
                "protocol": self.protocol, "baud": self.baud, "firmware": self.firmware}


class SdkClient:
    """A thin SDK wrapper: same calls, our exceptions, SI-free raw integers."""

    def __init__(self, port: str, baud: int, protocol: int = 2, margin_ms: float = 3.0):
        self.protocol = protocol
        self.port = open_port(port, baud, True, margin_ms)
        self.ph = packet_handler(protocol)

    def close(self) -> None:
        self.port.closePort()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def ping(self, servo_id: int, strict: bool = True) -> tuple[int, int | None]:
        """(model number, firmware or None); ``strict=False`` ignores the error byte
        (a servo with a latched alarm still answers a scan)."""
        number, result, error = self.ph.ping(self.port, servo_id)
        check_result(self.protocol, result, error if strict else 0, servo_id, "ping")
        firmware = None
        if self.protocol == 1:
            fw, result, error = self.ph.read1ByteTxRx(self.port, servo_id, 2)
            if result == dxl.COMM_SUCCESS and not error:
                firmware = fw
        else:
            data, result, error = self.ph.readTxRx(self.port, servo_id, 6, 1)
            if result == dxl.COMM_SUCCESS and not error and data:
                firmware = data[0]
        return number, firmware

    def broadcast_ping(self) -> dict[int, tuple[int, int]]:
        data, result = self.ph.broadcastPing(self.port)
        if result not in (dxl.COMM_SUCCESS, dxl.COMM_RX_TIMEOUT, dxl.COMM_RX_CORRUPT):
            check_result(self.protocol, result, 0, None, "broadcast ping")
        return {int(k): (int(v[0]), int(v[1])) for k, v in (data or {}).items()}

    def read(self, servo_id: int, address: int, size: int) -> int:
        fn = {1: self.ph.read1ByteTxRx, 2: self.ph.read2ByteTxRx, 4: self.ph.read4ByteTxRx}[size]
        value, result, error = fn(self.port, servo_id, address)
        check_result(self.protocol, result, error, servo_id, f"read {size} B at {address}")
        return value

    def write(self, servo_id: int, address: int, size: int, value: int) -> None:
        fn = {1: self.ph.write1ByteTxRx, 2: self.ph.write2ByteTxRx, 4: self.ph.write4ByteTxRx}[size]
        result, error = fn(self.port, servo_id, address, value)
        check_result(self.protocol, result, error, servo_id, f"write {size} B at {address}")

    def read_register(self, servo_id: int, model: str, name: str) -> int:
        reg = get_table(model)[name]
        return self.read(servo_id, reg.address, reg.size)

    def reboot(self, servo_id: int) -> None:
        result, error = self.ph.reboot(self.port, servo_id)
        check_result(self.protocol, result, error, servo_id, "reboot")


def scan(port: str, bauds, protocols, ids=range(0, 253), progress=None,
         margin_ms: float = 3.0) -> list[ScanHit]:
    """Every servo answering on ``port`` at each baud and protocol.

    Protocol 2.0: one broadcast ping per baud.  Protocol 1.0: one ping per id
    (no broadcast ping), with timeouts from the baud rate, not 34 ms each, and
    the ids that did not answer pinged once more: a reply later than its
    timeout (a loaded host, a noisy line) is dropped with the port's input
    before the next ping, and one miss must not hide a servo.
    ``progress(baud, protocol)`` is called before each pass.  ``margin_ms``
    is added to each reply's wire time: a few ms covers an FTDI adapter with
    its latency timer at 1 ms; a loaded machine or a 16 ms timer needs more.
    """
    hits: list[ScanHit] = []
    for baud in bauds:
        for protocol in protocols:
            if progress is not None:
                progress(baud, protocol)
            client = SdkClient(port, baud, protocol, margin_ms=margin_ms)
            try:
                if protocol == 2:
                    found = client.broadcast_ping()
                    for sid in sorted(found):
                        if sid in ids:
                            number, fw = found[sid]
                            hits.append(ScanHit(sid, number, model_name(number), 2, baud, fw))
                else:
                    found1 = {}
                    for _sweep in range(2):          # the second: the ids still silent
                        for sid in ids:
                            if sid in found1:
                                continue
                            try:
                                found1[sid] = client.ping(sid, strict=False)
                            except (BusTimeoutError, ChecksumError):
                                continue
                    for sid in sorted(found1):
                        number, fw = found1[sid]
                        hits.append(ScanHit(sid, number, model_name(number), 1, baud, fw))
            finally:
                client.close()
    return hits
