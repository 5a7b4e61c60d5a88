"""``trot``: seed 003's trot (seed 002's PD trot's gait, seed 003's timing) feeding ``wbc``.

The gait (:mod:`controller.wholebody.gait`, :mod:`controller.wholebody.trot_planner`):
cycle ``period`` 0.3 s, ``duty`` 75 %, ``step_height`` 1.5 cm, diagonal
pairs on four feet, alternating tripods on six (:meth:`TrotController._tripods`; other
counts are refused), swing splines from lift-off to a touchdown point ahead of the hip,
stance feet held where they landed while the base reference moves at
``speed_mps`` (forward, in the heading the robot had when the run began;
slewed at ``accel`` m/s^2).  The targets go to the same whole-body tick as
``wbc`` (task PD -> contact ID -> torques), contacts = the feet in stance.

params: every ``wbc`` parameter, plus ``speed_mps`` (default 0: trot in
place; settable over the socket, |speed| <= 0.5 m/s), ``period`` [s],
``duty`` (0..1), ``step_height`` [m], ``accel`` [m/s^2].

Default ``step_height`` (issue 11): one the servos can swing.  Seed 003's 1.5 cm
in its 75 ms swing asks ~10 rad/s of the quadruped's hips and knees, twice the
XM430-W350's no-load 4.8 rad/s, and its feet reached a third of it.  Without a
``step_height`` in the params the trot takes the highest step up to 1.5 cm
whose swing (at the configured ``speed_mps``, ``period`` and ``duty``) asks at
most ``SPEED_MARGIN`` (0.8) of the slowest servo's no-load speed at its supply
(:func:`default_step_height`; the quadruped at 0.1 m/s: ~4.4 mm, in place ~5.4
mm), never under ``MIN_STEP_HEIGHT`` (4 mm).  A step set in the params is
kept; when its swing asks more than the no-load speed the run summary says so
(:attr:`warnings`).  The status reports ``step_height_m`` and the demand.

The posture of a swing leg weighs in the swing task's units
(:attr:`~servoloop.controller.wholebody.balance.Gains.swing_posture`): it took a third
of the swing's acceleration.

Its position servos' goals are torque-carrying for the safety stage (``TORQUE_GOALS``):
bounded to stall torque / k_p from the measured position instead of in speed
(:mod:`controller.slew`); the speed limit gave the swing legs 0.56 of their torque.

Swing gains: ``swing_kp`` 2500 1/s^2, ``swing_kd`` 100 1/s (``wbc``'s 900 / 60 are for
its own use).  The servo chain (torque filter, a tick of bus, the servo's loop)
delays the torque by ~5-8 ms; at 900 (30 rad/s) the daemon's feet stayed 2-3 mm
under a 4-8 mm apex, at 2500 (50 rad/s, critically damped) they reach it
(BENCHMARKS.md, daemon trot).

Coulomb compensation (``coulomb_compensation``, on for ``trot``; issue 11): the torque sent
carries each servo's gearbox Coulomb friction in the direction the joint moves (``wbc``).
Without it both front feet stalled ~2 mm above their reference over the last ~20 ms of
the swing (the hind ~0.9): there the swing legs' torques fall to a few tenths of a N m,
the XM430's 0.134 N m of friction took ~85 % of a front knee's, and the swing legs reached
their step height only through the high swing gains (BENCHMARKS.md, daemon trot).

With ``variant: lcp_noslip`` the ID's forces are shared among the stance feet
and a foot is unloaded over its last 30 ms before a planned lift-off
(:mod:`controller.wholebody.force_split`); with ``lcp_coulomb`` (the default, on
point feet) its sticking contacts the same way, inside the friction cone.
"""

from __future__ import annotations

import math

from servoloop.controller.controllers.base import _number
from servoloop.controller.controllers.wbc import WbcController
from servoloop.controller.errors import ControllerParamError

__all__ = ["TrotController"]

#: gait parameter -> (lowest, highest) accepted
GAIT_RANGES = {"speed_mps": (-0.5, 0.5), "period": (0.1, 2.0), "duty": (0.5, 0.95),
               "step_height": (0.0, 0.1), "accel": (0.01, 5.0)}
