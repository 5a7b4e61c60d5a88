"""Seed 003's PID controller as the paper's (digest §7): joint PID, PD operational-space
feedback on the feet and VIIP inverted-pendulum balance with normal forces only.

No dynamics model beyond the joint inertias (the gains' scale) and the feet's point
Jacobians (to map task-space forces to joint torques); the ID controllers' joint gains
(:data:`experiments.seed003.KP_ID`, ``KD_ID`` [1/s^2, 1/s]) in torque terms, so the
comparison is the paper's ("the gains used for PID control are identical between all
controllers").

Terms, per tick (torques [N m], joint order of the controller):

- joint PID: ``I_jj (KP e + KD de) + KI int(e)``, I_jj the joint's diagonal inertia in the
  standing pose (plus the armature) [kg m^2];
- operational-space PD on each swing foot: ``J^T Lambda (KP e_p + KD e_v)``, Lambda the
  leg's 3x3 operational-space inertia [kg], e_p / e_v the foot's world position [m] and
  velocity [m/s] errors;
- VIIP (Sugihara & Nakamura): the centre of mass as an inverted pendulum on the stance
  feet; the total normal force m (g + z feedback) placed at the centre of pressure that
  gives the wanted horizontal acceleration (``c_dd = g / h (c - p)``), distributed over
  the stance feet by least squares (no pulling force), applied as ``-J^T f``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["PaperPID"]

#: integral gain [N m / (rad s)] (the servo's own; the paper gives none)
KI = 5.0
#: VIIP's feedback on the centre of mass [1/s^2, 1/s]: height and horizontal
KP_COM, KD_COM = 100.0, 20.0
G = 9.81


class PaperPID:
    """The paper's PID for the built-in quadruped (see the module docstring).

    Parameters
    ----------
    robot : WholeBodyRobot
    joint_inertia : (n,) [kg m^2] diagonal of the joint-space inertia (armature included)
    kp, kd : joint gains in acceleration units [1/s^2, 1/s] (the IDs')
    dt : control period [s]
    """

    def __init__(self, robot, joint_inertia, kp: float, kd: float, dt: float) -> None:
        self.robot = robot
        self.I = np.asarray(joint_inertia, dtype=float)
        self.kp, self.kd, self.dt = float(kp), float(kd), float(dt)
        self.integ = np.zeros(robot.n)
        self.mass = float(robot.mass)
        self._c_prev = None

    def torques(self, q, v, q_ref, dq_ref, stance, feet_ref, feet_vel_ref, base_ref, base_vel_ref,
                inertia) -> np.ndarray:
        """Joint torques (n,) [N m].

        q (nq,), v (nv,): the state; q_ref, dq_ref (n,): reference joints [rad, rad/s];
        stance (feet,) bool; feet_ref, feet_vel_ref (feet, 3): world foot references;
        base_ref, base_vel_ref (3,): the base's reference position [m] and velocity [m/s];
        inertia (nv, nv): the joint-space inertia at q (for the feet's Lambda).
        """
        r, dt = self.robot, self.dt
        e = q_ref - q[7:]
        self.integ += e * dt
        tau = self.I * (self.kp * e + self.kd * (dq_ref - v[6:])) + KI * self.integ
        r.kinematics(q)
        # the base stands for the centre of mass (the legs are 10 % of the mass); its
        # velocity by difference (the pendulum's state in the world frame)
        c = q[:3].copy()
        dc = np.zeros(3) if self._c_prev is None else (c - self._c_prev) / dt
        self._c_prev = c
        jac = [r.point_jacobian(q, f.body, f.center, f.radius) for f in r.feet]
        feet = np.array([r.foot_position(f) for f in r.feet])
        for i, on in enumerate(stance):
            if on:
                continue
            # operational-space PD on a swing foot, through the leg's own inertia
            J = jac[i][:, 6:]
            cols = np.flatnonzero(np.abs(J).sum(axis=0) > 1e-12)
            Jl = J[:, cols]
            Ml = inertia[np.ix_(cols + 6, cols + 6)]
            lam = np.linalg.inv(Jl @ np.linalg.solve(Ml, Jl.T) + 1e-9 * np.eye(3))
            a = self.kp * (feet_ref[i] - feet[i]) + self.kd * (feet_vel_ref[i] - jac[i] @ v)
            tau[cols] += Jl.T @ (lam @ a)
        on = np.flatnonzero(stance)
        if on.size:
            # VIIP: the total normal force and its centre of pressure
            fz = self.mass * (G + KP_COM * (base_ref[2] - c[2]) + KD_COM * (base_vel_ref[2] - dc[2]))
            fz = max(fz, 0.0)
            h = max(c[2] - feet[on, 2].mean(), 1e-3)
            cdd = KP_COM * (base_ref[:2] - c[:2]) + KD_COM * (base_vel_ref[:2] - dc[:2])
            p = c[:2] - h / G * cdd
            A = np.vstack([np.ones(on.size), feet[on, 0], feet[on, 1]])
            f = np.linalg.lstsq(A, fz * np.array([1.0, p[0], p[1]]), rcond=None)[0]
            f = np.clip(f, 0.0, None)      # normal forces only: no foot pulls the ground
            if f.sum() > 0.0:
                f *= fz / f.sum()
            for k, i in enumerate(on):
                tau -= jac[i][2, 6:] * f[k]
        return tau
