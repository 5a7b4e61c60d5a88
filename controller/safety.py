"""The safety stage of one tick: command clamping, the goal slew limit, measured limits,
the comm-fault ladder, late ticks, temperature and voltage.

Everything works in place on arrays allocated at construction.  The checks
(:class:`~servoloop.controller.comm_policy.CommPolicy`, :class:`LimitChecker`) return ``None`` when all is
well and a message naming the joint / servo and the value when it is not;
:class:`SafetyStage` turns those into typed
:class:`~servoloop.controller.faults.Fault` objects for the loop.
"""

from __future__ import annotations

import numpy as np

from servoloop.controller.comm_policy import CommPolicy
from servoloop.controller.faults import Fault, FaultKind
from servoloop.controller.slew import SlewLimiter, VelocitySlew

__all__ = ["LimitChecker", "SafetyStage"]


class LimitChecker:
    """Joint-limit clamping of commands and checks on measured values.

    Parameters
    ----------
    joint_names : sequence of str (n)
    servo_ids : sequence of int (n)
    lower, upper : (n,) joint limits, rad
    margin : rad a measured position may pass a limit before it is a fault
    """

    def __init__(self, joint_names, servo_ids, lower, upper, margin: float) -> None:
        self.joint_names = tuple(joint_names)
        self.servo_ids = tuple(servo_ids)
        self.lower = np.asarray(lower, dtype=float).copy()
        self.upper = np.asarray(upper, dtype=float).copy()
        self.margin = float(margin)
        # the limits in force: the configured ones, or widened to the start pose (widen_to)
        self.lower_active = self.lower.copy()
        self.upper_active = self.upper.copy()
        self.lower_fault = self.lower - margin
        self.upper_fault = self.upper + margin
        n = len(self.joint_names)
        self._b1 = np.zeros(n, dtype=bool)
        self._b2 = np.zeros(n, dtype=bool)
        self.last_index = -1  # joint index of the last check that failed
        # joints whose measured position is not checked: velocity (wheel) mode joints turn freely
        self.unchecked = np.zeros(n, dtype=bool)
        self._checked = np.ones(n, dtype=bool)
        self.any_unchecked = False

    def skip_measured(self, mask) -> None:
        """Measured positions of the joints in ``mask`` ((n,) bool) are not checked against limits."""
        self.unchecked[:] = mask
        np.logical_not(self.unchecked, out=self._checked)
        self.any_unchecked = bool(self.unchecked.any())

    def widen_to(self, q: np.ndarray) -> None:
        """Let the start pose ``q`` (rad) stand until :meth:`restore`.

        A robot lying with its servos off rests on its mechanical stops,
        which are outside the configured (soft) limits.  Clamping its first
        goal to the limits would jump the joint at torque on; instead the
        limits in force include the start pose while the startup ramp brings
        the joint inside.
        """
        np.minimum(self.lower, q, out=self.lower_active)
        np.maximum(self.upper, q, out=self.upper_active)
        np.subtract(self.lower_active, self.margin, out=self.lower_fault)
        np.add(self.upper_active, self.margin, out=self.upper_fault)

    def restore(self) -> None:
        """Back to the configured limits (end of the startup ramp)."""
        self.lower_active[:] = self.lower
        self.upper_active[:] = self.upper
        np.subtract(self.lower, self.margin, out=self.lower_fault)
        np.add(self.upper, self.margin, out=self.upper_fault)

    def clamp(self, goal: np.ndarray, out: np.ndarray) -> np.ndarray:
        """``out = clip(goal, lower, upper)`` (rad, in place) with the limits in force;
        NaN goals become the lower limit."""
        # maximum then minimum: np.clip's result (NaN included) without its Python-level dispatch
        np.minimum(np.maximum(goal, self.lower_active, out=out), self.upper_active, out=out)
        # NaN survives clip: a controller bug must never reach a servo as a goal
        np.isnan(out, out=self._b1)
        if self._b1.any():
            np.copyto(out, self.lower_active, where=self._b1)
        return out

    def check_position(self, q: np.ndarray, extra: float = 0.0) -> str | None:
        """Fault message if a measured joint position (rad) is past its limit + margin (+ extra)."""
        if extra:
            np.less(q, self.lower_fault - extra, out=self._b1)
            np.greater(q, self.upper_fault + extra, out=self._b2)
        else:
            np.less(q, self.lower_fault, out=self._b1)
            np.greater(q, self.upper_fault, out=self._b2)
        np.logical_or(self._b1, self._b2, out=self._b1)
        if self.any_unchecked:
            np.logical_and(self._b1, self._checked, out=self._b1)
        if not self._b1.any():
            return None
        i = self.last_index = int(np.argmax(self._b1))
        what = "margin" if not extra else f"margin + {extra:.3f} allowed at startup"
        return (f"joint {self.joint_names[i]!r} (servo {self.servo_ids[i]}) at {q[i]:.3f} rad is past "
                f"its limits [{self.lower[i]:.3f}, {self.upper[i]:.3f}] + {what}")

    def check_range(self, values: np.ndarray, lo: float | None, hi: float | None,
                    what: str, unit: str, key: str) -> str | None:
        """Fault message if any value is below ``lo`` or above ``hi`` (None: unchecked, NaN: skipped)."""
        if lo is not None:
            np.less(values, lo, out=self._b1)
            if self._b1.any():
                i = self.last_index = int(np.argmax(self._b1))
                return (f"servo {self.servo_ids[i]} ({self.joint_names[i]}): {what} {values[i]:.1f} {unit} "
                        f"below {lo} ({key})")
        if hi is not None:
            np.greater(values, hi, out=self._b1)
            if self._b1.any():
                i = self.last_index = int(np.argmax(self._b1))
                return (f"servo {self.servo_ids[i]} ({self.joint_names[i]}): {what} {values[i]:.1f} {unit} "
                        f"above {hi} ({key})")
        return None


