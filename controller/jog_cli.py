"""Move joints from the command line: ``servoloop goal``, ``servoloop jog``, ``servoloop zero``.

``goal`` and ``jog`` talk to a running daemon over its command socket
(``set_goal``, see docs/command-socket.md): the daemon's controller takes the
goal, and the safety stage clamps it to the joint limits and slew-limits it
(``safety.max_velocity``), so a step never reaches the servos as a jump.
``zero`` records the present joint readings as the config's ``offset``
fields (``q_servo = direction * q_joint + offset``: the offset is the servo
reading at joint zero), from a running daemon's status or, when none runs,
by reading the servos on the port.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from servoloop.exit_codes import EXIT_OK, EXIT_USAGE

__all__ = ["register", "parse_goal_args", "JogKeys", "cmd_goal", "cmd_jog", "cmd_zero"]


def register(sub) -> None:
    from servoloop.controller.commands import _socket_args

    p = sub.add_parser("goal", help="send joint goals to the running daemon (rad)",
                       description="Send a goal to the running daemon's controller over its command socket. "
                       "Joints left out keep their goal. The safety stage clamps to the limits and "
                       "slew-limits the motion.", epilog="example: servoloop goal shoulder=0.3 elbow=-0.5")
    p.add_argument("goal", nargs="+", metavar="JOINT=RAD", help="joint name and goal in rad")
    _socket_args(p)
    p.set_defaults(func=cmd_goal)
    p = sub.add_parser("jog", help="move joints from the keyboard (a terminal)",
                       description="Select a joint and step it from the keyboard; each step is a goal sent to "
                       "the running daemon (ramped by its safety stage). Keys: " + JogKeys.HELP)
    p.add_argument("--step", type=float, default=0.05, help="step, rad (default 0.05; [ and ] halve / double)")
    _socket_args(p)
    p.set_defaults(func=cmd_jog)
    p = sub.add_parser("zero", help="record the present joint positions as the config's offsets",
                       description="Set each servo's offset so the present pose reads joint zero: from the "
                       "running daemon's status, or by reading the servos when no daemon runs. The config "
                       "is rewritten in place keeping its comments, or written to --out.")
    p.add_argument("--config", help="robot config YAML to update (a built-in robot needs --out)")
    p.add_argument("--robot", default=None, help="built-in robot when no --config")
    p.add_argument("--out", help="write a new config file here instead of updating --config")
    p.add_argument("--joints", help="comma list of joints (default: all)")
    p.add_argument("--port", help="read the servos on this port (default: a running daemon, else bus.port)")
    p.add_argument("--socket", help="command socket of the running daemon")
    p.set_defaults(func=cmd_zero)


# ---------------------------------------------------------------------------
# goal


def parse_goal_args(items: list[str]) -> dict[str, float]:
    """``["a=0.3", "b=-1"]`` -> ``{"a": 0.3, "b": -1.0}``.

    Raises
    ------
    ValueError
        Naming the item that is not ``JOINT=RAD``.
    """
    goal = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name:
            raise ValueError(f"{item!r} is not JOINT=RAD (e.g. elbow=0.5)")
        try:
            goal[name] = float(value)
        except ValueError:
            raise ValueError(f"{item!r}: {value!r} is not a number of radians") from None
    return goal


def _send(args, request: dict) -> dict:
    from servoloop.controller.command_socket import send_command
    from servoloop.controller.commands import _find_socket

    return send_command(_find_socket(args), request)


def cmd_goal(args) -> int:
    """Send ``set_goal``; print the daemon's answer.  A refused goal: CommandError (exit 1)."""
    from servoloop.controller.errors import CommandError

    try:
        goal = parse_goal_args(args.goal)
    except ValueError as exc:
        print(f"servoloop goal: {exc}", file=sys.stderr)
        return EXIT_USAGE
    reply = _send(args, {"cmd": "set_goal", "goal": goal})
    if not reply.get("ok"):
        raise CommandError(f"the daemon refused the goal: {reply.get('error')}")
    print("goal accepted: " + ", ".join(f"{j} = {q:+.4f} rad" for j, q in goal.items()))
    return EXIT_OK


