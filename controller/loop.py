"""The tick: one object that runs the stages in order, on an absolute deadline.

::

    rate.wait()      absolute deadline on CLOCK_MONOTONIC (or simulated time);
                     a late tick is counted and skipped, never caught up
      -> read       one sync read of every servo          (bus_stages.ReadStage)
                    with the IMU board, if any, in one bulk read on Protocol 2.0;
                    its own sync read on a mixed bus       (bus_stages.ImuStage);
                    every ``safety.monitor_every`` ticks the wider twin read,
                    temperature and input voltage riding along (bus_stages.MonitorStage)
      -> estimate   servo -> joint; the floating base     (estimator.Estimator,
                    from IMU + leg kinematics              base_estimator.BaseEstimator)
      -> fall       the base estimate tipped over?        (fall.FallDetector; safety.on_fall)
      -> control    ramp | controller | frozen            (control_stage.ControlStage)
      -> safety     limits, clamp, slew limit, comm ladder, late ticks (safety.SafetyStage)
      -> joint map  torque -> goal offset / current, joint -> servo (joint_map.JointMap);
                    velocity (wheel) mode joints: velocity goal clamped and acceleration-limited
      -> write      one sync write per goal register / protocol (bus_stages.WriteStage)
      -> request    read-ahead only (``loop.read_ahead``): the next tick's read instruction;
                    that tick's read then collects the replies instead of writing and waiting
      -> record     one telemetry ring row                (telemetry.TickRecorder)

Every array is allocated in :class:`ControlLoop`'s constructor (or at
:meth:`ControlLoop.bind`, before the first deadline); a tick keeps no
Python object.  The deadline lives in ``ControlLoop.rate`` (a
:class:`~servoloop.controller.clock.FixedRate`).  A stage that finds a fault
returns it (the first one of the tick wins, the tick still records) or, for
what cannot wait (port gone, a servo's hardware error), raises
:class:`~servoloop.controller.faults.FaultRaised`.

Read-ahead takes the bus round trip out of the tick: the state a tick uses was
sampled when the previous tick ended (about one period older), in exchange for not
waiting on the replies (behind a USB adapter ~1 ms; a pty's tail is worse).  A tick's
``bus_us`` is then the collect's wait plus its own write and the next tick's request
write (the request before a monitor tick is the wider read: the monitor sends nothing of
its own, unless its registers cannot ride, see MonitorStage).  A tick that ends in a fault sends no request; :meth:`ControlLoop.drain`
takes one still outstanding (the daemon calls it on every way out).
"""

from __future__ import annotations

import logging

import numpy as np

from servoloop.controller.bus_io import BusErrorCounts
from servoloop.controller.bus_stages import ImuStage, MonitorStage, ReadStage, WriteStage
from servoloop.controller.clock import FixedRate
from servoloop.controller.control_stage import ControlStage
from servoloop.controller.controllers import BaseState, Command, JointState
from servoloop.controller.estimator import Estimator
from servoloop.controller.fall import graded
from servoloop.controller.faults import FaultRaised
from servoloop.controller.joint_map import JointMap
from servoloop.controller.lifecycle import State
from servoloop.controller.loop_stats import JitterStats, MissCauses
from servoloop.controller.safety import SafetyStage
from servoloop.controller.servo_faults import ServoFaultHandler
from servoloop.controller.slew import joint_max_offset, joint_max_velocity
from servoloop.controller.startup_ramp import StartupRamp
from servoloop.controller.telemetry import TelemetryRing, TickRecorder
from servoloop.controller.watchdog_guard import BusWatchdogGuard

__all__ = ["ControlLoop", "velocity_limits"]

log = logging.getLogger("servoloop.daemon")


def velocity_limits(bus, servos, tables) -> np.ndarray:
    """Per servo, the speed (rad/s) its goal velocity register accepts: X's Velocity Limit
    register (EEPROM, read now; a goal above it is refused with a Limit Error), inf elsewhere."""
    out = np.full(len(servos), np.inf)
    for i, (s, t) in enumerate(zip(servos, tables, strict=True)):
        if s.mode == "velocity" and "velocity_limit" in t.registers:
            r = t.registers["velocity_limit"]
            out[i] = bus.read_raw(s.id, "velocity_limit") * r.scale
    return out

