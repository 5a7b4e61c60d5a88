"""MuJoCo twin of a URDF robot, and the seed-002 comparison (ours vs MuJoCo).

The MJCF is generated from the same numbers our simulator uses
(:func:`core_cy.dynamics.urdf.parse_urdf`: fixed links merged, full inertia about the
COM), so both load one robot: free joint on the trunk, hinge joints with the
servo armature and Coulomb friction (``frictionloss`` = kc), a ``position``
actuator per joint with kp, kv = kd and the stall torque as force range,
collision spheres at the contact points only, condim 3 and an elliptic cone.
The contact time constant is solref = (0.005, 1) rather than MuJoCo's
default 0.02: seed 002 set solref/solimp to approach its stiff Hertz contact,
and with 0.02 the trunk walks 10 % faster than in every converged run of ours
(the soft friction constraint lets the stance feet give).

``mujoco`` is a test/bench dependency; this module imports it lazily.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from servoloop.core_cy.actuator import ServoModel
from servoloop.core_cy.dynamics.urdf import parse_urdf
from servoloop.core_cy.sim.model import ContactPoints, Ground

__all__ = ["mjcf_from_urdf", "MujocoTwin", "Trajectory", "compare_trajectories",
           "euler_zyx", "PAPER_FIGURES"]

# Seed 002's MAEs, paper simulator vs MuJoCo (x, y, z mm; three Euler angles deg; LF Fz N).
PAPER_FIGURES = {
    "trunk_pos_mae_mm_x": 63.0, "trunk_pos_mae_mm_y": 17.0, "trunk_pos_mae_mm_z": 4.6,
    "euler_mae_deg_roll": 1.5, "euler_mae_deg_pitch": 1.3, "euler_mae_deg_yaw": 2.7,
    "lf_fz_mae_n": 5.65,
}


def _quat_wxyz(R) -> str:
    from scipy.spatial.transform import Rotation

    x, y, z, w = Rotation.from_matrix(R).as_quat()
    return f"{w:.17g} {x:.17g} {y:.17g} {z:.17g}"


def _v(a) -> str:
    return " ".join(f"{float(x):.17g}" for x in a)


def mjcf_from_urdf(urdf, points: ContactPoints, servo: ServoModel, ground: Ground | None = None,
                   dt: float = 1e-3, mu: float = 0.8, integrator: str = "implicitfast",
                   solref=(0.005, 1.0), solimp=(0.9, 0.95, 0.001, 0.5, 2.0),
                   gravity: float = 9.81) -> str:
    """MJCF text of the floating-base robot of ``urdf`` on a plane."""
    t = parse_urdf(str(urdf), floating_base=True)
    ground = ground or Ground()
    n = ground.unit_normal()
    geoms = {b: [] for b in range(len(t.body_names))}
    for i in range(len(points)):
        geoms[int(points.body[i])].append(i)
    children = {b: [] for b in range(-1, len(t.body_names))}
    for b, p in enumerate(t.parent):
        children[int(p)].append(b)
    sr = f'solref="{_v(solref)}" solimp="{_v(solimp)}"'

    def body(b, indent):
        pad = " " * indent
        inertia = t.I_com[b]
        lines = [f'{pad}<body name="{t.body_names[b]}" pos="{_v(t.p_tree[b])}" quat="{_quat_wxyz(t.R_tree[b])}">']
        lines.append(
            f'{pad}  <inertial pos="{_v(t.com[b])}" mass="{t.mass[b]:.17g}" '
            f'fullinertia="{_v([inertia[0, 0], inertia[1, 1], inertia[2, 2], inertia[0, 1], inertia[0, 2], inertia[1, 2]])}"/>')
        if t.jtype[b] == 2:
            lines.append(f'{pad}  <freejoint name="{t.joint_names[b]}"/>')
        else:
            lines.append(
                f'{pad}  <joint name="{t.joint_names[b]}" type="hinge" axis="{_v(t.axis[b])}" '
                f'armature="{servo.armature_kg_m2:.17g}" frictionloss="{servo.coulomb_nm:.17g}"/>')
        for i in geoms[b]:
            lines.append(
                f'{pad}  <geom name="{points.names[i] if points.names else f"c{i}"}" type="sphere" '
                f'size="{max(points.radius[i], 1e-4):.17g}" pos="{_v(points.position[i])}" '
                f'friction="{mu:.17g} 0.005 0.0001" condim="3" {sr}/>')
        for c in children[b]:
            lines += body(c, indent + 2)
        lines.append(f"{pad}</body>")
        return lines

    # MuJoCo's position actuator has no motor line: the servo's back-EMF limit is left out
    tau_max = servo.stall_torque_at_supply_nm
    acts = [f'    <position joint="{j}" kp="{servo.kp_nm_per_rad:.17g}" kv="{servo.kd_nm_s_per_rad:.17g}" '
            f'forcelimited="true" forcerange="{-tau_max:.17g} {tau_max:.17g}"/>'
            for j, jt in zip(t.joint_names, t.jtype, strict=True) if jt != 2]
    xml = [
        '<mujoco model="servoloop_twin">',
        f'  <option timestep="{dt:.17g}" integrator="{integrator}" cone="elliptic" '
        f'gravity="0 0 {-gravity:.17g}"/>',
        '  <worldbody>',
        f'    <geom name="ground" type="plane" size="0 0 1" pos="{_v(ground.point)}" '
        f'zaxis="{_v(n)}" friction="{mu:.17g} 0.005 0.0001" condim="3" {sr}/>',
    ]
    for b in children[-1]:
        xml += body(b, 4)
    xml += ["  </worldbody>", "  <actuator>", *acts, "  </actuator>", "</mujoco>"]
    return "\n".join(xml)


def euler_zyx(R) -> np.ndarray:
    """(roll, pitch, yaw) [rad] of R = Rz(yaw) Ry(pitch) Rx(roll)."""
    return np.array([np.arctan2(R[2, 1], R[2, 2]), -np.arcsin(np.clip(R[2, 0], -1, 1)),
                     np.arctan2(R[1, 0], R[0, 0])])


@dataclass
class Trajectory:
    """Recorded run: t (N,) [s], trunk position (N, 3) [m], ZYX Euler (N, 3) [rad]
    as (roll, pitch, yaw), contact active (N, k) bool and vertical force (N, k) [N]."""

    t: np.ndarray
    position: np.ndarray
    euler: np.ndarray
    active: np.ndarray
    fz: np.ndarray


class MujocoTwin:
    """MuJoCo model of the robot with state conversion to Pinocchio's layout."""

    def __init__(self, urdf, points: ContactPoints, servo: ServoModel, ground=None,
                 dt: float = 1e-3, mu: float = 0.8, **kw):
        import mujoco

        self.mj = mujoco
        self.xml = mjcf_from_urdf(urdf, points, servo, ground, dt, mu, **kw)
        self.model = mujoco.MjModel.from_xml_string(self.xml)
        self.data = mujoco.MjData(self.model)
        names = points.names or [f"c{i}" for i in range(len(points))]
        self.geom_ids = [mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_GEOM, n) for n in names]
        self._f6 = np.zeros(6)

    def set_state(self, q, v):
        """Set from Pinocchio q (nq,) [x y z qx qy qz qw, joints] and v (nv,) (local base twist)."""
        from scipy.spatial.transform import Rotation

        d = self.data
        d.qpos[:3] = q[:3]
        d.qpos[3:7] = [q[6], q[3], q[4], q[5]]
        d.qpos[7:] = q[7:]
        R = Rotation.from_quat(q[3:7]).as_matrix()
        d.qvel[:3] = R @ v[:3]  # MuJoCo free joint: world linear, local angular
        d.qvel[3:6] = v[3:6]
        d.qvel[6:] = v[6:]
        self.mj.mj_forward(self.model, d)

    def contact_forces(self, out_fz, out_active):
        """Vertical world force [N] on each contact geom and its activation (force != 0)."""
        out_fz[:] = 0.0
        out_active[:] = False
        d, m = self.data, self.model
        for c in range(d.ncon):
            con = d.contact[c]
            for k, g in enumerate(self.geom_ids):
                if con.geom1 == g or con.geom2 == g:
                    self.mj.mj_contactForce(m, d, c, self._f6)
                    fw = con.frame.reshape(3, 3).T @ self._f6[:3]
                    sign = 1.0 if con.geom2 == g else -1.0  # force on geom2 along +normal
                    out_fz[k] += sign * fw[2]
                    if self._f6[0] != 0.0:
                        out_active[k] = True

    def run(self, goals, q0, v0=None) -> Trajectory:
        """Step once per row of ``goals`` (N, n) [rad]; record the state after each step."""
        from scipy.spatial.transform import Rotation

        m, d = self.model, self.data
        self.set_state(q0, np.zeros(m.nv) if v0 is None else v0)
        N, k = goals.shape[0], len(self.geom_ids)
        pos, eul = np.empty((N, 3)), np.empty((N, 3))
        act, fz = np.zeros((N, k), bool), np.zeros((N, k))
        for i in range(N):
            d.ctrl[:] = goals[i]
            self.mj.mj_step(m, d)
            pos[i] = d.qpos[:3]
            w, x, y, z = d.qpos[3:7]
            eul[i] = euler_zyx(Rotation.from_quat([x, y, z, w]).as_matrix())
            self.contact_forces(fz[i], act[i])
        return Trajectory((np.arange(N) + 1) * m.opt.timestep, pos, eul, act, fz)


