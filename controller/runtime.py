"""Assemble what the daemon runs on: a bus on a real port, on a virtual bus
process behind a pty, or (lockstep) on an in-process virtual bus driven by
simulated time.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from servoloop.controller.clock import SimulatedClock
from servoloop.controller.config import RobotConfig
from servoloop.controller.errors import ConfigError, ConnectError

__all__ = ["make_bus", "VirtualBusProcess", "Lockstep", "make_lockstep", "servo_spec_arg"]

log = logging.getLogger(__name__)


_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    """A ``preexec_fn`` (runs in the child between fork and exec) that asks the kernel
    to SIGKILL the child when its parent dies (Linux PR_SET_PDEATHSIG, kept across exec);
    None where prctl is not available.

    The libc lookup happens here, in the parent: the child only makes the call.  A
    parent that died before the call is caught by comparing the parent pid.
    """
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec():
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


def make_bus(cfg: RobotConfig, port: str, on_after_write=None):
    """A (closed) ``firmware_bridge.bus.Bus`` for the config's servos on ``port``."""
    from servoloop.firmware_bridge.bus import Bus, ServoSpec

    return Bus(port=port, baud=cfg.bus.baud, protocol=cfg.bus.protocol,
               servos=[ServoSpec(id=s.id, model=s.model) for s in cfg.servos],
               on_after_write=on_after_write)


def servo_spec_arg(cfg: RobotConfig) -> str:
    """``--servos`` argument of ``servoloop virtual-bus`` for the config's servos: ``ID:MODEL,...``."""
    return ",".join(f"{s.id}:{s.model}" for s in cfg.servos)


def _builtin_matches(cfg: RobotConfig) -> bool:
    """True when the config's servos and simulation section are those of the built-in robot
    of the same name (a changed ``simulation:``, e.g. pushes, is simulated as written)."""
    try:
        from servoloop.controller.config import builtin_config

        ref = builtin_config(cfg.robot)
    except Exception:  # noqa: BLE001 - any failure: not a built-in
        return False
    return ([(s.id, s.model) for s in ref.servos] == [(s.id, s.model) for s in cfg.servos]
            and ref.simulation == cfg.simulation)


