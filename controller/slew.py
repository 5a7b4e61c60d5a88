"""Goal slew limit: no goal written to a servo moves faster than the servo can.

The limit works on the goal *written last tick*, not on time: each written
goal is at most ``max_velocity * dt`` (rad, ``dt`` the nominal period) from
the previous written one, whatever the controller asked for and however
long the host stalled in between.  So a socket goal 1.4 rad away, a looping
trajectory that jumps back to its start, a reboot that left the servo far
from its old goal, or a 50 ms host stall all become a ramp at the servo's
speed instead of a step that drives it into stall torque (issue 10).

With ``max_acceleration`` the per-tick velocity also changes by at most
``max_acceleration * dt`` and brakes in time to stop at the target
(a trapezoidal profile toward a moving target).

Default ``max_velocity``: the servo model's datasheet no-load speed (the
fastest the servo can turn unloaded); a joint's goal moving faster than that
only means a following error the servo fights at stall torque.

Torque-carrying goals (issue 11).  ``wbc`` and ``trot`` give a position servo
its torque through the goal ``q + (k_d / k_p) dq + tau / k_p``: the measured
position plus an offset the servo's P gain turns into ``tau`` (``trot`` marks
its goals so, a controller's ``torque_goals`` mask; ``wbc`` and ``walk`` keep
the ramp, see ``WbcController.TORQUE_GOALS``).  Such a goal
moves with the joint *and* with the torque, which changes by ~2 N m in 30 ms
in a trot's swing: 8-13 rad/s of goal, and a speed limit on the goal clipped
the torque (swing joints got 0.56 of it).  What makes a goal dangerous is not
its speed but its distance from where the joint is: the servo pushes with
``k_p |goal - q|``, up to stall torque, for as long as the distance lasts.  So
for the joints :meth:`SlewLimiter.set_torque_goals` marks, the written goal may
be anywhere within ``b`` = ``max_offset`` (rad; default stall torque / ``k_p``,
:func:`joint_max_offset`) of the *measured* position ``q``, and beyond that
only one ramp step (``max_velocity * dt``) past the last written goal, the
ramp anchored within ``b`` of the joint:

    a   = clip(last, q - b, q + b)           (the ramp's anchor)
    r   = a + clip(goal - a, -step, step)    (one tick of ramp)
    out = clip(goal, min(r, q - b), max(r, q + b))

Both properties hold.  (1) Bounded torque: ``|out - q| <= b + step``, so the
servo's P term asks at most stall torque (plus one tick of ramp) whatever
the controller asked, and a stuck joint's goal does not run away from it.
(2) The goal's reference stays rate-limited: the reference of such a goal is
the measured position, which moves at the servo's speed (``torque`` mode, the
only one marked: an ``impedance`` goal's reference is the posture, which a
walk's IK or a posture param may jump, so it keeps the ramp); nothing of a
stale goal survives a reboot or a host stall (the window is about the position
read this tick: the first goal after them is the joint's position plus the
torque, at most ``b``), and a goal 1.4 rad away (a socket base goal that
swings the legs) becomes a push of at most stall torque that moves the joint
no faster than the servo can, with the goal riding ``b`` ahead of it.  A
joint whose reading failed (NaN) has no window: the plain ramp from the last
goal.  Goals the controller does not mark (``hold``, trajectories, position
goals) and every goal outside the run state (startup ramp, shutdown) keep the
ramp alone, bit for bit; the acceleration limit applies to them only.
"""

from __future__ import annotations

import numpy as np

from servoloop.controller._slew import window as _window_c

__all__ = ["SlewLimiter", "VelocitySlew", "joint_max_velocity", "joint_max_offset",
           "DEFAULT_VELOCITY_RAMP_S"]

#: without ``safety.max_acceleration``, a velocity-mode joint reaches ``max_velocity`` from rest
#: in this many seconds at the least (its acceleration limit is ``max_velocity / DEFAULT_VELOCITY_RAMP_S``)
DEFAULT_VELOCITY_RAMP_S = 0.25


def joint_max_velocity(servos, safety) -> np.ndarray:
    """Per-joint goal speed limit (rad/s), config order.

    ``servos[].max_velocity`` wins, then ``safety.max_velocity``, then the
    datasheet no-load speed of the servo model (inf when the table has none).
    """
    from servoloop.firmware_bridge.control_table import get_table

    out = np.full(len(servos), np.inf)
    for i, s in enumerate(servos):
        v = getattr(s, "max_velocity", None)
        if v is None:
            v = safety.max_velocity
        if v is None:
            ds = get_table(s.model).datasheet
            v = ds.no_load_speed_rad_s if ds is not None else np.inf
        out[i] = float(v)
    return out


