"""``servoloop init`` (a config from the servos on a port) and ``servoloop config schema|check``.

``init`` scans the port, reads each servo's own limit registers and writes
a commented YAML config that runs as it is (``servoloop run --config FILE
--port P``): one ``servos:`` entry per servo with a joint name to edit and
the joint limits the servo itself enforces.  ``config schema`` prints the
JSON Schema editors validate against; ``config check`` loads a config the
way the daemon does and reports the first problem with its file and key.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

__all__ = ["register", "render_config"]

EXIT_OK, EXIT_USAGE, EXIT_BUS = 0, 2, 3

#: limit registers per family: (min, max) in the servo's frame
_LIMIT_REGISTERS = (("min_position_limit", "max_position_limit"), ("cw_angle_limit", "ccw_angle_limit"))


def register(sub) -> None:
    p = sub.add_parser("init", help="write a config for the servos found on a port",
                       description="Scan a port and write a commented robot config with every servo "
                                   "found (model, ID, a joint name to edit, limits from the servo's own "
                                   "limit registers). The file runs with servoloop run --config FILE --port P.")
    p.add_argument("--port", required=True, help="serial device or pty path")
    p.add_argument("--baud", type=int, nargs="+", default=None,
                   help="baud rate(s) to scan (default: the common rates)")
    p.add_argument("--protocol", choices=("1", "2", "both"), default="both")
    p.add_argument("--out", default="robot.yaml", help="config file to write (default robot.yaml)")
    p.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    p.set_defaults(func=cmd_init)
    c = sub.add_parser("config", help="the config's JSON Schema, or check a config file")
    ops = c.add_subparsers(dest="config_op", metavar="OPERATION", required=True)
    q = ops.add_parser("schema", help="print the JSON Schema of a robot config (for editors)")
    q.add_argument("--out", help="write it to this file instead of stdout")
    q.set_defaults(func=cmd_schema)
    q = ops.add_parser("check", help="load a config as the daemon does and report problems")
    q.add_argument("file")
    q.set_defaults(func=cmd_check)


def _limits(bus, sid: int) -> tuple[float, float] | None:
    table = bus.tables[sid]
    for lo_name, hi_name in _LIMIT_REGISTERS:
        if lo_name in table and hi_name in table:
            lo, hi = bus.read(sid, lo_name), bus.read(sid, hi_name)
            if hi > lo:
                return lo, hi
    return None


def _servo_rows(hits, port: str) -> list[dict]:
    """Each hit with its limits, read over one bus per (baud, protocol)."""
    from servoloop.firmware_bridge.bus import Bus, ServoSpec

    rows = []
    groups: dict[tuple[int, int], list] = {}
    for h in hits:
        groups.setdefault((h.baud, h.protocol), []).append(h)
    for (baud, protocol), group in groups.items():
        with Bus(port, baud, protocol, [ServoSpec(h.id, h.model) for h in group]) as bus:
            for h in group:
                rows.append({"id": h.id, "model": h.model, "baud": baud, "protocol": protocol,
                             "limits": _limits(bus, h.id)})
    return rows


def _id_ranges(ids) -> str:
    """``[1, 2, 3, 5]`` -> ``"1-3, 5"``."""
    ids, out = sorted(ids), []
    for i in ids:
        if out and i == out[-1][1] + 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in out)


def _mixed_settings(rows: list[dict]) -> str:
    """Why ``init`` cannot write one config: the servos found per (baud, protocol), in one
    line each rate, and what to do.  IDs found at several rates are said apart: a servo
    answers at one rate, so either servos share an ID at different rates (new servos, all
    ID 1) or the port answers at any rate (``servoloop virtual-bus --servos`` without
    ``--baud``)."""
    groups: dict[tuple[int, int], list[int]] = {}
    for r in rows:
        groups.setdefault((r["baud"], r["protocol"]), []).append(r["id"])
    found = "; ".join(f"{baud} bps / Protocol {proto}.0: id {_id_ranges(ids)}"
                      for (baud, proto), ids in sorted(groups.items()))
    msg = (f"the servos do not share one baud rate and protocol ({found}); set them alike "
           "with `servoloop setup baud` first, or scan one rate with --baud")
    seen: dict[int, int] = {}
    for r in rows:
        seen[r["id"]] = seen.get(r["id"], 0) + 1
    twice = [i for i, n in seen.items() if n > 1]
    if twice:
        msg += (f". IDs {_id_ranges(twice)} answered at more than one rate: servos sharing an ID "
                "at different rates (give each its own with `servoloop setup id --alone`), or a "
                "port that answers any rate (`servoloop virtual-bus --servos` without --baud)")
    return msg


_RATES_HZ = (1000, 500, 250, 100, 50, 20, 10)


def feasible_rate_hz(baud: int, n_servos: int) -> int:
    """The highest usual loop rate whose sync read + sync write fill at most 90 % of the wire.

    Per tick about 30 + 26 n bytes: the sync read instruction and the sync
    write header (~30), then per servo a status packet of position, velocity
    and current (21 bytes) and its slot of the sync write (5); 10 bits a
    byte.  12 servos at 4 Mbps: 0.86 ms, so 1 kHz (the built-in quadruped).
    """
    wire_s = (30 + 26 * n_servos) * 10.0 / baud
    return next((r for r in _RATES_HZ if wire_s * r <= 0.9), _RATES_HZ[-1])


def render_config(rows: list[dict], port: str) -> str:
    """The commented YAML text of a config for ``rows`` (id, model, baud, protocol, limits)."""
    baud, protocol = rows[0]["baud"], rows[0]["protocol"]
    rate = feasible_rate_hz(baud, len(rows))
    lines = [
        "# yaml-language-server: $schema=servoloop.schema.json",
        "# Robot config written by `servoloop init`. Edit the joint names, offsets and",
        "# directions; `servoloop config check` validates it, `servoloop config schema",
        "# --out servoloop.schema.json` gives editors its schema.",
        "# Joint angle q relates to the servo's reading by q_servo = direction * q + offset [rad].",
        "robot: my_robot",
        "# model: {urdf: my_robot.urdf, floating_base: false}   # dynamics, for model-based control",
        f"bus: {{port: {json.dumps(port)}, baud: {baud}, protocol: {protocol}}}",
        "servos:",
    ]
    for r in rows:
        lo, hi = r["limits"] if r["limits"] else (-3.14159, 3.14159)
        note = "limits from the servo's limit registers" if r["limits"] else "no limit registers: a full turn"
        lines.append(f"  - {{id: {r['id']}, model: {r['model']}, joint: joint_{r['id']}, "
                     f"min: {lo:.4f}, max: {hi:.4f}}}   # {note}")
    lines += [
        f"loop: {{rate_hz: {rate}}}            # what {baud} bps carries for {len(rows)} servo(s); "
        "a faster baud (servoloop setup baud) allows more",
        "controller: {name: hold}          # holds the pose found at startup",
        "shutdown: {mode: torque_off}",
        "",
    ]
    return "\n".join(lines)


def cmd_init(args) -> int:
    from servoloop.firmware_bridge.errors import BridgeError
    from servoloop.firmware_bridge.scan import DEFAULT_BAUDS, NO_SERVO_HELP
    from servoloop.firmware_bridge.sdk import scan

    out = Path(args.out)
    if out.exists() and not args.force:
        print(f"init: {out} exists; give another --out or --force", file=sys.stderr)
        return EXIT_USAGE
    bauds = args.baud or list(DEFAULT_BAUDS)
    protocols = (1, 2) if args.protocol == "both" else (int(args.protocol),)
    try:
        from servoloop.firmware_bridge.imu import imu_model_name

        hits = scan(args.port, bauds, protocols)
        # an IMU board (the OP3's OpenCR at 200) answers pings too: it is no servo
        boards = [h for h in hits if imu_model_name(h.model_number)]
        hits = [h for h in hits if not imu_model_name(h.model_number)]
        if not hits:
            print(NO_SERVO_HELP.format(port=args.port, bauds=", ".join(map(str, bauds)),
                                       protocols=" and ".join(f"{p}.0" for p in protocols)),
                  file=sys.stderr)
            return EXIT_BUS
        rows = _servo_rows(hits, args.port)
    except BridgeError as exc:
        print(f"init: {exc}", file=sys.stderr)
        return EXIT_BUS
    settings = {(r["baud"], r["protocol"]) for r in rows}
    if len(settings) > 1:
        print(f"init: {_mixed_settings(rows)}", file=sys.stderr)
        return EXIT_USAGE
    ids = [r["id"] for r in rows]
    if len(set(ids)) != len(ids):
        print(f"init: IDs found more than once {sorted(ids)}; give each servo its own ID with "
              "`servoloop setup id` first", file=sys.stderr)
        return EXIT_USAGE
    text = render_config(rows, args.port)
    for b in boards:
        text += (f"# imu: {{id: {b.id}, model: {imu_model_name(b.model_number)}}}   # an IMU board found on "
                 "the bus: with a floating-base model it feeds the base estimator (docs/own-robot.md)\n")
    out.write_text(text)
    listed = ", ".join(f"{r['id']}:{r['model']}" for r in rows)
    print(f"wrote {out}: {len(rows)} servo(s) ({listed})")
    return EXIT_OK


def cmd_schema(args) -> int:
    from servoloop.controller.schema import config_schema
    from servoloop.firmware_bridge.control_table import MODELS

    text = json.dumps(config_schema(sorted(MODELS)), indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n")
    else:
        print(text)
    return EXIT_OK


def cmd_check(args) -> int:
    from servoloop.controller.config import load_config
    from servoloop.controller.config_checks import check_description, keyed_error
    from servoloop.controller.errors import ConfigError

    try:
        cfg = load_config(args.file)
        warnings = check_description(cfg, keyed_error(args.file))
    except ConfigError as exc:
        print(f"config check: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"{args.file}: ok ({len(cfg.servos)} servos, controller {cfg.controller.name})")
    for w in warnings:
        print(f"config check: {args.file}: warning: {w}", file=sys.stderr)
    return EXIT_OK

