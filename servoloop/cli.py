"""The one command line, ``servoloop``, with one subcommand per job.

Each package contributes its subcommands through a ``register(subparsers)``
function in its own ``cli`` module; this file only assembles them, so a
package can add a subcommand without touching the others.  A subcommand sets
``func`` (taking the parsed namespace, returning an exit code).

Exit codes: 0 success, 1 a failure the command reports (a fault, a failed
fit), 2 bad usage or bad input (config, file, arguments), 3 a bus or
hardware error, 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import sys

__all__ = ["main", "build_parser", "COMMAND_MODULES"]

# Order sets the order in ``servoloop --help``.
COMMAND_MODULES = (
    "servoloop.controller.commands",       # run, status, stop, log
    "servoloop.firmware_bridge.cli",       # scan
    "servoloop.virtual_bus.cli",           # virtual-bus
    "servoloop.calibration.cli",           # calibrate
    "servoloop.bench.cli",                 # bench
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="servoloop",
        description="Run robots made of Dynamixel servos: daemon, calibration, virtual bus.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
