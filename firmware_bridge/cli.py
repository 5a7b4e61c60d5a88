"""firmware_bridge subcommands: scan, virtual-bus (filled in by the bus work)."""

__all__ = ["register"]


def register(sub) -> None:
    return None
