"""firmware_bridge subcommands: ``scan`` and ``virtual-bus``.

``virtual-bus`` is built lazily: importing the virtual bus loads its engine
and physics, which ``servoloop --help`` must not pay for.
"""

__all__ = ["register"]

_VIRTUAL_BUS_HELP = "emulate Dynamixel servos (with physics) on a pseudo-terminal"


def register(sub) -> None:
    from servoloop.cli import lazy_arguments
    from servoloop.firmware_bridge.scan import register as register_scan

    register_scan(sub)
    lazy_arguments(sub.add_parser("virtual-bus", help=_VIRTUAL_BUS_HELP), _virtual_bus_arguments)


def _virtual_bus_arguments(parser) -> None:
    from servoloop.virtual_bus.cli import add_arguments

    add_arguments(parser)