#: [m] seed 003's step: the default when the servos can swing it
SEED_STEP_HEIGHT = 0.015
#: the default step's swing asks at most this share of the servos' no-load speed: a servo's
#: speed falls along its torque-speed line with the torque the swing takes
SPEED_MARGIN = 0.8
#: [m] the lowest default step: the stance feet sink ~1.3 mm into the compliant ground
MIN_STEP_HEIGHT = 0.004
#: trot's swing gains unless the params set them (module docstring)
SWING_GAINS = {"swing_kp": 2500.0, "swing_kd": 100.0}


class TrotController(WbcController):
    name = "trot"
    param_keys = WbcController.param_keys + tuple(GAIT_RANGES)
    LOAD_SPLIT = True
    TORQUE_GOALS = True
    COULOMB_COMPENSATION = True

    def __init__(self, ctx, params=None, robot=None):
        super().__init__(ctx, params, robot)
        feet = [f.link for f in self.robot.feet]
        if len(feet) not in (4, 6):
            raise ControllerParamError(
                f"trot swings the feet in two alternating groups and needs 4 (diagonal pairs) or "
                f"6 (tripods); this robot has {len(feet)} ({', '.join(feet)})"
                + ("; a biped walks with the walk controller" if len(feet) < 4 else
                   "; name 4 or 6 of them in trot's feet param"))
        self._touchdown = self._diagonal_pairs() if len(feet) == 4 else self._tripods()
        for k, v in SWING_GAINS.items():
            if k not in self.params:
                setattr(self.core.gains, k, v)
        # a swing leg's posture in the swing task's units (Gains.swing_posture): the quadruped's
        # 3-joint legs are fully set by the swing foot's point
        self.core.gains.swing_posture = True
        self.planner = None
        #: [m] the gait's step: the params', else one the servos can swing (module docstring)
        self.step_height = (float(self.params["step_height"]) if "step_height" in self.params
                            else self._default_step_height())
        if self._impedance.any():
            joints = [j for j, m in zip(self.ctx.joint_names, self._impedance, strict=True) if m]
            self._warnings.append(
                f"trot: {len(joints)} position servos ({joints[0]} ...) take their torque as "
                "impedance about the standing posture (position_servo): their own stiffness pulls "
                "a swing leg back to it, the feet barely lift and the robot slides more than it "
                "steps (an AX-12A hexapod at 0.1 m/s: 0-8 % of the time in the air of 25 % "
                "planned, 0.12 m covered of 0.29); servos with current control trot with "
                "position_servo: torque (the same hexapod on XM430-W350: 0.29 m)")
        self._swing_demand = self._swing_speed_demand()
        demand, no_load = self._swing_demand
        if no_load is not None and demand > no_load:
            self._warnings.append(
                f"trot: the swing asks {demand:.1f} rad/s of the leg joints, the servos do "
                f"{no_load:.1f} rad/s at no load: the feet will fall short of step_height "
                f"({self.step_height * 1e3:.1f} mm); a lower step_height, a longer period or a "
                "lower speed_mps asks less")

    def _gait(self, step_height: float | None = None):
        """The params' :class:`~servoloop.controller.wholebody.gait.TrotGait` (a new one), with
        :attr:`step_height` or ``step_height`` [m]."""
        from servoloop.controller.wholebody.gait import TrotGait

        p = self.params
        h = self.step_height if step_height is None else step_height
        gait = TrotGait(period=float(p.get("period", 0.3)), duty=float(p.get("duty", 0.75)),
                        step_height=float(h))
        gait.touchdown = self._touchdown.copy()
        return gait

    def _diagonal_pairs(self):
        """Touchdown phase per foot (feet,): the diagonal pairs from where the feet stand about
        their centre in the base frame at the posture (x forward, y left): front-left and
        hind-right at 0.25, the others at 0.75, as the names ``lf`` ... ``rh`` give them.  By
        name (else list order) when the feet are not one to a quadrant.  Before, names other
        than ``lf_`` ... (Solo's ``FL_FOOT``, Go1's ``FL_foot``) paired by list order: a
        ``feet`` param listed FL, FR, HR, HL made a pace (Solo sank 4 cm)."""
        import numpy as np

        from servoloop.controller.wholebody.gait import touchdown_phase

        r = self.robot
        d = self._foot_layout()
        if len(r.feet) == 4 and len({(bool(x > 0), bool(y > 0)) for x, y in d}) == 4:
            return np.where(d[:, 0] * d[:, 1] > 0, 0.25, 0.75)
        return np.array([touchdown_phase(f.link, i) for i, f in enumerate(r.feet)])

    def _foot_layout(self):
        """(feet, 2) foot positions [m] in the base frame at the posture, about their centre."""
        import numpy as np

        r = self.robot
        q = r.model.neutral().copy()
        q[r.q_joints] = self._default_posture()
        r.kinematics(q)
        d = np.array([r.foot_position(f)[:2] for f in r.feet])
        return d - d.mean(axis=0)

    def _tripods(self):
        """Touchdown phase per foot on six feet (feet,): the alternating tripods, each the
        front and hind foot of one side with the middle foot of the other (0.25 for the one with
        the front-left foot, 0.75 for the other), from where the feet stand at the posture.  The
        gait is the trot's: two groups half a cycle apart, each swinging ``1 - duty`` of it, so
        three feet always stand.  Six feet not three a side are refused before the run.

        Measured through the virtual bus at 0.1 m/s for 3 s on the test hexapod
        (tests/hil/test_foreign_hexapod.py): on XM430-W350 (``torque``) every foot off the
        ground 14-18 % of the time, 0.29-0.30 m covered at 200 Hz and 1 kHz; on AX-12A
        (``impedance``, their default) 0-8 %, 0.12 m; XM430-W350 forced to ``impedance``:
        7-11 %, 0.10 m (the :attr:`warnings` say so).  Before, six feet were grouped by name
        or list order (LF, RM, RH with LM, LH, RF: two feet of one side lifting together)."""
        import numpy as np

        d = self._foot_layout()
        left = [i for i in range(6) if d[i, 1] > 0]
        right = [i for i in range(6) if d[i, 1] < 0]
        if len(left) != 3 or len(right) != 3:
            feet = ", ".join(f"{f.link} (y {y * 1e3:+.0f} mm)" for f, y in zip(self.robot.feet, d[:, 1],
                                                                               strict=True))
            raise ControllerParamError(
                "trot on six feet swings tripods and needs three a side (left of the base's "
                f"centre line, y > 0, and right); at the posture the feet stand: {feet}")
        left.sort(key=lambda i: -d[i, 0])          # front, middle, hind
        right.sort(key=lambda i: -d[i, 0])
        out = np.full(6, 0.75)
        out[[left[0], left[2], right[1]]] = 0.25
        return out

    def _default_step_height(self) -> float:
        """[m] The highest step up to ``SEED_STEP_HEIGHT`` whose swing asks at most
        ``SPEED_MARGIN`` of the servos' no-load speed (``MIN_STEP_HEIGHT`` at the least);
        ``SEED_STEP_HEIGHT`` without servo figures (no config).  ~10 ms per demand evaluated,
        a few of them, before the loop runs."""
        no_load = self._servo_models("no_load_speed_at_supply_rad_s")
        if no_load is None or not len(no_load):
            return SEED_STEP_HEIGHT
        target = SPEED_MARGIN * float(no_load.min())
        return default_step_height(lambda h: self._demand_at(h), target)

    def _demand_at(self, step_height: float) -> float:
        """Peak joint speed [rad/s] the swing of a ``step_height`` [m] step asks (NaN if the
        leg could not be solved), at the configured gait and ``speed_mps``."""
        import numpy as np

        from servoloop.controller.wholebody.trot_planner import swing_joint_speed

        r = self.robot
        gait = self._gait(step_height)
        q0 = r.model.neutral().copy()
        q0[r.q_joints] = self._default_posture()
        try:
            return float(swing_joint_speed(r, q0, gait, float(self.params.get("speed_mps", 0.0)),
                                           samples=30).max())
        except (np.linalg.LinAlgError, ValueError):     # a diagnostic: never stops a trot
            return math.nan

    def _swing_speed_demand(self) -> tuple[float, float | None]:
        """(peak joint speed the gait's swing asks [rad/s], the slowest servo's no-load speed
        [rad/s] or None without a config), at the configured gait and ``speed_mps``.

        Computed once, before the loop runs (~10 ms: not in a tick).  Issue 11: seed 003's
        swing (1.5 cm in 75 ms) asks ~10 rad/s of the quadruped's hips and knees, twice the
        XM430-W350's no-load speed at 12 V, and its feet reached 5-6 mm (BENCHMARKS.md).
        """
        demand = self._demand_at(self.step_height)
        no_load = self._servo_models("no_load_speed_at_supply_rad_s")
        return demand, (None if no_load is None or not len(no_load) else float(no_load.min()))

    def check_params(self, params: dict, initial: bool = False) -> dict:
        params = super().check_params(params, initial)
        for k, (lo, hi) in GAIT_RANGES.items():
            if k in params:
                v = _number(params[k], f"trot.{k}")
                if not lo <= v <= hi:
                    raise ControllerParamError(f"trot.{k} = {v} is outside [{lo}, {hi}]")
                if k in ("period", "duty", "step_height") and not initial:
                    raise ControllerParamError(f"trot.{k} can only be set in the config "
                                               "(the gait is planned from it)")
        return params

    def apply_params(self, params: dict) -> None:
        super().apply_params(params)
        if self.planner is not None:
            if "speed_mps" in params:
                self.planner.speed_goal = float(params["speed_mps"])
            if "accel" in params:
                self.planner.accel = float(params["accel"])

    def begin_run(self, q, v) -> None:
        from servoloop.controller.wholebody.trot_planner import TrotPlanner

        super().begin_run(q, v)
        p = self.params
        self.planner = TrotPlanner(self.robot, q, self.posture, self._gait(), height=self._pose[2],
                                   accel=float(p.get("accel", 0.5)))
        self.planner.speed_goal = float(p.get("speed_mps", 0.0))
        self.targets = self.planner.targets
        self._t0 = None

    def _set_base_targets(self) -> None:
        # the planner owns x, y and yaw; a goal sets height, roll and pitch
        from servoloop.controller.wholebody.robot import rpy_to_matrix

        if self.targets is not None:
            yaw = self._standing[5]
            self.targets.base_position[2] = self._pose[2]
            self.targets.base_rotation[:] = rpy_to_matrix([self._pose[3], self._pose[4], yaw])

    def targets_for(self, t: float, q, v):
        if self._t0 is None:
            self._t0 = t
        core = self.core
        split = ((core.variant == "lcp_noslip" and core.noslip_split)
                 or (core.variant == "lcp_coulomb" and core.coulomb_split))
        # the split unloads a foot over its last 30 ms of stance (force_split): the planner's
        # compiled tick writes those weights too (one call a tick, issue 11)
        return self.planner.update(t - self._t0, q, v, core.liftoff_weights if split else None,
                                   self.ctx.dt)

    def status(self) -> dict:
        s = super().status()
        if self.planner is not None:
            s.update(speed_mps=self.planner.speed, speed_goal_mps=self.planner.speed_goal)
        # the swing's joint-speed demand next to what the servos can do (issue 11)
        s.update(swing_joint_speed_rad_s=self._swing_demand[0],
                 servo_no_load_speed_rad_s=self._swing_demand[1],
                 step_height_m=self.step_height, step_height_default="step_height" not in self.params)
        return s


def default_step_height(demand, target: float, high: float = SEED_STEP_HEIGHT,
                        low: float = MIN_STEP_HEIGHT) -> float:
    """[m] The highest step height in [``low``, ``high``] whose swing's joint-speed demand
    (``demand(h)`` [rad/s], increasing in ``h``) is at most ``target`` [rad/s]; ``low`` when
    none is (the stride alone asks more), ``high`` when a NaN demand says nothing.

    Secant steps on ``demand(h) = target`` (it is close to affine in ``h``: the stride's
    part plus the lift's), then 2 % lower until under: 3-5 evaluations.
    """
    d_hi = demand(high)
    if not d_hi > target:               # within (or unknown): seed 003's step
        return high
    d_lo = demand(low)
    if not d_lo < target:
        return low
    a, da, b, db = low, d_lo, high, d_hi
    for _ in range(4):
        h = a + (target - da) * (b - a) / (db - da)
        d = demand(h)
        if not math.isfinite(d):
            return low
        if abs(d - target) < 0.005 * target:
            break
        if d > target:
            b, db = h, d
        else:
            a, da = h, d
    while h > low and demand(h) > target:
        h = max(low, 0.98 * h)
    return h
