"""A fall: the estimated base tilt (and how fast it tips) past the ``safety.fall_*`` thresholds.

One detector for every floating-base robot with the estimate stage (IMU on the bus), in
the tick right after the estimate, whatever the controller.  A controller that keeps
driving a robot lying on the floor drives stall torque into it: the servos overheat, the
gears strip, the robot thrashes.  The loop reacts per ``safety.on_fall``:

==============  ===========================================================================
``damp``        (default) the servos made soft, not limp, for ``safety.fall_damp_s``: each
                position servo's P gain lowered (X / MX(2.0): Position P Gain :data:`DAMP_GAIN_SHARE`
                of its value; AX / MX(1.0): the compliance slope at :data:`DAMP_SLOPE`) and its
                goal set to the present position every tick; a current servo gets only a
                damping current ``-DAMP_KD dq / k_t``.  Then torque off, the gains put back,
                and the run ends in the fault state (kind ``fall``)
``torque_off``  torque off on every servo at once (the fault path), fault ``fall``
``warn``        the run goes on (the behaviour before this reaction existed); the fall is
                said in the summary, ``status`` and a telemetry event
==============  ===========================================================================

A fall in the same tick as another fault: the worse of the two decides (:func:`graded`), both
are recorded (the deciding one first).  A joint past its limit, a late loop, a hot or
under-powered servo, a servo's alert or a controller without an answer is what a fall brings
or what damping still serves: the fall decides, ``damp`` as asked (a damped tick that is late
again, or a servo that stops answering, ends the damping early: torque off).  A bus that
stopped answering (``comm``) decides against the fall: damping needs the bus, and a fallen
robot is not held (``safety.comm_timeout_action: hold``), its servos get torque off.

``damp`` is the default because a real robot that falls should neither keep its stall
torque (the thrash above) nor drop limp (limbs folding under a limp robot hit the floor
first, at full speed): the soft servos brake the limbs through the landing, then let go.

Thresholds, measured through the virtual bus (lockstep, BENCHMARKS.md "Falls"): pushes the
robots recover from, and their stand-ups, tilt the estimated base at most 0.11 rad (the
quadruped, 2 N s) with a one-tick tipping-rate spike of 1.7 rad/s at the push; pushes that
knock them over pass 0.45 rad at 2.2-9 rad/s.  A fall is a tilt past ``fall_tilt_rad``
(0.8 rad), or past half of it while tipping faster than ``fall_rate_rad_s`` (2 rad/s), for
``fall_dwell_s`` (0.02 s) in a row: the second rule sees the falls 0.03-0.15 s sooner than
the tilt alone (the humanoid's 0.11 s).  The rate alone would not do: a push's first tick
reads up to 3 rad/s while the tilt is still ~0.01 rad.

A collapse (:meth:`FallDetector.check_collapse`): the robot sinks onto its belly without
tipping (servos too weak for it, a torque limit, a payload, a sagging supply), so the tilt
rules never see it.  The base estimate's height below :data:`COLLAPSE_SHARE` of what it was
when the run began, for :data:`COLLAPSE_DWELL_S` in a row, while not fallen: the summary's
``warnings``, ``status``'s and the summary's ``collapse`` and a telemetry event say it; the
run goes on.  A warning, not a fault with ``on_fall``'s reaction: a robot lying on its belly
is at rest, not thrashing, and lying down is also what a ``trajectory`` or a lowered
``hold`` pose may ask for (a fault would stop those runs); a servo straining at its limit
meanwhile has its own faults (temperature, overload).  Measured through the virtual bus (the
Go1-sized quadruped of tests/hil/test_foreign_quadruped.py under ``hold``, its servos' PWM
limit cut to 12 % a second into the run): standing 0.242 m, lying 0.067 m within 0.5 s
(estimate 0.070 m, tilt < 0.06 rad), and the run had ended ``done`` with no word of it.
A ``wbc`` base goal may go 0.1 m down (a 0.24 m stand: to 58 %); a 30 % PWM limit sags the
same robot to 0.134 m (55 %): neither is a collapse.
"""

from __future__ import annotations

import logging
import math
from dataclasses import replace

from servoloop.controller.faults import Fault, FaultKind, FaultRaised

__all__ = ["FallDetector", "CollapseWatch", "FALL_REACTIONS", "DAMP_GAIN_SHARE", "DAMP_SLOPE", "DAMP_KD",
           "DAMPED_WITH", "base_tilt", "tipping_rate", "graded", "damp", "restore_gains",
           "stop_after"]

log = logging.getLogger("servoloop.daemon")