# ---------------------------------------------------------------------------
# jog


@dataclass
class JogKeys:
    """The keyboard state of ``servoloop jog``; :meth:`key` takes one key and says what to do.

    Parameters
    ----------
    joints : joint names, config order
    target : {joint: rad}, the goals to step from (the controller's target or the pose)
    step : rad per key press
    """

    HELP = ("up/down or tab: select joint, 1-9: joint by number, +/right: step up, -/left: step down, "
            "[ ]: halve / double the step, q or Ctrl-C: quit")
    joints: list[str]
    target: dict[str, float]
    step: float = 0.05
    index: int = 0
    message: str = field(default="")

    @property
    def joint(self) -> str:
        return self.joints[self.index]

    def key(self, key: str) -> dict[str, float] | None | bool:
        """One key (a character, or ``up``/``down``/``left``/``right``).

        Returns
        -------
        dict, None or False
            A goal ``{joint: rad}`` to send; None: nothing to send (selection, step size,
            an unknown key); False: quit.
        """
        if key in ("q", "Q", "\x03", "\x04", "\x1b"):
            return False
        if key in ("up", "\t", "k"):
            self.index = (self.index + (1 if key == "\t" else -1)) % len(self.joints)
        elif key in ("down", "j"):
            self.index = (self.index + 1) % len(self.joints)
        elif key.isdigit() and key != "0":
            if int(key) <= len(self.joints):
                self.index = int(key) - 1
        elif key in ("[", "]"):
            self.step = self.step * (2.0 if key == "]" else 0.5)
        elif key in ("+", "=", "right", "-", "_", "left"):
            sign = 1.0 if key in ("+", "=", "right") else -1.0
            q = self.target[self.joint] + sign * self.step
            return {self.joint: q}
        else:
            self.message = f"unknown key {key!r}; {self.HELP}"
            return None
        self.message = ""
        return None

    def accepted(self, goal: dict[str, float]) -> None:
        """The daemon took ``goal``: step from it next time."""
        self.target.update(goal)

    def line(self) -> str:
        j = self.joint
        return (f"[{self.index + 1}/{len(self.joints)}] {j}: goal {self.target[j]:+.4f} rad, "
                f"step {self.step:.4f} rad  {self.message}")


_ESCAPES = {"[A": "up", "[B": "down", "[C": "right", "[D": "left"}


def _read_key(fd) -> str:
    """One key from the terminal (raw mode): a character, or the name of an arrow key."""
    import os
    import select

    ch = os.read(fd, 1).decode(errors="replace")
    if ch == "\x1b" and select.select([fd], [], [], 0.05)[0]:
        seq = os.read(fd, 2).decode(errors="replace")
        return _ESCAPES.get(seq, "")
    return ch


def jog_state(status: dict, step: float) -> JogKeys:
    """A :class:`JogKeys` from a daemon status: joints in order, targets from the controller."""
    joints = list(status["joints"])
    target = dict(status["joints"])
    ctrl = status.get("controller") or {}
    if isinstance(ctrl.get("target"), dict):
        target.update({j: float(q) for j, q in ctrl["target"].items() if j in target and q is not None})
    return JogKeys(joints, {j: float(q) if q is not None else 0.0 for j, q in target.items()}, step)


