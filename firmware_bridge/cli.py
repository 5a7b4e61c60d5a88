"""firmware_bridge subcommands: ``scan``."""

__all__ = ["register"]


def register(sub) -> None:
    from servoloop.firmware_bridge.scan import register as register_scan

    register_scan(sub)