class SafetyStage:
    """The safety checks of one tick, as typed faults.

    Parameters
    ----------
    safety : SafetyConfig
    joint_names, servo_ids : sequences (n), config order
    lower, upper : (n,) joint limits, rad
    max_velocity : (n,) rad/s goal slew limit per joint (``slew.joint_max_velocity``); velocity
        mode joints: the limit of their velocity goal
    rate_hz : float, loop rate
    event : callable(kind, message), the daemon's event log
    velocity_joints : (n,) bool or None, joints whose servo is in velocity (wheel) mode: their
        measured position is not limit-checked (they turn freely)

    Attributes
    ----------
    limits : LimitChecker (clamping the command, measured positions, monitor ranges)
    slew : SlewLimiter (the goal's speed / acceleration, from the goal written last tick)
    velocity : VelocitySlew (velocity goals: +-max_velocity, acceleration limited, from 0)
    comm : CommPolicy (per-servo comm errors, the ok -> warn -> hold -> timeout ladder)
    consecutive_missed : int, late ticks in a row
    """

    def __init__(self, safety, joint_names, servo_ids, lower, upper, max_velocity=None,
                 rate_hz: float = 1000.0, event=None, velocity_joints=None) -> None:
        self.cfg = safety
        n = len(tuple(servo_ids))
        self.limits = LimitChecker(joint_names, servo_ids, lower, upper, safety.position_margin)
        vmax = np.full(n, np.inf) if max_velocity is None else max_velocity
        self.slew = SlewLimiter(vmax, safety.max_acceleration, 1.0 / rate_hz)
        self.velocity = VelocitySlew(vmax, safety.max_acceleration, 1.0 / rate_hz)
        if velocity_joints is not None:
            self.limits.skip_measured(velocity_joints)
        self.comm = CommPolicy(servo_ids, joint_names, safety, rate_hz, event or (lambda kind, msg: None))
        self.consecutive_missed = 0

    def _at(self, kind: FaultKind, msg: str) -> Fault:
        i = self.limits.last_index
        return Fault(kind, msg, self.limits.servo_ids[i], self.limits.joint_names[i])

    def late(self, skipped: int) -> Fault | None:
        """Count a late tick (``skipped`` deadlines); a fault after ``max_consecutive_missed`` in a row."""
        if not skipped:
            self.consecutive_missed = 0
            return None
        self.consecutive_missed += 1
        lim = self.cfg.max_consecutive_missed
        if lim is not None and self.consecutive_missed >= lim:
            return Fault(FaultKind.LATE, f"{self.consecutive_missed} consecutive late ticks "
                                         "(safety.max_consecutive_missed)")
        return None

    def check_measured(self, position: np.ndarray) -> Fault | None:
        """A fault when a measured joint position (rad) is past its limit + margin."""
        msg = self.limits.check_position(position)
        return None if msg is None else self._at(FaultKind.LIMIT, msg)

    def set_torque_goals(self, mask, max_offset) -> None:
        """The controller's goals carry torque on the joints in ``mask`` ((n,) bool): their slew
        limit is a window of ``max_offset`` ((n,) rad) about the measured position besides the
        ramp (:mod:`controller.slew`, issue 11)."""
        self.slew.set_torque_goals(mask, max_offset)

    def clamp(self, goal: np.ndarray, out: np.ndarray, present: np.ndarray | None = None) -> np.ndarray:
        """``out`` := ``goal`` clamped to the limits in force (NaN -> the last written goal,
        or the lower limit before any), then slew-limited from the last written goal, rad.

        ``present`` (n,) rad, the measured position, given in the run state: the joints
        marked by :meth:`set_torque_goals` may also lie within their offset bound of it."""
        lim = self.limits
        lim.clamp(goal, out)
        if self.slew.primed:
            # a NaN goal (controller bug) holds the last written goal instead of heading for a limit
            np.isnan(goal, out=lim._b1)
            if lim._b1.any():
                np.copyto(out, self.slew.last, where=lim._b1)
        self.slew.limit(out, out, present)
        if present is not None and self.slew.any_torque:
            # the window is about the measured position: a joint pushed past its limit (a fall,
            # a stop) would put it past the limit too; the written goal never is
            lim.clamp(out, out)
            self.slew.last[:] = out
        return out

    def clamp_velocity(self, goal: np.ndarray, out: np.ndarray) -> np.ndarray:
        """``out`` := velocity goal ``goal`` (rad/s) within +-max_velocity and the acceleration limit."""
        return self.velocity.limit(goal, out)

    def record_comm(self, ok: bool, failed: np.ndarray, now_ns: int, stale: bool = False) -> Fault | None:
        """Record the tick's bus outcome (``failed``: (n,) bool per servo; ``stale``: late
        replies, see CommPolicy.record); a fault at comm timeout."""
        msg = self.comm.record(ok, failed, now_ns, stale)
        if msg is None:
            return None
        k = self.comm.timeout_index
        return Fault(FaultKind.COMM, msg, self.limits.servo_ids[k], self.limits.joint_names[k])

    def check_monitor(self, temperature, voltage) -> Fault | None:
        """Temperatures (degC) and input voltages (V), (n,) or None; a fault naming the servo."""
        sf = self.cfg
        lim = self.limits
        if temperature is not None:
            msg = lim.check_range(temperature, None, sf.max_temperature_c, "temperature", "degC",
                                  "safety.max_temperature_c")
            if msg:
                return self._at(FaultKind.TEMPERATURE, msg)
        if voltage is not None:
            msg = lim.check_range(voltage, sf.min_voltage_v, sf.max_voltage_v, "input voltage", "V",
                                  "safety.min_voltage_v/max_voltage_v")
            if msg:
                return self._at(FaultKind.VOLTAGE, msg)
        return None
