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

from servoloop.controller.simulation_config import standing_pose
from servoloop.core_cy.dynamics._dynamics import Model
from servoloop.core_cy.sim.model import (
    ContactPoints,
    contact_points_from_spec,
    contact_points_from_urdf,
    simulator_servo_model,
)
from servoloop.core_cy.sim.simulator import SimConfig, Simulator
from servoloop.firmware_bridge.control_table import get_table

__all__ = ["RobotPlant", "SETTLE_S", "PUSH_S", "SERVO_LAW", "make_plant"]

#: the figures of the servo law :meth:`RobotPlant.set_servo_law` sets (the simulator's servo
#: array of that name) and their unit: seed 000's ``tau = kp (goal - q) - kd dq``, the
#: gearbox's ``kc sgn(dq) + viscous dq``, the rotor's inertia at the output
SERVO_LAW = {"kp": "N*m/rad", "kd": "N*m*s/rad", "kc": "N*m", "viscous": "N*m*s/rad", "armature": "kg*m^2"}

#: s, how long a push lasts: its impulse is given as a constant force over this time, in equal
#: parts each simulator step.  A hand's shove is a force over tens of ms, which a real IMU's
#: accelerometer feels (2 N s on the 2.45 kg quadruped: 1.6 g, inside the OpenCR's +-2 g);
#: given in one 1 ms step it was 30-80 g, clipped to 2 g or, between steps, not felt at all,
#: while the deceleration after it was: the estimate integrated a velocity the robot never had
PUSH_S = 0.05

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
        self.held_ns = -1          # simulation.held_s: the base is held still until this time
        self._held_q = None
        self._kp0 = sim._core.servo_array("kp")[0].copy()
        self._frames = None
        self._pushes = []          # (time ns, impulse (3,) N s world, link): simulation.pushes
        self.pushes_done = []      # (time s, dv (nv,)) of the pushes given (started)
        # pushes under way: [steps left, impulse per step (3,) N s or None, link, base dv per
        # step (3,) world m/s or None]
        self._active = []
        self._tau0 = sim._core.servo_array("tau_max")[0].copy()
        # the base's world acceleration over the last step (what an IMU's accelerometer feels,
        # with gravity): a difference of world velocities, so it holds contact impulses too
        self.base_acc_world = np.zeros(3)
        self._vw_prev = np.zeros(3)

    @classmethod
    def for_robot(cls, name: str, config: SimConfig | None = None, pose=None) -> RobotPlant:
        """Plant of a built-in robot (``robots/NAME``), standing at rest in ``pose``."""
        from servoloop.virtual_bus.spec import robot_config

        return cls.for_config(robot_config(name), config, pose)

    @classmethod
    def for_config(cls, cfg, config: SimConfig | None = None, pose=None) -> RobotPlant:
        """Plant of any robot config with a URDF (a typed ``controller.config.RobotConfig``).

        Contact geometry: the URDF's collision spheres, boxes and cylinders
        plus the config's ``simulation.contacts``; each joint gets the model
        of the servo that drives it; ``pose`` (dict joint -> rad, default
        :func:`controller.simulation_config.standing_pose`) is where it is placed.
        Raises ValueError naming the file when the config has no URDF or the
        robot has nothing to touch the ground with.
        """
        urdf = cfg.urdf_path()
        if urdf is None:
            raise ValueError(f"{cfg.source or cfg.robot}: the contact simulator needs a robot "
                             "description (model.urdf or model.name)")
        floating = cfg.model.floating_base
        model = Model.from_urdf(str(urdf), floating_base=floating, mimic=cfg.model.mimic)
        parts = []
        try:
            parts.append(contact_points_from_urdf(urdf, floating_base=floating))
        except ValueError:
            if not cfg.simulation.contacts and floating:
                raise ValueError(f"{urdf.name}: no collision box, sphere or cylinder (meshes only?) and "
                                 f"no simulation.contacts in {cfg.source or 'the config'}: the robot "
                                 "would fall through the floor; declare its feet there") from None
        if cfg.simulation.contacts:
            parts.append(contact_points_from_spec(urdf, cfg.simulation.contacts, floating_base=floating))
        points = ContactPoints.concat(parts)
        joints = [s.joint for s in cfg.servos]
        if config is None:
            from servoloop.controller.simulation_config import sim_settings

            config = sim_settings(cfg.simulation.ground)     # the config's floor
        if config.servo == SimConfig().servo:
            # the default servo: each joint gets the model of the servo that drives it
            by_joint = {s.joint: get_table(s.model) for s in cfg.servos}
            config = replace(config, servo=tuple(
                simulator_servo_model(by_joint[j].datasheet, by_joint[j].name)
                if j in by_joint else config.servo for j in model.actuated_joint_names))
        sim = Simulator(model, points, config)
        if pose is None:
            pose = standing_pose(cfg)
        plant = cls(sim, joints)
        q = np.zeros(sim.n_joints)
        names = list(model.actuated_joint_names)
        for j, val in pose.items():
            if j in names:
                q[names.index(j)] = val
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

    def base_state(self) -> dict | None:
        """The floating base's true pose: ``base_position_in_world`` [m], ``base_rpy`` [rad]
        (roll, pitch, yaw; ZYX), or None for a fixed base."""
        if not self.sim.model.floating_base:
            return None
        q = self.sim.q
        x, y, z, w = (float(v) for v in q[3:7])
        roll = np.arctan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
        pitch = np.arcsin(np.clip(2 * (w * y - z * x), -1.0, 1.0))
        yaw = np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
        return {"base_position_in_world": [float(v) for v in q[:3]],
                "base_rpy": [float(roll), float(pitch), float(yaw)]}

    def base_rotation(self) -> np.ndarray:
        """(3, 3) rotation base -> world of the floating base (identity for a fixed base)."""
        if not self.sim.model.floating_base:
            return np.eye(3)
        x, y, z, w = (float(v) for v in self.sim.q[3:7])
        return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                         [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                         [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])

    def _base_velocity_world(self) -> np.ndarray:
        return self.base_rotation() @ self.sim.v[:3]

    def base_motion(self):
        """What an IMU on the base feels: (R base -> world (3, 3), angular velocity in the base
        frame (3,) [rad/s], base origin acceleration in the world (3,) [m/s^2], gravity excluded).
        A fixed base: level and still."""
        if not self.sim.model.floating_base:
            return np.eye(3), np.zeros(3), np.zeros(3)
        return self.base_rotation(), np.array(self.sim.v[3:6]), self.base_acc_world

    def hold_base(self, seconds: float) -> None:
        """Hold the floating base still at its present pose for ``seconds`` of simulated time
        from now (a person or a gantry holding the robot), then let it go."""
        if not self.sim.model.floating_base:
            raise ValueError("hold_base: the robot has no floating base")
        self._held_q = np.array(self.sim.q[:7], dtype=float)
        self.held_ns = self.time_ns + int(round(seconds * 1e9))

    def push(self, dv_world, duration_s: float = PUSH_S) -> None:
        """A push on the base: its velocity changes by ``dv_world`` (3,) [m/s, world frame] over
        the next ``duration_s`` (a constant force, in equal parts each simulator step, so the
        IMU feels it; 0: a jump now)."""
        if not self.sim.model.floating_base:
            raise ValueError("push: the robot has no floating base")
        dv = np.asarray(dv_world, dtype=float)
        n = int(round(duration_s / self.sim.config.dt))
        if n < 1:
            self.sim.v[:3] += self.base_rotation().T @ dv
        else:
            self._active.append([n, None, None, dv / n])

    def apply_impulse(self, impulse_world, link: str | None = None) -> np.ndarray:
        """A linear impulse ``p`` (3,) [N s, world frame] at the origin of ``link`` (None: the
        base link), the joints locked: the robot, as one rigid body in its present pose, takes
        it (``dv_base = M_bb^-1 J_b^T p``, M_bb the 6x6 composite inertia, J_b the base columns
        of the link origin's world-aligned Jacobian); joint velocities do not jump.

        Why locked: a shove lasts a few ms, during which geared servos are not back-driven.
        With free joints (``M^-1 J^T p`` over all of M) the light legs of the AX-18A humanoid,
        whose servo model has no armature, would jump to 10 rad/s from 0.3 N s at the pelvis.
        Returns ``dv`` (nv,)."""
        dv = self._impulse_dv(impulse_world, link)
        self.sim.v[:] += dv
        return dv

    def _impulse_dv(self, impulse_world, link: str | None) -> np.ndarray:
        """The (nv,) velocity change :meth:`apply_impulse` gives, not applied."""
        from servoloop.core_cy import Data, crba, forward_kinematics, frame_jacobian

        model, sim = self.sim.model, self.sim
        if not model.floating_base:
            raise ValueError("apply_impulse: the robot has no floating base")
        body, R_link, p_link = self._link_frame(link)
        q = np.array(sim.q, dtype=float)
        data = Data(model)
        forward_kinematics(model, data, q)
        J = np.array(frame_jacobian(model, data, q, body, "local_world_aligned"), dtype=float)
        # the link's origin sits at p_link in its body: v_p = v_o - r x w, r in world axes
        r = data.rotation_body_to_world[body] @ p_link
        rx = np.array([[0.0, -r[2], r[1]], [r[2], 0.0, -r[0]], [-r[1], r[0], 0.0]])
        Jp = J[:3] - rx @ J[3:]
        M = np.array(crba(model, data, q), dtype=float)
        Mbb = 0.5 * (M[:6, :6] + M[:6, :6].T)
        dv = np.zeros(model.nv)
        dv[:6] = np.linalg.solve(Mbb, Jp[:, :6].T @ np.asarray(impulse_world, dtype=float))
        return dv

    def _link_frame(self, link: str | None):
        """(body index, R link -> body, link origin in the body) of a URDF link (None: the base)."""
        if link is None:
            return 0, np.eye(3), np.zeros(3)
        if self._frames is None:
            from servoloop.core_cy.dynamics.urdf import parse_urdf

            self._frames = parse_urdf(str(self.sim.model.source), floating_base=True).frames
        if link not in self._frames:
            raise ValueError(f"push: link {link!r} is not in {self.sim.model.source} "
                             f"(links: {', '.join(sorted(self._frames))})")
        body, R_link, p_link = self._frames[link]
        return body, np.asarray(R_link, dtype=float), np.asarray(p_link, dtype=float)

    def schedule_pushes(self, pushes) -> None:
        """Impulses to give at set times from now (the virtual bus's power-up): ``pushes`` is a
        sequence of ``(t_s, impulse (3,) N s world, link or None)`` (``simulation.pushes``)."""
        for t_s, impulse, link in pushes:
            self._link_frame(link)                      # an unknown link fails now, not mid-run
            self._pushes.append((self.time_ns + int(round(float(t_s) * 1e9)),
                                 np.asarray(impulse, dtype=float), link))
        self._pushes.sort(key=lambda p: p[0])

    def set_state(self, position, velocity=None) -> None:
        """Place the servo joints [rad] at rest; a floating base is set down on the ground."""
        q = self.sim.q[self._off:].copy()
        q[self._idx] = position
        self._place(q)
        if velocity is not None:
            self.sim.v[self._voff + self._idx] = velocity

    def set_servo_law(self, joints=None, **figures) -> None:
        """Give the simulated servos other figures than their model's defaults: a robot whose
        servos are damped more, or have more gearbox friction, than the controller assumes.

        ``figures``: any of :data:`SERVO_LAW` (``kp`` N*m/rad at the factory gain, ``kd``
        N*m*s/rad, ``kc`` N*m, ``viscous`` N*m*s/rad, ``armature`` kg*m^2), each one number for
        every servo or one per servo of ``joints`` (names; default every servo, bus order).
        Taken from the next step on.  The motor line (stall torque, back EMF) and a velocity-mode
        servo's loop gain stay the model's.

        Raises
        ------
        ValueError
            Naming the figure or joint: unknown, not finite, below 0 (``kp`` 0 too), the wrong
            number of values, or a ``kc`` at or over a servo's stall torque (it could not move).
        """
        names = list(self.joint_names) if joints is None else list(joints)
        unknown = [j for j in names if j not in self.joint_names]
        if unknown:
            raise ValueError(f"RobotPlant.set_servo_law: no servo drives {unknown}; "
                             f"joints: {', '.join(self.joint_names)}")
        idx = self._idx[[self.joint_names.index(j) for j in names]]
        core = self.sim._core
        checked = {}
        for key, value in figures.items():
            if key not in SERVO_LAW:
                raise ValueError(f"RobotPlant.set_servo_law: unknown figure {key!r}; known: "
                                 f"{', '.join(SERVO_LAW)}")
            try:
                v = np.broadcast_to(np.asarray(value, dtype=float), (len(names),)).copy()
            except (TypeError, ValueError):
                raise ValueError(f"RobotPlant.set_servo_law: {key} must be one number or {len(names)} "
                                 f"(one per joint), got {value!r}") from None
            if not (np.all(np.isfinite(v)) and np.all(v > 0 if key == "kp" else v >= 0)):
                raise ValueError(f"RobotPlant.set_servo_law: {key} must be finite and "
                                 f"{'> 0' if key == 'kp' else '>= 0'} {SERVO_LAW[key]}, got {value!r}")
            if key == "kc":
                stall = core.servo_array("stall")[0][idx]
                over = [j for j, kc, st in zip(names, v, stall, strict=True) if not kc < st]
                if over:
                    raise ValueError(f"RobotPlant.set_servo_law: kc {value!r} N*m is not below the "
                                     f"stall torque of {over}: the servo could not move")
            checked[key] = v
        for key, v in checked.items():      # all or nothing
            core.servo_array(key)[0][idx] = v
            if key == "kp":                  # set_actuation scales it by the gain register
                self._kp0[idx] = v

    def set_actuation(self, kp_scale, torque_limit_nm, mode=None, command=None) -> None:
        """Per-servo register state, all (n,): gain scale (1 = factory), active-torque limit
        [N m], and (as the independent plant) ``mode`` 0 position / 1 velocity / 2 torque with
        its ``command`` [rad/s or N m]: a current-mode servo drives its joint as a torque source."""
        core = self.sim._core
        kp = core.servo_array("kp")[0]
        tau = core.servo_array("tau_max")[0]
        kp[self._idx] = self._kp0[self._idx] * np.asarray(kp_scale, dtype=float)
        tau[self._idx] = np.minimum(self._tau0[self._idx], np.asarray(torque_limit_nm, dtype=float))
        if mode is not None:
            core.servo_array("drive")[0][self._idx] = mode
        if command is not None:
            core.servo_array("command")[0][self._idx] = command

    def step(self, dt, goal_rad, torque_on, out_position, out_velocity, out_torque) -> None:
        """Advance ``dt`` s in whole simulator steps (the remainder carries over)."""
        self._acc_ns += int(round(dt * 1e9))
        k, self._acc_ns = divmod(self._acc_ns, self._h_ns)
        if k:
            self._goal[self._idx] = goal_rad
            self._on[self._idx] = torque_on
            floating = self.sim.model.floating_base
            if floating:
                self._vw_prev[:] = self._base_velocity_world()
            start_ns, end_ns = self.time_ns, self.time_ns + k * self._h_ns
            h = self._h_ns
            while k:
                if not self._active:
                    # no push under way: all steps up to the next push's start at once
                    before = k if not self._pushes else min(k, max(0, (self._pushes[0][0] - self.time_ns) // h))
                    if before:
                        self.sim.step(self._goal, self._on, n_steps=before)
                        self.time_ns += before * h
                        k -= before
                        continue
                while self._pushes and self._pushes[0][0] < self.time_ns + h:
                    # a push starts in this step: its impulse over PUSH_S, a part each step
                    t_ns, impulse, link = self._pushes.pop(0)
                    n = max(1, int(round(PUSH_S * 1e9 / h)))
                    self.pushes_done.append((self.time_ns * 1e-9, self._impulse_dv(impulse, link)))
                    self._active.append([n, impulse / n, link, None])
                if not self._active:
                    continue
                R_T = self.base_rotation().T
                for a in self._active:
                    if a[1] is not None:
                        self.apply_impulse(a[1], a[2])
                    else:
                        self.sim.v[:3] += R_T @ a[3]
                    a[0] -= 1
                self._active = [a for a in self._active if a[0] > 0]
                self.sim.step(self._goal, self._on, n_steps=1)
                self.time_ns += h
                k -= 1
            self.time_ns = end_ns
            if self.time_ns <= self.held_ns:
                # held (simulation.held_s): the base stays where it was placed, at rest
                self.sim.q[:7] = self._held_q
                self.sim.v[:6] = 0.0
                self._vw_prev[:] = 0.0
            if floating:
                self.base_acc_world[:] = (self._base_velocity_world() - self._vw_prev) / ((end_ns - start_ns) * 1e-9)
        out_position[:] = self.sim.q[self._off:][self._idx]
        out_velocity[:] = self.sim.v[self._voff:][self._idx]
        out_torque[:] = self.sim.joint_torques[self._idx]


# Simulated time a powered-off floating robot is left to settle before the
# bus serves it: it falls from its standing pose and comes to rest on its
# trunk and joint stops within ~1 s.
SETTLE_S = 2.0


def make_plant(servos, robot: str | None = None, config=None) -> RobotPlant:
    """``--plant`` factory of the virtual bus: the contact simulator for a robot config.

    servos : [(id, model)] in bus order (must match the config's servo list).
    robot : a built-in robot's name, used when ``config`` is None.
    config : a typed robot config (``servoloop virtual-bus --config FILE``).

    Real servos power up with torque off, so a floating robot (legged) starts
    as it would be found when switched on: lying at rest where its joints
    let it fall (:data:`SETTLE_S` of simulated time with torque off), not
    mid-fall.  The daemon's startup then stands it up.  A robot that cannot
    stand up from lying (a humanoid) declares ``simulation.held_s``: it
    starts upright in its pose, its base held still that long.
    """
    if config is None:
        if robot is None:
            raise ValueError("virtual_bus.robot_plant:make_plant needs a robot config "
                             "(--config FILE or --robot NAME): the simulator needs its URDF")
        from servoloop.virtual_bus.spec import robot_config

        config = robot_config(robot)
        name = robot
    else:
        name = config.source or config.robot
    plant = RobotPlant.for_config(config)
    held_s = config.simulation.held_s
    if plant.sim.model.floating_base and held_s > 0:
        plant.hold_base(held_s)
    elif plant.sim.model.floating_base:
        n = plant.n
        pos, vel, tau = np.zeros(n), np.zeros(n), np.zeros(n)
        plant.step(SETTLE_S, pos.copy(), np.zeros(n, dtype=bool), pos, vel, tau)
    if config.simulation.pushes and plant.sim.model.floating_base:
        # from power-up as the bus serves it (after the settling above)
        plant.schedule_pushes([(p.t_s, p.impulse, p.link) for p in config.simulation.pushes])
    if plant.n != len(servos):
        raise ValueError(f"{name}: the robot drives {plant.n} joints, the bus has {len(servos)} servos")
    return plant
