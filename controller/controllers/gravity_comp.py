"""``gravity_comp``: cancel gravity with core_cy RNEA, hold or comply around a pose.

Each tick: ``tau_g = g(q)`` (``core_cy.gravity``, fixed base) on the
measured joint positions, scaled by ``scale``, goes out as the command's
feed-forward effort.  The daemon turns effort into what each servo takes:

* ``current`` mode servos: ``i = (tau_g + kp (q_goal - q) - kd dq) / k_t``
  with ``k_t`` the servo's ``torque_constant``; ``kp = 0`` makes the joint
  float (teleoperation leader, kinesthetic teaching);
* position servos (AX-18 and friends): the goal is offset by
  ``tau_g / k_p`` with ``k_p`` the servo's calibrated
  ``position_stiffness`` (N*m/rad), so the servo's own P loop produces the
  gravity torque at the goal instead of sagging under it.

params: ``pose`` (setpoint, default the start pose), ``kp`` / ``kd`` (host
gains for current-mode servos, scalar or per joint; default 0 / 0.05),
``scale`` (fraction of gravity to cancel, default 1.0).
"""

from __future__ import annotations

import numpy as np

from servoloop.controller.controllers.base import (
    Command,
    Controller,
    JointState,
    _number,
    joint_vector,
)
from servoloop.controller.errors import ControllerParamError

__all__ = ["GravityCompController"]


class GravityCompController(Controller):
    name = "gravity_comp"
    param_keys = ("pose", "kp", "kd", "scale")

    def __init__(self, ctx, params=None, model=None):
        super().__init__(ctx, params)
        self.target = np.zeros(ctx.n)
        self._kp = self._gain_vector(self.params.get("kp", 0.0), "kp")
        self._kd = self._gain_vector(self.params.get("kd", 0.05), "kd")
        self._scale = float(self.params.get("scale", 1.0))
        self._check_servos()
        self._load_model(model)

    # -- setup ------------------------------------------------------------
    def _check_servos(self) -> None:
        cfg = self.ctx.config
        if cfg is None:
            return
        missing = [s.joint for s in cfg.servos if s.mode != "current" and not s.position_stiffness]
        if missing:
            raise ControllerParamError(
                "gravity_comp: position servos need a calibrated position_stiffness (N*m/rad) "
                f"to turn torque into a goal offset; missing for joints {missing}"
            )

    def _load_model(self, model) -> None:
        from servoloop import core_cy

        if model is None:
            path = self.ctx.config.urdf_path() if self.ctx.config is not None else None
            if path is None:
                raise ControllerParamError("gravity_comp: the config has no model (model.urdf or model.name)")
            # Gravity compensation of the limbs: the base is taken as fixed.
            model = core_cy.Model.from_urdf(str(path), floating_base=False,
                                            mimic=self.ctx.config.model.mimic)
        if model.nq != model.nv:
            raise ControllerParamError(
                f"gravity_comp: model has nq={model.nq} != nv={model.nv} (continuous or "
                "spherical joints); only revolute/prismatic joints are supported"
            )
        names = list(model.joint_names)
        missing = [j for j in self.ctx.joint_names if j not in names]
        if missing:
            raise ControllerParamError(f"gravity_comp: joints {missing} are not in the model ({names})")
        self.model = model
        self.data = core_cy.Data(model)
        self._gravity = core_cy.gravity
        # model joint index of each config joint (config order -> model order)
        self._idx = np.array([names.index(j) for j in self.ctx.joint_names], dtype=np.intp)
        neutral = np.asarray(model.neutral(), dtype=float)
        self._q_model = neutral.copy()
        self._tau_model = np.zeros(model.nv)

    def _gain_vector(self, value, what: str) -> np.ndarray:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            v = np.full(self.ctx.n, float(value))
        else:
            v = joint_vector(self.ctx, value, f"gravity_comp.{what}", check_limits=False,
                             default=np.zeros(self.ctx.n))
        if (v < 0).any():
            raise ControllerParamError(f"gravity_comp.{what} must be >= 0")
        return v

    def check_params(self, params: dict, initial: bool = False) -> dict:
        params = super().check_params(params, initial)
        if "scale" in params:
            s = _number(params["scale"], "gravity_comp.scale")
            if not 0.0 <= s <= 1.5:
                raise ControllerParamError(f"gravity_comp.scale must be in [0, 1.5], got {s}")
        for k in ("kp", "kd"):
            if k in params:
                self._gain_vector(params[k], k)
        if params.get("pose") is not None:
            joint_vector(self.ctx, params["pose"], "gravity_comp.pose",
                         default=np.clip(np.zeros(self.ctx.n), self.ctx.lower, self.ctx.upper))
        return params

    def apply_params(self, params: dict) -> None:
        super().apply_params(params)
        if "kp" in params:
            self._kp[:] = self._gain_vector(params["kp"], "kp")
        if "kd" in params:
            self._kd[:] = self._gain_vector(params["kd"], "kd")
        if "scale" in params:
            self._scale = float(params["scale"])
        if params.get("pose") is not None:
            self.target[:] = joint_vector(self.ctx, params["pose"], "gravity_comp.pose", default=self.target)

    def check_goal(self, goal) -> np.ndarray:
        return joint_vector(self.ctx, goal, "goal", default=self.target)

    def apply_goal(self, goal: np.ndarray) -> None:
        self.target[:] = goal

    # -- the loop ---------------------------------------------------------
    def start(self, state: JointState) -> None:
        np.clip(state.position, self.ctx.lower, self.ctx.upper, out=self.target)
        if self.params.get("pose") is not None:
            self.target[:] = joint_vector(self.ctx, self.params["pose"], "gravity_comp.pose", default=self.target)

    def gravity_torque(self, q: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Joint gravity torques (n,) N*m at joint positions ``q`` (n,) rad, config order."""
        self._q_model[self._idx] = q
        self._gravity(self.model, self.data, self._q_model, out=self._tau_model)
        np.take(self._tau_model, self._idx, out=out)
        return out

    def update(self, t: float, state: JointState, command: Command) -> None:
        self.gravity_torque(state.position, command.effort)
        command.effort *= self._scale
        command.position[:] = self.target
        command.kp[:] = self._kp
        command.kd[:] = self._kd

    def status(self) -> dict:
        return {"name": self.name, "scale": self._scale,
                "target": dict(zip(self.ctx.joint_names, self.target.tolist(), strict=False))}
