"""calibration subcommands: calibrate (filled in by the calibration work)."""

__all__ = ["register"]


def register(sub) -> None:
    return None