#: ``safety.on_fall`` choices
FALL_REACTIONS = ("damp", "torque_off", "warn")
#: share of its Position P Gain a position servo keeps while damped (X: 800 -> 100)
DAMP_GAIN_SHARE = 0.125
#: AX / MX(1.0) compliance slope while damped (factory 32; the e-Manual: a larger slope is a
#: softer servo; 254 is the register's top)
DAMP_SLOPE = 254
#: N m s/rad, the damping a current-mode servo gets while damped (host side)
DAMP_KD = 0.05
#: a collapse: the estimated base height under this share of its height when the run began
COLLAPSE_SHARE = 0.5
#: [s] ... for this long in a row (a stumble's dip is shorter)
COLLAPSE_DWELL_S = 0.5


#: faults that a fall in the same tick decides over: what a fall brings (joints thrown past
#: their limits, a late tick) or what a second of soft servos still serves; any other (the bus
#: gone quiet, a bug) decides over the fall
DAMPED_WITH = frozenset({FaultKind.LIMIT, FaultKind.LATE, FaultKind.TEMPERATURE, FaultKind.VOLTAGE,
                         FaultKind.HARDWARE_ERROR, FaultKind.CONTROL})


def graded(fault: Fault | None, new: Fault | None) -> Fault | None:
    """The tick's fault once ``new`` is found after ``fault`` (either may be None).

    Without a fall the first found decides (``new`` dropped, as it always was).  With a fall
    in the pair the worse decides: the fall over a :data:`DAMPED_WITH` kind, any other over
    the fall; the other one rides in the deciding fault's ``also`` (recorded by the fault
    path after it).
    """
    if new is None or fault is None:
        return fault if new is None else new
    if FaultKind.FALL not in (fault.kind, new.kind):
        return fault
    fall, other = (fault, new) if fault.kind == FaultKind.FALL else (new, fault)
    first, second = (fall, other) if other.kind in DAMPED_WITH else (other, fall)
    return replace(first, also=first.also + (replace(second, also=()),) + second.also)


def base_tilt(q) -> float:
    """Angle of the base's z axis from the world vertical, rad; ``q`` (x, y, z, w) base -> world."""
    c = 1.0 - 2.0 * (q[0] * q[0] + q[1] * q[1])
    return math.acos(-1.0 if c < -1.0 else 1.0 if c > 1.0 else c)


def tipping_rate(q, w) -> float:
    """How fast the base tips, rad/s: the norm of the angular velocity ``w`` (base frame, rad/s)
    without its part about the world vertical (turning in place is not tipping)."""
    x, y, z, s = q[0], q[1], q[2], q[3]
    ux, uy, uz = 2.0 * (x * z - s * y), 2.0 * (y * z + s * x), 1.0 - 2.0 * (x * x + y * y)
    wx, wy, wz = w[0], w[1], w[2]
    d = wx * ux + wy * uy + wz * uz
    px, py, pz = wx - d * ux, wy - d * uy, wz - d * uz
    return math.sqrt(px * px + py * py + pz * pz)


class CollapseWatch:
    """The collapse rule on a base height, tick by tick: under :data:`COLLAPSE_SHARE` of the
    first height it was given (the run's start) for :data:`COLLAPSE_DWELL_S` in a row.  The
    loop's :class:`FallDetector` feeds it the estimate; ``wbc`` its leg odometry where no IMU
    is (no estimate stage, so no detector).  ``at``: ``(t [s], height [m])`` once collapsed."""

    def __init__(self, rate_hz: float) -> None:
        self.dwell = max(1, round(COLLAPSE_DWELL_S * rate_hz))
        self.streak = 0
        self.standing: float | None = None      # [m]
        self.at: tuple[float, float] | None = None

    def update(self, t_s: float, z: float) -> bool:
        """True on the tick the robot is found collapsed (once)."""
        if self.at is not None:
            return False
        if self.standing is None:
            self.standing = z
            return False
        if z >= COLLAPSE_SHARE * self.standing:
            self.streak = 0
            return False
        self.streak += 1
        if self.streak < self.dwell:
            return False
        self.at = (t_s, z)
        return True


