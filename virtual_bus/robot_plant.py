"""Whole-robot plant for the virtual servo bus, on the contact simulator.

Implements the virtual bus's Plant interface (``n`` and ``step(dt, goal_rad,
torque_on, out_position, out_velocity, out_torque)``, plus the optional
``set_actuation`` and ``set_state``), so that ``InProcessVirtualBus(servos,
plant=RobotPlant.for_robot("quadruped"))`` runs the quadruped standing on the
ground instead of one free load per servo; from the command line:
``servoloop virtual-bus --robot quadruped --plant virtual_bus.robot_plant:make_plant``.

Servo i drives the joint named by the robot config's ``servos[i].joint``;
servo angles are joint angles (the built-in robots have offset 0 and
direction 1; other offsets belong to the daemon's joint<->servo mapping).
Each joint gets the servo model of the servo that drives it
(:func:`core_cy.sim.model.simulator_servo_model`: XM430-W350 on the
quadruped, AX-18A on the humanoid), so the simulated joints obey the same
law, torque limits and no-load speeds as the independent-servo plant.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from servoloop.core_cy.dynamics._dynamics import Model
from servoloop.core_cy.sim.model import (
    ContactPoints,
    box_corners,
    contact_points_from_urdf,
    simulator_servo_model,
)
from servoloop.core_cy.sim.simulator import SimConfig, Simulator
from servoloop.firmware_bridge.control_table import get_table

__all__ = ["RobotPlant", "TRUNK_BOXES", "SETTLE_S", "make_plant"]

# Trunk boxes (m) so a robot that collapses with torque off lands on its trunk
# instead of falling through the floor (the URDFs collide with their feet only).
TRUNK_BOXES = {"quadruped": (0.30, 0.14, 0.064)}


class RobotPlant:
    """The simulator as a virtual-bus plant.

    Parameters
    ----------
    sim : Simulator
        Robot and settings; its state is advanced by :meth:`step`.
    joint_names : sequence of str, optional
        The joint each servo drives, in bus order (default: every actuated
        joint in model order).
    """

    def __init__(self, sim: Simulator, joint_names=None):
        self.sim = sim
        names = list(sim.model.actuated_joint_names)
        joint_names = list(joint_names) if joint_names is not None else names
        missing = [j for j in joint_names if j not in names]
        if missing:
            raise ValueError(f"RobotPlant: joints {missing} not in {sim.model.source}")
        self.joint_names = joint_names
        self.n = len(joint_names)
        self._idx = np.array([names.index(j) for j in joint_names], dtype=np.intp)
        self._off = sim.model.nq - sim.n_joints
        self._voff = sim.model.nv - sim.n_joints
        self._goal = sim.q[self._off:].copy()
        self._on = np.zeros(sim.n_joints, dtype=bool)
        self._h_ns = int(round(sim.config.dt * 1e9))
        self._acc_ns = 0
        self.time_ns = 0
        self._kp0 = sim._core.servo_array("kp")[0].copy()
        self._tau0 = sim._core.servo_array("tau_max")[0].copy()

    @classmethod
    def for_robot(cls, name: str, config: SimConfig | None = None, pose=None) -> RobotPlant:
        """Plant of a built-in robot (``robots/NAME``), standing at rest in ``pose``.

        pose : dict joint -> rad, default the config's controller pose (or zeros).
        """
        from servoloop.virtual_bus.spec import robot_config

        cfg = robot_config(name)          # the typed loader: unknown keys are errors
        urdf = cfg.urdf_path()
        floating = cfg.model.floating_base
        model = Model.from_urdf(str(urdf), floating_base=floating)
        try:
            points = contact_points_from_urdf(urdf, floating_base=floating)
        except ValueError:
            points = ContactPoints(np.zeros(0, np.int32), np.zeros((0, 3)), np.zeros(0))
        if name in TRUNK_BOXES and floating:
            points = ContactPoints.concat([points, box_corners(0, TRUNK_BOXES[name], name="trunk")])
        joints = [s.joint for s in cfg.servos]
        config = config or SimConfig()
        if config.servo == SimConfig().servo:
            # the default servo: each joint gets the model of the servo that drives it
            by_joint = {s.joint: s.model for s in cfg.servos}
            config = replace(config, servo=tuple(
                simulator_servo_model(get_table(by_joint[j]).datasheet, get_table(by_joint[j]).name)
                if j in by_joint else config.servo
                for j in model.actuated_joint_names))
        sim = Simulator(model, points, config)
        if pose is None:
            pose = cfg.controller.params.get("pose", {}) or {}
        plant = cls(sim, joints)
        q = np.zeros(sim.n_joints)
        for j, val in pose.items():
            q[list(model.actuated_joint_names).index(j)] = val
        plant._place(q)
        return plant

    def _place(self, joints) -> None:
        if self.sim.model.floating_base:
            self.sim.reset(joints)
        else:
            q = self.sim.model.neutral()
            q[self._off:] = joints
            self.sim.set_state(q)
        self._goal[:] = joints

    def set_state(self, position, velocity=None) -> None:
        """Place the servo joints [rad] at rest; a floating base is set down on the ground."""
        q = self.sim.q[self._off:].copy()
        q[self._idx] = position
        self._place(q)
        if velocity is not None:
            self.sim.v[self._voff + self._idx] = velocity

    def set_actuation(self, kp_scale, torque_limit_nm) -> None:
        """Gain scale (1 = factory) and active-torque limit [N m] per servo, (n,)."""
        kp = self.sim._core.servo_array("kp")[0]
        tau = self.sim._core.servo_array("tau_max")[0]
        kp[self._idx] = self._kp0[self._idx] * np.asarray(kp_scale, dtype=float)
        tau[self._idx] = np.minimum(self._tau0[self._idx], np.asarray(torque_limit_nm, dtype=float))

    def step(self, dt, goal_rad, torque_on, out_position, out_velocity, out_torque) -> None:
        """Advance ``dt`` s in whole simulator steps (the remainder carries over)."""
        self._acc_ns += int(round(dt * 1e9))
        k, self._acc_ns = divmod(self._acc_ns, self._h_ns)
        if k:
            self._goal[self._idx] = goal_rad
            self._on[self._idx] = torque_on
            self.sim.step(self._goal, self._on, n_steps=k)
            self.time_ns += k * self._h_ns
        out_position[:] = self.sim.q[self._off:][self._idx]
        out_velocity[:] = self.sim.v[self._voff:][self._idx]
        out_torque[:] = self.sim.joint_torques[self._idx]


# Simulated time a powered-off floating robot is left to settle before the
# bus serves it: it falls from its standing pose and comes to rest on its
# trunk and joint stops within ~1 s.
SETTLE_S = 2.0


def make_plant(servos, robot: str | None = None) -> RobotPlant:
    """``--plant`` factory of the virtual bus: the simulator for built-in robot ``robot``.

    servos : [(id, model)] in bus order (must match the robot config's servo list).

    Real servos power up with torque off, so a floating robot (legged) starts
    as it would be found when switched on: lying at rest where its joints
    let it fall (:data:`SETTLE_S` of simulated time with torque off), not
    mid-fall.  The daemon's startup then stands it up.
    """
    if robot is None:
        raise ValueError("virtual_bus.robot_plant:make_plant needs a robot (--robot NAME): "
                         "the simulator needs its URDF")
    plant = RobotPlant.for_robot(robot)
    if plant.sim.model.floating_base:
        n = plant.n
        pos, vel, tau = np.zeros(n), np.zeros(n), np.zeros(n)
        plant.step(SETTLE_S, pos.copy(), np.zeros(n, dtype=bool), pos, vel, tau)
    if plant.n != len(servos):
        raise ValueError(f"robot {robot!r} drives {plant.n} joints, the bus has {len(servos)} servos")
    return plant
