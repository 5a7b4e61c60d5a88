"""A walking task (speed, incline) and the stride it implies at the fixed step duration."""

from __future__ import annotations

import math
from dataclasses import dataclass

from servoloop.locomotion.errors import RomInputError

__all__ = ["Task", "DURATION", "parse_floats"]

#: one half-gait step [s] (the authors' code fixes it; the paper does not say)
DURATION = 0.746


@dataclass(frozen=True)
class Task:
    """Walk at ``speed`` [m/s] up ``incline`` [rad] (negative: downhill)."""

    speed: float
    incline: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.speed) and 0.05 <= self.speed <= 1.0):
            raise RomInputError(f"task speed {self.speed!r} m/s: must lie in [0.05, 1.0] "
                                "(the five-link robot's legs are 1 m long)")
        if not (math.isfinite(self.incline) and abs(self.incline) <= 0.2):
            raise RomInputError(f"task incline {self.incline!r} rad: must lie in [-0.2, 0.2]")

    @property
    def stride(self) -> float:
        """Distance along the slope covered by one step [m]."""
        return self.speed * DURATION

    @property
    def case(self) -> str:
        """The benchmark row name, ``"v=<speed> incline=<rad>"``."""
        return f"v={self.speed:g} incline={self.incline:g}"


def parse_floats(text: str, what: str) -> list[float]:
    """``"0.3,0.4"`` -> [0.3, 0.4]; a clear :class:`RomInputError` naming ``what`` otherwise."""
    out = []
    for item in str(text).split(","):
        try:
            value = float(item)
        except ValueError:
            raise RomInputError(f"{what}: {item.strip()!r} is not a number "
                                f"(give a comma-separated list, e.g. 0.3,0.4)") from None
        if not math.isfinite(value):
            raise RomInputError(f"{what}: {item.strip()!r} is not finite")
        out.append(value)
    return out
