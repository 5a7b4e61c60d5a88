"""``walk``: a biped walks ``steps`` steps on flat ground, then stands, through ``wbc``'s tick.

The plan (:mod:`controller.wholebody.walk_planner`, made when the run begins):
footholds ``speed_mps * step_s`` apart, the ZMP on the stance foot, the CoM
from the linear inverted pendulum (LIP) over the whole walk, swing feet on
splines ``step_height`` high, the posture from IK of the planned base and
feet.  With ``model`` a learned reduced-order model (``builtin:five_link_4d``,
``builtin:five_link_2d`` or a file from ``servoloop rom learn``) the sagittal
CoM of the steady steps is that model's optimal step, Froude-scaled from
the five-link biped to this robot's leg (:mod:`locomotion.humanoid_rom`);
the lateral CoM stays the LIP's.  The targets go to the same whole-body
tick as ``wbc`` (task PD -> contact ID -> torques -> currents or position
servo goal offsets).

params: every ``wbc`` parameter, plus (all config-only: the walk is planned
from them when the run begins)

- ``speed_mps``: forward speed [m/s] (default 0.12; 0-0.3);
- ``step_s``: one step, single + double support [s] (default 0.32, the
  five-link step's 0.746 s Froude-scaled to the built-in humanoid's leg);
- ``step_height``: swing apex [m] (default 0.012);
- ``steps``: steps before standing still (default 10; 1-200);
- ``double_support``: fraction of a step with both feet down (default 0.2);
- ``model``: ``lip`` (default) or a learned ROM (its step is solved when the
  controller is made: seconds);
- at loops slower than 500 Hz the ``wbc`` defaults ``torque_filter_hz`` 15,
  ``base_kd`` 40 and ``rot_kd`` 40 (the humanoid config's tuning for ``wbc``);
- ``crouch``: without ``posture``, how far the hips stand below straight legs, as a
  fraction of the leg (default 0.07: a walk needs bent knees).
"""

from __future__ import annotations

import numpy as np

from servoloop.controller.controllers.base import _number
from servoloop.controller.controllers.wbc import WbcController
from servoloop.controller.errors import ControllerParamError

__all__ = ["WalkController"]

#: walk parameter -> (lowest, highest) accepted
WALK_RANGES = {"speed_mps": (0.0, 0.3), "step_s": (0.15, 1.5), "step_height": (0.0, 0.05),
               "steps": (1, 200), "double_support": (0.0, 0.6), "crouch": (0.0, 0.3)}
#: wbc parameters a walk defaults to at loops slower than 500 Hz
SLOW_LOOP_DEFAULTS = {"torque_filter_hz": 15.0, "base_kd": 40.0, "rot_kd": 40.0}
DEFAULTS = {"speed_mps": 0.12, "step_s": 0.32, "step_height": 0.012, "steps": 10,
            "double_support": 0.2, "crouch": 0.07}


