"""``trot``: seed 003's trot (seed 002's PD trot's gait, seed 003's timing) feeding ``wbc``.

The gait (:mod:`controller.wholebody.gait`, :mod:`controller.wholebody.trot_planner`):
cycle ``period`` 0.3 s, ``duty`` 75 %, ``step_height`` 1.5 cm, diagonal
pairs, swing splines from lift-off to a touchdown point ahead of the hip,
stance feet held where they landed while the base reference moves at
``speed_mps`` (forward, in the heading the robot had when the run began;
slewed at ``accel`` m/s^2).  The targets go to the same whole-body tick as
``wbc`` (task PD -> contact ID -> torques), contacts = the feet in stance.

params: every ``wbc`` parameter, plus ``speed_mps`` (default 0: trot in
place; settable over the socket, |speed| <= 0.5 m/s), ``period`` [s],
``duty`` (0..1), ``step_height`` [m], ``accel`` [m/s^2].

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


class TrotController(WbcController):
    name = "trot"
    param_keys = WbcController.param_keys + tuple(GAIT_RANGES)
    LOAD_SPLIT = True

    def __init__(self, ctx, params=None, robot=None):
        super().__init__(ctx, params, robot)
        feet = [f.link for f in self.robot.feet]
        if len(feet) < 4:
            raise ControllerParamError(
                f"trot swings the feet in diagonal pairs and needs 4; this robot has {len(feet)} "
                f"({', '.join(feet)}); a biped walks with the walk controller")
        self._touchdown = self._diagonal_pairs()
        self.planner = None
        self._swing_demand = self._swing_speed_demand()
        demand, no_load = self._swing_demand
        if no_load is not None and demand > no_load:
            self._warnings.append(
                f"trot: the swing asks {demand:.1f} rad/s of the leg joints, the servos do "
                f"{no_load:.1f} rad/s at no load: the feet will fall short of step_height "
                f"({self._gait().step_height * 1e3:.0f} mm); a lower step_height or a longer period "
                "asks less")

    def _gait(self):
        """The params' :class:`~servoloop.controller.wholebody.gait.TrotGait` (a new one)."""
        from servoloop.controller.wholebody.gait import TrotGait

        p = self.params
        gait = TrotGait(period=float(p.get("period", 0.3)), duty=float(p.get("duty", 0.75)),
                        step_height=float(p.get("step_height", 0.015)))
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
        q = r.model.neutral().copy()
        q[r.q_joints] = self._default_posture()
        r.kinematics(q)
        d = np.array([r.foot_position(f)[:2] for f in r.feet])
        d -= d.mean(axis=0)
        if len(r.feet) == 4 and len({(bool(x > 0), bool(y > 0)) for x, y in d}) == 4:
            return np.where(d[:, 0] * d[:, 1] > 0, 0.25, 0.75)
        return np.array([touchdown_phase(f.link, i) for i, f in enumerate(r.feet)])

    def _swing_speed_demand(self) -> tuple[float, float | None]:
        """(peak joint speed the gait's swing asks [rad/s], the slowest servo's no-load speed
        [rad/s] or None without a config), at the configured gait and ``speed_mps``.

        Computed once, before the loop runs (~10 ms: not in a tick).  Issue 11: seed 003's
        swing (1.5 cm in 75 ms) asks ~10 rad/s of the quadruped's hips and knees, twice the
        XM430-W350's no-load speed at 12 V, and its feet reached 5-6 mm (BENCHMARKS.md).
        """
        import numpy as np

        from servoloop.controller.wholebody.trot_planner import swing_joint_speed

        p, r = self.params, self.robot
        gait = self._gait()
        q0 = r.model.neutral().copy()
        q0[r.q_joints] = self._default_posture()
        try:
            demand = float(swing_joint_speed(r, q0, gait, float(p.get("speed_mps", 0.0)),
                                             samples=30).max())
        except (np.linalg.LinAlgError, ValueError):     # a diagnostic: never stops a trot
            demand = math.nan
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
                 servo_no_load_speed_rad_s=self._swing_demand[1])
        return s
