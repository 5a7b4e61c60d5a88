"""What a :class:`~firmware_bridge.bus.Bus` reports: per-servo communication counters and
the result of :meth:`Bus.connect <firmware_bridge.bus.Bus.connect>` (both re-exported by
:mod:`firmware_bridge.bus`)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ServoHealth", "ConnectReport"]


@dataclass
class ServoHealth:
    """Per-servo communication counters since the bus was opened."""

    ok: int = 0
    timeouts: int = 0
    checksum_errors: int = 0
    malformed: int = 0
    error_bits: int = 0          # replies with a non-zero error byte
    hardware_errors: int = 0     # of which hardware (alert / overload / ...)
    stale: int = 0               # late replies to an earlier request, discarded
    implausible: int = 0         # positions faster than the servo can move (corrupt reads)
    last_error_raw: int = 0
    last_hardware_error_status: int | None = None

    @property
    def failures(self) -> int:
        return (self.timeouts + self.checksum_errors + self.malformed + self.error_bits
                + self.implausible)


@dataclass
class ConnectReport:
    """What :meth:`Bus.connect` found and changed."""

    port: str
    baud: int
    protocol: int | str          # 1, 2 or "mixed"
    servos: list[dict] = field(default_factory=list)
    latency_timer_ms: int | str = "n/a"
    latency_timer_fixed: bool = False
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"port": self.port, "baud": self.baud, "protocol": self.protocol,
                "servos": self.servos, "latency_timer_ms": self.latency_timer_ms,
                "latency_timer_fixed": self.latency_timer_fixed, "warnings": self.warnings}
