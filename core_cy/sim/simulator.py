"""Legged-robot simulator: servo actuators, compliant or rigid plane contact.

The compiled step lives in ``core_cy/sim/_kernels.pyx`` (GIL released, no
allocation per step); this module builds it from a URDF and checks inputs.

>>> sim = Simulator.from_urdf("robots/quadruped/quadruped.urdf", mode="compliant")
>>> sim.reset(base_height=0.25, joints=goals)
>>> sim.step(goals, n_steps=10)
>>> sim.q, sim.v, sim.contact_forces

State layout is Pinocchio's free-flyer layout: q = [x y z qx qy qz qw,
joints] (quaternion base, no Euler singularity), v = [linear, angular] of
the base in its own frame, then joint rates (seed 002 erratum A5: the base
twist is body-frame and the position rate is R v_lin).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from servoloop.core_cy.actuator import ServoModel
from servoloop.core_cy.contact.laws import CONES, ContactLaw
from servoloop.core_cy.dynamics._dynamics import Model
from servoloop.core_cy.sim._kernels import SimCore
from servoloop.core_cy.sim.model import (
    RIGID_SOLVERS,
    ContactPoints,
    Ground,
    JointSettings,
    RigidSettings,
    contact_points_from_urdf,
    simulator_servo_model,
)

__all__ = ["SimConfig", "Simulator", "BatchSimulator", "SimulationError"]

MODES = {"compliant": 0, "rigid": 1}
INTEGRATORS = {"euler": 0, "rk4": 1}


class SimulationError(RuntimeError):
    """The step failed (mass matrix not positive definite: the state blew up)."""


@dataclass(frozen=True)
class SimConfig:
    """Simulator settings.

    mode: "compliant" (seed 002) or "rigid" (LCP); integrator: "euler"
    (semi-implicit, linearly implicit in the damping terms) or "rk4"
    (explicit, compliant only); dt [s]; servo: the :class:`ServoModel` at
    every actuated joint, or a tuple of one per actuated joint (default: the
    XM430-W350 of :func:`simulator_servo_model`); joints: how the law is
    applied and the joint stops.
    """

    mode: str = "compliant"
    integrator: str = "euler"
    dt: float = 1e-3
    law: ContactLaw = field(default_factory=ContactLaw)
    servo: ServoModel | tuple = field(default_factory=simulator_servo_model)
    joints: JointSettings = field(default_factory=JointSettings)
    ground: Ground = field(default_factory=Ground)
    rigid: RigidSettings = field(default_factory=RigidSettings)

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"SimConfig.mode: {self.mode!r}; choose one of {', '.join(MODES)}")
        if self.integrator not in INTEGRATORS:
            raise ValueError(f"SimConfig.integrator: {self.integrator!r}; choose one of "
                             f"{', '.join(INTEGRATORS)}")
        if self.mode == "rigid" and self.integrator != "euler":
            raise ValueError("SimConfig: rigid contact is velocity-level time stepping; "
                             "use integrator='euler'")
        if not self.dt > 0:
            raise ValueError(f"SimConfig.dt must be > 0, got {self.dt}")
        servos = self.servo if isinstance(self.servo, tuple) else (self.servo,)
        if not servos or not all(isinstance(s, ServoModel) for s in servos):
            raise ValueError("SimConfig.servo must be a ServoModel or a tuple of them (one per joint)")

    def servos(self, n_joints: int) -> tuple:
        """One ServoModel per actuated joint (n_joints,)."""
        if not isinstance(self.servo, tuple):
            return (self.servo,) * n_joints
        if len(self.servo) != n_joints:
            raise ValueError(f"SimConfig.servo: {len(self.servo)} servo models for {n_joints} joints")
        return self.servo


# Servo arrays of the kernel (SimCore.servo_array), per actuated joint, from ServoModel:
# tau_max is the torque limit (the limit registers; default the stall torque at the supply).
_SERVO_ARRAYS = {
    "kp": lambda s: s.kp_nm_per_rad,
    "kd": lambda s: s.kd_nm_s_per_rad,
    "kc": lambda s: s.coulomb_nm,
    "tau_max": lambda s: s.stall_torque_at_supply_nm,
    "armature": lambda s: s.armature_kg_m2,
    "stall": lambda s: s.stall_torque_at_supply_nm,
    "emf": lambda s: s.back_emf_nm_s_per_rad,
    "viscous": lambda s: s.viscous_nm_s_per_rad,
    "off_damping": lambda s: s.torque_off_damping_nm_s_per_rad,
    "kv": lambda s: s.velocity_loop_gain_nm_s_per_rad,
    "drive": lambda s: 0.0,      # position control; set per joint with SimCore.servo_array("drive")
    "command": lambda s: 0.0,
}


def _core(model: Model, n_env: int, cfg: SimConfig, points: ContactPoints) -> SimCore:
    na = model.nv - (6 if model.floating_base else 0)
    servos = cfg.servos(na)
    servo_arrays = {k: np.array([get(s) for s in servos], dtype=float) for k, get in _SERVO_ARRAYS.items()}
    qa = model.nq - na
    servo_arrays["q_lo"] = np.array(model.lower_limits[qa:], dtype=float)  # -inf: no stop
    servo_arrays["q_hi"] = np.array(model.upper_limits[qa:], dtype=float)
    params = {
        "mode": MODES[cfg.mode], "integrator": INTEGRATORS[cfg.integrator], "dt": float(cfg.dt),
        "sign_band": float(cfg.joints.sign_band),
        "stop_k": float(cfg.joints.stop_stiffness), "stop_d": float(cfg.joints.stop_damping),
        "plane_point": [float(x) for x in cfg.ground.point],
        "normal": [float(x) for x in cfg.ground.unit_normal()],
        "law": cfg.law.as_kernel_dict(),
        "baumgarte": float(cfg.rigid.baumgarte), "margin": float(cfg.rigid.margin),
        "lcp_tol": float(cfg.rigid.tol), "lcp_max_iter": int(cfg.rigid.max_iter),
        "lcp_cone": CONES[cfg.rigid.cone], "lcp_solver": RIGID_SOLVERS[cfg.rigid.solver],
    }
    mu = np.full(len(points), float(cfg.rigid.mu))
    return SimCore(model, n_env, params, points.body, points.position, points.radius,
                   servo_arrays, mu)


class Simulator:
    """One robot on a plane.

    Parameters
    ----------
    model : core_cy.Model
        Floating-base (or fixed-base) model.
    points : ContactPoints
        Contact candidates (sphere feet, box corners, points).
    config : SimConfig
    """

    def __init__(self, model: Model, points: ContactPoints, config: SimConfig | None = None):
        self.model = model
        self.points = points
        self.config = config or SimConfig()
        self.n_joints = model.nv - (6 if model.floating_base else 0)
        self._core = _core(model, 1, self.config, points)
        self._q = model.neutral().reshape(1, -1).copy()
        self._v = np.zeros((1, model.nv))
        self._goal = np.zeros((1, self.n_joints))
        self._on = np.ones((1, self.n_joints), dtype=np.uint8)

    @classmethod
    def from_urdf(cls, urdf, config: SimConfig | None = None, boxes: bool = True,
                  **config_kw) -> Simulator:
        """Floating-base robot of ``urdf``; contacts from its collision spheres and boxes."""
        model = Model.from_urdf(str(urdf), floating_base=True)
        points = contact_points_from_urdf(urdf, floating_base=True, boxes=boxes)
        return cls(model, points, config or SimConfig(**config_kw))

    # state ----------------------------------------------------------------
    @property
    def q(self) -> np.ndarray:
        """Configuration (nq,), a view advanced in place by :meth:`step`."""
        return self._q[0]

    @property
    def v(self) -> np.ndarray:
        """Velocity (nv,), a view advanced in place by :meth:`step`."""
        return self._v[0]

    @property
    def contact_forces(self) -> np.ndarray:
        """World contact force per contact point (k, 3) [N] of the last step."""
        return self._core.force[0]

    @property
    def contact_active(self) -> np.ndarray:
        """(k,) bool: the contact force of the last step is nonzero."""
        return np.any(self._core.force[0] != 0.0, axis=1)

    @property
    def joint_torques(self) -> np.ndarray:
        """Actuated-joint torques (n_joints,) [N m], servo plus joint stop, at the start of the
        last step (RK4: its first stage)."""
        return self._core.tau[0][self.model.nv - self.n_joints:]

    def set_contact_law(self, law: ContactLaw) -> None:
        """Replace the compliant contact law (takes effect at the next step)."""
        self._core.set_law(0, law.as_kernel_dict())

    @property
    def lcp_stats(self) -> tuple[int, float, float]:
        """(iterations, residual, complementarity) of the last rigid step's LCP."""
        it, res, comp = self._core.stats_array[0]
        return int(it), float(res), float(comp)

    @property
    def lcp_fallbacks(self) -> int:
        """Rigid steps whose Lemke solve failed and PGS answered instead (solver "lemke")."""
        return int(self._core.fallbacks[0, 0])

    def set_state(self, q, v=None) -> None:
        q = np.asarray(q, dtype=float)
        if q.shape != (self.model.nq,):
            raise ValueError(f"q: expected shape ({self.model.nq},), got {q.shape}")
        self._q[0] = q
        self._v[0] = 0.0 if v is None else np.asarray(v, dtype=float)
        self._core.lam[:] = 0.0

    def reset(self, joints=None, base_height: float | None = None, clearance: float = 5e-4) -> None:
        """Base upright at rest with joint angles ``joints`` (n_joints,) [rad].

        base_height [m]; default: the lowest contact just ``clearance`` above
        a level ground.
        """
        q = self.model.neutral()
        off = self.model.nq - self.n_joints
        if joints is not None:
            q[off:] = joints
        if self.model.floating_base:
            q[2] = base_height if base_height is not None else self._lowest_height(q) + clearance
        self.set_state(q)

    def _lowest_height(self, q) -> float:
        from servoloop.core_cy.dynamics._dynamics import Data, forward_kinematics

        data = Data(self.model)
        forward_kinematics(self.model, data, q)
        R, p = data.rotation_body_to_world, data.position_body_in_world
        z = [(R[b] @ c + p[b])[2] - r for b, c, r in
             zip(self.points.body, self.points.position, self.points.radius, strict=True)]
        return -min(z)

    # stepping ---------------------------------------------------------------
    def step(self, goal, torque_on=True, n_steps: int = 1) -> None:
        """Advance n_steps * dt with servo goals (n_joints,) [rad] held constant."""
        self._goal[0] = goal
        if torque_on is True or torque_on is False:
            self._on.fill(torque_on)
        else:
            self._on[0] = torque_on
        rc = self._core.step(self._q, self._v, self._goal, self._on, int(n_steps))
        if rc:
            raise SimulationError(f"simulator step failed at t-state q={self.q}")

    def run(self, goals, torque_on=True):
        """Step once per row of goals (n, n_joints); returns q (n, nq) and forces (n, k, 3)."""
        goals = np.ascontiguousarray(goals, dtype=float)
        n = goals.shape[0]
        on = np.ascontiguousarray(np.broadcast_to(np.asarray(torque_on, dtype=bool),
                                                  (self.n_joints,)).astype(np.uint8))
        q_log = np.empty((n, self.model.nq))
        f_log = np.empty((n, 3 * len(self.points)))
        if self._core.run(self._q[0], self._v[0], goals, on, q_log, f_log):
            raise SimulationError("simulator run failed (mass matrix not positive definite)")
        return q_log, f_log.reshape(n, -1, 3)


