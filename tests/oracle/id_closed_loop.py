"""Closed loop for the contact inverse dynamics: joint PD -> ID torques -> rigid simulator.

The simulator's servos are pure torque sources (kp = 100 N m/rad, kd = kc = 0,
goal = q + tau / kp, no saturation), its contact LCP PGS to 1e-12 with the
same mu, margin, Baumgarte factor and armature as the ID.  Each tick the ID
gets the simulator's true state and the PD desired joint acceleration
toward a squat trajectory (knees and hips at ``amp`` rad, ``freq`` Hz); its
predicted contact forces are compared with the ones the simulator then
applies (the paper's Table 5 metric: l1 of the feet's normal forces, relative;
a foot's force is the sum over its contact points).
"""

from __future__ import annotations

import numpy as np

from servoloop.core_cy import inverse_dynamics as ID
from servoloop.core_cy.actuator import ServoModel
from servoloop.core_cy.dynamics._dynamics import Model
from servoloop.core_cy.sim.model import (
    RigidSettings,
    contact_points_from_urdf,
    simulator_servo_model,
)
from servoloop.core_cy.sim.simulator import SimConfig, Simulator
from servoloop.experiments.gaits import stand_goals
from servoloop.robots import urdf_path

QUAD = str(urdf_path("quadruped"))
HUMANOID = str(urdf_path("humanoid"))
DT = 1e-3
KP_SERVO = 100.0
ARMATURE = simulator_servo_model().armature_kg_m2


def _stand(urdf, model):
    if urdf == HUMANOID:
        from servoloop.controller.config import builtin_config
        from servoloop.controller.simulation_config import standing_pose

        pose = standing_pose(builtin_config("humanoid"))
        return np.array([pose.get(n, 0.0) for n in model.joint_names[1:]])
    return stand_goals(urdf)


def _squat_wave(urdf, names):
    """Direction (n_joints,) of the squat: knees bend, hips (and ankles) follow."""
    if urdf == HUMANOID:     # sole stays flat: hip -1/2, knee 1, ankle -1/2 (the yaml's ratio)
        return np.array([1.0 if n.endswith("knee") else
                         (-0.5 if n.endswith("hip_pitch") or n.endswith("ankle_pitch") else 0.0)
                         for n in names])
    # quadruped: knees bend by amp, hips flex by half of it (the feet stay under the hips)
    return np.array([1.0 if n.endswith("knee") else (-0.5 if n.endswith("hip_flex") else 0.0)
                     for n in names])


def run(variant: str, mu: float = 0.8, seconds: float = 2.0, amp: float = 0.15,
        freq: float = 1.0, kp: float = 400.0, kd: float = 40.0, armature_id=ARMATURE,
        urdf: str = QUAD):
    """Run the loop; returns a dict of the measured errors (see module doc)."""
    model = Model.from_urdf(urdf, floating_base=True)
    pts = contact_points_from_urdf(urdf)
    servo = ServoModel(kp_nm_per_rad=KP_SERVO, kd_nm_s_per_rad=0.0, coulomb_nm=0.0,
                       stall_torque_nm=1e3, armature_kg_m2=ARMATURE)
    rigid = RigidSettings(mu=min(mu, 1e3), max_iter=2000, tol=1e-12)
    sim = Simulator.from_urdf(urdf, SimConfig(mode="rigid", rigid=rigid, servo=servo))
    stand = _stand(urdf, model)
    # settle with the simulator's own stiff PD on the stance first
    sim.reset(stand)
    sim.step(stand, n_steps=500)
    ws = ID.ContactInverseDynamics(model, pts, mu, variant, dt=DT, armature=armature_id)
    names = model.joint_names[1:]
    wave = _squat_wave(urdf, names)
    n = int(round(seconds / DT))
    foot = np.unique(pts.body, return_inverse=True)[1]      # contact -> foot index
    n_feet = int(foot.max()) + 1
    na = model.nv - 6
    tau = np.empty(na)
    forces = np.empty((len(pts), 3))
    qdd_des = np.zeros(model.nv)
    err_num = err_den = 0.0
    pos_err = []
    fallbacks = regularized = 0
    complementarity = 0.0
    w = 2 * np.pi * freq
    for i in range(n):
        t = i * DT
        s = np.sin(w * t) ** 2          # starts at rest: ref - stand = amp sin^2
        q_ref = stand + amp * wave * s
        v_ref = amp * wave * w * np.sin(2 * w * t)
        a_ref = amp * wave * 2 * w * w * np.cos(2 * w * t)
        q, v = sim.q, sim.v
        qdd_des[6:] = a_ref + kp * (q_ref - q[7:]) + kd * (v_ref - v[6:])
        ws.solve_into(q, v, qdd_des, tau, forces)
        fallbacks += int(ws._core.fallback)
        regularized += int(ws._core.regularization > 0.0)
        complementarity = max(complementarity, ws._core.complementarity)
        sim.step(q[7:] + tau / KP_SERVO)
        # per foot (the sum over its points: how a box foot's load spreads over
        # its corners is indeterminate, and the simulator's PGS picks one split)
        f_id = np.bincount(foot, forces[:, 2], n_feet)
        f_sim = np.bincount(foot, sim.contact_forces[:, 2], n_feet)
        err_num += np.abs(f_id - f_sim).sum()
        err_den += np.abs(f_sim).sum()
        pos_err.append(np.abs(sim.q[7:] - q_ref).mean())
    return {"force_err_pct": 100.0 * err_num / err_den, "pos_err_rad": float(np.mean(pos_err)),
            "pos_err_max_rad": float(np.max(pos_err)), "fallbacks": fallbacks, "ticks": n,
            "regularized": regularized, "complementarity": complementarity,
            "base_height": float(sim.q[2])}
