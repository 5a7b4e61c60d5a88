"""The one command line, ``servoloop``, with one subcommand per job.

Each package contributes its subcommands through a ``register(subparsers)``
function in its own ``cli`` module; this file only assembles them, so a
package can add a subcommand without touching the others.  A subcommand sets
``func`` (taking the parsed namespace, returning an exit code).

Start-up stays fast (``servoloop --help`` and ``servoloop status`` import
neither SciPy nor the kernels): ``register`` functions import nothing
heavy, and a subcommand whose options need a heavy module to be built uses
:func:`lazy_arguments`, so its module is imported only when that
subcommand is parsed or its help is shown.

Errors: :func:`main` catches every package's exceptions and maps them to
exit codes through the one table in :mod:`servoloop.exit_codes` (0 ok,
1 a failure the command reports, 2 bad usage or input, 3 bus or hardware
error, 130 interrupted), printing one line that names the command.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from servoloop.exit_codes import EXIT_INTERRUPTED, EXIT_USAGE, epilog, exit_code_for

__all__ = ["main", "build_parser", "lazy_arguments", "COMMAND_MODULES", "setup_logging", "log_level"]

# Order sets the order in ``servoloop --help``.
COMMAND_MODULES = (
    "servoloop.controller.commands",       # run, status, stop, log
    "servoloop.controller.init_cli",       # init, config
    "servoloop.firmware_bridge.cli",       # scan
    "servoloop.virtual_bus.cli",           # virtual-bus
    "servoloop.calibration.cli",           # calibrate
    "servoloop.bench.cli",                 # bench
    "servoloop.locomotion.cli",            # rom
    "servoloop.experiments.cli",           # experiment
)


def lazy_arguments(parser: argparse.ArgumentParser, add_arguments) -> argparse.ArgumentParser:
    """Let ``add_arguments(parser)`` run only when ``parser`` is used.

    ``parser`` is a subcommand's parser; its options are added the first
    time it parses arguments or formats its help, so the (heavy) module
    that knows them is imported only then.  Returns ``parser``.
    """
    done = []
    parse_known_args, format_help, format_usage = parser.parse_known_args, parser.format_help, parser.format_usage

    def load() -> None:
        if not done:
            done.append(True)
            add_arguments(parser)

    def lazy_parse_known_args(args=None, namespace=None):
        load()
        return parse_known_args(args, namespace)

    def lazy_format_help():
        load()
        return format_help()

    def lazy_format_usage():
        load()
        return format_usage()

    parser.parse_known_args = lazy_parse_known_args
    parser.format_help = lazy_format_help
    parser.format_usage = lazy_format_usage
    return parser


def build_parser() -> argparse.ArgumentParser:
    """The ``servoloop`` parser with every package's subcommands."""
    parser = argparse.ArgumentParser(
        prog="servoloop",
        description="Run robots made of Dynamixel servos: daemon, calibration, virtual bus.",
        epilog=epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _verbosity_args(parser, argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    for p in _subparsers(parser):  # -v / -q after the subcommand too (servoloop run -v)
        _verbosity_args(p, argparse.SUPPRESS)
    return parser


def _verbosity_args(p: argparse.ArgumentParser, default) -> None:
    have = {o for a in p._actions for o in a.option_strings}
    if "-v" not in have:
        p.add_argument("-v", "--verbose", action="count", default=default,
                       help="more log output (-v info, -vv debug); default: the config's logging.level, "
                            "else warnings")
    if "-q" not in have:
        p.add_argument("-q", dest="log_quiet", action="store_true", default=default,
                       help="errors only in the log output")


def _subparsers(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for p in dict.fromkeys(action.choices.values()):
                yield p
                yield from _subparsers(p)


LOG_FORMAT = "servoloop: %(levelname)s %(name)s: %(message)s"


def log_level(args, config_level: str | None = None) -> int:
    """The logging level: ``-q`` errors only, ``-v`` info, ``-vv`` debug; else ``config_level``
    (the config's ``logging.level``), else warnings."""
    import logging

    if getattr(args, "log_quiet", False):
        return logging.ERROR
    verbose = getattr(args, "verbose", 0) or 0
    if verbose:
        return logging.DEBUG if verbose > 1 else logging.INFO
    if config_level:
        return logging.getLevelName(config_level.upper())
    return logging.WARNING


def setup_logging(args, config_level: str | None = None) -> None:
    """Configure the ``servoloop`` loggers for this command (called again once a config is known)."""
    import logging

    logging.basicConfig(format=LOG_FORMAT)
    logging.getLogger().setLevel(log_level(args, config_level))


def _command_prog(parser: argparse.ArgumentParser, argv: list[str]) -> str:
    """``servoloop run``, ``servoloop log export``, ...: the deepest subcommand named in ``argv``."""
    p = parser
    for word in argv:
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            break
        if word in subs[0].choices:
            p = subs[0].choices[word]
    return p.prog


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``), run the subcommand, return its exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    setup_logging(args)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:
        code = exit_code_for(exc)
        if code is None:
            raise  # not an error a package reports: a bug, keep its traceback
        print(f"{_command_prog(parser, argv)}: {exc}", file=sys.stderr)
        return code


if __name__ == "__main__":
    sys.exit(main())
