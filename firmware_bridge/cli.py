"""firmware_bridge subcommands: ``scan`` and ``virtual-bus``."""

__all__ = ["register"]


def register(sub) -> None:
    from servoloop.firmware_bridge.scan import register as register_scan
    from servoloop.virtual_bus.cli import register as register_virtual_bus

    register_scan(sub)
    register_virtual_bus(sub)
