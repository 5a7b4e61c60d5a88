"""The daemon: lifecycle, the fixed-rate tick, faults, stop paths.

One tick (every array allocated in ``__init__``)::

    clock.wait (absolute deadline) -> bus sync read -> estimate (servo -> joint)
      -> control (ramp | controller | stop) -> safety (clamp, limits, comm window)
      -> actuate (joint -> servo, torque -> current or goal offset)
      -> bus sync write -> copy into the telemetry ring

The daemon owns the bus it is given: whatever happens it ends with the
servos stopped and the port closed.  The fault path swallows and logs
every error while it turns torque off servo by servo.

Reactions (each on the tick that sees the cause):

=============================  =====================================================
lost / corrupt reply           counted per kind, that tick's write skipped (servos
                               hold their last goal), NaN in telemetry; fault when
                               ``safety.max_consecutive_comm_errors`` ticks in a row
                               fail or more than ``comm_error_rate`` of the last
                               ``comm_error_window`` ticks did
hardware error (alert bit)     reported with its bits; fault, or with
                               ``on_hardware_error: reboot`` reboot the servo,
                               restore mode / goal := present / torque, go on
port gone (unplug)             fault
temperature / voltage          fault (checked every ``safety.monitor_every`` ticks)
joint past limit + margin      fault (commands are always clamped to the limits)
late ticks                     counted and skipped; fault after
                               ``safety.max_consecutive_missed`` late ticks in a row
SIGINT / SIGTERM               shutdown with torque off; a second one: fault path
stop command                   shutdown per ``shutdown.mode`` (hold | torque_off)
=============================  =====================================================
"""

from __future__ import annotations

import collections
import gc
import logging
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from servoloop.controller.clock import FixedRate, MonotonicClock
from servoloop.controller.config import RobotConfig
from servoloop.controller.controllers import Command, ControllerContext, JointState, make_controller
from servoloop.controller.controllers.base import joint_vector
from servoloop.controller.controllers.minimum_jerk import min_jerk_s
from servoloop.controller.errors import CommandError, ControllerParamError, LifecycleError
from servoloop.controller.lifecycle import Lifecycle, State
from servoloop.controller.loop_stats import JitterStats
from servoloop.controller.realtime import (
    RealtimeReport,
    apply_realtime,
    raise_thread,
    restore_realtime,
)
from servoloop.controller.safety import CommMonitor, LimitChecker
from servoloop.controller.telemetry import TelemetryRing, TelemetryWriter

__all__ = ["Daemon", "error_kind", "OPERATING_MODES"]

log = logging.getLogger("servoloop.daemon")

#: X-series Operating Mode register values for the config's servo modes
OPERATING_MODES = {"current": 0, "position": 3, "current_position": 5}

_STATE_RUN = int(State.RUN)
_STATE_STARTUP = int(State.STARTUP)
_STATE_SHUTDOWN = int(State.SHUTDOWN)


def error_kind(exc: BaseException) -> str:
    """Short name of a bus error class, the key of ``bus_errors`` in the summary."""
    names = [c.__name__ for c in type(exc).__mro__]
    for cls_name, kind in (
        ("BusTimeoutError", "timeout"),
        ("ChecksumError", "checksum"),
        ("MalformedPacketError", "malformed"),
        ("HardwareErrorStatus", "hardware_error"),
        ("ServoStatusError", "status"),
        ("PortError", "port"),
    ):
        if cls_name in names:
            return kind
    return "other"


class _Fault(Exception):
    """Internal: leave the loop for the fault path with this message."""