@dataclass
class VirtualBusProcess:
    """``servoloop virtual-bus`` as a child process; ``port`` is its pty.

    The child dies with its parent (PR_SET_PDEATHSIG: a daemon killed with
    SIGKILL leaves no simulated servos behind).  Start it from the thread
    that lives as long as the daemon (the main thread): the kernel signals
    the child when the thread that forked it exits.

    Parameters
    ----------
    cfg : RobotConfig, the robot it simulates (``--robot`` for a built-in, else ``--servos``)
    faults : str or None, a ``--faults`` SPEC
    extra : list of str, more arguments
    fast_path : bool, answer the loop's sync / bulk reads and goal sync writes from the
        compiled reply path (``--fast-path``; the daemon reads at its own rate, never free-running)
    """

    cfg: RobotConfig
    faults: str | None = None
    extra: list[str] = field(default_factory=list)
    fast_path: bool = True
    startup_timeout_s: float = 30.0
    port: str | None = None
    proc: subprocess.Popen | None = None

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "servoloop.cli", "virtual-bus"]
        if _builtin_matches(self.cfg):
            cmd += ["--robot", self.cfg.robot]
        elif self.cfg.source:
            cmd += ["--config", str(self.cfg.source)]     # the robot's own URDF and contacts
        else:
            cmd += ["--servos", servo_spec_arg(self.cfg)]
        if self.cfg.bus.protocol != "mixed":      # mixed: each servo speaks its table's protocol
            cmd += ["--protocol", str(self.cfg.bus.protocol)]
        cmd += ["--baud", str(self.cfg.bus.baud)]
        if self.cfg.simulation.plant:
            cmd += ["--plant", self.cfg.simulation.plant]
        if self.faults:
            cmd += ["--faults", self.faults]
        if self.fast_path:
            cmd += ["--fast-path"]
        return cmd + list(self.extra)

    def start(self) -> str:
        """Start the process and wait (with a deadline) for the pty path on its first line."""
        if not _builtin_matches(self.cfg):
            _check_description(self.cfg)
        cmd = self.command()
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                     start_new_session=True, preexec_fn=_die_with_parent())
        deadline = time.monotonic() + self.startup_timeout_s
        line = b""
        fd = self.proc.stdout.fileno()
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                err = self._stderr_tail()
                self.stop()
                raise ConnectError(f"virtual bus ({' '.join(cmd[2:])}) did not start: {err or 'timeout'}")
            r, _, _ = select.select([fd], [], [], min(left, 0.2))
            if r:
                chunk = os.read(fd, 1)
                if not chunk:
                    continue
                line += chunk
        self.port = line.decode().strip()
        return self.port

    def make_realtime(self, priority: int) -> str | None:
        """SCHED_FIFO for the simulated servos too (they stand in for hardware); a warning or None."""
        from servoloop.controller.realtime import raise_process

        if self.proc is None:
            return "virtual bus not running"
        w = raise_process(self.proc.pid, priority)   # every thread: its reader answers the loop
        return None if w is None else f"SCHED_FIFO for the virtual bus refused: {w}"

    def keep_off_cpu(self, cpu: int) -> str | None:
        """Move the simulated servos off ``cpu`` (the loop's, ``loop.cpu``); a warning or None."""
        from servoloop.controller.realtime import pin_process

        if self.proc is None:
            return "virtual bus not running"
        try:
            others = os.sched_getaffinity(self.proc.pid) - {cpu}
        except OSError as exc:
            return f"virtual bus affinity: {exc}"
        return pin_process(self.proc.pid, others) if others else None

    def _stderr_tail(self) -> str:
        if self.proc is None or self.proc.stderr is None:
            return ""
        try:
            if self.proc.poll() is not None:
                return self.proc.stderr.read().decode(errors="replace").strip()[-2000:]
        except OSError:
            pass
        return ""

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 5 s; never raises."""
        p = self.proc
        if p is None:
            return
        try:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=5.0)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=5.0)
        except OSError:
            pass
        for f in (p.stdout, p.stderr):
            try:
                if f:
                    f.close()
            except OSError:
                pass
        self.proc = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()


@dataclass
class Lockstep:
    """An in-process virtual bus and the simulated clock that drives it."""

    virtual: object
    clock: SimulatedClock
    bus: object

    def close(self) -> None:
        for obj in (self.bus, self.virtual):
            close = getattr(obj, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:  # noqa: BLE001
                    pass


def _check_description(cfg: RobotConfig) -> None:
    """The robot description against the servos before it is simulated: what the simulator
    would refuse, said as ``servoloop config check`` says it (the key and its line)."""
    from servoloop.controller.config_checks import check_description, keyed_error

    if cfg.source is not None and cfg.urdf_path() is not None and cfg.simulation.plant in (None, "contact"):
        check_description(cfg, keyed_error(cfg.source))


def make_lockstep(cfg: RobotConfig, faults: str | None = None, plant=None) -> Lockstep:
    """Bus + clock for lockstep mode: ``pump`` after every write, ``advance(dt)`` per tick.

    The run is then a pure function of the config (and the fault seed):
    repeated runs are bit-identical.
    """
    try:
        from servoloop.virtual_bus import InProcessVirtualBus
    except ImportError as exc:
        raise ConnectError(f"lockstep needs virtual_bus.InProcessVirtualBus: {exc}") from exc
    from servoloop.firmware_bridge.bus import ServoSpec

    servos = [ServoSpec(id=s.id, model=s.model) for s in cfg.servos]
    if plant is None:
        from servoloop.virtual_bus.spec import config_plant, load_plant

        target = config_plant(cfg)
        if target != "independent" and not _builtin_matches(cfg):
            _check_description(cfg)
        if target != "independent":
            pairs = [(s.id, s.model) for s in cfg.servos]
            try:
                # a built-in robot as shipped (its pose, its contacts); any other config as written
                plant = (load_plant(target, pairs, cfg.robot) if _builtin_matches(cfg)
                         else load_plant(target, pairs, None, cfg))
            except (ValueError, KeyError) as exc:     # the robot description cannot be simulated
                raise ConfigError(f"cannot simulate the robot: {exc.args[0] if exc.args else exc}",
                                  cfg.source) from None
    kwargs = {}
    if faults:
        kwargs["faults"] = faults
    if cfg.imu is not None:
        from servoloop.virtual_bus.imu_device import ImuEmulation

        kwargs["imu"] = ImuEmulation.from_config(cfg.imu)    # the IMU board, on the plant's base (if any)
    # a mixed bus: each emulated servo speaks its control table's protocol (protocol None)
    virtual = InProcessVirtualBus(servos, plant, None if cfg.bus.protocol == "mixed" else cfg.bus.protocol,
                                  **kwargs)
    clock = SimulatedClock(on_advance=virtual.advance)
    bus = make_bus(cfg, virtual.port, on_after_write=virtual.pump)
    return Lockstep(virtual, clock, bus)
