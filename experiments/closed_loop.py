"""A robot on the contact simulator driven by joint torques, in process, with its true base state.

The simulator's servos run as torque sources (drive mode 2, the current-mode
servo of the virtual bus), so a controller's torques reach the joints as
they are; :meth:`TorquePlant.base_state` gives the simulator's true base
state as a :class:`~servoloop.controller.controllers.BaseState` (the
estimator's output on a real robot), and :meth:`TorquePlant.push` injects an
impulse into the base (a disturbance hook for balance tests).
"""

from __future__ import annotations

import numpy as np

from servoloop.controller.controllers.base import BaseState
from servoloop.core_cy.sim.simulator import SimConfig, Simulator

__all__ = ["TorquePlant", "builtin_urdf"]


def builtin_urdf(robot: str):
    """Path of a built-in robot's URDF (``robots/NAME/NAME.urdf``)."""
    from servoloop.robots import urdf_path

    return urdf_path(robot)


class TorquePlant:
    """The simulator with every joint torque-driven.

    Parameters
    ----------
    urdf : path of the robot's URDF (floating base)
    config : SimConfig (mode, dt, friction, law)
    joints : (n_joints,) initial joint angles [rad], model order; placed standing on the ground
    substeps : simulator steps per control tick
    servo : servo model name (e.g. "AX-18A") at every joint, default the config's
    drive : "torque" (the servos are torque sources, as current-mode servos) or "offset"
        (position servos; a torque reaches the joint as the goal offset of seed 000's law
        inverted, ``goal = q + (tau + k_d dq) / k_p``, as the daemon sends it)
    """

    def __init__(self, urdf, config: SimConfig | None = None, joints=None, substeps: int = 1,
                 servo=None, drive: str = "torque"):
        from servoloop.core_cy.sim.model import simulator_servo_model
        from servoloop.firmware_bridge.control_table import get_table

        config = config or SimConfig()
        if servo is not None:
            from dataclasses import replace

            table = get_table(servo)
            config = replace(config, servo=simulator_servo_model(table.datasheet, table.name))
        self.sim = Simulator.from_urdf(urdf, config)
        self.substeps = int(substeps)
        self.dt = config.dt * self.substeps
        self.sim.reset(joints)
        if drive not in ("torque", "offset"):
            raise ValueError(f"TorquePlant.drive: {drive!r}; choose torque or offset")
        self.drive = drive
        core = self.sim._core
        core.servo_array("drive")[0][:] = 2 if drive == "torque" else 0
        self._command = core.servo_array("command")[0]
        self._goal = self.sim.q[7:].copy()
        self.base = BaseState()
        servos = config.servos(self.sim.n_joints)
        self.armature = np.array([s.armature_kg_m2 for s in servos])
        self._kp = np.array([s.kp_nm_per_rad for s in servos])
        self._kd = np.array([s.kd_nm_s_per_rad for s in servos])
        self.t = 0.0

    @property
    def q(self) -> np.ndarray:
        return self.sim.q

    @property
    def v(self) -> np.ndarray:
        return self.sim.v

    def step(self, tau) -> None:
        """Apply joint torques (n_joints,) [N m], model order, for one control tick."""
        if self.drive == "torque":
            self._command[:] = tau
        else:
            self._goal[:] = self.sim.q[7:] + (np.asarray(tau) + self._kd * self.sim.v[6:]) / self._kp
        self.sim.step(self._goal, True, n_steps=self.substeps)
        self.t += self.dt

    def base_state(self) -> BaseState:
        """The true base state (filled in place and returned)."""
        q, v, b = self.sim.q, self.sim.v, self.base
        b.position[:] = q[:3]
        b.quaternion[:] = q[3:7]
        b.linear_velocity[:] = v[:3]
        b.angular_velocity[:] = v[3:6]
        b.valid = True
        return b

    def push(self, impulse_world, angular_world=(0.0, 0.0, 0.0)) -> None:
        """Add an impulse [N s] (world frame) at the base: ``dv = M^-1 J^T F`` on the whole robot.

        ``angular_world`` [N m s] adds an angular impulse about the base origin.
        """
        from servoloop import core_cy

        model, q = self.sim.model, self.sim.q
        data = core_cy.Data(model)
        M = np.array(core_cy.crba(model, data, q), dtype=float)
        M = 0.5 * (M + M.T)
        M[6:, 6:] += np.diag(self.armature)
        x, y, z, w = q[3:7]
        R = np.array([
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ])
        gen = np.zeros(model.nv)
        gen[:3] = R.T @ np.asarray(impulse_world, dtype=float)
        gen[3:6] = R.T @ np.asarray(angular_world, dtype=float)
        self.sim.v[:] += np.linalg.solve(M, gen)

    @property
    def contact_forces(self) -> np.ndarray:
        """World contact force per contact point (k, 3) [N] of the last step."""
        return self.sim.contact_forces
