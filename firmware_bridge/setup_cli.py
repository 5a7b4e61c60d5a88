"""``servoloop setup``: change an ID or a baud rate, reboot, factory-reset, read or write a register.

Each subcommand opens the port, works on one servo, and prints what it
found and did (``--json``: one object).  Exit codes: 0 done, 2 refused
(the message says why and what to do), 3 the bus or the servo failed.
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["register"]

EXIT_OK, EXIT_REFUSED, EXIT_BUS = 0, 2, 3

_EPILOG = """\
examples:
  servoloop setup id --port /dev/ttyUSB0 --baud 57600 --id 1 --new-id 7 --alone
  servoloop setup baud --port /dev/ttyUSB0 --baud 57600 --id 7 --new-baud 1000000
  servoloop setup read --port /dev/ttyUSB0 --id 7 present_temperature
  servoloop setup write --port /dev/ttyUSB0 --id 7 return_delay_time 0 --raw
  servoloop setup reboot --port /dev/ttyUSB0 --id 7
  servoloop setup reset --port /dev/ttyUSB0 --id 7 --keep keep-id-baud --yes

A new servo answers at ID 1, 57600 bps (Protocol 2.0; AX/MX 1.0: ID 1, 1 Mbps).
Registers are named as in `servoloop models --registers MODEL`; values are SI
(rad, rad/s, A, V, degC) unless --raw.
"""


def _common(p) -> None:
    p.add_argument("--port", required=True, help="serial device or pty path")
    p.add_argument("--baud", type=int, default=57_600, help="the servo's current baud rate (default 57600)")
    p.add_argument("--protocol", type=int, choices=(1, 2), default=2, help="protocol (default 2)")
    p.add_argument("--id", type=int, required=True, dest="servo_id", help="the servo's current ID")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def register(sub) -> None:
    p = sub.add_parser("setup", help="set servos up: ID, baud rate, reboot, reset, registers",
                       description="Set up one servo: change its ID or baud rate, reboot or "
                                   "factory-reset it, read or write a register.",
                       epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    ops = p.add_subparsers(dest="setup_op", metavar="OPERATION", required=True)
    q = ops.add_parser("id", help="give a servo a new ID (refused if the ID is taken)")
    _common(q)
    q.add_argument("--new-id", type=int, required=True)
    q.add_argument("--alone", action="store_true", help="refuse unless this servo is the only one on the bus")
    q = ops.add_parser("baud", help="set a servo's baud rate (checked at the new rate)")
    _common(q)
    q.add_argument("--new-baud", type=int, required=True)
    q = ops.add_parser("reboot", help="reboot a servo (clears a latched hardware error)")
    _common(q)
    q = ops.add_parser("reset", help="factory reset a servo")
    _common(q)
    q.add_argument("--keep", choices=("all", "keep-id", "keep-id-baud"), default="keep-id-baud",
                   help="what survives (Protocol 2.0; default keep-id-baud; 'all' resets ID and baud too)")
    q.add_argument("--yes", action="store_true", help="confirm: a factory reset erases the servo's settings")
    q = ops.add_parser("read", help="read one register")
    _common(q)
    q.add_argument("register", help="register name, e.g. present_position")
    q = ops.add_parser("write", help="write one register (read back)")
    _common(q)
    q.add_argument("register", help="register name, e.g. position_p_gain")
    q.add_argument("value", type=float, help="value in SI units (or the raw integer with --raw)")
    q.add_argument("--raw", action="store_true", help="VALUE is the raw register integer")
    p.set_defaults(func=run)


def _open(args, baud=None):
    from servoloop.firmware_bridge.bus import Bus

    return Bus(args.port, baud or args.baud, args.protocol).open()


def _do(args, bus, opened: list) -> dict:
    from servoloop.firmware_bridge import servo_setup as S

    op, sid = args.setup_op, args.servo_id
    if op == "id":
        return S.change_id(bus, sid, args.new_id, alone=args.alone)
    if op == "baud":
        def reopen(baud):
            bus.close()
            other = _open(args, baud)
            opened.append(other)
            return other
        return S.change_baud(bus, sid, args.new_baud, reopen=reopen)
    if op == "reboot":
        return S.reboot(bus, sid)
    if op == "reset":
        if not args.yes:
            raise S.SetupError("a factory reset erases the servo's settings: add --yes to confirm")
        return S.factory_reset(bus, sid, args.keep)
    if op == "read":
        return S.read_register(bus, sid, args.register)
    return S.write_register(bus, sid, args.register, args.value, raw=args.raw)


def _describe(op: str, out: dict) -> str:
    who = f"servo {out['id']} ({out['model']})"
    if op == "id":
        return f"servo {out['old_id']} ({out['model']}) now answers at ID {out['id']}"
    if op == "baud":
        check = "checked at the new rate" if out["verified"] else "not checked"
        return f"{who} now talks at {out['baud']} bps ({check})"
    if op == "reboot":
        return f"{who} rebooted"
    if op == "reset":
        moved = "" if out["now_id"] == out["id"] else f"; it now answers at ID {out['now_id']}"
        return f"{who} factory reset (kept: {out['kept']}){moved}"
    unit = f" {out['unit']}" if out.get("unit") and out["unit"] != "raw" else ""
    return f"{who} {out['register']} = {out['value']:g}{unit} (raw {out['raw']})"


def run(args) -> int:
    from servoloop.firmware_bridge.errors import BridgeError
    from servoloop.firmware_bridge.servo_setup import SetupError

    opened = []
    try:
        bus = _open(args)
        opened.append(bus)
        out = _do(args, bus, opened)
    except SetupError as exc:
        print(f"setup {args.setup_op}: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except BridgeError as exc:
        print(f"setup {args.setup_op}: {exc}", file=sys.stderr)
        return EXIT_BUS
    finally:
        for b in opened:
            b.close()
    print(json.dumps(out) if args.json else _describe(args.setup_op, out))
    return EXIT_OK
