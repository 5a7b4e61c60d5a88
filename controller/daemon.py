"""The daemon: the lifecycle of one run (connect, startup, run, shutdown, fault) and its stop paths.

The tick itself is :class:`~servoloop.controller.loop.ControlLoop` (the
stages and the deadline); this module decides *when* to tick and what to
do when a stage reports a :class:`~servoloop.controller.faults.Fault`.

The daemon owns the bus it is given: whatever happens it ends with the
servos stopped and the port closed.  The fault path swallows and logs
every error while it turns torque off servo by servo.

Reactions (each on the tick that sees the cause):

=============================  =====================================================
lost / corrupt reply           counted per kind and servo, that tick's write skipped
                               (servos hold their last goal), NaN in telemetry; the
                               ladder warn -> hold -> timeout in seconds
                               (:mod:`controller.comm_policy`): a ``comm`` fault after
                               ``safety.comm_timeout_s`` without a good reply, then
                               ``safety.comm_timeout_action`` (torque_off | hold)
any goal                       clamped to the limits, then slew-limited from the goal
                               written last tick (:mod:`controller.slew`)
hardware error (alert bit)     reported with its bits; fault, or with
                               ``on_hardware_error: reboot`` reboot the servo,
                               restore mode / goal := present / torque, go on
                               (:mod:`controller.servo_faults`)
port gone (unplug)             fault
temperature / voltage          fault (checked every ``safety.monitor_every`` ticks)
joint past limit + margin      fault (commands are always clamped to the limits)
late ticks                     counted and skipped; fault after
                               ``safety.max_consecutive_missed`` late ticks in a row
a fall (floating base + IMU)    ``safety.on_fall``: damp, then torque off | torque_off |
                               warn; fault ``fall``; tipped at startup: no torque (:mod:`controller.fall`)
SIGINT / SIGTERM               shutdown with torque off; a second one: fault path
stop command                   shutdown per ``shutdown.mode`` (hold | torque_off)
=============================  =====================================================
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Any

from servoloop.controller.bringup import (
    arm_bus_watchdog,
    clear_bus_watchdog,
    configure_modes,
    connect_bus,
    connect_report_text,
    prepare_bus_watchdog,
    servo_tables,
    watchdog_ids,
)
from servoloop.controller.bus_io import error_kind
from servoloop.controller.clock import MonotonicClock
from servoloop.controller.config import RobotConfig
from servoloop.controller.controllers import ControllerContext, make_controller
from servoloop.controller.errors import LifecycleError
from servoloop.controller.fall import stop_after
from servoloop.controller.faults import Fault, FaultKind, FaultRaised
from servoloop.controller.lifecycle import Lifecycle, State
from servoloop.controller.loop import ControlLoop
from servoloop.controller.outputs import Outputs, resolve_socket_path, resolve_telemetry_path
from servoloop.controller.realtime import LoopEnvironment
from servoloop.controller.servo_faults import OPERATING_MODES
from servoloop.controller.servo_friction import friction_summary, law_summary
from servoloop.controller.startup_ramp import hold_present_pose
from servoloop.controller.telemetry import servo_header

__all__ = ["Daemon", "error_kind", "OPERATING_MODES"]

log = logging.getLogger("servoloop.daemon")


def _retry(fn, errors, tries: int = 3):
    """``fn()``, again after a lost or corrupt reply (counted in ``errors``): idempotent bus work
    (reads, writes of a value) must not fail a startup on one dropped reply of a healthy bus."""
    from servoloop.firmware_bridge.errors import BusTimeoutError, ChecksumError

    for attempt in range(tries):
        try:
            return fn()
        except (BusTimeoutError, ChecksumError) as exc:
            errors.count(exc)
            if attempt == tries - 1:
                raise
            log.warning("lost or corrupt reply (%s); retrying", exc)
    return None


class Daemon:
    """The control daemon for one robot.

    Parameters
    ----------
    cfg : RobotConfig
    bus : firmware_bridge.bus.Bus (not yet opened); the daemon opens and closes it
    clock : Clock or None, default a MonotonicClock with ``cfg.loop.spin_tail_s`` (the SCHED_FIFO
        default tail once the loop has SCHED_FIFO)
    readonly : bool, never write to the servos (no torque, no goals)
    telemetry_path : path, ``"auto"`` (from the config) or None (no file)
    socket_path : path, ``"auto"`` (from the config) or None (no socket)
    install_signals : bool, handle SIGINT/SIGTERM (main thread only)
    realtime : bool, apply the config's SCHED_FIFO / mlockall / affinity

    Raises
    ------
    ControllerParamError
        Bad controller parameters or startup via poses (before any I/O).
    """

    def __init__(self, cfg: RobotConfig, bus, clock=None, *, readonly: bool = False,
                 telemetry_path: Any = "auto", socket_path: Any = "auto",
                 install_signals: bool = False, realtime: bool = True) -> None:
        self.cfg = cfg
        self.bus = bus
        self._own_clock = clock is None
        self.clock = clock if clock is not None else MonotonicClock(cfg.loop.spin_tail_s(sched_fifo=False))
        self.install_signals = install_signals
        self.lifecycle = Lifecycle()
        self.lifecycle.listeners.append(self._on_transition)
        self.ids = tuple(s.id for s in cfg.servos)
        self.joint_names = cfg.joint_names
        self.ctx = ControllerContext.from_config(cfg)
        self.controller = make_controller(cfg.controller.name, self.ctx, cfg.controller.params)
        self.loop = ControlLoop(cfg, self.clock, self.controller, self.ctx, self.lifecycle, self._event)
        self.readonly = readonly
        self.friction = friction_summary(cfg, log)   # the servos' gearbox friction, and its source
        self.servo_law = law_summary(cfg, log)       # their damping and armature, and its source

        self.faults: list[Fault] = []
        self.warnings: list[str] = []
        self.env = LoopEnvironment(cfg.loop, realtime and not getattr(self.clock, "simulated", False))
        self.env.warnings = self.warnings
        self.stop_reason: str | None = None
        self._stop_request: str | None = None
        self._hard_stop: str | None = None
        self._signal_torque_off = False
        self._connected = False
        self._answered: set | None = None  # servo ids that answered at connect (None: not known)
        self._torque_on = False
        self._run_wall0 = self._run_wall1 = self._run_dl1 = 0
        self.helper_threads: list = []  # other threads that take the GIL (status line, ...)
        #: callables run once as the run state begins, after the startup ramp (``run --lockstep``
        #: keeps the simulator's truth there beside the estimate's ``at_run_start``)
        self.run_start_hooks: list = []
        self.outputs = Outputs(resolve_telemetry_path(cfg, telemetry_path), resolve_socket_path(cfg, socket_path))

    # ------------------------------------------------------------------
    # views of the loop (the status line, benchmarks and tests read these)

    @property
    def readonly(self) -> bool:
        return self.loop.readonly

    @readonly.setter
    def readonly(self, value: bool) -> None:
        self.loop.readonly = bool(value)

    rate = property(lambda self: self.loop.rate, doc="FixedRate: the deadline grid")
    jitter = property(lambda self: self.loop.jitter, doc="JitterStats of run-state ticks")
    bus_errors = property(lambda self: self.loop.errors, doc="bus errors per kind")
    tick = property(lambda self: self.loop.ticks, doc="ticks so far (all states)")
    run_ticks = property(lambda self: self.loop.run_ticks, doc="run-state ticks so far")
    state = property(lambda self: self.loop.state, doc="JointState, measured")
    cmd = property(lambda self: self.loop.cmd, doc="Command of this tick")
    goal = property(lambda self: self.loop.goal, doc="(n,) joint goal after safety, rad")
    goal_servo = property(lambda self: self.loop.goal_servo, doc="(n,) servo goal, rad")
    current_servo = property(lambda self: self.loop.current_servo, doc="(n,) servo goal current, A")
    telemetry_path = property(lambda self: self.outputs.telemetry_path)
    socket_path = property(lambda self: self.outputs.socket_path)

    def t_s(self) -> float:
        """Loop time of the current tick, s since the first startup deadline."""
        return self.loop.t_s()

    def _event(self, kind: str, message: str, fault: Fault | None = None) -> None:
        self.outputs.event(kind, message, self.loop.ticks, self.loop.t_s(), fault)

    def _on_transition(self, tr) -> None:
        log.info("%s -> %s%s", tr.source.label, tr.target.label, f" ({tr.reason})" if tr.reason else "")
        self._event("state", f"{tr.source.label} -> {tr.target.label}" + (f": {tr.reason}" if tr.reason else ""))

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
        except FaultRaised as f:
            self.fault(f.fault)
        except BaseException as exc:  # a bug or an interrupt: still stop the servos
            if not isinstance(exc, KeyboardInterrupt):
                log.exception("unexpected error in the loop")
            self.fault(Fault(FaultKind.INTERNAL, f"unexpected {type(exc).__name__}: {exc}"))
        finally:
            self.loop.drain()   # no read request left on the wire (read-ahead), whatever stopped us
            self.env.end_realtime()
            self.env.resume_gc()
            self.close_bus()
            if old_handlers is not None:
                self._restore_signal_handlers(old_handlers)
            self.close_outputs()
        return self.summary()

    def open_outputs(self) -> None:
        """Start the telemetry writer and the command socket (before real-time settings).

        Raises
        ------
        FaultRaised
            The telemetry file cannot be created or another daemon holds the socket.
        """
        cfg = self.cfg
        header = {"robot": cfg.robot, "rate_hz": cfg.loop.rate_hz, "joint_names": list(self.joint_names),
                  "servo_ids": list(self.ids), "controller": cfg.controller.name,
                  "lower": self.ctx.lower.tolist(), "upper": self.ctx.upper.tolist(), "config": cfg.source,
                  "simulated_clock": bool(getattr(self.clock, "simulated", False)),
                  **servo_header(cfg, servo_tables(cfg))}
        self.outputs.open(self.loop.ring, header, cfg.logging.flush_s, self, cfg.logging.max_mb,
                          cfg.logging.max_files)

    def close_outputs(self) -> None:
        """Stop the socket, flush telemetry with the summary; never raises."""
        error = self.outputs.close(self.summary())
        if error:
            self.warnings.append(error)

    # ------------------------------------------------------------------
    # connect, startup, run

    def connect(self) -> None:
        """Open the port, ping every servo, check models, fix latency timer and return delay, set modes."""
        from servoloop.firmware_bridge.errors import BridgeError

        self.lifecycle.to(State.CONNECT, f"port {getattr(self.bus, 'port', '?')}")
        try:
            self.bus.open()
            self._connected = True
            report = connect_bus(self.bus, self.cfg, self.readonly, self.loop.errors)
            self._answered = set(self.ids)
            if report is not None:
                self._event("connect", connect_report_text(report))
                self.warnings.extend(str(w) for w in (getattr(report, "warnings", ()) or ()))
            tables = servo_tables(self.cfg)
            self.loop.bind(self.bus, tables, self.readonly)
            if not self.readonly:
                _retry(lambda: configure_modes(self.bus, self.cfg, tables), self.loop.errors)
                note = prepare_bus_watchdog(self.bus, self.cfg, tables)
                if note:
                    log.warning("%s", note)
                    self._event("connect", note)
        except BridgeError as exc:
            sid = getattr(exc, "servo_id", None)
            joint = self.loop.servo_faults.joint_of(sid) if sid is not None else None
            raise FaultRaised(Fault(FaultKind.CONNECT, f"connect: {exc}", sid, joint)) from exc

    def startup(self) -> None:
        """goal := present, then torque on, then ramp to the controller's first command."""
        self.lifecycle.to(State.STARTUP)
        loop = self.loop
        # before torque on: the collection is a stall (0.9 s in a large process), and a stall
        # after the Bus Watchdog is armed stops the servos for good (controller/watchdog_guard.py)
        self.env.pause_gc()
        self._torque_on = hold_present_pose(loop, self.bus, self.ids, self.readonly,
                                            self.cfg.safety.startup_margin)
        loop.ramp.begin(loop.goal)
        self.controller.start(loop.state)
        self.env.begin_realtime(self.helper_threads + self.outputs.threads())
        rt = self.env.report
        if rt is not None and rt.sched_fifo and self._own_clock:   # the tail pays off under FIFO only
            self.clock.spin_ns = int(self.cfg.loop.spin_tail_s(sched_fifo=True) * 1e9)
        if self._torque_on:
            from servoloop.firmware_bridge.errors import BridgeError

            tables = servo_tables(self.cfg)
            try:  # a dead host from here on: the servos stop by themselves
                raw = arm_bus_watchdog(self.bus, self.cfg, tables)
            except BridgeError as exc:
                raise FaultRaised(Fault(FaultKind.STARTUP, f"startup: arming the bus watchdog failed: {exc}")) from exc
            # armed last, right before the first deadline: nothing slow comes between
            loop.watchdog.arm(watchdog_ids(self.cfg, tables), raw)
        loop.start()
        for _ in range(loop.ramp.n_ticks):
            self._check_requests()
            if self._stop_request is not None:
                return
            loop.tick()

    def run_loop(self, duration_s: float | None = None) -> None:
        """Tick the controller until ``duration_s`` of loop time, a stop request or a fault."""
        loop = self.loop
        rate = loop.rate
        if self.lifecycle.state != State.RUN:
            if self._stop_request is not None:
                return
            self.lifecycle.to(State.RUN)
            loop.safety.limits.restore()  # the ramp has brought every joint inside its limits
            loop.run_t0 = rate.next_deadline_ns
            self._run_wall0 = time.monotonic_ns()
            if loop.base_estimator is not None:
                loop.base_estimator.mark_run_start()
            for hook in self.run_start_hooks:
                hook()
        end_ns = None if duration_s is None else rate.next_deadline_ns + int(duration_s * 1e9)
        self.env.pause_gc()  # normally done by startup already
        try:
            while True:
                self._check_requests()
                if self._stop_request is not None:
                    break
                if end_ns is not None and rate.next_deadline_ns >= end_ns:
                    break
                loop.tick()
        finally:
            self._run_wall1 = time.monotonic_ns()
            self._run_dl1 = rate.deadline_ns

    def pause_gc(self) -> None:
        """Collect once, freeze, keep the collector off (see LoopEnvironment.pause_gc)."""
        self.env.pause_gc()

    def resume_gc(self) -> None:
        """Undo :meth:`pause_gc`."""
        self.env.resume_gc()

    def _check_requests(self) -> None:
        if self._hard_stop is not None:
            raise FaultRaised(Fault(FaultKind.SIGNAL, self._hard_stop))
        if self.loop.control.has_pending:
            self.loop.control.apply_pending()

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
            self.cmd.velocity[:] = 0.0  # wheels decelerate (acceleration-limited) during the stop cycles
            for _ in range(self.cfg.shutdown.stop_cycles):
                if self._hard_stop is not None:
                    raise FaultRaised(Fault(FaultKind.SIGNAL, self._hard_stop))
                self.loop.tick()
            self.loop.drain(wait_wire=True)  # owed replies off the wire first (no drain() needed)
            if self.loop.joint_map.any_velocity:
                try:  # then 0 rad/s, before torque off (or to hold still with shutdown.mode hold)
                    self.loop.write.stop_wheels()
                except BridgeError as exc:
                    raise FaultRaised(Fault(FaultKind.SHUTDOWN, f"shutdown: velocity 0 failed: {exc}")) from exc
            torque_off = self.cfg.shutdown.mode == "torque_off" or self._signal_torque_off
            is_current = self.loop.joint_map.is_current
            if torque_off or self.loop.joint_map.any_current:
                for sid, cur in zip(self.ids, is_current, strict=False):
                    if torque_off or cur:
                        try:  # idempotent: a lost reply on a lossy bus is retried, not a fault
                            _retry(lambda sid=sid: self._torque_off(sid), self.loop.errors)
                        except BridgeError as exc:
                            raise FaultRaised(Fault(
                                FaultKind.SHUTDOWN, f"shutdown: torque off of servo {sid} failed: {exc}",
                                sid, self.loop.servo_faults.joint_of(sid))) from exc
                self._torque_on = not torque_off
        if self._connected and not self.readonly:
            self.loop.watchdog.disarm()
            # 0 = off: a servo left holding (shutdown.mode hold) must not stop when we go quiet
            clear_bus_watchdog(self.bus, self.cfg, servo_tables(self.cfg))
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

    def fault(self, fault: Fault | str) -> None:
        """The fault path: record, torque off every servo (each in its own try); never raises."""
        if not isinstance(fault, Fault):
            fault = Fault(FaultKind.INTERNAL, str(fault))
        try:
            self.faults.append(fault)
            log.error("FAULT [%s]: %s", fault.kind.value, fault.message)
            self._event("fault", fault.message, fault)
            if not self.lifecycle.terminal:
                try:
                    self.lifecycle.to(State.FAULT, fault.message, self.tick)
                except LifecycleError:
                    self.lifecycle.state = State.FAULT
            elif self.lifecycle.state == State.DONE:
                self.lifecycle.state = State.FAULT
        except Exception:  # noqa: BLE001 - nothing may stop us from stopping the servos
            self.lifecycle.state = State.FAULT
        self.loop.drain()    # the replies owed to a read-ahead request first (never raises)
        stop_after(self, fault, _retry)    # torque off (a fall with on_fall damp: soft servos first)

    def stop_all_servos(self) -> None:
        """Torque off on every servo, each in its own try, twice for those that fail; never raises.

        With ``safety.comm_timeout_action: hold`` a comm timeout leaves torque on (the servos
        hold their last goal; the X-series bus watchdog, if armed, still stops them).  A servo
        that never answered at connect is tried but not warned about."""
        if self.readonly or not self._connected:
            return
        last = self.faults[-1] if self.faults else None
        if (last is not None and last.kind == FaultKind.COMM and self._torque_on
                and self.cfg.safety.comm_timeout_action == "hold" and self._hard_stop is None):
            self.warnings.append("comm timeout: servos left torqued at their last goal "
                                 "(safety.comm_timeout_action: hold)")
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
        self._torque_on = bool(failed) and self._answered is not None
        if self._answered is None:  # the connect failed: we never turned torque on
            if failed:
                log.info("torque off not confirmed by servos %s (they did not answer at connect)", failed)
            return
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
    # signals

    def _install_signal_handlers(self):
        if threading.current_thread() is not threading.main_thread():
            return None
        return {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}

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
            "t_s": self.t_s(),
            "rate_hz": self.rate_now(),
            "jitter_us": self.jitter.summary(),
            "missed": self.rate.missed,
            "bus_errors": dict(self.bus_errors),
            "faults": [f.message for f in self.faults],
            "fault_details": [f.as_dict() for f in self.faults],
            "controller": self.controller.status(),
            "joints": {j: float(q) for j, q in zip(self.joint_names, self.state.position, strict=False)},
            "readonly": self.readonly, "friction": self.friction, "servo_law": self.servo_law,
            **self.loop.report(),
        }

    def set_params(self, params: dict) -> None:
        """Check controller parameters now; the loop applies them between ticks."""
        self.loop.control.set_params(params)

    def set_goal(self, goal) -> None:
        """Check a goal now (startup / run only); the loop applies it between ticks."""
        self.loop.control.set_goal(goal, self.lifecycle.state)

    # ------------------------------------------------------------------
    # summary

    def rate_now(self) -> float:
        """Run-state ticks per second of loop time (simulated clock) or wall time, Hz."""
        loop = self.loop
        if not loop.run_t0 or loop.run_ticks == 0:
            return 0.0
        if getattr(self.clock, "simulated", False):
            end = self._run_dl1 if self._run_dl1 else loop.rate.deadline_ns
            span = (end - loop.run_t0) * 1e-9 + loop.rate.dt
        else:
            end = self._run_wall1 if self._run_wall1 else time.monotonic_ns()
            span = (end - self._run_wall0) * 1e-9
        return loop.run_ticks / span if span > 0 else 0.0

    def summary(self) -> dict:
        """The run summary: ``ticks`` (run-state ticks), ``rate_hz``, ``jitter_us``
        (wake-up lateness p50/p99/max), ``missed``, ``missed_by_cause`` (``compute``, ``bus``,
        ``wakeup``: adds up to ``missed``, see :mod:`controller.loop_stats`), ``tick_work_us``
        (run-state tick work, wake-up to end with bus waits, p50/p99/max), ``stale_reads`` (ticks
        run on the last reading: ``loop.late_read``; ``wire_gate``), ``bus_errors`` per kind, ``faults`` (messages)
        and ``fault_details`` (kind, servo, joint, message), ``fall`` (None, or its when, how far,
        how fast, reaction),
        ``state``, plus ``stop_reason``, ``telemetry``, ``warnings``; for a floating base
        with an IMU ``estimate`` (``base_position_in_world`` [m], ``base_rpy`` [rad], ...)."""
        rt = self.env.report
        return {
            "ticks": int(self.run_ticks),
            "rate_hz": float(self.rate_now()),
            "jitter_us": self.jitter.summary(),
            "missed": int(self.rate.missed),
            "bus_errors": dict(self.bus_errors),
            "faults": [f.message for f in self.faults],
            "fault_details": [f.as_dict() for f in self.faults],
            "state": self.lifecycle.state.label,
            "stop_reason": self.stop_reason,
            "robot": self.cfg.robot,
            "controller": self.cfg.controller.name, "friction": self.friction, "servo_law": self.servo_law,
            "total_ticks": int(self.tick),
            **self.loop.report(),
            "telemetry": str(self.telemetry_path) if self.telemetry_path else None,
            "realtime": None if rt is None else {
                "sched_fifo": rt.sched_fifo, "mlockall": rt.mlockall, "affinity": rt.affinity,
                "cpu": rt.cpu, "timer_slack_ns": rt.timer_slack_ns, "cpu_latency_us": rt.cpu_latency_us,
                "spin_us": getattr(self.clock, "spin_ns", 0) / 1e3,
            },
            "warnings": (list(self.warnings) + list(getattr(self.controller, "warnings", ()))
                         + self.loop.watchdog.warnings + self._comm_warnings() + self.loop.fall_warnings()),
            "bus_watchdog_trips": self.loop.watchdog.trips,
        }

    def _comm_warnings(self) -> list[str]:
        """One summary warning when the comm ladder left ``ok`` during the run."""
        comm = self.loop.safety.comm
        worst = max((s["level"] for s in comm.steps), key=("ok", "warn", "hold", "timeout").index, default="ok")
        if worst == "ok":
            return []
        return [f"comm: reached {worst}; {comm.failed_ticks} ticks with failed reads, "
                f"errors per servo {comm.error_counts()}"]
