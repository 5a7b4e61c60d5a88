"""``hold``: keep the start pose, or the config's ``pose``, until told otherwise.

params: ``pose`` ({joint: rad} or a list; joints left out keep the start
pose); ``velocity`` ({joint: rad/s} or a list; joints left out: 0), the speed
of the joints whose servo is in velocity (wheel) mode -- 0 holds them still.
Goals from the command socket replace the held pose (within limits).
"""

from __future__ import annotations

import numpy as np

from servoloop.controller.controllers.base import Command, Controller, JointState, joint_vector
from servoloop.controller.errors import ControllerParamError

__all__ = ["HoldController"]


class HoldController(Controller):
    name = "hold"
    param_keys = ("pose", "velocity")

    def __init__(self, ctx, params=None):
        super().__init__(ctx, params)
        self.target = np.zeros(ctx.n)
        self.velocity = np.zeros(ctx.n)
        if self.params.get("velocity") is not None:
            self.apply_params({"velocity": self.params["velocity"]})

    def check_params(self, params: dict, initial: bool = False) -> dict:
        params = super().check_params(params, initial)
        if params.get("pose") is not None:
            pose = params["pose"]
            # a partial mapping is allowed: the rest is taken from the start pose
            joint_vector(self.ctx, pose, "hold.pose", default=np.clip(
                np.zeros(self.ctx.n), self.ctx.lower, self.ctx.upper))
        if params.get("velocity") is not None:   # rad/s, no position limits (safety clamps the speed)
            joint_vector(self.ctx, params["velocity"], "hold.velocity", default=np.zeros(self.ctx.n),
                         check_limits=False)
        return params

    def apply_params(self, params: dict) -> None:
        super().apply_params(params)
        if params.get("pose") is not None:
            self.target[:] = joint_vector(self.ctx, params["pose"], "hold.pose", default=self.target)
        if params.get("velocity") is not None:
            self.velocity[:] = joint_vector(self.ctx, params["velocity"], "hold.velocity",
                                            default=np.zeros(self.ctx.n), check_limits=False)

    def check_goal(self, goal) -> np.ndarray:
        return joint_vector(self.ctx, goal, "goal", default=self.target)

    def apply_goal(self, goal: np.ndarray) -> None:
        if goal.shape != self.target.shape:
            raise ControllerParamError(f"hold: goal must have shape {self.target.shape}")
        self.target[:] = goal

    def start(self, state: JointState) -> None:
        # Never command outside the limits, even if the robot starts there.
        np.clip(state.position, self.ctx.lower, self.ctx.upper, out=self.target)
        if self.params.get("pose") is not None:
            self.target[:] = joint_vector(self.ctx, self.params["pose"], "hold.pose", default=self.target)

    def update(self, t: float, state: JointState, command: Command) -> None:
        command.position[:] = self.target
        command.effort[:] = 0.0
        command.velocity[:] = self.velocity

    def status(self) -> dict:
        return {"name": self.name, "target": dict(zip(self.ctx.joint_names, self.target.tolist(), strict=False))}