def joint_max_offset(servos) -> np.ndarray:
    """Per-joint bound on a torque-carrying goal's offset from the measured position (rad),
    config order: the servo model's stall torque at its supply over its position stiffness
    ``k_p`` (``servos[].position_stiffness`` when calibrated, else the servo model's), the
    offset at which the servo's P term reaches stall torque; inf when unknown.
    """
    from servoloop.core_cy.sim.model import simulator_servo_model
    from servoloop.firmware_bridge.control_table import get_table

    out = np.full(len(servos), np.inf)
    for i, s in enumerate(servos):
        table = get_table(s.model)
        if table.datasheet is None:
            continue
        model = simulator_servo_model(table.datasheet, table.name)
        kp = getattr(s, "position_stiffness", None) or model.kp_nm_per_rad
        if kp > 0:
            out[i] = model.stall_torque_at_supply_nm / kp
    return out


class SlewLimiter:
    """Rate (and optional acceleration) limit on the joint goal, in place.

    Parameters
    ----------
    max_velocity : (n,) rad/s per joint
    max_acceleration : rad/s^2 or None (no acceleration limit)
    dt : s, the loop's nominal period

    Attributes
    ----------
    last : (n,) rad, the goal of the last :meth:`limit` (what was written)
    primed : bool, ``last`` holds a goal (after :meth:`reset`)
    held : (n,) bool, joints whose goal stays at ``last`` (a disabled servo)
    torque : (n,) bool, joints whose goal carries torque (:meth:`set_torque_goals`)
    max_offset : (n,) rad, their bound on ``|goal - measured|`` (-inf elsewhere: no window)
    """

    def __init__(self, max_velocity, max_acceleration: float | None, dt: float) -> None:
        self.max_velocity = np.asarray(max_velocity, dtype=float).copy()
        n = self.max_velocity.shape[0]
        self.dt = float(dt)
        self.max_step = self.max_velocity * self.dt  # rad per tick
        self.max_acceleration = None if max_acceleration is None else float(max_acceleration)
        self.dv = None if max_acceleration is None else float(max_acceleration) * self.dt * self.dt
        self.last = np.zeros(n)
        self.step = np.zeros(n)  # rad/tick of the last limit (the acceleration limit's state)
        self.held = np.zeros(n, dtype=bool)
        self.primed = False
        self.torque = np.zeros(n, dtype=bool)
        self.max_offset = np.full(n, -np.inf)
        self._anchor_b = np.full(n, np.inf)
        self.any_torque = False
        self._err = np.zeros(n)
        self._tmp = np.zeros(n)
        # the compiled window's uint8 views, made once (``torque`` and ``held`` change in place)
        self._torque_u8 = self.torque.view(np.uint8)
        self._held_u8 = self.held.view(np.uint8)
        self._saved_last = np.zeros(n)
        self._saved_step = np.zeros(n)

    def save(self) -> None:
        """Keep the state as it is, for :meth:`rewind` (no allocation)."""
        np.copyto(self._saved_last, self.last)
        np.copyto(self._saved_step, self.step)

    def rewind(self) -> None:
        """Back to the state :meth:`save` kept: the goal :meth:`limit` made since was not sent
        (a stale tick's write the wire gate held back), so the servos still hold the goal
        before it and the next goal steps from that one, never two steps at once."""
        np.copyto(self.last, self._saved_last)
        np.copyto(self.step, self._saved_step)

    def set_torque_goals(self, mask, max_offset) -> None:
        """Joints in ``mask`` ((n,) bool) take torque-carrying goals: each written goal may lie
        within ``max_offset`` ((n,) rad, or a scalar) of the measured position (module
        docstring); an empty mask restores the ramp alone everywhere."""
        self.torque[:] = mask
        b = np.broadcast_to(np.asarray(max_offset, dtype=float), self.torque.shape)
        if np.any(self.torque & ~(b >= 0.0)):
            raise ValueError("SlewLimiter.set_torque_goals: max_offset must be >= 0 rad "
                             "(inf: unbounded) on the torque-carrying joints")
        self.max_offset[:] = np.where(self.torque, b, -np.inf)
        self._anchor_b[:] = np.where(self.torque, b, np.inf)
        self.any_torque = bool(self.torque.any())

    def reset(self, q: np.ndarray) -> None:
        """Start from goal ``q`` (rad), at rest: the goal written at torque on."""
        self.last[:] = q
        self.step[:] = 0.0
        self.primed = True

    def reset_joint(self, i: int, q: float) -> None:
        """Joint ``i`` starts again from ``q`` (rad) at rest (a servo rebooted: goal := present)."""
        self.last[i] = q
        self.step[i] = 0.0

    def limit(self, goal: np.ndarray, out: np.ndarray, present: np.ndarray | None = None) -> np.ndarray:
        """``out`` := ``goal`` moved from :attr:`last` by at most the limits; ``last`` := ``out``.

        ``goal`` and ``out`` may be the same array.  Not primed yet: ``goal``
        passes unchanged and becomes :attr:`last`.  ``present`` (n,) rad, the measured
        position: the torque-carrying joints' goals may also lie within ``max_offset`` of it
        (module docstring); None: the ramp alone for every joint.
        """
        if not self.primed:
            if out is not goal:
                out[:] = goal
            self.reset(out)
            return out
        err = self._err
        np.subtract(goal, self.last, out=err)
        if self.dv is None:
            np.clip(err, -self.max_step, self.max_step, out=self.step)
        else:
            # braking: the step from which we still stop within |err| at max_acceleration
            tmp = self._tmp
            np.abs(err, out=tmp)
            tmp *= 2.0 * self.dv
            np.sqrt(tmp, out=tmp)
            np.minimum(tmp, self.max_step, out=tmp)
            np.clip(err, -tmp, tmp, out=err)
            # accelerate at most dv from the previous step
            np.subtract(self.step, self.dv, out=tmp)
            np.maximum(err, tmp, out=err)
            np.add(self.step, self.dv, out=tmp)
            np.minimum(err, tmp, out=self.step)
        if self.held.any():
            self.step[self.held] = 0.0
        if present is not None and self.any_torque:
            self._window(goal, present, out)
            return out
        np.add(self.last, self.step, out=out)
        self.last[:] = out
        return out

    def _window(self, goal, present, out) -> None:
        """The torque joints' limit (module docstring), the others' ramp ``last + step`` exactly
        (compiled: :func:`controller._slew.window`).

        ``b`` is -inf off the torque joints in :attr:`max_offset` (the window collapses onto
        the ramp) and ``_anchor_b`` +inf (the anchor is ``last``); a NaN reading drops out
        of ``fmin`` / ``fmax``: the ramp from ``last`` alone."""
        _window_c(goal, present, self.last, self.step, self.max_step, self.max_offset,
                  self._anchor_b, self._torque_u8, self._held_u8, out)