_RUN = int(State.RUN)
_STARTUP = int(State.STARTUP)


class ControlLoop:
    """The stages of one tick and the arrays they share (joint space unless named ``*_servo``).

    Parameters
    ----------
    cfg : RobotConfig
    clock : Clock
    controller : Controller
    ctx : ControllerContext
    lifecycle : Lifecycle, whose state selects what the control stage does
    event : callable(kind, message, fault=None), the daemon's event log

    Attributes
    ----------
    rate : FixedRate, the deadline grid
    state : JointState (n), measured
    current : (n,) measured current (A) or load, joint sign
    cmd : Command (n), what the control stage asks for
    goal : (n,) rad, joint goal after safety
    goal_servo, current_servo : (n,) servo goals, rad and A
    velocity_goal, velocity_servo : (n,) rad/s, joint and servo velocity goals (velocity mode joints)
    errors : BusErrorCounts, bus errors per kind
    ticks, run_ticks, comm_errors : int counters (all ticks, run-state ticks, failed ticks)
    jitter, work : JitterStats of run-state ticks, wake-up lateness and tick work (ns in, us out)
    causes : MissCauses, every missed deadline (all states) with its cause
    bus_ns : int, the last tick's time waiting on the bus (read, write, monitor), ns
    """

    def __init__(self, cfg, clock, controller, ctx, lifecycle, event) -> None:
        n = cfg.n
        servos = cfg.servos
        self.cfg = cfg
        self.clock = clock
        self.lifecycle = lifecycle
        self.ids = tuple(s.id for s in servos)
        self.joint_names = cfg.joint_names
        self.rate = FixedRate(cfg.loop.rate_hz, clock)
        self.readonly = False
        self.monitor_every = cfg.safety.monitor_every

        self.state = JointState.zeros(n)
        self.current = np.full(n, np.nan)
        self.cmd = Command.zeros(n)
        self.goal = np.zeros(n)
        self.goal_servo = np.zeros(n)
        self.current_servo = np.zeros(n)
        self.velocity_goal = np.zeros(n)
        self.velocity_servo = np.zeros(n)
        self._tmp = np.zeros(n)

        self.errors = BusErrorCounts()
        self.joint_map = JointMap(servos)
        self.servo_faults = ServoFaultHandler(servos, cfg.safety, self.rate, event)
        if cfg.loop.read_ahead:   # a config made in code skipped the loader's check
            from servoloop.controller.config_checks import check_read_ahead
            from servoloop.controller.errors import ConfigError

            check_read_ahead(cfg, lambda msg, key: ConfigError(msg, cfg.source, key))
        self.read = ReadStage(self.errors, self.servo_faults, cfg.loop.read_ahead,
                              cfg.loop.late_read, clock)
        self.read_ahead = cfg.loop.read_ahead
        #: late-read budget: the tick's own work after its read (its recent peak, ns, decaying
        #: by a thousandth of the period a tick, at most half a period: one stalled tick must
        #: not leave the next thousands without a wait) and a margin for the wake-up, see tick()
        self._own_peak_ns = 0
        self._peak_decay_ns = max(1, self.rate.period_ns // 1000)
        self._peak_cap_ns = self.rate.period_ns // 2
        self._late_margin_ns = self.rate.period_ns // 20
        self.bus = None
        self.imu = self.base_estimator = None
        if cfg.imu is not None:      # a floating base with an IMU board on the bus
            from servoloop.controller.base_estimator import BaseEstimator

            self.state.base = BaseState()
            self.imu = ImuStage(cfg.imu, self.errors)
            self.base_estimator = BaseEstimator(cfg, self.state.base, self.state.position,
                                                self.state.velocity, 1.0 / cfg.loop.rate_hz)
        self.estimate = Estimator(self.joint_map, self.state, self.current, self.base_estimator)
        #: the fall detector (controller/fall.py): every floating base with the estimate stage
        self.fall = None
        if self.base_estimator is not None and cfg.safety.fall_tilt_rad is not None:
            from servoloop.controller.fall import DAMP_KD, FallDetector

            self.fall = FallDetector(cfg.safety, self.state.base, cfg.loop.rate_hz)
        #: True while a fall's ``damp`` reaction runs (the daemon's): goal := present, no torque
        self.damping = False
        self._damp_kd = np.where(self.joint_map.is_current, DAMP_KD, 0.0) if self.fall else np.zeros(n)
        self._event = event
        ramp = StartupRamp(ctx, cfg.startup.via, int(round(cfg.startup.ramp_s * cfg.loop.rate_hz)))
        self.control = ControlStage(controller, ramp, self.state, self.cmd, event)
        self.safety = SafetyStage(cfg.safety, self.joint_names, self.ids, ctx.lower, ctx.upper,
                                  joint_max_velocity(servos, cfg.safety), cfg.loop.rate_hz, event,
                                  velocity_joints=self.joint_map.is_velocity)
        torque_goals = getattr(controller, "torque_goals", None)
        if torque_goals is not None:    # wbc / trot: goals that carry torque (controller.slew)
            self.safety.set_torque_goals(torque_goals, joint_max_offset(servos))
        self.servo_faults.on_restore = self._on_servo_restored
        self.servo_faults.on_disable = self._on_servo_disabled
        self.disabled = np.zeros(n, dtype=bool)
        self.any_disabled = False
        self.write = WriteStage(self.goal_servo, self.current_servo, self.errors, self.velocity_servo)
        self.monitor = MonitorStage(self.safety, self.errors, n)
        cap = max(64, int(cfg.logging.ring_s * cfg.loop.rate_hz))
        be = self.base_estimator
        self.ring = TelemetryRing(self.joint_names, cap, be.telemetry_columns() if be else ())
        self.record = TickRecorder(self.ring, self.state.position, self.state.velocity, self.current,
                                   self.goal, self.cmd.effort, self.monitor.temperature,
                                   self.monitor.voltage, self.monitor.hardware_error,
                                   be.telemetry if be else None)
        self.jitter = JitterStats()
        self.work = JitterStats()  # run-state tick work: wake-up to the end of the tick, sleep excluded
        self.causes = MissCauses()

        self.ticks = 0
        self.run_ticks = 0
        self.comm_errors = 0
        self.anchor_ns = 0  # first deadline: telemetry's t = 0
        self.run_t0 = 0  # first deadline of the run state: the controller's t = 0
        self._prev_wake = 0
        self._prev_late = 0  # the previous tick's lateness and bus wait, ns: what an overrun
        self._prev_bus = 0   # found at the next wait is put down to (MissCauses.overrun)
        self.bus_ns = 0
        #: the servos' Bus Watchdog after a stall (the daemon arms it); the end of the last
        #: tick's bus traffic, ns: a gap from there long enough to have fired it is checked
        self.watchdog = BusWatchdogGuard(event)
        self._last_bus_end_ns = 0
        self._est_ns = 0     # the deadline of the last tick that estimated (0: none yet)
        self._ride = False   # the monitor's registers ride in the tick's read (bind)

    @property
    def ramp(self) -> StartupRamp:
        return self.control.ramp

    def bind(self, bus, tables, readonly: bool) -> None:
        """Make the readers and writers on the open ``bus`` (``tables``: control tables, config order)."""
        self.readonly = readonly
        self.bus = bus
        turning = [sid for sid, v in zip(self.ids, self.joint_map.is_velocity, strict=True) if v]
        imu = self.imu
        if imu is not None:
            imu.connect(bus)    # before the read stage: the board joins the servos' bulk read
        reader = self.read.bind(bus, self.ids, tables, free_turning=turning,
                                devices=imu.devices() if imu is not None else (),
                                extra=MonitorStage.registers(tables))
        v = reader.values
        self.estimate.bind(v["present_position"], v["present_velocity"], v["effort"])
        self.joint_map.set_effort_units(reader.effort_units)
        self.monitor.bind(bus, self.ids, tables, ride=self.read)
        self._ride = self.monitor.rides
        self.servo_faults.bind(bus, tables, readonly)
        if imu is not None:
            parts = self.read.device_parts
            imu.attach(parts[0] if parts else None)
            r = imu.reader
            self.base_estimator.bind(r.gyro, r.accel, r.rpy)
        if readonly:
            return
        self.write.bind(bus, self.cfg.servos)
        limits = np.full(len(self.ids), np.inf)
        for i, t in enumerate(tables):
            r = t.registers.get("goal_current")
            if r is not None and r.max_raw is not None:
                limits[i] = abs((r.max_raw - r.zero_raw) * r.scale)
        self.joint_map.set_current_limits(limits)
        if self.joint_map.any_velocity:
            self.safety.velocity.set_max_velocity(velocity_limits(bus, self.cfg.servos, tables))

    def start(self) -> None:
        """Anchor the deadline grid now: the first tick is one period away.

        Called from the loop thread: the clock's per-thread settings (timer slack) go there.
        """
        prepare = getattr(self.clock, "prepare_thread", None)
        if prepare is not None:
            prepare()
        self.rate.start()
        self.anchor_ns = self.rate.next_deadline_ns
        self._prev_wake = self.clock.now_ns()
        self._prev_late = self._prev_bus = 0
        self._last_bus_end_ns = self._prev_wake
        self.safety.comm.start(self.rate.next_deadline_ns)

    def _on_servo_restored(self, i: int, present_servo: float, now_ns: int) -> None:
        """A rebooted servo holds its present position: its joint goal ramps back from there."""
        jm = self.joint_map
        q = jm.direction[i] * (present_servo - jm.offset[i])
        self.safety.slew.reset_joint(i, q)
        self.safety.velocity.reset(i)  # a wheel comes back at rest
        comm = self.safety.comm
        comm.last_ok_ns[:] = now_ns  # the reboot's silence is not a comm timeout
        comm.last_tick_ok_ns = now_ns

    def _on_servo_disabled(self, i: int) -> None:
        """``disable_servo``: servo ``i`` is off; its joint holds its last goal and position."""
        self.disabled[i] = True
        self.any_disabled = True
        self.read.disabled[i] = True
        self.safety.slew.held[i] = True
        self.safety.comm.disable(i)

    def fall_summary(self) -> dict | None:
        """``t_s``, ``tilt_rad``, ``tipping_rate_rad_s``, ``reaction`` if the robot fell, else None."""
        f = self.fall
        return None if f is None or f.fell is None else dict(f.fell)

    def fall_warnings(self) -> list[str]:
        """With ``safety.on_fall: warn`` the fall is no fault: the summary still says it; a
        collapse (no fault, fall.py) too."""
        f = self.fall
        if f is None:
            return []
        return (([] if f.fell is None or f.reaction != "warn" else [f.message()])
                + ([] if f.collapsed is None else [f.collapse_message()]))

    def collapse_summary(self) -> dict | None:
        """``t_s``, ``height_m``, ``standing_height_m``, ``tilt_rad`` if the robot collapsed."""
        f = self.fall
        return None if f is None or f.collapsed is None else dict(f.collapsed)

    def _damp_command(self) -> None:
        """A fallen robot's servos, soft (``safety.on_fall: damp``; their gains lowered by the
        daemon): goal := present, no torque but a damping current on current servos, wheels
        to rest."""
        cmd = self.cmd
        np.copyto(cmd.position, self.state.position)
        cmd.effort[:] = 0.0
        cmd.kp[:] = 0.0
        np.copyto(cmd.kd, self._damp_kd)
        cmd.velocity[:] = 0.0

    def report(self) -> dict:
        """What ``servoloop status`` and the run summary both tell of the loop: ``missed_by_cause``,
        ``tick_work_us``, the read's figures (:meth:`read_summary`), ``comm``, ``fall`` and, for a
        floating base with an IMU, ``estimate`` (see ``BaseEstimator.summary``)."""
        be = self.base_estimator
        return {"missed_by_cause": self.causes.summary(), "tick_work_us": self.work.summary(),
                **self.read_summary(), "comm": self.safety.comm.status(), "fall": self.fall_summary(),
                "collapse": self.collapse_summary(), **({} if be is None else {"estimate": be.summary()})}

    def read_summary(self) -> dict:
        """``read_ahead``, ``late_read``, ``stale_reads`` and ``wire_gate`` (stale ticks' goal
        writes that waited for the owed replies to be off the wire: ``waits``, ``wait_us`` in
        all; ``skipped``: not sent, the wire not free before the next deadline; ``wire_us``:
        the read's wire time), for the status and the summary."""
        read = self.read
        return {"read_ahead": self.read_ahead, "late_read": read.late_read,
                "stale_reads": read.stale_reads, "wire_gate": read.gate.summary()}

    def drain(self, wait_wire: bool = False) -> None:
        """Take the replies of a read request still outstanding (read-ahead) off the bus, so
        the loop never leaves one behind when it stops; never raises.  ``wait_wire`` (the
        shutdown): on a simulated clock, first let the read's wire time pass
        (:meth:`~controller.wire_gate.WireGate.quiesce`); the fault path does not touch a
        clock that may have failed."""
        bus = self.bus
        if bus is None or getattr(bus, "pending", None) is None:
            return
        try:
            if wait_wire:
                self.read.gate.quiesce(bus)
            else:
                bus.settle()
        except Exception as exc:  # noqa: BLE001 - called on the way out, faults included
            log.warning("draining the outstanding read request: %s", exc)

    def t_s(self) -> float:
        """Loop time of the current tick, s since the first startup deadline."""
        return (self.rate.deadline_ns - self.anchor_ns) * 1e-9 if self.anchor_ns else 0.0

    def actuate(self) -> None:
        """Command (joint space) -> safe joint goal -> servo targets (torque as offset or current)."""
        self.joint_map.offset_goal(self.cmd, self._tmp)
        # the run state's torque-carrying goals are bounded about the measured position
        run = int(self.lifecycle.state) == _RUN
        self.safety.clamp(self._tmp, self.goal, self.state.position if run else None)
        self.joint_map.to_servo(self.goal, self.cmd, self.state, self.goal_servo, self.current_servo)
        if self.joint_map.any_velocity:
            self.safety.clamp_velocity(self.cmd.velocity, self.velocity_goal)
            self.joint_map.velocity_to_servo(self.velocity_goal, self.velocity_servo)

    def tick(self) -> None:
        """Wait for the next deadline and run every stage once.

        Raises
        ------
        FaultRaised
            A stage found a fault (after the tick has been recorded).
        """
        rate = self.rate
        clock = self.clock
        if rate.wait():
            if rate.overrun_skipped:  # the previous tick ran past this deadline
                self.causes.overrun(rate.overrun_skipped, self._prev_late, self._prev_bus,
                                    rate.entry_ns - self._prev_wake - self._prev_bus)
            if rate.late_skipped:
                self.causes.late_wakeup(rate.late_skipped)
        skipped = rate.overrun_skipped + rate.late_skipped
        wake = rate.deadline_ns + rate.late_ns
        code = int(self.lifecycle.state)
        safety = self.safety
        fault = safety.late(skipped)
        read = self.read
        if read.late_read:
            # the replies may come until the tick's own work (its recent peak) and a margin
            # for the wake-up still fit before the next deadline; later, the tick runs stale
            read.until_ns = rate.deadline_ns + rate.period_ns - self._own_peak_ns - self._late_margin_ns
        # a monitor tick's read carries the monitor's registers too (one transaction, not two)
        ok = read.run(self._ride and (self.ticks + 1) % self.monitor_every == 0)
        stale = read.stale
        if self.imu is not None and not stale:
            self.imu.run()      # a failed IMU read: NaN in, the base estimate marked invalid
        if self.watchdog.limit_ns:   # a stall long enough to have stopped the servos: ask them
            self.watchdog.check(self.bus, clock.now_ns() - self._last_bus_end_ns, self.errors)
        bus_ns = read_ns = clock.now_ns() - wake
        # a failed servo reads NaN (never a stale number): telemetry shows the gap.  A stale tick
        # estimates nothing: the joint state and the base estimate (its ``valid`` too) keep the
        # last tick's values; the base estimator would take the same IMU sample as a new one
        if not stale:
            # the time since the last estimate: more than a period after a skipped or stale tick
            last, self._est_ns = self._est_ns, rate.deadline_ns
            self.estimate.run((rate.deadline_ns - last) * 1e-9 if last else 0.0)
        if self.any_disabled:  # a disabled servo's joint: its last goal, at rest (no NaN into control)
            np.copyto(self.state.position, self.safety.slew.last, where=self.disabled)
            np.copyto(self.state.velocity, 0.0, where=self.disabled)
        if self.fall is not None and (code == _RUN or code == _STARTUP):
            f = self.fall.check(self.t_s())
            if f is not None:
                self._event("fall", f.message, f)
                if self.fall.reaction != "warn" and not self.readonly:
                    fault = graded(fault, f)     # with another fault: the worse decides
            if code == _RUN and self.fall.check_collapse(self.t_s()):
                self._event("collapse", self.fall.collapse_message())   # a warning (fall.py)
        # stale on a failed reading (NaN), or past safety.comm_hold_s: the servos keep their
        # last goals, as when reads fail
        if ok and not (stale and (not read.reading_ok
                                  or rate.deadline_ns - safety.comm.last_tick_ok_ns >= safety.comm.hold_ns)):
            if self.damping:    # a fallen robot's joints may lie past their limits: no fault
                self._damp_command()
            else:
                f = safety.check_measured(self.state.position)
                if f is not None:
                    fault = graded(fault, f)
                self.control.run(code, (rate.deadline_ns - self.run_t0) * 1e-9)
            if stale:
                safety.slew.save()
                safety.velocity.save()
            self.actuate()
            # a stale tick's write waits until the owed replies are off the half-duplex wire,
            # or is not sent (the servos keep their last goal) when that is past the next deadline
            if fault is None and not self.readonly:
                t = clock.now_ns()
                if not stale or read.gate.clear(rate.deadline_ns + rate.period_ns - self._late_margin_ns):
                    ok = self.write.send() and ok
                else:   # not sent: the next goal steps from the one the servos hold
                    safety.slew.rewind()
                    safety.velocity.rewind()
                bus_ns += clock.now_ns() - t
        f = safety.record_comm(ok, read.failed, rate.deadline_ns, stale)
        if f is not None:
            fault = graded(fault, f)
        if not ok:
            self.comm_errors += 1
        self.ticks += 1
        if self.monitor.reader is not None and self.ticks % self.monitor_every == 0 and not stale:
            t = clock.now_ns()
            f = self.monitor.run()
            bus_ns += clock.now_ns() - t
            if f is not None:
                fault = graded(fault, f)
        if self.read_ahead and fault is None and not stale:   # stale: the request is still out
            t = clock.now_ns()
            # after every other transaction of the tick: none collects it early; the wide one
            # when the next tick monitors
            self.read.request(self._ride and (self.ticks + 1) % self.monitor_every == 0)
            bus_ns += clock.now_ns() - t
        end = clock.now_ns()
        own = end - wake - read_ns
        if own > self._peak_cap_ns:
            own = self._peak_cap_ns
        peak = self._own_peak_ns - self._peak_decay_ns
        self._own_peak_ns = own if own > peak else peak
        if code == _RUN:
            self.jitter.add(rate.late_ns)
            self.work.add(end - wake)
            self.run_ticks += 1
        c = self.causes
        self.record.run(self.ticks, (rate.deadline_ns - self.anchor_ns) * 1e-9, rate.late_ns * 1e-3,
                        (wake - self._prev_wake) * 1e-3, (end - wake) * 1e-3,
                        code, rate.missed, self.comm_errors, ok,
                        bus_ns * 1e-3, c.compute, c.bus, c.wakeup, read.stale_reads)
        self._prev_wake = wake
        self._last_bus_end_ns = end
        self._prev_late = rate.late_ns
        self._prev_bus = self.bus_ns = bus_ns
        if fault is not None:
            raise FaultRaised(fault)
