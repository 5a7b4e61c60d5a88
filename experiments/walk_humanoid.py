"""The built-in humanoid walking with ``walk`` on the contact simulator, in process (A9).

The controller runs through its daemon interface (``start`` / ``update`` on a
JointState) with the simulator's true base state in ``state.base`` (what the
estimate stage gives it on the robot).  Its servo goals reach the simulated
AX-18A servos as the daemon sends them (``command.position``: the goal; the
servo law ``tau = k_p (goal - q) - k_d dq`` of the simulator's servo model
turns it into torque), at the humanoid's 200 Hz loop, physics at 1 ms.

``steps_done``: the plan's steps completed before a fall (base below 0.8 of its
standing height or tilted over 30 deg), if any.

A9 (seed 004 digest): torque cost per metre, ``sum_t |tau_servo|^2 dt /
distance`` over the steady steps (all but the first two and the last two),
``tau_servo`` the torque the servos put out (their law, as simulated), the
distance the base's forward travel over the same window; and the RMS of the base's
horizontal distance from its planned place (the digest's "tracking of y", here the CoM
plan's, which the base follows) until the last step ends.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["WalkRun", "run_walk", "tilt_deg"]


def tilt_deg(quat) -> float:
    """Angle [deg] between the base's z axis and the vertical."""
    return math.degrees(2.0 * math.asin(min(1.0, math.hypot(quat[0], quat[1]))))


class WalkRun:
    """A controller of the built-in humanoid driving the simulator through its servo goals."""

    def __init__(self, params: dict, robot: str = "humanoid", ground: str = "rigid",
                 controller: str = "walk") -> None:
        from servoloop.controller.config import builtin_config
        from servoloop.controller.controllers import (
            Command,
            ControllerContext,
            JointState,
            make_controller,
        )
        from servoloop.core_cy.sim.simulator import SimConfig
        from servoloop.experiments.closed_loop import TorquePlant, builtin_urdf

        cfg = builtin_config(robot)
        self.ctx = ControllerContext.from_config(cfg)
        self.ctrl = make_controller(controller, self.ctx, params)
        self.idx = self.ctrl.robot.idx
        names = list(self.ctrl.robot.model.actuated_joint_names)
        q0 = np.zeros(len(names))
        q0[self.idx] = self.ctrl._default_posture()
        servo = cfg.servos[0].model
        self.plant = TorquePlant(builtin_urdf(robot), SimConfig(mode=ground, dt=1e-3), q0,
                                 substeps=max(1, round(self.ctx.dt / 1e-3)), servo=servo, drive="offset")
        self.state = JointState.zeros(self.ctx.n)
        self.cmd = Command.zeros(self.ctx.n)
        self.ctrl.start(self.state)
        self.k = 0
        self.z0 = float(self.plant.q[2])
        self.max_tilt = 0.0
        self.min_z = self.z0
        #: per tick: t, base x, y, z [m], tilt [deg], sum tau^2 [N^2 m^2], |base - plan| (x, y) [m]
        self.log = []

    def run(self, seconds: float) -> None:
        p, dt = self.plant, self.ctx.dt
        n = len(p.q) - 7
        tau = np.zeros(n)
        for _ in range(round(seconds / dt)):
            self.k += 1
            self.state.position[:] = p.q[7:][self.idx]
            self.state.velocity[:] = p.v[6:][self.idx]
            self.state.base = p.base_state()
            self.ctrl.update(self.k * dt, self.state, self.cmd)
            # the goal the daemon sends, as the plant's offset drive takes it
            goal = p.q[7:].copy()
            goal[self.idx] = self.cmd.position
            tau[:] = p._kp * (goal - p.q[7:]) - p._kd * p.v[6:]
            p.step(tau)
            tilt = tilt_deg(p.q[3:7])
            self.max_tilt = max(self.max_tilt, tilt)
            self.min_z = min(self.min_z, float(p.q[2]))
            tg = self.ctrl.targets
            err = float(np.hypot(*(tg.base_position[:2] - p.q[:2]))) if tg is not None else 0.0
            self.log.append((self.k * dt, float(p.q[0]), float(p.q[1]), float(p.q[2]), tilt,
                             float(np.sum(tau ** 2)), err))


def run_walk(params: dict, settle_s: float = 1.0, ground: str = "rigid") -> dict:
    """Walk the humanoid with ``params`` on ``ground`` (``rigid`` or ``compliant``, the
    simulator's modes); summary: steps done, distance [m], fell, A9 cost."""
    w = WalkRun(params, ground=ground)
    tm_steps = int(params.get("steps", 10))
    step_s = float(params.get("step_s", 0.32))
    from servoloop.controller.wholebody.lip import WalkTiming

    tm = WalkTiming(steps=tm_steps, step_s=step_s, ds=float(params.get("double_support", 0.2)))
    w.run(tm.duration + settle_s)
    log = np.array(w.log)
    t = log[:, 0] - w.ctx.dt            # the walk's clock starts at the first tick
    a, b = tm.first_step + 2 * step_s, tm.first_step + (tm_steps - 2) * step_s
    win = (t >= a) & (t < b)
    dist = float(log[win, 1][-1] - log[win, 1][0]) if win.any() else 0.0
    cost = float(log[win, 5].sum() * w.ctx.dt)
    down = (log[:, 3] < 0.8 * w.z0) | (log[:, 4] > 30.0)      # fallen: low or tipped over
    fell = bool(down.any())
    t_end = t[np.argmax(down)] if fell else t[-1]
    steps = w.ctrl.planner.steps_done(t_end) if w.ctrl.planner is not None else 0
    return {"steps_done": steps, "distance_m": float(w.plant.q[0] - log[0, 1]),
            "steady_distance_m": dist, "torque_cost": cost,
            "torque_cost_per_m": cost / dist if dist > 1e-3 else math.inf, "fell": fell,
            "max_tilt_deg": w.max_tilt,
            "base_rms_error_m": float(np.sqrt(np.mean(log[t <= tm.end_of_steps, 6] ** 2))), "min_height_m": w.min_z, "height_m": w.z0,
            "lateral_drift_m": float(w.plant.q[1]), "run": w}
