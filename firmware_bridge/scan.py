"""``servoloop scan``: find every servo on a port, at every asked baud rate and protocol.

Prints a table, or with ``--json`` a JSON list
``[{"id", "model_number", "model", "protocol", "baud", "firmware"}]``.
Exit code 3 (bus/hardware error) when nothing answered or the port failed.
"""

from __future__ import annotations

import json
import sys

__all__ = ["register", "run", "DEFAULT_BAUDS", "NO_SERVO_HELP"]

# Factory default first (57600), then the rates robots use.
DEFAULT_BAUDS = (57600, 1_000_000, 2_000_000, 3_000_000, 4_000_000)
EXIT_OK, EXIT_USAGE, EXIT_BUS = 0, 2, 3

NO_SERVO_HELP = """\
no servo answered on {port} (baud {bauds}; protocol {protocols}).
Usual causes:
  - baud rate or protocol mismatch: scan more rates (--baud 9600 57600 115200 1000000
    2000000 3000000 4000000) and --protocol both; AX/MX(1.0) speak only Protocol 1.0
  - a new servo is at its factory default: ID 1, 57600 bps (Protocol 2.0 on X/MX(2.0))
  - no power: the servo LED blinks once at power-up; the USB adapter does not power servos
  - FTDI latency timer at 16 ms makes replies late: echo 1 > /sys/bus/usb-serial/devices/<ttyUSBn>/latency_timer
  - half-duplex wiring: TTL (3-pin) vs RS-485 (4-pin) port on the adapter, the U2D2 switch,
    or a missing direction control on a bare UART
  - two servos with the same ID corrupt each other's replies: connect one at a time"""


def register(sub) -> None:
    p = sub.add_parser("scan", help="find servos on a port (every ID, baud rate and protocol)")
    p.add_argument("--port", required=True, help="serial device or pty path")
    p.add_argument("--baud", type=int, nargs="+", default=list(DEFAULT_BAUDS),
                   help="baud rates to try (default: %(default)s)")
    p.add_argument("--protocol", choices=("1", "2", "both"), default="both")
    p.add_argument("--margin-ms", type=float, default=3.0,
                   help="ms added to each reply's wire time (raise it for a 16 ms FTDI latency timer)")
    p.add_argument("--json", action="store_true", help="print a JSON list")
    p.set_defaults(func=run)


def run(args) -> int:
    from servoloop.firmware_bridge.errors import BridgeError, PortError
    from servoloop.firmware_bridge.sdk import scan

    protocols = (1, 2) if args.protocol == "both" else (int(args.protocol),)
    for b in args.baud:
        if b <= 0:
            print(f"scan: bad baud rate {b}", file=sys.stderr)
            return EXIT_USAGE

    def progress(baud, protocol):
        if not args.json:
            print(f"scanning {args.port} at {baud} bps, Protocol {protocol}.0 ...", file=sys.stderr)

    try:
        hits = scan(args.port, args.baud, protocols, progress=progress, margin_ms=args.margin_ms)
    except PortError as exc:
        print(f"scan: {exc}", file=sys.stderr)
        return EXIT_BUS
    except BridgeError as exc:
        print(f"scan: {exc}", file=sys.stderr)
        return EXIT_BUS
    rows = [h.as_dict() for h in hits]
    if args.json:
        print(json.dumps(rows))
    else:
        for r in rows:
            fw = "?" if r["firmware"] is None else r["firmware"]
            print(f"id {r['id']:>3}  {r['model']:<14} (model {r['model_number']:>5}, firmware {fw})"
                  f"  Protocol {r['protocol']}.0 at {r['baud']} bps")
    if not rows:
        print(NO_SERVO_HELP.format(port=args.port, bauds=", ".join(map(str, args.baud)),
                                   protocols=" and ".join(f"{p}.0" for p in protocols)),
              file=sys.stderr)
        return EXIT_BUS
    return EXIT_OK