def compare_trajectories(ours: Trajectory, ref: Trajectory, foot: int = 0) -> dict:
    """Seed-002 agreement figures between two runs sampled at the same instants.

    Returns trunk position MAE per axis [mm], Euler MAE [deg] (roll, pitch,
    yaw; yaw unwrapped), the fraction of samples where the ``foot`` contact
    activation differs, the mean |touchdown time difference| [ms] matched
    nearest-neighbour, and the foot's vertical force MAE [N].
    """
    if ours.t.shape != ref.t.shape:
        raise ValueError(f"compare_trajectories: {ours.t.shape} vs {ref.t.shape} samples")
    dp = np.abs(ours.position - ref.position).mean(axis=0) * 1e3
    e1, e2 = np.unwrap(ours.euler, axis=0), np.unwrap(ref.euler, axis=0)
    de = np.degrees(np.abs(e1 - e2).mean(axis=0))
    a, b = ours.active[:, foot], ref.active[:, foot]

    def touchdowns(x, t):
        return t[1:][(~x[:-1]) & x[1:]]

    ta, tb = touchdowns(a, ours.t), touchdowns(b, ref.t)
    td = float(np.mean([np.min(np.abs(tb - x)) for x in ta]) * 1e3) if ta.size and tb.size else float("nan")
    return {
        "trunk_pos_mae_mm_x": float(dp[0]), "trunk_pos_mae_mm_y": float(dp[1]),
        "trunk_pos_mae_mm_z": float(dp[2]),
        "euler_mae_deg_roll": float(de[0]), "euler_mae_deg_pitch": float(de[1]),
        "euler_mae_deg_yaw": float(de[2]),
        "lf_contact_mismatch": float(np.mean(a != b)),
        "lf_touchdown_dt_ms": td,
        "lf_touchdowns_ours": int(ta.size), "lf_touchdowns_ref": int(tb.size),
        "lf_fz_mae_n": float(np.abs(ours.fz[:, foot] - ref.fz[:, foot]).mean()),
    }
