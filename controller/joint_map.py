"""Servo <-> joint mapping: direction, offset, and what a joint torque becomes for each servo.

::

    q_joint  = direction * (q_servo - offset)          (rad)
    dq_joint = direction * dq_servo                    (rad/s)
    q_servo  = direction * q_joint + offset
    v_servo  = direction * v_joint                     (velocity mode goals, rad/s)

A joint torque ``tau`` (N*m) reaches a servo in one of two ways:

* a **position** servo gets its goal offset by ``tau / k_p`` (``position_stiffness``,
  N*m/rad, calibrated; 0 where none is), so its own P loop pushes with ``tau``;
* a **current** servo gets ``i = (tau + kp (q_goal - q) - kd dq) / k_t`` (A),
  with the host-side ``kp``/``kd`` of the command, clipped to the servo's
  Goal Current range.

Every array is allocated in :class:`JointMap`'s constructor; the methods
work in place and allocate nothing.
"""

from __future__ import annotations

import numpy as np

__all__ = ["JointMap", "position_only"]


class JointMap:
    """The servo <-> joint mapping of one robot (n servos in config order).

    Parameters
    ----------
    servos : sequence of ServoConfig (n)

    Attributes
    ----------
    direction, offset : (n,) float, +-1 and rad
    kt : (n,) N*m/A, NaN where unknown or the servo reports load, not current
    inv_kt, inv_stiffness : (n,) 1/k_t and 1/k_p, 0 where unknown
    current_limit : (n,) A, Goal Current range (inf until :meth:`set_current_limits`)
    is_current : (n,) bool, servo in current mode
    is_velocity : (n,) bool, servo in velocity (wheel) mode: its goal is a velocity
    """

    def __init__(self, servos) -> None:
        n = len(servos)
        self.n = n
        self.direction = np.array([s.direction for s in servos], dtype=float)
        self.offset = np.array([s.offset for s in servos], dtype=float)
        self.is_current = np.array([s.mode == "current" for s in servos], dtype=bool)
        self.any_current = bool(self.is_current.any())
        self.is_velocity = np.array([s.mode == "velocity" for s in servos], dtype=bool)
        self.any_velocity = bool(self.is_velocity.any())
        kt = np.array([s.torque_constant or np.nan for s in servos], dtype=float)
        self.kt = kt
        self.inv_kt = np.where(np.isfinite(kt) & (kt > 0), 1.0 / np.where(kt > 0, kt, 1.0), 0.0)
        # a current-mode servo takes its torque as current: a goal offset as well would count it twice
        stiff = np.array([0.0 if s.mode == "current" else (s.position_stiffness or 0.0) for s in servos],
                         dtype=float)
        self.inv_stiffness = np.where(stiff > 0, 1.0 / np.where(stiff > 0, stiff, 1.0), 0.0)
        self.current_limit = np.full(n, np.inf)
        self._current_floor = -self.current_limit  # preallocated: no negation per tick
        self._tmp = np.zeros(n)

    def set_effort_units(self, units) -> None:
        """Per servo, the unit its effort register reports (``"A"`` or a load ratio).

        ``present_load`` is a PWM fraction, not a current: no torque estimate from it.
        """
        self.kt = np.where(np.array([u == "A" for u in units], dtype=bool), self.kt, np.nan)

    def set_current_limits(self, limits) -> None:
        """Goal Current range per servo, A ((n,), inf where the servo has none)."""
        self.current_limit[:] = limits
        np.negative(self.current_limit, out=self._current_floor)

    # ------------------------------------------------------------------
    # servo -> joint

    def to_joint(self, position_servo, velocity_servo, effort_servo, state, current) -> None:
        """Fill ``state`` (JointState) and ``current`` ((n,), joint sign) from servo readings.

        Parameters
        ----------
        position_servo, velocity_servo : (n,) rad, rad/s (NaN where a read failed)
        effort_servo : (n,) A or load ratio, or None
        state : JointState, filled in place (effort in N*m, NaN without k_t)
        current : (n,) out, servo effort in the joint's sign
        """
        np.subtract(position_servo, self.offset, out=state.position)
        state.position *= self.direction
        np.multiply(velocity_servo, self.direction, out=state.velocity)
        if effort_servo is not None:
            np.multiply(effort_servo, self.direction, out=current)
            np.multiply(current, self.kt, out=state.effort)

    # ------------------------------------------------------------------
    # joint -> servo

    def offset_goal(self, command, out: np.ndarray) -> np.ndarray:
        """``out = position + effort / k_p`` (rad): torque as a goal offset for position servos."""
        np.multiply(command.effort, self.inv_stiffness, out=out)
        np.add(command.position, out, out=out)
        return out

    def velocity_to_servo(self, velocity_goal: np.ndarray, velocity_servo: np.ndarray) -> None:
        """Servo velocity goals (rad/s, ``velocity_servo`` out) from joint velocity goals (rad/s)."""
        np.multiply(velocity_goal, self.direction, out=velocity_servo)

    def to_servo(self, goal, command, state, goal_servo, current_servo) -> None:
        """Servo goals from the (safe) joint goal.

        Parameters
        ----------
        goal : (n,) rad, joint goal after safety
        command : Command, its effort / kp / kd give current-mode servos their current
        state : JointState, measured (current mode's P and D terms)
        goal_servo : (n,) out, rad
        current_servo : (n,) out, A (written only when some servo is in current mode)
        """
        np.multiply(goal, self.direction, out=goal_servo)
        goal_servo += self.offset
        if self.any_current:
            tmp = self._tmp
            # i = (tau + kp (q_goal - q) - kd dq) / k_t, in the servo's sign
            np.subtract(goal, state.position, out=tmp)
            tmp *= command.kp
            tmp += command.effort
            np.multiply(command.kd, state.velocity, out=current_servo)
            np.subtract(tmp, current_servo, out=tmp)
            tmp *= self.inv_kt
            np.multiply(tmp, self.direction, out=current_servo)
            np.clip(current_servo, self._current_floor, self.current_limit, out=current_servo)


def position_only(servos) -> np.ndarray:
    """(n,) bool: the servos in position mode that have no current control (no Goal Current
    register: AX, MX on Protocol 1.0, XL-320), whose torque can only ride on the goal."""
    from servoloop.firmware_bridge.control_table import get_table

    return np.array([s.mode not in ("current", "velocity") and "goal_current" not in get_table(s.model)
                     for s in servos], dtype=bool)