class FallDetector:
    """Watches the base estimate each tick; says when, how far and how fast the robot fell.

    Parameters
    ----------
    safety : SafetyConfig (``fall_tilt_rad``, ``fall_rate_rad_s``, ``fall_dwell_s``, ``on_fall``)
    base : BaseState, the estimate stage's (filled in place each tick)
    rate_hz : float, loop rate

    Attributes
    ----------
    fell : dict or None, ``{"t_s", "tilt_rad", "tipping_rate_rad_s", "reaction"}`` once fallen
    collapsed : dict or None, ``{"t_s", "height_m", "standing_height_m", "tilt_rad"}`` once
        collapsed (:meth:`check_collapse`)
    """

    def __init__(self, safety, base, rate_hz: float) -> None:
        self.base = base
        self.reaction = safety.on_fall
        self.tilt_limit = safety.fall_tilt_rad
        self.early_tilt = 0.5 * safety.fall_tilt_rad
        self.rate_limit = math.inf if safety.fall_rate_rad_s is None else safety.fall_rate_rad_s
        self.dwell = max(1, round(safety.fall_dwell_s * rate_hz))
        self.streak = 0
        self.fell: dict | None = None
        self.collapse = CollapseWatch(rate_hz)
        self.collapsed: dict | None = None

    def check(self, t_s: float) -> Fault | None:
        """This tick's estimate; a ``fall`` fault the tick the dwell is reached (None after:
        one fall per run), also with ``on_fall: warn`` (the loop only records that one)."""
        b = self.base
        if self.fell is not None or not b.valid:
            return None
        q = b.quaternion
        tilt = base_tilt(q)
        if tilt < self.early_tilt:
            self.streak = 0
            return None
        rate = tipping_rate(q, b.angular_velocity)
        if tilt < self.tilt_limit and rate < self.rate_limit:
            self.streak = 0
            return None
        self.streak += 1
        if self.streak < self.dwell:
            return None
        self.fell = {"t_s": float(t_s), "tilt_rad": float(tilt), "tipping_rate_rad_s": float(rate),
                     "reaction": self.reaction}
        return Fault(FaultKind.FALL, self.message())

    def check_collapse(self, t_s: float) -> bool:
        """A running tick's estimate: True the tick the base has stayed under
        ``COLLAPSE_SHARE`` of its standing height (the first valid estimate's of the run) for
        ``COLLAPSE_DWELL_S`` (once per run; never after a fall, which says more)."""
        b = self.base
        if self.fell is not None or not b.valid or not self.collapse.update(t_s, float(b.position[2])):
            return False
        self.collapsed = {"t_s": float(t_s), "height_m": self.collapse.at[1],
                          "standing_height_m": self.collapse.standing,
                          "tilt_rad": float(base_tilt(b.quaternion))}
        return True

    def collapse_message(self) -> str:
        c = self.collapsed
        return (f"the robot collapsed at t = {c['t_s']:.2f} s: its base sank to {c['height_m']:.3f} m "
                f"from {c['standing_height_m']:.3f} m when the run began (estimated; under "
                f"{COLLAPSE_SHARE:.0%} for {COLLAPSE_DWELL_S} s), not tipped ({c['tilt_rad']:.2f} rad, "
                "so no fall): unless it was asked to lie down, the servos could not carry it (too "
                "weak for the robot, a torque or PWM limit, a payload, a low supply); the run went on")

    def message(self) -> str:
        f = self.fell
        what = {"damp": "servos damped, then torque off", "torque_off": "torque off",
                "warn": "the run goes on"}[f["reaction"]]
        return (f"the robot fell at t = {f['t_s']:.2f} s: its base tilted {f['tilt_rad']:.2f} rad "
                f"from upright, tipping at {f['tipping_rate_rad_s']:.1f} rad/s (estimated; "
                f"safety.fall_tilt_rad {self.tilt_limit}, fall_rate_rad_s {self.rate_limit}); "
                f"safety.on_fall {f['reaction']}: {what}")

    def check_start(self, rpy, mount_rpy) -> Fault | None:
        """Before torque on: a robot found tipped past ``fall_tilt_rad`` (lying on its side or
        back) is not torqued up (it would thrash on the floor), unless ``on_fall: warn``.
        ``rpy`` (3,) rad: the IMU board's orientation registers; ``mount_rpy``: the board's
        mounting (``imu.rotation_rpy``).  A robot lying on its belly (the built-in quadruped at
        power-up) is upright: it stands up."""
        from servoloop.controller.attitude import quat_from_rpy, quat_multiply

        if not all(math.isfinite(a) for a in rpy):
            return None          # no orientation read: the estimate's check takes over from the first tick
        mx, my, mz, mw = quat_from_rpy(*mount_rpy)
        tilt = base_tilt(quat_multiply(quat_from_rpy(rpy[0], rpy[1], rpy[2]), (-mx, -my, -mz, mw)))
        if tilt < self.tilt_limit or self.reaction == "warn":
            return None
        return Fault(FaultKind.FALL, (
            f"startup: the robot lies tipped over (its base {tilt:.2f} rad from upright, past "
            f"safety.fall_tilt_rad {self.tilt_limit}): torque stays off; set it on its feet "
            "(or its belly) and start again"))


