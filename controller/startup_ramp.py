"""Startup: goal := present before torque on, then a minimum-jerk ramp through the ``via`` poses.

::

    read (3 tries) -> start pose within limits + safety.startup_margin?
      -> goal := present, written BEFORE torque on (no jump to a stale goal)
      -> torque on -> ramp: start pose -> via[0] -> ... -> the controller's first command

Every goal, the ramp's included, then passes the safety stage's slew limit
(:mod:`controller.slew`): a ramp shorter than the servos can follow is
stretched to their speed rather than stepped.

The ramp spends ``startup.ramp_s`` seconds in ``len(via) + 1`` equal
segments, each a minimum-jerk interpolation (zero velocity and acceleration
at the poses); the controller's feed-forward effort fades in over the whole
ramp.  A robot lying on its mechanical stops may start a little outside its
limits: the limits in force are widened to the start pose until the ramp
has brought every joint inside (``LimitChecker.widen_to`` / ``restore``).
"""

from __future__ import annotations

import numpy as np

from servoloop.controller.controllers.base import joint_vector
from servoloop.controller.controllers.minimum_jerk import min_jerk_s
from servoloop.controller.faults import Fault, FaultKind, FaultRaised

__all__ = ["StartupRamp", "hold_present_pose"]


class StartupRamp:
    """The startup ramp's waypoints and per-tick interpolation.

    Parameters
    ----------
    ctx : ControllerContext (joint names and limits)
    via : sequence of {joint: rad} mappings (``startup.via``), checked now
    n_ticks : int, ticks the ramp lasts (``round(ramp_s * rate_hz)``, may be 0)

    Raises
    ------
    ControllerParamError
        A via pose names an unknown joint or leaves the limits (before any I/O).
    """

    def __init__(self, ctx, via, n_ticks: int) -> None:
        self.ctx = ctx
        self.via = tuple(via)
        n = ctx.n
        for i, pose in enumerate(self.via):  # unknown joints / limits: an error now, not mid-ramp
            joint_vector(ctx, pose, f"startup.via[{i}]", default=np.clip(np.zeros(n), ctx.lower, ctx.upper))
        self.n_ticks = int(n_ticks)
        self.ticks = max(self.n_ticks, 1)
        self.k = 0
        # start pose, via poses..., the controller's current command (refreshed each tick)
        self.waypoints = np.zeros((len(self.via) + 2, n))
        self._tmp = np.zeros(n)

    def begin(self, start: np.ndarray) -> None:
        """Anchor the ramp at ``start`` (rad, the goal at torque on); via joints left out keep the previous pose."""
        w = self.waypoints
        w[0] = start
        for i, pose in enumerate(self.via):
            w[i + 1] = joint_vector(self.ctx, pose, f"startup.via[{i}]", default=w[i])
        self.k = 0

    def step(self, controller, state, cmd) -> None:
        """One ramp tick: ``cmd`` := the ramp's pose, the controller's effort faded in."""
        self.k += 1
        s = min_jerk_s(self.k / self.ticks)
        controller.update(0.0, state, cmd)
        # the ramp ends inside the configured limits, even from a start pose outside them
        np.clip(cmd.position, self.ctx.lower, self.ctx.upper, out=cmd.position)
        w = self.waypoints
        w[-1] = cmd.position
        # segment through the via poses: position = w[i] + s_i * (w[i+1] - w[i])
        n_seg = w.shape[0] - 1
        x = min(self.k / self.ticks, 1.0) * n_seg
        i = min(int(x), n_seg - 1)
        np.subtract(w[i + 1], w[i], out=self._tmp)
        self._tmp *= min_jerk_s(x - i)
        np.add(w[i], self._tmp, out=cmd.position)
        cmd.effort *= s  # feed-forward effort fades in over the whole ramp


def hold_present_pose(loop, bus, ids, readonly: bool, startup_margin: float) -> bool:
    """Read the start pose, make it every servo's goal, then torque on.

    Parameters
    ----------
    loop : ControlLoop, bound to the bus (its read, estimate and write stages)
    bus : the open Bus
    ids : servo ids, config order
    readonly : never write (no goal, no torque)
    startup_margin : rad a joint may rest past limit + margin at startup

    Returns
    -------
    bool
        True when torque is on.

    Raises
    ------
    FaultRaised
        No complete reading in 3 tries, a start pose too far out, or torque on failed.
    """
    from servoloop.firmware_bridge.errors import BridgeError

    if not any(loop.read.run() for _ in range(3)):
        raise FaultRaised(Fault(FaultKind.STARTUP,
                                "startup: could not read the present position of every servo (3 tries)"))
    loop.estimate.run()
    state, limits = loop.state, loop.safety.limits
    if loop.fall is not None and loop.imu is not None:
        # a robot lying on its side or back would thrash on the floor once torqued up
        loop.imu.run()
        fell = loop.fall.check_start(loop.imu.reader.rpy, loop.cfg.imu.rotation_rpy)
        if fell is not None:
            raise FaultRaised(fell)
    # A joint may rest a little outside its limits (a robot lying on its
    # mechanical stops); further out, the reading itself is suspect
    # (wrap-around, lost turn count: field notes a8) and nothing moves.
    msg = limits.check_position(state.position, extra=startup_margin)
    if msg:
        i = limits.last_index
        raise FaultRaised(Fault(FaultKind.STARTUP, f"startup: {msg}", ids[i], loop.joint_names[i]))
    limits.widen_to(state.position)
    # Goal := present BEFORE torque on, so torque on does not jump to a
    # stale goal (lerobot PR #3913, bitbots: "possibly damaging the robot").
    loop.goal[:] = state.position
    loop.cmd.effort[:] = 0.0
    loop.cmd.position[:] = state.position
    # the slew limit starts from the goal written at torque on: the ramp, and
    # every command after it, moves from here at most max_velocity * dt per tick
    loop.safety.slew.reset(loop.goal)
    if readonly:
        return False
    try:
        limits.clamp(state.position, loop.goal)
        loop.safety.slew.reset(loop.goal)
        loop.joint_map.to_servo(loop.goal, loop.cmd, state, loop.goal_servo, loop.current_servo)
        loop.current_servo[:] = 0.0  # no torque burst on current-mode servos either
        loop.velocity_servo[:] = 0.0  # velocity-mode servos start at rest, then accelerate
        loop.safety.velocity.reset()
        loop.write.send()
        for sid in ids:
            _write_retry(bus, sid, "torque_enable", 1, loop.errors)
    except BridgeError as exc:
        raise FaultRaised(Fault(FaultKind.STARTUP, f"startup: torque on failed: {exc}")) from exc
    return True


def _write_retry(bus, sid: int, register: str, value, errors, tries: int = 3) -> None:
    """One register write, again after a lost or corrupt reply (counted): a write of a value
    is idempotent, and one dropped reply of a healthy bus must not fail the startup."""
    from servoloop.firmware_bridge.errors import BusTimeoutError, ChecksumError

    for attempt in range(tries):
        try:
            bus.write(sid, register, value)
            return
        except (BusTimeoutError, ChecksumError) as exc:
            errors.count(exc)
            if attempt == tries - 1:
                raise
