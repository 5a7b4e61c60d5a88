"""firmware_bridge subcommands: ``scan`` and ``setup``."""

__all__ = ["register"]


def register(sub) -> None:
    from servoloop.firmware_bridge.scan import register as register_scan
    from servoloop.firmware_bridge.setup_cli import register as register_setup

    register_scan(sub)
    register_setup(sub)