class WalkController(WbcController):
    name = "walk"
    param_keys = WbcController.param_keys + tuple(WALK_RANGES) + ("model",)

    def __init__(self, ctx, params=None, robot=None):
        if ctx.dt > 2e-3:
            # slow loops (the AX-18A humanoid's 200 Hz): the humanoid config's wbc tuning,
            # which a walk through the daemon needs as well (without it the walk rocks
            # sideways on the estimate and falls at the 3rd step)
            params = {**SLOW_LOOP_DEFAULTS, **(params or {})}
        super().__init__(ctx, params, robot)
        if len(self.robot.feet) != 2:
            raise ControllerParamError(f"walk: a biped walks on 2 feet; this robot's feet are "
                                       f"{[f.link for f in self.robot.feet]} (set walk.feet)")
        self.planner = None
        self.odometry = None
        self.rom = None
        self._t0 = None
        model = self.params.get("model", "lip")
        if model != "lip":
            self.rom = self._rom_step(model)

    def _p(self, key):
        return self.params.get(key, DEFAULTS[key])

    def _rom_step(self, model: str):
        from servoloop.controller.wholebody.walk_planner import leg_length
        from servoloop.locomotion.errors import RomInputError
        from servoloop.locomotion.humanoid_rom import froude_scale, rom_step

        leg = leg_length(self.robot)
        # the learned step has the Froude-scaled duration; it is solved for this walk's step
        # length (speed * step_s) and stretched in time onto step_s if they differ
        t_froude = 0.746 * float(np.sqrt(froude_scale(leg)))
        length = float(self._p("speed_mps")) * float(self._p("step_s"))
        try:
            return rom_step(model, length / t_froude, leg)
        except RomInputError as exc:
            raise ControllerParamError(f"walk.model: {exc}") from None

    def check_params(self, params: dict, initial: bool = False) -> dict:
        params = super().check_params(params, initial)
        for k, (lo, hi) in WALK_RANGES.items():
            if k in params:
                v = _number(params[k], f"walk.{k}")
                if not lo <= v <= hi:
                    raise ControllerParamError(f"walk.{k} = {v} is outside [{lo}, {hi}]")
                if k == "steps" and v != int(v):
                    raise ControllerParamError(f"walk.steps must be a whole number, got {v}")
        if "model" in params:
            m = params["model"]
            if not isinstance(m, str) or not m:
                raise ControllerParamError(f"walk.model: expected 'lip', builtin:five_link_4d, "
                                           f"builtin:five_link_2d or a model file, got {m!r}")
        for k in tuple(WALK_RANGES) + ("model",):
            if k in params and not initial:
                raise ControllerParamError(f"walk.{k} can only be set in the config "
                                           "(the walk is planned from it when the run begins)")
        return params

    def _default_posture(self, measured=None) -> np.ndarray:
        """``wbc``'s default (the posture param, else the last ``startup.via`` pose); without
        either, straight legs bent by IK to ``crouch`` (a walk needs bent knees)."""
        base = super()._default_posture(measured)
        cfg = self.ctx.config
        if (self.params.get("posture") is not None or (cfg is not None and cfg.startup.via)
                or getattr(self, "robot", None) is None):
            return base             # (no robot yet: it is being built, finding its feet)
        from servoloop.controller.wholebody.leg_ik import LegIK
        from servoloop.controller.wholebody.walk_planner import leg_length

        r = self.robot
        ik_joints = LegIK(r, r.model.neutral()).joints
        base[np.isin(r.idx, ik_joints)] = 0.0              # from straight legs
        base = np.clip(base, self.ctx.lower, self.ctx.upper)
        q = r.model.neutral().copy()
        q[7 + r.idx] = base
        r.kinematics(q)
        feet = np.array([r.foot_position(f) for f in r.feet])
        drop = float(self._p("crouch")) * leg_length(r)
        ik = LegIK(r, q)
        # start a third of the way to mid-range: a straight knee is a singular start, from
        # which the hips and ankles alone would lower the base (feet no longer under it)
        mid = 0.5 * (self.ctx.lower + self.ctx.upper)
        legs = np.isin(r.idx, ik.joints)
        ik.q[7 + r.idx[legs]] = base[legs] + 0.3 * (mid[legs] - base[legs])
        for _ in range(20):
            qj = ik.solve(q[:3] - [0.0, 0.0, drop], q[3:7], feet, iterations=3)
        out = base.copy()
        out[legs] = qj[r.idx][legs]
        return np.clip(out, self.ctx.lower, self.ctx.upper)

    def begin_run(self, q, v) -> None:
        from servoloop.controller.wholebody.lip import WalkTiming
        from servoloop.controller.wholebody.stance_odometry import StanceOdometry
        from servoloop.controller.wholebody.walk_planner import WalkPlanner

        super().begin_run(q, v)
        timing = WalkTiming(steps=int(self._p("steps")), step_s=float(self._p("step_s")),
                            ds=float(self._p("double_support")))
        self.planner = WalkPlanner(self.robot, q, self.posture, timing, float(self._p("speed_mps")),
                                   float(self._p("step_height")), rom=self.rom,
                                   limits=(self.ctx.lower, self.ctx.upper))
        self.targets = self.planner.targets
        self.odometry = StanceOdometry(self.robot, self.ctx.dt, self.planner.ground_z)
        self._t0 = None

    def _set_base_targets(self) -> None:
        # the planner owns the base pose while walking
        return

    def apply_goal(self, goal: dict) -> None:
        raise ControllerParamError("walk takes no goal: set speed_mps / steps in the config")

    def targets_for(self, t: float, q, v):
        if self._t0 is None:
            self._t0 = t
        self._t = t - self._t0
        return self.planner.update(self._t, q, v)

    def update(self, t: float, state, command) -> None:
        """``wbc``'s tick, then position servos hold the planned posture (IK of the plan):
        goal = q_IK + tau / k_p, so the servo's own stiffness keeps the gait and the contact
        ID's torque rides on it as the goal offset (the daemon adds it for calibrated servos)."""
        est = getattr(state, "base", None)
        swapped = False
        if self.odometry is not None and est is not None and est.valid:
            # position and velocity from the legs of the planned stance feet (the estimate
            # stage takes a low swing foot for a standing one): controller.wholebody.stance_odometry
            tp = t - self._t0 if self._t0 is not None else 0.0
            state.base = self.odometry.update(est, state.position, state.velocity,
                                              self.planner.foot_plan(tp)[0])
            swapped = True
        try:
            super().update(t, state, command)
        finally:
            if swapped:
                state.base = est
        if not self.running or self.targets is None:
            return
        hold = ~self._current
        np.multiply(command.effort, self._own_offset, out=self._buf)
        self._buf += self.targets.posture
        command.position[hold] = self._buf[hold]

    def status(self) -> dict:
        s = super().status()
        s["model"] = self.params.get("model", "lip")
        if self.planner is not None and self._t0 is not None:
            s.update(steps_done=self.planner.steps_done(self._t), steps=self.planner.timing.steps,
                     walking=self._t < self.planner.timing.end_of_steps)
        return s
