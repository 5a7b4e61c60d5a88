"""One exception hierarchy for everything on the wire.

A failed read raises one of these; it never yields a number.
"""

from __future__ import annotations

__all__ = [
    "BridgeError",
    "PortError",
    "BusTimeoutError",
    "ChecksumError",
    "MalformedPacketError",
    "ServoStatusError",
    "HardwareErrorStatus",
    "ModelMismatchError",
    "UnknownModelError",
    "UnsafeOperationError",
]


class BridgeError(Exception):
    """Base of every firmware_bridge error.

    A failed group read (sync/bulk) raises the error of its first failed
    servo with two extra attributes: ``failed_ids`` (tuple of ids) and
    ``failures`` ({id: exception}); the other errors leave them empty.
    """

    failed_ids: tuple = ()
    failures: dict = {}


class PortError(BridgeError):
    """The serial port could not be opened, configured, or went away (unplug)."""


class BusTimeoutError(BridgeError):
    """No complete reply arrived within the computed timeout.

    Attributes: ``servo_id`` (or None for a group), ``expected`` bytes,
    ``received`` bytes (what did arrive, kept for diagnosis), ``timeout_s``.
    """

    def __init__(self, msg: str, servo_id=None, expected=0, received=b"", timeout_s=0.0):
        super().__init__(msg)
        self.servo_id = servo_id
        self.expected = expected
        self.received = bytes(received)
        self.timeout_s = timeout_s


class ChecksumError(BridgeError):
    """Checksum (Protocol 1.0) or CRC-16 (Protocol 2.0) did not match."""

    def __init__(self, msg: str, packet: bytes = b"", servo_id=None):
        super().__init__(msg)
        self.packet = bytes(packet)
        self.servo_id = servo_id


class MalformedPacketError(BridgeError):
    """Bytes that cannot be a packet: bad header, impossible length, wrong instruction."""

    def __init__(self, msg: str, packet: bytes = b"", offset: int | None = None):
        super().__init__(msg)
        self.packet = bytes(packet)
        self.offset = offset


class ServoStatusError(BridgeError):
    """The servo answered with a non-zero error field; ``bits`` names each set bit."""

    def __init__(self, msg: str, servo_id: int, error_raw: int, bits: tuple[str, ...]):
        super().__init__(msg)
        self.servo_id = servo_id
        self.error_raw = error_raw
        self.bits = bits


class HardwareErrorStatus(ServoStatusError):
    """The servo reports a hardware error (overload, overheat, voltage, ...).

    X-series servos turn torque off when this latches; only a reboot clears it.
    """


class ModelMismatchError(BridgeError):
    """A servo answered with a model number other than the configured one."""


class UnknownModelError(BridgeError, KeyError):
    """No control table for that model name or number."""


class UnsafeOperationError(BridgeError):
    """A destructive operation (factory reset, ...) was asked for without ``confirm=True``."""