def _soften(bus, servos, retry, errors) -> dict:
    """Lower each position servo's P gain (compliance slope); ``{id: {register: raw before}}``."""
    from servoloop.firmware_bridge.control_table import get_table

    saved: dict = {}
    for s in servos:
        if s.mode in ("current", "velocity"):
            continue          # a current servo is damped host side; a wheel stops
        regs = get_table(s.model).registers
        names = (("position_p_gain",) if "position_p_gain" in regs else
                 ("cw_compliance_slope", "ccw_compliance_slope") if "cw_compliance_slope" in regs else ())
        for name in names:
            old = retry(lambda sid=s.id, name=name: bus.read_raw(sid, name), errors)
            saved.setdefault(s.id, {})[name] = old
            soft = max(1, round(old * DAMP_GAIN_SHARE)) if name == "position_p_gain" else DAMP_SLOPE
            retry(lambda sid=s.id, name=name, soft=soft: bus.write_raw(sid, name, soft), errors)
    return saved


def damp(loop, bus, cfg, retry, warnings, stopping) -> dict:
    """A fall's ``damp`` reaction (the daemon's fault path, before torque off): the servos'
    gains lowered, then ``safety.fall_damp_s`` of ticks with goal := present
    (``ControlLoop._damp_command``); a stop request or a signal (``stopping()`` true) or
    another fault ends it early.  Never raises.

    Parameters
    ----------
    loop : ControlLoop; bus : the open Bus; cfg : RobotConfig
    retry : callable(fn, errors), the daemon's retry of idempotent bus work
    warnings : list, the run summary's (what cut the damping short goes there)
    stopping : callable() -> bool

    Returns
    -------
    dict
        ``{servo id: {register: raw value before}}``, for :func:`restore_gains` after torque off.
    """
    saved: dict = {}
    try:
        saved = _soften(bus, cfg.servos, retry, loop.errors)
        loop.damping = True
        for _ in range(max(1, round(cfg.safety.fall_damp_s * cfg.loop.rate_hz))):
            if stopping():
                break
            try:
                loop.tick()
            except FaultRaised as f:
                warnings.append(f"fall: damping ended early by {f.fault.kind.value}: {f.fault.message}")
                break
    except Exception as exc:  # noqa: BLE001 - the fault path goes on to torque off
        log.error("fall: damping failed (%s); torque off now", exc)
        warnings.append(f"fall: damping failed ({exc}); torque off at once")
    finally:
        loop.damping = False
        loop.drain()
    return saved


def restore_gains(bus, saved: dict, retry, errors, warnings) -> None:
    """Put back the gains :func:`damp` lowered (RAM, written with torque off); never raises:
    a gain not put back is said in ``warnings`` (the next connect finds it low)."""
    for sid, regs in saved.items():
        for name, raw in regs.items():
            try:
                retry(lambda sid=sid, name=name, raw=raw: bus.write_raw(sid, name, raw), errors)
            except Exception as exc:  # noqa: BLE001
                warnings.append(f"fall: servo {sid}'s {name} not put back to {raw}: {exc}")


def stop_after(daemon, fault, retry) -> None:
    """The fault path's stop (``daemon.stop_all_servos``), after :func:`damp` when ``fault`` is a
    fall and ``safety.on_fall`` is ``damp`` (torque on, not read-only, no second signal), and the
    gains :func:`damp` lowered put back after it; never raises.

    The faults of the same tick that did not decide (``fault.also``, :func:`graded`) are
    recorded first, after ``fault``: with a fall among them the last fault recorded is no
    ``comm``, so ``stop_all_servos`` never holds a fallen robot torqued at its last goal."""
    for other in fault.also:
        daemon.faults.append(other)
        log.error("FAULT [%s] in the same tick, %s decides: %s", other.kind.value,
                  fault.kind.value, other.message)
    saved = None
    if (fault.kind == FaultKind.FALL and daemon.cfg.safety.on_fall == "damp" and daemon._torque_on
            and not daemon.readonly and daemon._hard_stop is None):
        saved = damp(daemon.loop, daemon.bus, daemon.cfg, retry, daemon.warnings,
                     lambda: daemon._stop_request is not None or daemon._hard_stop is not None)
    daemon.stop_all_servos()
    if saved:
        restore_gains(daemon.bus, saved, retry, daemon.loop.errors, daemon.warnings)
