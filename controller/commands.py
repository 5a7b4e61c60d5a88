"""controller subcommands: ``run``, ``status``, ``stop``, ``log export``, ``log plot``, ``log info``.

Exit codes come from the one table, :mod:`servoloop.exit_codes`: errors
propagate to ``servoloop.cli.main`` (a run that ends in a fault raises the
error of its first fault, :func:`controller.faults.fault_error`): 0 ok,
1 the run ended in a fault / a command failed, 2 bad input (config,
arguments, telemetry file), 3 bus or hardware error while connecting.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import threading
from pathlib import Path

__all__ = ["register"]

from servoloop.controller.summary_text import print_status, print_summary
from servoloop.exit_codes import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE


def register(sub) -> None:
    _register_run(sub)
    p = sub.add_parser("status", help="state of a running daemon (over its command socket)")
    _socket_args(p)
    p.add_argument("--json", action="store_true", help="print the raw status object")
    p.set_defaults(func=cmd_status)
    p = sub.add_parser("stop", help="ask a running daemon to shut down cleanly")
    _socket_args(p)
    p.set_defaults(func=cmd_stop)
    from servoloop.controller.jog_cli import register as register_jog

    register_jog(sub)
    _register_log(sub)


# ---------------------------------------------------------------------------
# run


def _register_run(sub) -> None:
    p = sub.add_parser(
        "run",
        help="run the control daemon (default: the built-in simulated quadruped)",
        description="Run the fixed-rate control daemon. Without --config/--port it starts the "
        "built-in simulated robot: a virtual servo bus process behind a pty.",
    )
    p.add_argument("--config", help="robot config YAML (default: the built-in --robot)")
    p.add_argument("--robot", default="quadruped", help="built-in robot when no --config (default quadruped)")
    p.add_argument("--port", help="serial port (overrides bus.port; none: built-in virtual bus)")
    p.add_argument("--rate", type=float, help="loop rate, Hz (overrides loop.rate_hz)")
    p.add_argument("--duration", type=float, help="run for S seconds of loop time, then shut down")
    p.add_argument("--controller", help="controller name (overrides controller.name; params cleared "
                   "unless it is the config's own, but the robot's standing pose carries over)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="a controller parameter (repeatable; VALUE is read as YAML: 0.1, inf, [a, b], "
                        "{x: 0.1}); overrides the config's, e.g. --controller trot --param speed_mps=0.1")
    p.add_argument("--calibration", metavar="FILE", help="a `servoloop calibrate` result (YAML): sets "
                   "position_stiffness and the gearbox friction it identified (coulomb_friction, "
                   "viscous_friction) of the servos of its model and pins the firmware gain it was made at")
    p.add_argument("--readonly", action="store_true", help="never write to the servos: no torque, no goals")
    p.add_argument("--lockstep", action="store_true",
                   help="simulated time against an in-process virtual bus (bit-reproducible)")
    p.add_argument("--json", action="store_true", help="end by printing one JSON summary object")
    p.add_argument("--telemetry", help="telemetry file (default logging.telemetry; 'none' for no file)")
    p.add_argument("--socket", help="command socket path (default socket.path; 'none' for no socket)")
    p.add_argument("--faults", help="fault SPEC for the built-in virtual bus (see servoloop virtual-bus)")
    p.add_argument("--sched-fifo", action="store_true", help="ask for SCHED_FIFO (loop.sched_fifo)")
    p.add_argument("--read-ahead", action="store_true",
                   help="send each tick's read at the end of the previous tick (loop.read_ahead)")
    p.add_argument("--no-late-read", dest="late_read", action="store_false", default=None, help="with "
                   "read-ahead, wait for late replies, not run on the last reading (loop.late_read: false)")
    p.add_argument("--cpu", type=int, help="run the loop thread alone on this CPU (loop.cpu)")
    p.add_argument("--cpu-latency-us", type=int, metavar="US",
                   help="hold the CPUs' wake-up latency at US while running (loop.cpu_latency_us; "
                        "0: idle CPUs poll instead of sleeping)")
    p.add_argument("--spin-us", type=float,
                   help="busy-wait tail before each deadline, us (loop.spin_s; 0: never spin)")
    p.add_argument("--quiet", action="store_true", help="no live status line")
    p.add_argument("--live", nargs="?", type=int, const=8765, metavar="PORT",
                   help="serve a live view for Foxglove on ws://localhost:PORT (default 8765): joints, "
                   "servo temperatures/voltages/errors, loop timing, 3D robot, events")
    p.set_defaults(func=cmd_run)


def _load_cfg(args):
    from servoloop.controller.config import builtin_config, load_config

    cfg = load_config(args.config) if args.config else builtin_config(args.robot)
    over = {}
    if args.rate is not None:
        over["loop.rate_hz"] = float(args.rate)
    if args.sched_fifo:
        over["loop.sched_fifo"] = True
    if getattr(args, "cpu", None) is not None:
        over["loop.cpu"] = args.cpu
    if getattr(args, "cpu_latency_us", None) is not None:
        over["loop.cpu_latency_us"] = args.cpu_latency_us
    if getattr(args, "read_ahead", False):
        over["loop.read_ahead"] = True
    over.update({"loop.late_read": False} if getattr(args, "late_read", None) is False else {})
    if getattr(args, "spin_us", None) is not None:
        over["loop.spin_s"] = args.spin_us * 1e-6
    if args.controller and args.controller != cfg.controller.name:
        from servoloop.controller.config import ControllerConfig

        over["controller"] = ControllerConfig(name=args.controller,
                                              params=_carried_pose(cfg, args.controller))
    if getattr(args, "param", None):
        from servoloop.controller.config import ControllerConfig

        base = over.get("controller", cfg.controller)
        given = _params_arg(args.param)
        _check_param_keys(cfg, base.name, given)
        over["controller"] = ControllerConfig(name=base.name, params={**(base.params or {}), **given})
    cfg = cfg.with_overrides(**over) if over else cfg
    if getattr(args, "calibration", None):
        from servoloop.controller.calibration_file import apply_calibration, load_calibration

        cfg = apply_calibration(cfg, load_calibration(args.calibration))
    return cfg


def _params_arg(items) -> dict:
    """``--param KEY=VALUE`` items -> {key: value}, each VALUE read as YAML.

    Raises
    ------
    ConfigError
        An item without ``=`` or a key, or a VALUE that is not YAML (the item is named).
    """
    import yaml

    from servoloop.controller.errors import ConfigError

    out = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--param {item!r}: expected KEY=VALUE, e.g. --param speed_mps=0.1")
        try:
            out[key] = yaml.safe_load(text) if text.strip() else None
        except yaml.YAMLError as exc:
            raise ConfigError(f"--param {item!r}: VALUE is not YAML ({str(exc).splitlines()[0]})") from None
    return out


def _carried_pose(cfg, name: str) -> dict:
    """The params a controller named on the command line starts with: none, but the robot's
    standing pose (the config's own controller's ``pose`` / ``posture``) under the key the new
    controller takes it by, so ``--controller wbc`` on a config written for ``hold`` stands the
    robot where the config does (not in its ``startup.via`` crouch)."""
    from pathlib import Path

    from servoloop.controller.controllers import get_controller_class
    from servoloop.controller.errors import ConfigError

    params = cfg.controller.params or {}
    pose = next((params[k] for k in ("posture", "pose") if isinstance(params.get(k), dict)), None)
    if pose is None:
        return {}
    try:
        keys = get_controller_class(name, Path(cfg.source).parent if cfg.source else None).param_keys
    except (ConfigError, ValueError, ImportError):
        return {}        # an unknown name: the daemon reports it where it makes the controller
    key = next((k for k in ("posture", "pose") if k in keys), None)
    return {key: dict(pose)} if key else {}


def _check_param_keys(cfg, name: str, given: dict) -> None:
    """A ``--param`` key the controller ``name`` does not take: ConfigError naming the option
    (not the robot's file, which does not have it); an unknown controller is left to the
    daemon, which names it where it makes the controller."""
    from pathlib import Path

    from servoloop.controller.controllers import get_controller_class
    from servoloop.controller.errors import ConfigError

    try:
        keys = get_controller_class(name, Path(cfg.source).parent if cfg.source else None).param_keys
    except (ConfigError, ValueError, ImportError):
        return
    unknown = [k for k in given if k not in keys]
    if unknown:
        raise ConfigError(f"--param {unknown[0]}: controller {name!r} has no parameter {unknown[0]!r}; "
                          f"known: {', '.join(keys) or 'none'}")


def _path_arg(value):
    if value is None:
        return "auto"
    return None if value.lower() == "none" else value


def cmd_run(args) -> int:
    """Run the daemon; print its summary.  A fault raises the error its first fault maps to."""
    import logging

    from servoloop.cli import setup_logging
    from servoloop.controller.errors import ConfigError
    from servoloop.controller.faults import fault_error
    from servoloop.controller.run_advice import missed_ticks_advice, rate_fit_warning

    cfg = _load_cfg(args)  # ConfigError / ControllerParamError: exit 2 (servoloop.exit_codes)
    setup_logging(args, cfg.logging.level)   # -v / -q win over the config's logging.level
    live = _live_view(args)
    if live is False:
        return EXIT_USAGE
    too_fast = None if args.lockstep else rate_fit_warning(cfg)
    if too_fast:
        logging.getLogger("servoloop").warning("%s", too_fast)
    vproc = None
    lock = None
    try:
        bus, clock = None, None
        if args.lockstep:
            from servoloop.controller.runtime import make_lockstep

            lock = make_lockstep(cfg, faults=args.faults)
            bus, clock = lock.bus, lock.clock
        else:
            from servoloop.controller.runtime import VirtualBusProcess, make_bus

            port = args.port or cfg.bus.port
            if port is None:
                vproc = VirtualBusProcess(cfg, faults=args.faults)
                port = vproc.start()
                if cfg.loop.sched_fifo:
                    warning = vproc.make_realtime(cfg.loop.priority - 1)
                    if warning:
                        logging.getLogger("servoloop").warning(warning)
                if cfg.loop.cpu is not None:
                    warning = vproc.keep_off_cpu(cfg.loop.cpu)
                    if warning:
                        logging.getLogger("servoloop").warning(warning)
            bus = make_bus(cfg, port)
        from servoloop.controller.daemon import Daemon

        try:
            daemon = Daemon(cfg, bus, clock, readonly=args.readonly,
                            telemetry_path=_path_arg(args.telemetry), socket_path=_path_arg(args.socket),
                            install_signals=True)
        except ValueError as exc:  # a value the config loader let through but the loop refuses
            raise ConfigError(str(exc), cfg.source) from exc
        daemon.outputs.live = live
        if too_fast:
            daemon.warnings.append(too_fast)
        printer = None
        if not args.quiet:
            printer = StatusLine(daemon, sys.stderr)
            printer.start()
            daemon.helper_threads.append(printer._thread)
        base_state = getattr(lock.virtual.engine.plant, "base_state", None) if lock is not None else None
        # where the robot lay when the servos were powered up (the plant lets it fall and settle
        # first): the estimate starts from there, so its position compares with the truth's move
        power_up = base_state() if base_state is not None else None
        run_start = []      # and where it stood as the run began (after the startup ramp)
        if base_state is not None:
            daemon.run_start_hooks.append(lambda: run_start.append(base_state()))
        try:
            summary = daemon.run(args.duration)
        finally:
            if printer is not None:
                printer.stop()
        if base_state is not None and base_state() is not None:
            summary["simulation"] = base_state()      # the plant's truth, to compare with estimates
            summary["simulation"]["at_power_up"] = power_up
            summary["simulation"]["at_run_start"] = run_start[0] if run_start else None
    finally:
        if vproc is not None:
            vproc.stop()
        if lock is not None:
            lock.close()
    advice = missed_ticks_advice(summary, cfg.loop.rate_hz)
    if advice:
        summary["advice"] = [advice]
    if args.json:
        print(json.dumps(_finite(summary)))
    else:
        print_summary(summary)
    if summary["state"] == "fault":
        raise fault_error(daemon.faults)
    if summary.get("stop_reason") == "SIGINT":
        return EXIT_INTERRUPTED  # Ctrl-C: a clean stop, but an interrupted run (exit_codes: 130)
    return EXIT_OK


def _live_view(args):
    """The LiveView of ``--live`` (None without it; False, said why, when it cannot be had)."""
    if getattr(args, "live", None) is None:
        return None
    from servoloop.controller.live import LiveView, LiveViewError, require_sdk

    try:
        require_sdk()
        return LiveView(args.live, announce=lambda url: print(
            f"servoloop: live view on {url} (Foxglove: Open connection, Foxglove WebSocket)",
            file=sys.stderr, flush=True))
    except LiveViewError as exc:
        print(f"servoloop run: --live: {exc}", file=sys.stderr)
        return False


def _finite(obj):
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


class StatusLine:
    """Prints the robot's state, then loop timing, to ``stream`` twice a second (own thread).

    The robot first: lifecycle state, the worst tracking error (|goal - position|) with
    its joint, the hottest servo; then rate, jitter p99, misses and bus errors, which are
    only shown once the run state has ticks to measure (never ``0.0 Hz``/``nan`` while
    starting up).
    """

    def __init__(self, daemon, stream, period_s: float = 0.5) -> None:
        self.daemon = daemon
        self.stream = stream
        self.period_s = period_s
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="servoloop-status", daemon=True)
        self._printed = False

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)
        if self._printed and self.tty:
            self.stream.write("\n")
            self.stream.flush()

    def line(self) -> str:
        return status_text(self.daemon)

    def _run(self) -> None:
        every = 1 if self.tty else 4  # a pipe or a log file gets a line every 2 s
        k = 0
        while not self._stop.wait(self.period_s):
            k += 1
            if k % every:
                continue
            try:
                text = self.line()
                self.stream.write(("\r\x1b[K" + text) if self.tty else text + "\n")
                self.stream.flush()
                self._printed = True
            except (OSError, ValueError):
                return


def status_text(d) -> str:
    """The status line of daemon ``d``: robot first, timing second (read from another thread:
    copies of the arrays, so a tick that writes them meanwhile shows one tick's mix at worst)."""
    import numpy as np

    state = d.lifecycle.state.label
    parts = [f"[servoloop] {state:<8} t={d.t_s():7.2f} s"]
    names = d.joint_names
    err = np.abs(np.array(d.goal) - np.array(d.state.position))
    if state in ("startup", "run", "shutdown") and np.isfinite(err).any():
        i = int(np.nanargmax(err))
        parts.append(f"worst error {err[i]:.3f} rad ({names[i]})")
    temp = getattr(getattr(d.loop, "monitor", None), "temperature", None)
    if temp is not None and np.isfinite(temp).any():
        i = int(np.nanargmax(temp))
        parts.append(f"hottest {temp[i]:.0f} degC (servo {d.ids[i]}, {names[i]})")
    if d.run_ticks > 0:
        errs = sum(d.bus_errors.values())
        parts.append(f"{d.rate_now():.1f} Hz, p99 {d.jitter.percentile_us(99):.0f} us, missed {d.rate.missed}, "
                     f"bus errors {errs}")
    return " | ".join(parts)


# ---------------------------------------------------------------------------
# status / stop


def _socket_args(p) -> None:
    p.add_argument("--socket", help="command socket path (default: the one running daemon's)")
    p.add_argument("--robot", help="robot name, to find its default socket")


def _find_socket(args) -> Path:
    from servoloop.controller.command_socket import (
        check_private_dir,
        default_socket_path,
        socket_dir,
    )
    from servoloop.controller.errors import CommandError

    if args.socket:
        return Path(args.socket)
    # the default directory must be ours and private: a squatted one is refused, not trusted
    check_private_dir(socket_dir(), create=False)
    if args.robot:
        return default_socket_path(args.robot)
    found = sorted(socket_dir().glob("*.sock"))
    if len(found) == 1:
        return found[0]
    if not found:
        raise CommandError(f"no daemon socket in {socket_dir()} (is `servoloop run` running?)")
    raise CommandError("several daemons are running; choose one with --socket: "
                       + ", ".join(str(f) for f in found))


def cmd_status(args) -> int:
    """Print the running daemon's status; no daemon or an error reply: CommandError (exit 1)."""
    from servoloop.controller.command_socket import send_command
    from servoloop.controller.errors import CommandError

    reply = send_command(_find_socket(args), {"cmd": "status"})
    if not reply.get("ok"):
        raise CommandError(str(reply.get("error")))
    st = reply["status"]
    if args.json:
        print(json.dumps(st))
        return EXIT_OK
    print_status(st)
    return EXIT_OK


def cmd_stop(args) -> int:
    """Ask the running daemon to stop; no daemon or an error reply: CommandError (exit 1)."""
    from servoloop.controller.command_socket import send_command
    from servoloop.controller.errors import CommandError

    path = _find_socket(args)
    reply = send_command(path, {"cmd": "stop", "reason": "servoloop stop"})
    if not reply.get("ok"):
        raise CommandError(str(reply.get("error")))
    print(f"stop requested (the daemon at {path} answered)")
    return EXIT_OK


# ---------------------------------------------------------------------------
# log


def _register_log(sub) -> None:
    p = sub.add_parser("log", help="telemetry files: export, plot, info")
    lsub = p.add_subparsers(dest="log_command", metavar="ACTION", required=True)
    e = lsub.add_parser("export", help="telemetry to CSV and/or MCAP")
    e.add_argument("file", help="telemetry file (.sltl)")
    e.add_argument("--csv", help="CSV output path")
    e.add_argument("--mcap", help="MCAP output path (needs the mcap package)")
    e.set_defaults(func=cmd_log_export)
    pl = lsub.add_parser("plot", help="joint tracking and loop timing to PNG (every joint, in pages)",
                         description="Measured vs goal position of each joint (12 a page: OUT.png, OUT-2.png, "
                         "...) and the loop timing.")
    pl.add_argument("file", help="telemetry file (.sltl)")
    pl.add_argument("--out", required=True, help="PNG output path (first page)")
    pl.add_argument("--joints", help="comma list of joints (default: all)")
    pl.add_argument("--from", dest="t_from", type=float, metavar="S", help="start of the window, s")
    pl.add_argument("--to", dest="t_to", type=float, metavar="S", help="end of the window, s")
    pl.add_argument("--per-page", type=int, default=12, help="joints per page (default 12)")
    pl.set_defaults(func=cmd_log_plot)
    i = lsub.add_parser("info", help="header, row count, events, damage report")
    i.add_argument("file")
    i.add_argument("--json", action="store_true")
    i.set_defaults(func=cmd_log_info)


def _read(path):
    from servoloop.controller.telemetry_format import read_telemetry

    return read_telemetry(path)


def cmd_log_export(args) -> int:
    from servoloop.controller.log_export import export_csv, export_mcap

    if not args.csv and not args.mcap:
        print("servoloop log export: give --csv OUT and/or --mcap OUT", file=sys.stderr)
        return EXIT_USAGE
    try:
        tel = _read(args.file)
        for p in tel.problems:
            print(f"servoloop log export: {args.file}: {p}", file=sys.stderr)
        if args.csv:
            n = export_csv(tel, args.csv)
            print(f"{args.csv}: {n} rows")
        if args.mcap:
            n = export_mcap(tel, args.mcap)
            print(f"{args.mcap}: {n} messages")
    except (ImportError, OSError) as exc:  # no mcap package, an output that cannot be written
        print(f"servoloop log export: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def cmd_log_plot(args) -> int:
    from servoloop.controller.log_plot import plot_pages

    tel = _read(args.file)
    joints = [j.strip() for j in args.joints.split(",") if j.strip()] if args.joints else None
    if args.per_page < 1:
        print("servoloop log plot: --per-page must be >= 1", file=sys.stderr)
        return EXIT_USAGE
    try:
        pages = plot_pages(tel, args.out, joints=joints, t_from=args.t_from, t_to=args.t_to,
                               per_page=args.per_page)
    except (OSError, ValueError) as exc:  # an output that cannot be written, a joint or window not there
        print(f"servoloop log plot: {args.file}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for page in pages:
        print(page)
    return EXIT_OK


def cmd_log_info(args) -> int:
    tel = _read(args.file)
    info = {"robot": tel.header.get("robot"), "rate_hz": tel.header.get("rate_hz"),
            "rows": int(tel.data.shape[0]), "columns": len(tel.columns), "events": tel.events,
            "summary": tel.summary, "truncated": tel.truncated, "gaps": tel.gaps,
            "problems": tel.problems}
    if args.json:
        print(json.dumps(_finite(info)))
    else:
        print(f"{args.file}: robot {info['robot']}, {info['rows']} rows x {info['columns']} columns "
              f"at {info['rate_hz']} Hz; {'clean end' if tel.summary else 'no summary (crash or kill)'}")
        for ev in tel.events:
            print(f"  [{ev.get('tick')}] {ev.get('kind')}: {ev.get('message')}")
        for p in tel.problems:
            print(f"  damaged: {p}")
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    ap = argparse.ArgumentParser()
    register(ap.add_subparsers())