class Daemon:
    """The control daemon for one robot.

    Parameters
    ----------
    cfg : RobotConfig
    bus : firmware_bridge.bus.Bus (not yet opened); the daemon opens and closes it
    clock : Clock or None, default a MonotonicClock with ``cfg.loop.spin_s``
    readonly : bool, never write to the servos (no torque, no goals)
    telemetry_path : path, ``"auto"`` (from the config) or None (no file)
    socket_path : path, ``"auto"`` (from the config) or None (no socket)
    install_signals : bool, handle SIGINT/SIGTERM (main thread only)
    realtime : bool, apply the config's SCHED_FIFO / mlockall / affinity
    """

    def __init__(self, cfg: RobotConfig, bus, clock=None, *, readonly: bool = False,
                 telemetry_path: Any = "auto", socket_path: Any = "auto",
                 install_signals: bool = False, realtime: bool = True) -> None:
        self.cfg = cfg
        self.bus = bus
        self.clock = clock if clock is not None else MonotonicClock(cfg.loop.spin_s)
        self.readonly = readonly
        self.install_signals = install_signals
        self.use_realtime = realtime and not getattr(self.clock, "simulated", False)
        self.rate = FixedRate(cfg.loop.rate_hz, self.clock)
        self.lifecycle = Lifecycle()
        self.lifecycle.listeners.append(self._on_transition)
        n = cfg.n
        self.n = n
        servos = cfg.servos
        self.ids = tuple(s.id for s in servos)
        self.joint_names = cfg.joint_names
        self.direction = np.array([s.direction for s in servos], dtype=float)
        self.offset = np.array([s.offset for s in servos], dtype=float)
        self.lower = np.array([s.min for s in servos], dtype=float)
        self.upper = np.array([s.max for s in servos], dtype=float)
        self.is_current = np.array([s.mode == "current" for s in servos], dtype=bool)
        self.any_current = bool(self.is_current.any())
        self.all_current = bool(self.is_current.all())
        kt = np.array([s.torque_constant or np.nan for s in servos], dtype=float)
        self.kt = kt
        self.inv_kt = np.where(np.isfinite(kt) & (kt > 0), 1.0 / np.where(kt > 0, kt, 1.0), 0.0)
        stiff = np.array([s.position_stiffness or 0.0 for s in servos], dtype=float)
        self.inv_stiffness = np.where(stiff > 0, 1.0 / np.where(stiff > 0, stiff, 1.0), 0.0)
        self.current_limit = np.full(n, np.inf)

        # controller (raises ControllerParamError on bad params, before any I/O)
        self.ctx = ControllerContext.from_config(cfg)
        self.controller = make_controller(cfg.controller.name, self.ctx, cfg.controller.params)
        # startup waypoints: start pose, cfg.startup.via..., first command (filled at startup)
        for i, via in enumerate(cfg.startup.via):  # unknown joints / limits: an error now, not mid-ramp
            joint_vector(self.ctx, via, f"startup.via[{i}]", default=np.clip(np.zeros(n), self.lower, self.upper))
        self._waypoints = np.zeros((len(cfg.startup.via) + 2, n))

        # preallocated tick arrays (joint space unless named *_servo)
        self.state = JointState.zeros(n)
        self.current = np.full(n, np.nan)  # measured current (A) or load, joint sign
        self.cmd = Command.zeros(n)
        self.goal = np.zeros(n)  # joint goal after safety, rad
        self.goal_servo = np.zeros(n)  # servo goal, rad
        self.current_servo = np.zeros(n)  # servo goal current, A
        self._tmp = np.zeros(n)
        self._tmp2 = np.zeros(n)
        self.voltage = np.full(n, np.nan)
        self.temperature = np.full(n, np.nan)

        sf = cfg.safety
        self.comm = CommMonitor(sf.comm_error_window, sf.comm_error_rate, sf.max_consecutive_comm_errors)
        self.limits = LimitChecker(self.joint_names, self.ids, self.lower, self.upper, sf.position_margin)
        self.jitter = JitterStats()
        cap = max(64, int(cfg.logging.ring_s * cfg.loop.rate_hz))
        self.ring = TelemetryRing(self.joint_names, cap)
        self._c_ring = self.ring.col
        self._sl = self.ring.joint_slice

        # counters and outcome
        self.tick = 0
        self.run_ticks = 0
        self.comm_errors = 0
        self.bus_errors: dict[str, int] = {}
        self.faults: list[str] = []
        self.warnings: list[str] = []
        self.stop_reason: str | None = None
        self._stop_request: str | None = None
        self._hard_stop: str | None = None
        self._signal_torque_off = False
        self._consecutive_missed = 0
        self._reboots: dict[int, int] = {}
        self._pending: collections.deque = collections.deque()
        self._prev_wake = 0
        self._run_t0 = 0
        self._anchor_ns = 0
        self._run_wall0 = 0
        self._run_wall1 = 0
        self._run_dl1 = 0
        self._connected = False
        self._torque_on = False
        self._gc_paused = False
        self._gc_was_enabled = True
        self.realtime_report: RealtimeReport | None = None
        self.helper_threads: list = []  # other threads that take the GIL (status line, ...)

        # outputs
        self.telemetry_path = self._resolve_telemetry(telemetry_path)
        self.socket_path = self._resolve_socket(socket_path)
        self.writer: TelemetryWriter | None = None
        self.server = None
        self.reader = None
        self.monitor_reader = None
        self.pos_writer = None
        self.cur_writer = None

    # ------------------------------------------------------------------
    # outputs

    def _resolve_telemetry(self, path) -> Path | None:
        if path == "auto":
            path = self.cfg.logging.telemetry
            if path == "auto":
                stamp = time.strftime("%Y%m%d-%H%M%S")
                return Path("runs") / f"{self.cfg.robot}-{stamp}.sltl"
        return Path(path) if path else None

    def _resolve_socket(self, path) -> Path | None:
        if path == "auto":
            path = self.cfg.socket.path
            if path == "auto":
                from servoloop.controller.command_socket import default_socket_path

                return default_socket_path(self.cfg.robot)
        return Path(path) if path else None

    def open_outputs(self) -> None:
        """Start the telemetry writer and the command socket (before real-time settings).

        Raises
        ------
        _Fault
            The telemetry file cannot be created or another daemon holds the socket.
        """
        try:
            self._open_outputs()
        except CommandError as exc:
            raise _Fault(f"command socket: {exc}") from exc
        except OSError as exc:
            raise _Fault(f"telemetry {self.telemetry_path}: {exc.strerror or exc}") from exc

    def _open_outputs(self) -> None:
        if self.telemetry_path is not None:
            header = {"robot": self.cfg.robot, "rate_hz": self.cfg.loop.rate_hz,
                      "joint_names": list(self.joint_names), "servo_ids": list(self.ids),
                      "controller": self.cfg.controller.name, "lower": self.lower.tolist(),
                      "upper": self.upper.tolist(), "config": self.cfg.source,
                      "simulated_clock": bool(getattr(self.clock, "simulated", False))}
            self.writer = TelemetryWriter(self.telemetry_path, self.ring, header, self.cfg.logging.flush_s)
            self.writer.start()
        if self.socket_path is not None:
            from servoloop.controller.command_socket import CommandServer

            self.server = CommandServer(self.socket_path, self)
            self.server.start()

    def close_outputs(self) -> None:
        """Stop the socket, flush telemetry with the summary; never raises."""
        if self.server is not None:
            try:
                self.server.close()
            except Exception as exc:  # noqa: BLE001 - closing must not fail
                log.warning("closing the command socket: %s", exc)
            self.server = None
        if self.writer is not None:
            try:
                self.writer.close(self.summary())
            except Exception as exc:  # noqa: BLE001
                log.warning("closing telemetry: %s", exc)
            if self.writer.error:
                self.warnings.append(self.writer.error)

    def _event(self, kind: str, message: str) -> None:
        if self.writer is not None:
            self.writer.event(kind, message, self.tick, self._t_s())

    def _on_transition(self, tr) -> None:
        log.info("%s -> %s%s", tr.source.label, tr.target.label, f" ({tr.reason})" if tr.reason else "")
        self._event("state", f"{tr.source.label} -> {tr.target.label}" + (f": {tr.reason}" if tr.reason else ""))

    def _t_s(self) -> float:
        """Loop time of the current tick, s since the first startup deadline."""
        return (self.rate.deadline_ns - self._anchor_ns) * 1e-9 if self._anchor_ns else 0.0

    # ------------------------------------------------------------------
    # the whole life

    def run(self, duration_s: float | None = None) -> dict:
        """connect -> startup -> run (``duration_s`` s, or until stopped) -> shutdown.

        Returns
        -------
        dict
            The run summary (see :meth:`summary`); ``state`` is ``done`` or ``fault``.
        """
        old_handlers = self._install_signal_handlers() if self.install_signals else None
        try:
            self.open_outputs()
            self.connect()
            self.startup()
            self.run_loop(duration_s)
            self.shutdown()
        except _Fault as f:
            self.fault(str(f))
        except BaseException as exc:  # a bug or an interrupt: still stop the servos
            if not isinstance(exc, KeyboardInterrupt):
                log.exception("unexpected error in the loop")
            self.fault(f"unexpected {type(exc).__name__}: {exc}")
        finally:
            self._end_realtime()
            self.resume_gc()
            self.close_bus()
            if old_handlers is not None:
                self._restore_signal_handlers(old_handlers)
            self.close_outputs()
        return self.summary()

    # ------------------------------------------------------------------
    # connect

    def connect(self) -> None:
        """Open the port, ping every servo, check models, fix latency timer and return delay."""
        from servoloop.firmware_bridge.errors import BridgeError

        self.lifecycle.to(State.CONNECT, f"port {getattr(self.bus, 'port', '?')}")
        try:
            self.bus.open()
            self._connected = True
            report = self._connect_with_retries()
            if report is not None:
                self._event("connect", _short(report))
                for w in getattr(report, "warnings", ()) or ():
                    self.warnings.append(str(w))
            self._setup_io()
            if not self.readonly:
                self._configure_modes()
        except BridgeError as exc:
            raise _Fault(f"connect: {exc}") from exc

    def _connect_with_retries(self, tries: int = 3):
        """bus.connect(); a lost reply while pinging is retried (not yet real time)."""
        from servoloop.firmware_bridge.errors import BusTimeoutError, ChecksumError

        for attempt in range(tries):
            try:
                return self.bus.connect(
                    fix_latency_timer=self.cfg.bus.fix_latency_timer and not self.readonly,
                    fix_return_delay=self.cfg.bus.fix_return_delay and not self.readonly)
            except (BusTimeoutError, ChecksumError) as exc:
                if attempt == tries - 1:
                    raise
                log.warning("connect attempt %d failed (%s); retrying", attempt + 1, exc)
                self._count_error(exc)

    def _tables(self):
        from servoloop.firmware_bridge.control_table import get_table

        return [get_table(s.model) for s in self.cfg.servos]

    def _setup_io(self) -> None:
        from servoloop.controller.bus_io import JointReader

        tables = self._tables()
        self.reader = JointReader(self.bus, self.ids, tables, ["present_position", "present_velocity"],
                                  effort=True)
        v = self.reader.values
        self._rv_pos = v["present_position"]
        self._rv_vel = v["present_velocity"]
        self._rv_eff = v["effort"]
        # present_load is a PWM fraction, not a current: no torque estimate from it
        self.kt = np.where(np.array([u == "A" for u in self.reader.effort_units]), self.kt, np.nan)
        mon = [r for r in ("present_input_voltage", "present_temperature")
               if all(r in t.registers for t in tables)]
        self.monitor_reader = JointReader(self.bus, self.ids, tables, mon) if mon else None
        if self.readonly:
            return
        pos_ids = [s.id for s in self.cfg.servos if s.mode != "current"]
        cur_ids = [s.id for s in self.cfg.servos if s.mode == "current"]
        self._pos_index = np.array([i for i, s in enumerate(self.cfg.servos) if s.mode != "current"], dtype=np.intp)
        self._cur_index = np.array([i for i, s in enumerate(self.cfg.servos) if s.mode == "current"], dtype=np.intp)
        self.pos_writer = self._writer("goal_position", pos_ids) if pos_ids else None
        self.cur_writer = self._writer("goal_current", cur_ids) if cur_ids else None
        self._pos_buf = np.zeros(len(pos_ids))
        self._cur_buf = np.zeros(len(cur_ids))
        for i, t in enumerate(tables):
            if "goal_current" in t.registers:
                r = t.registers["goal_current"]
                if r.max_raw is not None:
                    self.current_limit[i] = abs((r.max_raw - r.zero_raw) * r.scale)

    def _writer(self, register: str, ids: list[int]):
        if len(ids) == self.n:
            return self.bus.sync_writer(register)
        return self.bus.sync_writer(register, ids=ids)

    def _configure_modes(self) -> None:
        tables = self._tables()
        for s, t in zip(self.cfg.servos, tables, strict=False):
            if "operating_mode" not in t.registers:
                if s.mode != "position":
                    raise _Fault(f"servo {s.id} ({s.joint}): model {s.model} has no operating_mode; "
                                 f"mode {s.mode!r} is not possible")
                continue
            want = OPERATING_MODES[s.mode]
            have = int(round(self.bus.read(s.id, "operating_mode")))
            if have != want:
                # EEPROM: writable only with torque off (field notes a7)
                log.warning("servo %d (%s): operating mode %d -> %d (torque off first)", s.id, s.joint, have, want)
                self.bus.write(s.id, "torque_enable", 0)
                self.bus.write(s.id, "operating_mode", want)

    # ------------------------------------------------------------------
    # startup

    def startup(self) -> None:
        """goal := present, then torque on, then ramp to the controller's first command."""
        from servoloop.firmware_bridge.errors import BridgeError

        self.lifecycle.to(State.STARTUP)
        ok = False
        for _ in range(3):
            if self._read():
                ok = True
                break
        if not ok:
            raise _Fault("startup: could not read the present position of every servo (3 tries)")
        self._estimate()
        # A joint may rest a little outside its limits (a robot lying on its
        # mechanical stops); further out, the reading itself is suspect
        # (wrap-around, lost turn count: field notes a8) and nothing moves.
        msg = self.limits.check_position(self.state.position, extra=self.cfg.safety.startup_margin)
        if msg:
            raise _Fault(f"startup: {msg}")
        self.limits.widen_to(self.state.position)
        # Goal := present BEFORE torque on, so torque on does not jump to a
        # stale goal (lerobot PR #3913, bitbots: "possibly damaging the robot").
        self.goal[:] = self.state.position
        self.cmd.effort[:] = 0.0
        self.cmd.position[:] = self.state.position
        if not self.readonly:
            try:
                self.limits.clamp(self.state.position, self.goal)
                self._to_servo_targets()
                self.current_servo[:] = 0.0  # no torque burst on current-mode servos either
                self._write_goals()
                for sid in self.ids:
                    self.bus.write(sid, "torque_enable", 1)
                self._torque_on = True
            except BridgeError as exc:
                raise _Fault(f"startup: torque on failed: {exc}") from exc
        self._waypoints[0] = self.goal
        for i, via in enumerate(self.cfg.startup.via):
            self._waypoints[i + 1] = joint_vector(self.ctx, via, f"startup.via[{i}]", default=self._waypoints[i])
        self.controller.start(self.state)
        self._begin_realtime()
        self.pause_gc()  # before the first deadline: the collection is a multi-ms stall
        self.rate.start()
        self._anchor_ns = self.rate.next_deadline_ns
        self._prev_wake = self.clock.now_ns()
        n_ramp = int(round(self.cfg.startup.ramp_s * self.cfg.loop.rate_hz))
        self._ramp_ticks = max(n_ramp, 1)
        self._ramp_k = 0
        for _ in range(n_ramp):
            self._check_requests()
            if self._stop_request is not None:
                return
            self._tick()

    # ------------------------------------------------------------------
    # run

    def run_loop(self, duration_s: float | None = None) -> None:
        """Tick the controller until ``duration_s`` of loop time, a stop request or a fault."""
        if self.lifecycle.state != State.RUN:
            if self._stop_request is not None:
                return
            self.lifecycle.to(State.RUN)
            self.limits.restore()  # the ramp has brought every joint inside its limits
            self._run_t0 = self.rate.next_deadline_ns
            self._run_wall0 = time.monotonic_ns()
        end_ns = None if duration_s is None else self.rate.next_deadline_ns + int(duration_s * 1e9)
        self.pause_gc()  # normally done by startup already
        try:
            while True:
                self._check_requests()
                if self._stop_request is not None:
                    break
                if end_ns is not None and self.rate.next_deadline_ns >= end_ns:
                    break
                self._tick()
        finally:
            self._run_wall1 = time.monotonic_ns()
            self._run_dl1 = self.rate.deadline_ns

    def pause_gc(self) -> None:
        """Collect once, freeze what survives, and keep the cyclic collector off.

        A tick creates no reference cycles, so nothing is lost; a full
        collection of this process's heap (NumPy, the dynamics model, ...)
        measured ~37 ms, i.e. 37 missed ticks at 1 kHz, if it ran inside
        the loop.  Done once before the first deadline, not per run block.
        Idempotent; :meth:`resume_gc` undoes it (``run`` does at the end).
        """
        if self._gc_paused:
            return
        self._gc_was_enabled = gc.isenabled()
        gc.collect()
        gc.freeze()  # survivors go to the permanent generation: later collections skip them
        gc.disable()
        self._gc_paused = True

    def resume_gc(self) -> None:
        """Undo :meth:`pause_gc`."""
        if not self._gc_paused:
            return
        gc.unfreeze()
        if self._gc_was_enabled:
            gc.enable()
        self._gc_paused = False

    def _check_requests(self) -> None:
        if self._hard_stop is not None:
            raise _Fault(self._hard_stop)
        if self._pending:
            self._apply_pending()

    # ------------------------------------------------------------------
    # one tick

    def _tick(self) -> None:
        rate = self.rate
        skipped = rate.wait()
        wake = rate.deadline_ns + rate.late_ns
        state = int(self.lifecycle.state)
        fault = None
        if skipped:
            self._consecutive_missed += 1
            lim = self.cfg.safety.max_consecutive_missed
            if lim is not None and self._consecutive_missed >= lim:
                fault = f"{self._consecutive_missed} consecutive late ticks (safety.max_consecutive_missed)"
        else:
            self._consecutive_missed = 0
        ok = self._read()
        # a failed servo reads NaN (never a stale number): telemetry shows the gap
        self._estimate()
        if ok:
            msg = self.limits.check_position(self.state.position)
            if msg is not None and fault is None:
                fault = msg
            if state == _STATE_RUN:
                t = (rate.deadline_ns - self._run_t0) * 1e-9
                self.controller.update(t, self.state, self.cmd)
            elif state == _STATE_STARTUP:
                self._ramp()
            # SHUTDOWN: cmd stays frozen at the last command
            self._actuate()
            if fault is None and not self.readonly:
                ok = self._write_goals() and ok
        msg = self.comm.record(ok)
        if msg is not None and fault is None:
            fault = msg
        if not ok:
            self.comm_errors += 1
        self.tick += 1
        if self.monitor_reader is not None and self.tick % self.cfg.safety.monitor_every == 0:
            msg = self._monitor()
            if msg is not None and fault is None:
                fault = msg
        if state == _STATE_RUN:
            self.jitter.add(rate.late_ns)
            self.run_ticks += 1
        self._record(state, wake, ok)
        if fault is not None:
            raise _Fault(fault)

    def _read(self) -> bool:
        from servoloop.firmware_bridge.errors import BridgeError, PortError, ServoStatusError

        try:
            self.reader.read()
            return True
        except PortError as exc:
            self._count_error(exc)
            raise _Fault(f"bus port error: {exc}") from exc
        except BridgeError as exc:
            self._count_error(exc)
            if isinstance(exc, ServoStatusError) or any(
                    isinstance(e, ServoStatusError) for e in (getattr(exc, "failures", None) or {}).values()):
                self._on_servo_error(exc)
            return False

    def _count_error(self, exc: BaseException) -> None:
        failures = getattr(exc, "failures", None) or {}
        if failures:
            for e in failures.values():
                k = error_kind(e)
                self.bus_errors[k] = self.bus_errors.get(k, 0) + 1
        else:
            k = error_kind(exc)
            self.bus_errors[k] = self.bus_errors.get(k, 0) + 1

    def _estimate(self) -> None:
        st = self.state
        # q_joint = direction * (q_servo - offset)
        np.subtract(self._rv_pos, self.offset, out=st.position)
        st.position *= self.direction
        np.multiply(self._rv_vel, self.direction, out=st.velocity)
        if self._rv_eff is not None:
            np.multiply(self._rv_eff, self.direction, out=self.current)
            np.multiply(self.current, self.kt, out=st.effort)

    def _ramp(self) -> None:
        self._ramp_k += 1
        s = min_jerk_s(self._ramp_k / self._ramp_ticks)
        self.controller.update(0.0, self.state, self.cmd)
        cmd = self.cmd
        # the ramp ends inside the configured limits, even from a start pose outside them
        np.clip(cmd.position, self.lower, self.upper, out=cmd.position)
        w = self._waypoints
        w[-1] = cmd.position
        # segment through the via poses: position = w[i] + s_i * (w[i+1] - w[i])
        n_seg = w.shape[0] - 1
        x = min(self._ramp_k / self._ramp_ticks, 1.0) * n_seg
        i = min(int(x), n_seg - 1)
        np.subtract(w[i + 1], w[i], out=self._tmp)
        self._tmp *= min_jerk_s(x - i)
        np.add(w[i], self._tmp, out=cmd.position)
        cmd.effort *= s  # feed-forward effort fades in over the whole ramp

    def _actuate(self) -> None:
        """Command (joint space) -> safe joint goal -> servo targets."""
        cmd = self.cmd
        # position servos: offset the goal by tau / k_p (0 where no stiffness is calibrated)
        np.multiply(cmd.effort, self.inv_stiffness, out=self._tmp)
        np.add(cmd.position, self._tmp, out=self._tmp)
        self.limits.clamp(self._tmp, self.goal)
        self._to_servo_targets()

    def _to_servo_targets(self) -> None:
        # q_servo = direction * q_joint + offset
        np.multiply(self.goal, self.direction, out=self.goal_servo)
        self.goal_servo += self.offset
        if self.any_current:
            cmd, st = self.cmd, self.state
            # i = (tau + kp (q_goal - q) - kd dq) / k_t, in the servo's sign
            np.subtract(self.goal, st.position, out=self._tmp2)
            self._tmp2 *= cmd.kp
            self._tmp2 += cmd.effort
            np.multiply(cmd.kd, st.velocity, out=self.current_servo)
            np.subtract(self._tmp2, self.current_servo, out=self._tmp2)
            self._tmp2 *= self.inv_kt
            np.multiply(self._tmp2, self.direction, out=self.current_servo)
            np.clip(self.current_servo, -self.current_limit, self.current_limit, out=self.current_servo)

    def _write_goals(self) -> bool:
        from servoloop.firmware_bridge.errors import BridgeError, PortError

        try:
            if self.pos_writer is not None:
                if self.cur_writer is None:
                    self.pos_writer.write(self.goal_servo)
                else:
                    np.take(self.goal_servo, self._pos_index, out=self._pos_buf)
                    self.pos_writer.write(self._pos_buf)
            if self.cur_writer is not None:
                np.take(self.current_servo, self._cur_index, out=self._cur_buf)
                self.cur_writer.write(self._cur_buf)
            return True
        except PortError as exc:
            self._count_error(exc)
            raise _Fault(f"bus port error on write: {exc}") from exc
        except BridgeError as exc:
            self._count_error(exc)
            return False

    def _monitor(self) -> str | None:
        """Temperature and voltage of every servo (one sync read); a fault message or None."""
        from servoloop.firmware_bridge.errors import BridgeError, PortError

        try:
            self.monitor_reader.read()
        except PortError as exc:
            self._count_error(exc)
            return f"bus port error: {exc}"
        except BridgeError as exc:
            self._count_error(exc)
            return None
        v = self.monitor_reader.values
        sf = self.cfg.safety
        if "present_temperature" in v:
            self.temperature[:] = v["present_temperature"]
            msg = self.limits.check_range(self.temperature, None, sf.max_temperature_c,
                                          "temperature", "degC", "safety.max_temperature_c")
            if msg:
                return msg
        if "present_input_voltage" in v:
            self.voltage[:] = v["present_input_voltage"]
            return self.limits.check_range(self.voltage, sf.min_voltage_v, sf.max_voltage_v,
                                           "input voltage", "V", "safety.min_voltage_v/max_voltage_v")
        return None

    def _record(self, state: int, wake: int, ok: bool) -> None:
        ring = self.ring
        r = ring.row()
        r[0] = self.tick
        r[1] = (self.rate.deadline_ns - self._anchor_ns) * 1e-9
        r[2] = self.rate.late_ns * 1e-3
        r[3] = (wake - self._prev_wake) * 1e-3
        r[4] = (self.clock.now_ns() - wake) * 1e-3
        r[5] = state
        r[6] = self.rate.missed
        r[7] = self.comm_errors
        r[8] = 1.0 if ok else 0.0
        sl = self._sl
        r[sl["q"]] = self.state.position
        r[sl["dq"]] = self.state.velocity
        r[sl["current"]] = self.current
        r[sl["goal"]] = self.goal
        r[sl["tau_ff"]] = self.cmd.effort
        ring.commit()
        self._prev_wake = wake

    # ------------------------------------------------------------------
    # servo errors (hardware error bits)

    def _on_servo_error(self, exc) -> None:
        failures = getattr(exc, "failures", None) or {getattr(exc, "servo_id", None): exc}
        from servoloop.firmware_bridge.errors import HardwareErrorStatus, ServoStatusError

        for sid, e in failures.items():
            if not isinstance(e, ServoStatusError):
                continue
            joint = self._joint_of(sid)
            bits = ", ".join(getattr(e, "bits", ()) or ()) or f"0x{getattr(e, 'error_raw', 0):02x}"
            hw = self._read_hardware_error(sid) if isinstance(e, HardwareErrorStatus) else None
            what = f"servo {sid} ({joint}): {'hardware error' if isinstance(e, HardwareErrorStatus) else 'status error'} {bits}"
            if hw:
                what += f"; hardware_error_status {hw}"
            self._event("servo_error", what)
            log.error(what)
            if not isinstance(e, HardwareErrorStatus):
                continue
            if (self.cfg.safety.on_hardware_error == "reboot"
                    and self._reboots.get(sid, 0) < self.cfg.safety.max_reboots and not self.readonly):
                self._reboots[sid] = self._reboots.get(sid, 0) + 1
                self._reboot_and_restore(sid, what)
            else:
                raise _Fault(what)

    def _joint_of(self, sid) -> str:
        try:
            return self.joint_names[self.ids.index(sid)]
        except ValueError:
            return "?"

    def _read_hardware_error(self, sid) -> str | None:
        try:
            raw = int(self.bus.read_raw(sid, "hardware_error_status"))
        except Exception:  # noqa: BLE001 - diagnosis only
            return None
        names = {0: "input voltage", 2: "overheating", 3: "motor encoder", 4: "electrical shock", 5: "overload"}
        set_bits = [names.get(b, f"bit {b}") for b in range(8) if raw >> b & 1]
        return f"0x{raw:02x} ({', '.join(set_bits) or 'none'})"

    def _reboot_and_restore(self, sid: int, why: str) -> None:
        """Reboot one servo, then restore what a reboot resets: mode, goal := present, torque."""
        from servoloop.firmware_bridge.errors import BridgeError, ServoStatusError

        i = self.ids.index(sid)
        s = self.cfg.servos[i]
        self._event("reboot", f"servo {sid} ({s.joint}): reboot after {why}")
        try:
            try:
                self.bus.reboot(sid)
            except ServoStatusError:
                pass  # the reply to REBOOT still carries the alert bit: the servo reboots after it
            deadline = time.monotonic() + 2.0
            while True:
                try:
                    self.bus.ping(sid)
                    break
                except BridgeError:
                    if time.monotonic() > deadline:
                        raise
            if "operating_mode" in self._tables()[i].registers:
                self.bus.write(sid, "operating_mode", OPERATING_MODES[s.mode])
            present = self.bus.read(sid, "present_position")
            if s.mode != "current":
                self.bus.write(sid, "goal_position", present)
            self.bus.write(sid, "torque_enable", 1)
        except BridgeError as exc:
            raise _Fault(f"{why}; reboot of servo {sid} failed: {exc}") from exc
        # the reboot took many periods: start a fresh deadline grid, count what was skipped
        now = self.clock.now_ns()
        lost = max(0, (now - self.rate.next_deadline_ns) // self.rate.period_ns + 1)
        self.rate.missed += int(lost)
        self.rate.start(now)
        self._event("reboot", f"servo {sid} ({s.joint}): restored; {lost} ticks skipped")

    # ------------------------------------------------------------------
    # stopping

    def request_stop(self, reason: str = "stop requested") -> None:
        """Ask the loop to shut down cleanly at the next tick (any thread)."""
        if self._stop_request is None:
            self._stop_request = reason

    def shutdown(self) -> None:
        """Stop cycles (goal frozen), then torque off or hold; then ``done``."""
        from servoloop.firmware_bridge.errors import BridgeError

        reason = self._stop_request or "end of run"
        self.stop_reason = reason
        if self.lifecycle.state in (State.CONNECT, State.STARTUP, State.RUN):
            self.lifecycle.to(State.SHUTDOWN, reason, self.tick)
        if self._torque_on:
            self.cmd.kp[:] = 0.0
            self.cmd.effort[:] = 0.0
            for _ in range(self.cfg.shutdown.stop_cycles):
                if self._hard_stop is not None:
                    raise _Fault(self._hard_stop)
                self._tick()
            torque_off = self.cfg.shutdown.mode == "torque_off" or self._signal_torque_off
            if torque_off or self.any_current:
                for sid, cur in zip(self.ids, self.is_current, strict=False):
                    if torque_off or cur:
                        try:
                            self._torque_off(sid)
                        except BridgeError as exc:
                            raise _Fault(f"shutdown: torque off of servo {sid} failed: {exc}") from exc
                self._torque_on = not torque_off
        self.lifecycle.to(State.DONE, reason, self.tick)

    def _torque_off(self, sid: int) -> None:
        """Torque Enable := 0 on one servo.

        A reply carrying the hardware-error alert still means the write was
        done (the alert only reports a latched error, and that error has
        already turned torque off on X/MX 2.0), so it counts as success.
        """
        from servoloop.firmware_bridge.errors import HardwareErrorStatus

        try:
            self.bus.write(sid, "torque_enable", 0)
        except HardwareErrorStatus:
            pass

    def fault(self, message: str) -> None:
        """The fault path: record, torque off every servo (each in its own try); never raises."""
        try:
            self.faults.append(message)
            log.error("FAULT: %s", message)
            self._event("fault", message)
            if not self.lifecycle.terminal:
                try:
                    self.lifecycle.to(State.FAULT, message, self.tick)
                except LifecycleError:
                    self.lifecycle.state = State.FAULT
            elif self.lifecycle.state == State.DONE:
                self.lifecycle.state = State.FAULT
        except Exception:  # noqa: BLE001 - nothing may stop us from stopping the servos
            self.lifecycle.state = State.FAULT
        self.stop_all_servos()

    def stop_all_servos(self) -> None:
        """Torque off on every servo, each in its own try, twice for those that fail; never raises."""
        if self.readonly or not self._connected:
            return
        failed = list(self.ids)
        for attempt in range(2):
            still = []
            for sid in failed:
                try:
                    self._torque_off(sid)
                except Exception as exc:  # noqa: BLE001 - keep going to the next servo
                    still.append(sid)
                    if attempt == 1:
                        log.error("fault path: torque off of servo %s failed: %s", sid, exc)
            failed = still
            if not failed:
                break
        self._torque_on = bool(failed)
        if failed:
            self.warnings.append(f"torque off failed for servos {failed}")

    def close_bus(self) -> None:
        """Close the port; never raises."""
        if not self._connected:
            return
        try:
            self.bus.close()
        except Exception as exc:  # noqa: BLE001
            log.warning("closing the bus: %s", exc)
        self._connected = False

    # ------------------------------------------------------------------
    # real-time settings

    def _begin_realtime(self) -> None:
        if not self.use_realtime or self.realtime_report is not None:
            return
        lp = self.cfg.loop
        self.realtime_report = apply_realtime(lp.sched_fifo, lp.priority, lp.lock_memory, lp.cpus)
        self.warnings.extend(self.realtime_report.warnings)
        if self.realtime_report.sched_fifo:
            for th in self._helper_threads():
                w = raise_thread(th.native_id, lp.priority - 10)
                if w:
                    self.warnings.append(w)
        # the loop thread must get the GIL back quickly after each sleep
        self._old_switch = sys.getswitchinterval()
        sys.setswitchinterval(0.0005)

    def _helper_threads(self) -> list:
        threads = list(self.helper_threads)
        if self.writer is not None:
            threads.append(self.writer._thread)
        if self.server is not None:
            threads.append(self.server._thread)
        return [t for t in threads if t.is_alive() and t.native_id]

    def _end_realtime(self) -> None:
        if self.realtime_report is not None:
            restore_realtime(self.realtime_report)
            sys.setswitchinterval(self._old_switch)

    # ------------------------------------------------------------------
    # signals

    def _install_signal_handlers(self):
        if threading.current_thread() is not threading.main_thread():
            return None
        old = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            old[sig] = signal.signal(sig, self._on_signal)
        return old

    def _restore_signal_handlers(self, old) -> None:
        for sig, h in old.items():
            try:
                signal.signal(sig, h)
            except (ValueError, TypeError):
                pass

    def _on_signal(self, signum, frame) -> None:
        name = signal.Signals(signum).name
        if self._stop_request is None:
            # first signal: clean shutdown with torque off, whatever shutdown.mode says
            self._signal_torque_off = True
            self._stop_request = name
        else:
            self._hard_stop = f"second signal {name} during shutdown"

    # ------------------------------------------------------------------
    # command-socket handler (called from the socket thread)

    def status(self) -> dict:
        """Snapshot for ``servoloop status`` (JSON-able)."""
        return {
            "robot": self.cfg.robot,
            "state": self.lifecycle.state.label,
            "tick": self.tick,
            "t_s": self._t_s(),
            "rate_hz": self._rate_now(),
            "jitter_us": self.jitter.summary(),
            "missed": self.rate.missed,
            "bus_errors": dict(self.bus_errors),
            "faults": list(self.faults),
            "controller": self.controller.status(),
            "joints": {j: float(q) for j, q in zip(self.joint_names, self.state.position, strict=False)},
            "readonly": self.readonly,
        }

    def set_params(self, params: dict) -> None:
        checked = self.controller.check_params(dict(params))
        self._pending.append(("params", checked))

    def set_goal(self, goal) -> None:
        if self.lifecycle.state not in (State.STARTUP, State.RUN):
            raise CommandError(f"cannot take a goal in state {self.lifecycle.state.label}")
        checked = self.controller.check_goal(goal)
        self._pending.append(("goal", checked))

    def _apply_pending(self) -> None:
        while self._pending:
            kind, payload = self._pending.popleft()
            try:
                if kind == "params":
                    self.controller.apply_params(payload)
                else:
                    self.controller.apply_goal(payload)
                self._event("command", f"applied {kind}")
            except (ControllerParamError, ValueError) as exc:
                log.warning("command %s not applied: %s", kind, exc)
                self._event("command", f"{kind} not applied: {exc}")

    # ------------------------------------------------------------------
    # summary

    def _rate_now(self) -> float:
        if not self._run_t0 or self.run_ticks == 0:
            return 0.0
        if getattr(self.clock, "simulated", False):
            end = self._run_dl1 if self._run_dl1 else self.rate.deadline_ns
            span = (end - self._run_t0) * 1e-9 + self.rate.dt
        else:
            end = self._run_wall1 if self._run_wall1 else time.monotonic_ns()
            span = (end - self._run_wall0) * 1e-9
        return self.run_ticks / span if span > 0 else 0.0

    def summary(self) -> dict:
        """The run summary: ``ticks`` (run-state ticks), ``rate_hz``, ``jitter_us``
        (wake-up lateness p50/p99/max), ``missed``, ``bus_errors`` per kind,
        ``faults``, ``state``, plus ``stop_reason``, ``telemetry``, ``warnings``."""
        return {
            "ticks": int(self.run_ticks),
            "rate_hz": float(self._rate_now()),
            "jitter_us": self.jitter.summary(),
            "missed": int(self.rate.missed),
            "bus_errors": dict(self.bus_errors),
            "faults": list(self.faults),
            "state": self.lifecycle.state.label,
            "stop_reason": self.stop_reason,
            "robot": self.cfg.robot,
            "controller": self.cfg.controller.name,
            "total_ticks": int(self.tick),
            "telemetry": str(self.telemetry_path) if self.telemetry_path else None,
            "realtime": None if self.realtime_report is None else {
                "sched_fifo": self.realtime_report.sched_fifo,
                "mlockall": self.realtime_report.mlockall,
                "affinity": self.realtime_report.affinity,
            },
            "warnings": list(self.warnings),
        }


def _short(obj) -> str:
    servos = getattr(obj, "servos", None)
    if isinstance(servos, list):
        fixed = sum(1 for e in servos if e.get("return_delay_fixed"))
        models = sorted({e.get("model") for e in servos})
        return (f"{len(servos)} servos answered ({', '.join(map(str, models))}); latency timer "
                f"{getattr(obj, 'latency_timer_ms', '?')} ms; return delay set to 0 on {fixed}")
    s = str(obj)
    return s if len(s) < 2000 else s[:2000] + "..."