class VelocitySlew:
    """Velocity goals of velocity (wheel) mode joints: clamped to +-``max_velocity``,
    changed by at most ``max_acceleration * dt`` per tick, in place.

    Parameters
    ----------
    max_velocity : (n,) rad/s per joint (inf where unlimited)
    max_acceleration : rad/s^2 or None: ``max_velocity / DEFAULT_VELOCITY_RAMP_S`` per joint
    dt : s, the loop's nominal period

    Attributes
    ----------
    last : (n,) rad/s, the velocity goal of the last :meth:`limit` (what was written); starts at
        0 (a wheel starts at rest: never a jump at torque on)
    """

    def __init__(self, max_velocity, max_acceleration: float | None, dt: float) -> None:
        self.max_velocity = np.asarray(max_velocity, dtype=float).copy()
        n = self.max_velocity.shape[0]
        if max_acceleration is None:
            acc = self.max_velocity / DEFAULT_VELOCITY_RAMP_S
        else:
            acc = np.full(n, float(max_acceleration))
        # an unlimited speed with no acceleration limit given: no ramp either
        self.max_dv = np.where(np.isfinite(acc), acc * float(dt), np.inf)  # rad/s per tick
        self._neg_vmax = -self.max_velocity
        self.last = np.zeros(n)
        self._lo = np.zeros(n)
        self._hi = np.zeros(n)
        self._nan = np.zeros(n, dtype=bool)
        self._saved = np.zeros(n)

    def save(self) -> None:
        """Keep :attr:`last`, for :meth:`rewind` (no allocation)."""
        np.copyto(self._saved, self.last)

    def rewind(self) -> None:
        """Back to the velocity goal :meth:`save` kept (the one since was not sent)."""
        np.copyto(self.last, self._saved)

    def set_max_velocity(self, vmax) -> None:
        """Tighter speed limits (rad/s, (n,)): e.g. a servo's Velocity Limit register."""
        np.minimum(self.max_velocity, vmax, out=self.max_velocity)
        np.negative(self.max_velocity, out=self._neg_vmax)

    def reset(self, i: int | None = None) -> None:
        """Velocity goal 0 (at rest) for joint ``i``, or every joint."""
        if i is None:
            self.last[:] = 0.0
        else:
            self.last[i] = 0.0

    def limit(self, goal: np.ndarray, out: np.ndarray) -> np.ndarray:
        """``out`` := ``goal`` (rad/s) clamped to the speed limit, moved from :attr:`last` by at
        most one tick's acceleration; NaN holds the last goal.  ``last`` := ``out``."""
        np.clip(goal, self._neg_vmax, self.max_velocity, out=out)
        np.isnan(goal, out=self._nan)
        if self._nan.any():  # a controller bug never reaches a wheel: hold the last goal
            np.copyto(out, self.last, where=self._nan)
        np.subtract(self.last, self.max_dv, out=self._lo)
        np.add(self.last, self.max_dv, out=self._hi)
        np.clip(out, self._lo, self._hi, out=out)
        self.last[:] = out
        return out
