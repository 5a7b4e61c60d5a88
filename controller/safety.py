"""Safety checks of one tick: command clamping, measured limits, comm error window.

Everything works in place on arrays allocated at construction; a check
returns ``None`` when all is well and a message naming the joint / servo
and the value when it is not (the daemon turns that into a fault).
"""

from __future__ import annotations

import numpy as np

__all__ = ["CommMonitor", "LimitChecker"]


class CommMonitor:
    """Communication health over a sliding window of ticks.

    Faults when more than ``rate`` of the last ``window`` ticks had a bus
    error (Bit-Bots: 5 % of 200), or after ``max_consecutive`` failed ticks
    in a row.  The window only judges once it is full, so one error on the
    first tick is not a 100 % error rate.
    """

    def __init__(self, window: int = 200, rate: float = 0.05, max_consecutive: int = 5) -> None:
        self.window = int(window)
        self.rate = float(rate)
        self.max_consecutive = int(max_consecutive)
        self._ring = np.zeros(self.window, dtype=np.uint8)
        self._i = 0
        self.filled = 0
        self.errors_in_window = 0
        self.consecutive = 0
        self._limit = int(np.floor(self.rate * self.window))

    def record(self, ok: bool) -> str | None:
        """Record one tick's outcome; a fault message or None."""
        bad = 0 if ok else 1
        i = self._i
        self.errors_in_window += bad - int(self._ring[i])
        self._ring[i] = bad
        self._i = i + 1 if i + 1 < self.window else 0
        if self.filled < self.window:
            self.filled += 1
        self.consecutive = 0 if ok else self.consecutive + 1
        if self.consecutive >= self.max_consecutive:
            return f"{self.consecutive} consecutive ticks with bus errors (safety.max_consecutive_comm_errors)"
        if self.filled == self.window and self.errors_in_window > self._limit:
            return (f"bus error rate {self.errors_in_window}/{self.window} ticks exceeds "
                    f"{self.rate:.1%} (safety.comm_error_rate)")
        return None


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
        np.clip(goal, self.lower_active, self.upper_active, out=out)
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
        if not self._b1.any():
            return None
        i = int(np.argmax(self._b1))
        what = "margin" if not extra else f"margin + {extra:.3f} allowed at startup"
        return (f"joint {self.joint_names[i]!r} (servo {self.servo_ids[i]}) at {q[i]:.3f} rad is past "
                f"its limits [{self.lower[i]:.3f}, {self.upper[i]:.3f}] + {what}")

    def check_range(self, values: np.ndarray, lo: float | None, hi: float | None,
                    what: str, unit: str, key: str) -> str | None:
        """Fault message if any value is below ``lo`` or above ``hi`` (None: unchecked, NaN: skipped)."""
        if lo is not None:
            np.less(values, lo, out=self._b1)
            if self._b1.any():
                i = int(np.argmax(self._b1))
                return (f"servo {self.servo_ids[i]} ({self.joint_names[i]}): {what} {values[i]:.1f} {unit} "
                        f"below {lo} ({key})")
        if hi is not None:
            np.greater(values, hi, out=self._b1)
            if self._b1.any():
                i = int(np.argmax(self._b1))
                return (f"servo {self.servo_ids[i]} ({self.joint_names[i]}): {what} {values[i]:.1f} {unit} "
                        f"above {hi} ({key})")
        return None
