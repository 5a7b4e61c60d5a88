"""``servoloop virtual-bus``: emulated servos with physics behind a pseudo-terminal."""

from __future__ import annotations

import json
import signal
import sys
import time

__all__ = ["register", "add_arguments", "run", "HELP"]

_EPILOG = """\
examples:
  servoloop virtual-bus --servos 1-12:XM430-W350 --baud 4000000
  servoloop virtual-bus --robot humanoid --faults drop:id=3:p=0.05,unplug:at=30
  servoloop virtual-bus --servos 1:AX-18A,2:XM430-W350     # Protocol 1.0 and 2.0 on one bus
The first line of stdout is the pty path; the bus serves until SIGTERM/SIGINT.
Faults: KIND[:KEY=VALUE...] joined by commas, KIND in drop, corrupt, delay,
hwerror, vanish, powercycle, unplug; keys id=N|A-B|A+B, p=0..1, at=S, until=S,
us=MICROSECONDS, bits=overload+overheat+voltage+encoder+electrical|INT, down=S, bytes=N.
"""


HELP = "emulate Dynamixel servos (with physics) on a pseudo-terminal"


def register(sub) -> None:
    """Add the ``virtual-bus`` subcommand to ``servoloop``'s subparsers."""
    add_arguments(sub.add_parser("virtual-bus", help=HELP))


def add_arguments(p) -> None:
    """Description and options of ``servoloop virtual-bus`` on its parser ``p``.

    Separate from :func:`register` so that ``servoloop`` can build this
    parser only when the subcommand is used (importing this package loads
    the engine and its physics).
    """
    import argparse

    p.description = ("Emulate Dynamixel servos with their control tables and physics behind a "
                     "pseudo-terminal. Prints the pty path on the first line, then serves until "
                     "SIGTERM/SIGINT.")
    p.epilog = _EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--servos", metavar="SPEC",
                       help='servos as IDS:MODEL items, e.g. "1-12:XM430-W350" or "1:AX-18A,2:AX-18A"; '
                            "Protocol 1.0 and 2.0 models may share the bus, each answering its own protocol")
    which.add_argument("--robot", metavar="NAME",
                       help="a built-in robot (bench, arm, quadruped, humanoid): its servo map, baud, protocol")
    which.add_argument("--config", metavar="FILE",
                       help="a robot config (the daemon's YAML): its servos, baud, protocol and, with a "
                            "URDF, the robot on the contact simulator")
    p.add_argument("--protocol", type=int, choices=(1, 2),
                   help="protocol every servo must speak (default: the robot's, or each servo's control table's)")
    p.add_argument("--baud", type=int, metavar="B",
                   help="the servos' baud rate; they answer only a host at this rate "
                        "(default: the robot's; with --servos: any rate)")
    p.add_argument("--faults", metavar="SPEC", help="faults to inject (see below)")
    p.add_argument("--wire-timing", action="store_true",
                   help="delay replies by their wire time at the baud rate plus Return Delay Time; "
                        "an instruction sent while replies are queued more than 50 ms ahead is not answered")
    p.add_argument("--physics", choices=("beside", "inline"), default="beside",
                   help="beside (default): answer at once from the latest state, physics stepped "
                        "between requests; inline: integrate up to now before each answer")
    p.add_argument("--fast-path", action="store_true",
                   help="answer the every-tick reads and goal sync writes from the compiled reply "
                        "path (physics beside, no wire timing); off by default, see docs/own-robot.md")
    p.add_argument("--realtime", action="store_true",
                   help="run under SCHED_FIFO (priority 10) when permitted, so replies are not late "
                        "behind other processes; a warning and normal scheduling otherwise")
    p.add_argument("--return-delay", type=int, metavar="RAW",
                   help="Return Delay Time register (2 us units) of every servo; default: factory (250)")
    p.add_argument("--actuator", metavar="SPEC",
                   help='actuator parameters per servo, e.g. "1-3:kp=9.272:kd=0.3069:inertia=0.004" '
                        "(fields: kp kd kc stall_torque damping_off inertia gravity_torque gravity_down_rad, "
                        "or any ServoModel / JointLoad field, e.g. no_load_speed_rad_s supply_voltage_v)")
    p.add_argument("--actuator-file", metavar="FILE",
                   help="a `servoloop calibrate` result (YAML): the emulated servos of its model (all "
                        "servos if it names none) take the calibrated parameters; --actuator items win; "
                        "on the contact simulator, the servo law it identified (kp, kd, friction, armature)")
    p.add_argument("--plant", metavar="MODULE:FUNCTION",
                   help="physics from FUNCTION(servos=[(id, model)], robot=NAME or None) -> Plant; "
                        "'contact' = the contact simulator (needs --robot or --config with a URDF), "
                        "'independent' = one independent load per servo (default for --servos; "
                        "for a config: its simulation.plant, else 'contact' when it has a URDF)")
    p.add_argument("--reboot-time", type=float, default=None, metavar="S",
                   help="seconds a servo is silent after answering REBOOT while it boots "
                        "(default 0.4, measured on an XC330; 0: answers at once)")
    p.add_argument("--seed", type=int, default=0, help="seed of position noise and fault draws")
    p.add_argument("--noise-ticks", type=float, default=0.25, metavar="STD",
                   help="position measurement noise, standard deviation in encoder ticks (default 0.25)")
    p.add_argument("--duration", type=float, metavar="S", help="stop by itself after S seconds")
    p.add_argument("--json", action="store_true", help="print a JSON summary on exit (after the path line)")
    p.set_defaults(func=run)


