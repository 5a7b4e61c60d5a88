"""firmware_bridge subcommands: ``scan``, ``setup`` and ``models``."""

__all__ = ["register"]


def register(sub) -> None:
    from servoloop.firmware_bridge.models_cli import register as register_models
    from servoloop.firmware_bridge.scan import register as register_scan
    from servoloop.firmware_bridge.setup_cli import register as register_setup

    register_scan(sub)
    register_models(sub)
    register_setup(sub)