class BatchSimulator:
    """N independent copies of one robot stepped in one call (GIL released).

    ``q`` (N, nq) and ``v`` (N, nv) are the states, ``goal`` (N, n_joints)
    and ``torque_on`` (N, n_joints) the inputs; each environment has its own
    workspace and its own servo parameters (:meth:`servo_param`), friction
    (:attr:`friction`) and contact law (:meth:`set_contact_law`), so one call
    advances a calibration or parameter sweep of N runs without Python in
    the loop.
    """

    def __init__(self, model: Model, points: ContactPoints, n_env: int,
                 config: SimConfig | None = None):
        self.model, self.points = model, points
        self.config = config or SimConfig()
        self.n_env = int(n_env)
        self.n_joints = model.nv - (6 if model.floating_base else 0)
        self._core = _core(model, self.n_env, self.config, points)
        self.q = np.tile(model.neutral(), (self.n_env, 1))
        self.v = np.zeros((self.n_env, model.nv))
        self.goal = np.zeros((self.n_env, self.n_joints))
        self.torque_on = np.ones((self.n_env, self.n_joints), dtype=np.uint8)

    @classmethod
    def from_urdf(cls, urdf, n_env: int, config: SimConfig | None = None, **kw):
        model = Model.from_urdf(str(urdf), floating_base=True)
        points = contact_points_from_urdf(urdf, floating_base=True)
        return cls(model, points, n_env, config or SimConfig(**kw))

    @property
    def contact_forces(self) -> np.ndarray:
        """(N, k, 3) world contact forces [N] of the last step."""
        return self._core.force

    @property
    def lcp_stats(self) -> np.ndarray:
        """(N, 3): iterations, residual, complementarity of each environment's last LCP."""
        return self._core.stats_array

    def servo_param(self, name: str) -> np.ndarray:
        """Live (N, n_joints) servo parameter: "kp", "kd", "kc", "tau_max" (torque limit),
        "armature", "stall" (stall torque at the supply), "emf" (motor line slope),
        "viscous", "off_damping" (SI units of :class:`ServoModel`), "kv" (velocity-loop gain),
        "drive" (0 position, 1 velocity, 2 torque) and "command" (rad/s or N m).

        Write rows to sweep a parameter across environments; the next
        :meth:`step` uses the new values.
        """
        return self._core.servo_array(name)

    @property
    def friction(self) -> np.ndarray:
        """Live (N, k) rigid-contact friction coefficient per contact point."""
        return self._core.friction_array()

    def set_contact_law(self, env: int, law: ContactLaw) -> None:
        """Give environment ``env`` its own compliant contact law."""
        self._core.set_law(int(env), law.as_kernel_dict())

    def reset(self, joints=None, clearance: float = 5e-4) -> None:
        """Every environment upright at rest on level ground with ``joints`` (n_joints,) [rad]."""
        one = Simulator(self.model, self.points, self.config)
        one.reset(joints, clearance=clearance)
        self.q[:] = one.q
        self.v[:] = 0.0
        self._core.lam[:] = 0.0
        if joints is not None:
            self.goal[:] = joints

    def step(self, n_steps: int = 1, threads: int = 1) -> None:
        """Advance every environment by n_steps with its row of ``goal`` / ``torque_on``.

        threads > 1 splits the environments into that many contiguous blocks
        stepped by Python threads at once: the kernel releases the GIL and
        every environment has its own workspace.
        """
        n_steps = int(n_steps)
        if threads <= 1 or self.n_env < 2:
            rc = self._core.step(self.q, self.v, self.goal, self.torque_on, n_steps)
            if rc:
                raise SimulationError(f"environment {rc - 1}: step failed")
            return
        from concurrent.futures import ThreadPoolExecutor

        edges = np.linspace(0, self.n_env, min(threads, self.n_env) + 1).astype(int)

        def block(a: int, b: int) -> int:
            rc = self._core.step(self.q[a:b], self.v[a:b], self.goal[a:b], self.torque_on[a:b],
                                 n_steps, a)
            return a + rc if rc else 0

        with ThreadPoolExecutor(len(edges) - 1) as pool:
            bad = [r for r in pool.map(block, edges[:-1], edges[1:]) if r]
        if bad:
            raise SimulationError(f"environment {bad[0] - 1}: step failed")