def _error(msg: str) -> int:
    print(f"servoloop virtual-bus: error: {msg}", file=sys.stderr)
    return 2


def _with_actuator_file(path, servos, actuators):
    """Calibrated ServoModel fields per matching servo, under the explicit ``--actuator`` items."""
    from servoloop.controller.calibration_file import actuator_overrides, load_calibration
    from servoloop.core_cy.actuator import ALIASES

    out = actuator_overrides(load_calibration(path), servos)
    for sid, values in (actuators or {}).items():
        # short names (kp) to field names (kp_nm_per_rad), so the item replaces the file's value
        out.setdefault(sid, {}).update({ALIASES.get(k, k): v for k, v in values.items()})
    return out


def _law_from_file(path, servos, plant) -> None:
    """The contact simulator's servos of the file's model take the servo law it identified
    (``RobotPlant.set_servo_law``: kp, kd, Coulomb and viscous friction, armature)."""
    from servoloop.controller.calibration_file import load_calibration, plant_law

    for i, figures in plant_law(load_calibration(path), servos).items():
        plant.set_servo_law([plant.joint_names[i]], **figures)


def _go_realtime(priority: int = 10) -> None:
    import os

    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except (OSError, AttributeError) as e:
        print(f"servoloop virtual-bus: warning: SCHED_FIFO not permitted ({e}); "
              "running with normal scheduling", file=sys.stderr)


def run(args) -> int:
    """Build the bus, print the pty path, serve; exit code 0, or 2 for bad input."""
    from servoloop.controller.errors import ConfigError
    from servoloop.virtual_bus.engine import REBOOT_SILENT_S, BusEngine
    from servoloop.virtual_bus.faults import FaultSpecError
    from servoloop.virtual_bus.server import PtyServer
    from servoloop.virtual_bus.spec import (
        ServoSpecError,
        config_plant,
        load_config_file,
        load_plant,
        normalize_servos,
        parse_actuator_spec,
        parse_servo_spec,
        robot_config,
    )

    protocol, baud = args.protocol, args.baud
    reboot_s = REBOOT_SILENT_S if args.reboot_time is None else args.reboot_time
    if not reboot_s >= 0:
        return _error(f"--reboot-time must be >= 0 s, got {args.reboot_time}")
    try:
        cfg = None
        if args.robot:
            cfg = robot_config(args.robot)
        elif args.config:
            cfg = load_config_file(args.config)
        if cfg is not None:
            servos = normalize_servos([(s.id, s.model) for s in cfg.servos], source=cfg.source or cfg.robot)
            # a mixed bus: each emulated servo speaks its own table's protocol (protocol None)
            protocol = protocol or (None if cfg.bus.protocol == "mixed" else cfg.bus.protocol)
            baud = baud or cfg.bus.baud
        else:
            servos = parse_servo_spec(args.servos)
        eeprom = {"return_delay_time": args.return_delay} if args.return_delay is not None else None
        actuators = parse_actuator_spec(args.actuator) if args.actuator else None
        target = args.plant if args.plant is not None else (config_plant(cfg) if cfg is not None else None)
        if target == "independent":
            target = None
        plant = load_plant(target, servos, args.robot, cfg) if target else None
        if args.actuator_file and hasattr(plant, "set_servo_law"):
            _law_from_file(args.actuator_file, servos, plant)     # the contact simulator's servos
        elif args.actuator_file:
            actuators = _with_actuator_file(args.actuator_file, servos, actuators)
        imu = None
        if cfg is not None and cfg.imu is not None:
            from servoloop.virtual_bus.imu_device import ImuEmulation

            imu = ImuEmulation.from_config(cfg.imu)      # the config's IMU board, on the plant's base
        engine = BusEngine(servos, plant=plant, protocol=protocol, baud=baud, faults=args.faults,
                           seed=args.seed, eeprom=eeprom, actuators=actuators,
                           noise_ticks=args.noise_ticks, reboot_s=reboot_s, imu=imu)
    except (ServoSpecError, FaultSpecError, ValueError, KeyError, ConfigError) as e:
        return _error(e.args[0] if e.args else str(e))
    if args.realtime:
        _go_realtime()
    server = PtyServer(engine, wire_timing=args.wire_timing, physics=args.physics,
                       fast=args.fast_path)
    # handlers first: a host may send SIGTERM the moment it has read the path
    old = {s: signal.signal(s, server.stop) for s in (signal.SIGTERM, signal.SIGINT)}
    print(server.port, flush=True)
    t0 = time.monotonic()
    try:
        server.serve(duration=args.duration)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if args.json:
        summary = {
            "port": server.port, "servos": [[sid, m] for sid, m in servos],
            "protocol": engine.protocol or sorted({s.protocol for s in engine.servos}),
            "baud": engine.bus_baud, "wire_timing": args.wire_timing,
            "uptime_s": round(time.monotonic() - t0, 3), **engine.stats, **server.stats, **engine.faults.counts,
            "faults_fired": engine.faults.fired,
        }
        print(json.dumps(summary), flush=True)
    return 0