def cmd_jog(args) -> int:
    """The keyboard loop; refuses without a terminal (exit 2)."""
    import termios
    import tty

    from servoloop.controller.errors import CommandError

    if not sys.stdin.isatty():
        print("servoloop jog: needs a terminal (stdin is not a tty); from a script use "
              "`servoloop goal JOINT=RAD ...`", file=sys.stderr)
        return EXIT_USAGE
    reply = _send(args, {"cmd": "status"})
    if not reply.get("ok"):
        raise CommandError(str(reply.get("error")))
    keys = jog_state(reply["status"], args.step)
    print(f"jogging {reply['status']['robot']}: {JogKeys.HELP}", file=sys.stderr)
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        while True:
            sys.stderr.write("\r\x1b[K" + keys.line())
            sys.stderr.flush()
            goal = keys.key(_read_key(fd))
            if goal is False:
                break
            if goal:
                r = _send(args, {"cmd": "set_goal", "goal": goal})
                if r.get("ok"):
                    keys.accepted(goal)
                    keys.message = ""
                else:
                    keys.message = f"refused: {r.get('error')}"
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        sys.stderr.write("\n")
    return EXIT_OK


# ---------------------------------------------------------------------------
# zero


def _present_servo_positions(args, cfg) -> tuple[dict[str, float], str]:
    """{joint: servo reading, rad} and where it came from (a daemon, or the servos on a port)."""
    from servoloop.controller.errors import CommandError

    if not args.port:
        try:
            reply = _send(args, {"cmd": "status"})
        except CommandError:
            reply = None  # no daemon: read the servos
        if reply is not None:
            if not reply.get("ok"):
                raise CommandError(str(reply.get("error")))
            st = reply["status"]
            joints = st.get("joints") or {}
            missing = [s.joint for s in cfg.servos if s.joint not in joints]
            if missing:
                raise CommandError(f"the running daemon ({st.get('robot')}) has no joint {missing[0]!r}: "
                                   "is it running this config?")
            return ({s.joint: s.direction * float(joints[s.joint]) + s.offset for s in cfg.servos},
                    f"the running daemon's status ({st.get('robot')}, state {st.get('state')})")
    port = args.port or cfg.bus.port
    if not port:
        raise CommandError("no daemon is running and no port is known: give --port or set bus.port")
    from servoloop.controller.runtime import make_bus

    bus = make_bus(cfg, port)
    with bus:
        return ({s.joint: float(bus.read(s.id, "present_position")) for s in cfg.servos},
                f"the servos on {port}")


def cmd_zero(args) -> int:
    """Record offsets; says whether it updated the config in place or wrote a new file."""
    from pathlib import Path

    from servoloop.controller.config import builtin_config, load_config
    from servoloop.controller.errors import ConfigError
    from servoloop.controller.yaml_edit import set_servo_fields

    if not args.config and not args.out:
        print("servoloop zero: give --config FILE (updated in place) or --out FILE", file=sys.stderr)
        return EXIT_USAGE
    cfg = load_config(args.config) if args.config else builtin_config(args.robot or "quadruped")
    names = [j.strip() for j in args.joints.split(",")] if args.joints else list(cfg.joint_names)
    unknown = [j for j in names if j not in cfg.joint_names]
    if unknown:
        raise ConfigError(f"--joints: no joint {unknown[0]!r}; joints: {', '.join(cfg.joint_names)}", cfg.source)
    present, source = _present_servo_positions(args, cfg)
    offsets = {cfg.joint_names.index(j): round(present[j], 6) for j in names}
    text = Path(cfg.source).read_text()
    new = set_servo_fields(text, {i: {"offset": v} for i, v in offsets.items()})
    out = Path(args.out) if args.out else Path(cfg.source)
    load_check = out.with_name(f".{out.name}.check")
    load_check.write_text(new)
    try:
        load_config(load_check)  # the edit must give a valid config before it replaces anything
    finally:
        load_check.unlink()
    out.write_text(new)
    how = ("updated in place, comments kept" if out.resolve() == Path(cfg.source).resolve()
           else f"a new file (from {cfg.source}, comments kept)")
    print(f"offsets from {source} -> {out} ({how}):")
    for i, v in offsets.items():
        s = cfg.servos[i]
        print(f"  {s.joint}: offset {s.offset:+.4f} -> {v:+.4f} rad (servo {s.id})")
    return EXIT_OK
