"""Seed 003's manipulator case: an arm holding a box, contact ID in closed loop on MuJoCo.

The paper's arm (7 DoF + 4 one-DoF fingers, Moby) is not public as a model;
this uses Franka's Panda from example-robot-data (7 DoF + 2 prismatic
fingers, 16.8 kg) holding a 0.29 kg box (density 6000 kg/m^3, as the paper)
between two finger pads, two spherical contact points per pad.  The arm
follows a sinusoidal joint trajectory (3 cycles/s, as the paper); the fingers
hold zero velocity and close while their pads do not touch (the contact ID
chooses the squeeze).  Commanded torques are clipped to the Panda's limits.
By default the ID is the paper's own formulation (the NumPy reference);
``compiled=True`` runs the compiled kernels over the same rows.

The truth is MuJoCo (soft contacts, elliptic cones, its own integrator): a
different contact model from the ID's rigid one, so the force prediction
error measures something real.  The ID sees MuJoCo's state each tick (arm
and box), as a controller with a perfect state estimate would.  Controllers:
``lcp_noslip`` (LCP,inf), ``lcp_coulomb`` (LCP,mu), ``qp_mu`` (two-stage
QP with the pyramid), ``qp_inf`` (without), ``pid`` (joint PID with the
arm's gravity compensation, fingers squeezing with a fixed force).

``mujoco`` and ``example-robot-data`` are test/bench dependencies.
"""

from __future__ import annotations

import math
import sysconfig
from pathlib import Path

import numpy as np

from servoloop.core_cy.inverse_dynamics import InfeasibleError
from servoloop.experiments.grasp import (
    Box,
    BoxState,
    Grasp,
    GraspInverseDynamics,
    Pad,
    grasp_problem,
)

__all__ = ["CONTROLLERS", "MUS", "panda_urdf", "panda_grasp", "GraspSim", "run_case", "run"]

CONTROLLERS = ("lcp_noslip", "lcp_coulomb", "qp_mu", "qp_inf", "pid")
MUS = (1.0, math.inf)
MU_INF_MUJOCO = 50.0        # MuJoCo's friction coefficient standing for "inf"
Q0 = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 1.9, 0.785])
PAD_Z = (0.038, 0.052)      # finger-local heights of the two points of a pad [m] (rubber tip 36-54 mm)
PAD_R = 0.002
BOX_HALF = (0.015, 0.02, 0.02)   # hand x (depth), hand y (between the pads), hand z [m]
DENSITY = 6000.0
KP, KD = 400.0, 40.0        # joint error feedback into qdd_des [1/s^2, 1/s]
CLOSE_ACC = 0.5             # finger closing acceleration while not touching [m/s^2]
# reflected rotor inertia: the Panda's URDF has none; a geared arm has some, and a 15 g finger
# on its own would need a far finer step than 1 ms (both the ID and MuJoCo get these)
ARMATURE = np.array([0.1] * 7 + [0.5, 0.5])
# the Panda's joint torque limits (datasheet) and the hand's continuous grasp force [N m | N]
TAU_MAX = np.array([87.0] * 4 + [12.0] * 3 + [70.0, 70.0])
PID_KP, PID_KD, PID_KI = 60.0, 8.0, 20.0   # joint PID [N m/rad, N m s/rad, N m/(rad s)]
SQUEEZE_N = 5.0
SETTLE_S = 0.3               # MuJoCo settles the grasp before the run [s]
QP_SOLVER = "daqp"          # the paper-formulation QP's backend (quiet; a test extra)


def panda_urdf() -> Path:
    """Path of example-robot-data's panda.urdf (a clear error when it is not installed)."""
    for key in ("purelib", "platlib"):
        p = (Path(sysconfig.get_paths()[key]) / "cmeel.prefix/share/example-robot-data/robots"
             / "panda_description/urdf/panda.urdf")
        if p.is_file():
            return p
    raise FileNotFoundError("the manipulator experiment needs example-robot-data's Panda: "
                            "pip install 'servoloop[test]' (example-robot-data)")


def panda_grasp():
    """(Grasp, q0 (9,), BoxState) of the Panda holding the box, pads just touching."""
    from servoloop import core_cy

    model = core_cy.Model.from_urdf(panda_urdf(), floating_base=False, mimic="independent")
    half = np.asarray(BOX_HALF)
    box = Box(mass=DENSITY * float(np.prod(2 * half)), half=tuple(BOX_HALF))
    # each rubber tip's inner face is its finger's local y = 0 plane; the left faces local -y,
    # the right local +y (both fingers share the hand's axes), so the sphere sits just behind it
    pads = tuple(
        [Pad("panda_leftfinger", (0.0, PAD_R, z), PAD_R, (0.0, -1.0, 0.0)) for z in PAD_Z]
        + [Pad("panda_rightfinger", (0.0, -PAD_R, z), PAD_R, (0.0, 1.0, 0.0)) for z in PAD_Z])
    g = Grasp(model, box, pads, armature=ARMATURE)
    q = np.concatenate([Q0, [half[1], half[1]]])        # each pad at the box face
    core_cy.forward_kinematics(model, g.data, q)
    b = model.body_index("panda_leftfinger")
    R = np.array(g.data.rotation_body_to_world[b])
    mid = 0.5 * (np.asarray(g.data.position_body_in_world[b])
                 + np.asarray(g.data.position_body_in_world[model.body_index("panda_rightfinger")]))
    # box axes = the finger frame's axes (box +y toward the right finger = finger -y)
    Rb = R @ np.diag([1.0, -1.0, -1.0])
    centre = mid + R @ np.array([0.0, 0.0, 0.5 * sum(PAD_Z)])
    return g, q, BoxState(centre, Rb)


def _v(a) -> str:
    return " ".join(f"{float(x):.17g}" for x in np.ravel(a))


def _quat(R) -> str:
    from scipy.spatial.transform import Rotation

    x, y, z, w = Rotation.from_matrix(R).as_quat()
    return _v([w, x, y, z])


def mjcf(g: Grasp, box: BoxState, mu: float, dt: float = 1e-3) -> str:
    """MJCF of the arm (from the same parsed URDF), its pad spheres, and the free box."""
    from servoloop.core_cy.dynamics.urdf import parse_urdf

    t = parse_urdf(str(g.model.source), floating_base=False, mimic="independent")
    arm = np.broadcast_to(np.asarray(g.armature, dtype=float), (len(t.body_names),))
    children = {b: [] for b in range(-1, len(t.body_names))}
    for b, p in enumerate(t.parent):
        children[int(p)].append(b)
    fr = f'friction="{mu:.17g} 0.005 0.0001" condim="3" solref="0.004 1" solimp="0.95 0.99 0.001"'

    def body(b, ind):
        pad = " " * ind
        inertia = t.I_com[b]
        out = [f'{pad}<body name="{t.body_names[b]}" pos="{_v(t.p_tree[b])}" quat="{_quat(t.R_tree[b])}">',
               f'{pad}  <inertial pos="{_v(t.com[b])}" mass="{t.mass[b]:.17g}" fullinertia="'
               f'{_v([inertia[0, 0], inertia[1, 1], inertia[2, 2], inertia[0, 1], inertia[0, 2], inertia[1, 2]])}"/>',
               f'{pad}  <joint name="{t.joint_names[b]}" type="{"slide" if t.jtype[b] == 1 else "hinge"}" '
               f'axis="{_v(t.axis[b])}" armature="{arm[b]:.17g}"/>']
        for i, p in enumerate(g.pads):
            if int(g.bodies[i]) == b:
                out.append(f'{pad}  <geom name="pad{i}" type="sphere" size="{p.radius:.17g}" '
                           f'pos="{_v(p.position)}" {fr}/>')
        for c in children[b]:
            out += body(c, ind + 2)
        return out + [f"{pad}</body>"]

    xml = ['<mujoco model="grasp">',
           f'  <option timestep="{dt:.17g}" integrator="implicitfast" cone="elliptic" gravity="0 0 -9.81"/>',
           '  <default><geom contype="1" conaffinity="1"/></default>',
           '  <worldbody>']
    for b in children[-1]:
        xml += body(b, 4)
    xml += [f'    <body name="box" pos="{_v(box.position)}" quat="{_quat(box.rotation)}">',
            '      <freejoint name="box"/>',
            f'      <geom name="box" type="box" size="{_v(g.box.half)}" mass="{g.box.mass:.17g}" {fr}/>',
            '    </body>', '  </worldbody>',
            '  <contact>' + "".join(f'<exclude body1="{a}" body2="{b}"/>' for a, b in
                                    [("panda_leftfinger", "panda_rightfinger")]) + '</contact>',
            '  <actuator>']
    xml += [f'    <motor joint="{j}" gear="1"/>' for j in t.joint_names]
    return "\n".join(xml + ['  </actuator>', '</mujoco>'])


class GraspSim:
    """MuJoCo truth of arm + box: state in the grasp's conventions, torques in, pad forces out."""

    def __init__(self, g: Grasp, q0, box0: BoxState, mu: float, dt: float = 1e-3):
        import mujoco

        self._mj = mujoco
        self.g = g
        self.model = mujoco.MjModel.from_xml_string(mjcf(g, box0, mu, dt))
        self.data = mujoco.MjData(self.model)
        n = g.model.nv
        self.n = n
        self.data.qpos[:n] = q0
        self.pad_geoms = [mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_GEOM, f"pad{i}")
                          for i in range(len(g.pads))]
        self.box_geom = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_GEOM, "box")
        mujoco.mj_forward(self.model, self.data)

    def state(self):
        """(q, v, BoxState) now."""
        from scipy.spatial.transform import Rotation

        d, n = self.data, self.n
        w, x, y, z = d.qpos[n + 3:n + 7]
        R = Rotation.from_quat([x, y, z, w]).as_matrix()
        box = BoxState(d.qpos[n:n + 3].copy(), R, d.qvel[n:n + 3].copy(), R @ d.qvel[n + 3:n + 6])
        return d.qpos[:n].copy(), d.qvel[:n].copy(), box

    def settle(self, seconds: float, squeeze: float = 5.0) -> None:
        """Hold the arm at its start (PD + gravity) with the fingers squeezing [N] for ``seconds``.

        MuJoCo's soft contacts carry force only once they penetrate a little;
        this lets the pads sink in and the box come to rest in the grasp.
        """
        from servoloop.core_cy import Data, nonlinear_effects

        d = Data(self.g.model)
        q0 = self.data.qpos[:self.n].copy()
        for _ in range(int(round(seconds / self.model.opt.timestep))):
            q, v = self.data.qpos[:self.n], self.data.qvel[:self.n]
            tau = 400.0 * (q0 - q) - 40.0 * v + nonlinear_effects(self.g.model, d, q, v)
            tau[7:] = -squeeze
            self.step(tau)

    def step(self, tau) -> None:
        self.data.ctrl[:] = tau
        self._mj.mj_step(self.model, self.data)

    def pad_normal_forces(self) -> np.ndarray:
        """(k,) normal force of the box on every pad [N] after the last step."""
        f = np.zeros(len(self.pad_geoms))
        out = np.zeros(6)
        for i in range(self.data.ncon):
            c = self.data.contact[i]
            pair = {c.geom1, c.geom2}
            if self.box_geom not in pair:
                continue
            for j, gid in enumerate(self.pad_geoms):
                if gid in pair:
                    self._mj.mj_contactForce(self.model, self.data, i, out)
                    f[j] += out[0]
        return f


def _reference(t, amp, freq):
    w = 2 * math.pi * freq
    s = np.zeros(9)
    s[:7] = 1.0
    return (np.concatenate([Q0, [0, 0]]) + amp * math.sin(w * t) * s,
            amp * w * math.cos(w * t) * s, -amp * w * w * math.sin(w * t) * s)


class _Reference:
    """The paper's formulation (NumPy reference, qpsolvers backend) on the grasp's problem."""

    def __init__(self, g, mu, variant, dt):
        self.g, self.mu, self.variant, self.dt = g, mu, variant, dt
        self.gap = np.zeros(len(g.pads))

    def solve(self, q, v, box, qdd):
        from servoloop.core_cy.inverse_dynamics import solve_problem

        p, _ = grasp_problem(self.g, q, v, box, qdd, self.mu, dt=self.dt, baumgarte=0.0)
        self.gap[:] = np.inf
        self.gap[p.index] = p.gap
        return solve_problem(p, self.variant, solver=QP_SOLVER)


def run_case(controller: str, mu: float, seconds: float = 3.0, amp: float = 0.1,
             freq: float = 3.0, dt: float = 1e-3, compiled: bool = False) -> dict:
    """One closed-loop run; the metrics of seed 003's tables plus ``dropped``.

    ``compiled`` runs the compiled kernels (:class:`GraspInverseDynamics`)
    instead of the paper's own formulation (the default; see the module doc).
    """
    from servoloop.core_cy import Data

    g, q0, box0 = panda_grasp()
    mu_sim = MU_INF_MUJOCO if math.isinf(mu) else mu
    sim = GraspSim(g, q0, box0, mu_sim, dt)
    mu_id = math.inf if controller in ("lcp_noslip", "qp_inf") else mu
    variant = {"lcp_noslip": "lcp_noslip", "lcp_coulomb": "lcp_coulomb",
               "qp_mu": "qp", "qp_inf": "qp"}.get(controller)
    if variant == "lcp_coulomb" and math.isinf(mu_id):
        mu_id = MU_INF_MUJOCO            # the Coulomb LCP needs a finite mu
    # the ID asks a penetrating pad not to approach further (Baumgarte 0): pushing MuJoCo's soft
    # penetration out from both sides of a squeezed box is impossible with the fingers held still
    if variant is None:
        gid = None
    elif compiled:
        gid = GraspInverseDynamics(g, mu_id, variant, dt=dt, baumgarte=0.0)
    else:
        gid = _Reference(g, mu_id, variant, dt)
    d_arm = Data(g.model)
    sim.settle(SETTLE_S)
    grip0 = None
    steps = int(round(seconds / dt))
    pos_err = vel_err = dtau = tau_sum = ferr = fsum = 0.0
    tau_prev = None
    failures = fallbacks = 0
    dropped, drop_t = 0, None
    integ = np.zeros(9)
    for i in range(steps):
        t = i * dt
        q, v, box = sim.state()
        qr, vr, ar = _reference(t, amp, freq)
        e, ed = qr - q, vr - v
        if variant is None:        # joint PID + the arm's own gravity; the fingers squeeze 20 N
            tau = _pid(g, d_arm, q, v, e, ed, integ)
            f_pred = None
        else:
            qdd = ar + KP * e + KD * ed
            # fingers hold zero velocity, and close further while their pads do not touch
            for j, rows in ((7, slice(0, 2)), (8, slice(2, 4))):
                touching = i == 0 or np.any(gid.gap[rows] <= 0.0)      # gaps of the last solve
                qdd[j] = -v[j] / dt - (0.0 if touching else CLOSE_ACC)
            try:
                r = gid.solve(q, v, box, qdd)
                fallbacks += int(r.diagnostics.fallback)
                tau = r.tau
                f_pred = np.asarray(r.contact_forces)[:, 2]
            except InfeasibleError:             # counted: the ID had no answer this tick
                failures += 1                   # fall back to the PID for this tick
                tau = _pid(g, d_arm, q, v, e, ed, integ)
                f_pred = None
        tau = np.clip(tau, -TAU_MAX, TAU_MAX)
        sim.step(tau)
        f_sim = sim.pad_normal_forces()
        integ += e * dt
        if f_pred is not None:
            ferr += float(np.abs(f_pred - f_sim).sum())
            fsum += float(f_sim.sum())
        pos_err += float(np.abs(e[:7]).mean())
        vel_err += float(np.abs(ed[:7]).mean())
        tau_sum += float(np.abs(tau[:7]).mean())
        if tau_prev is not None:
            dtau += float(np.abs(tau[:7] - tau_prev[:7]).mean()) / dt
        tau_prev = np.array(tau, dtype=float)
        # dropped: the box has moved more than 1 cm relative to the pads' midpoint
        mid = _pad_mid(g, q)
        if grip0 is None:
            grip0 = box.rotation.T @ (box.position - mid)
        if not dropped and np.linalg.norm(box.rotation.T @ (box.position - mid) - grip0) > 0.01:
            dropped, drop_t = 1, t
    n = float(steps)
    return {"pos_err_rad": pos_err / n, "vel_err_rad_s": vel_err / n, "dtau_mean": dtau / (n - 1),
            "tau_mean": tau_sum / n,
            "force_err_pct": 100.0 * ferr / fsum if fsum > 0 else float("nan"),
            "dropped": dropped, "drop_time_s": drop_t, "id_failures": failures,
            "id_fallbacks": fallbacks}


def _pid(g, d_arm, q, v, e, ed, integ) -> np.ndarray:
    """Joint PID with the arm's own gravity and Coriolis terms; the fingers squeeze ``SQUEEZE_N``."""
    from servoloop.core_cy import nonlinear_effects

    tau = PID_KP * e + PID_KD * ed + PID_KI * integ + nonlinear_effects(g.model, d_arm, q, v)
    tau[7:] = -SQUEEZE_N
    return tau


def _pad_mid(g: Grasp, q):
    from servoloop.core_cy import forward_kinematics

    forward_kinematics(g.model, g.data, q)
    P = np.asarray(g.data.position_body_in_world)
    return 0.5 * (P[g.bodies[0]] + P[g.bodies[-1]])


def run(seconds: float = 3.0, mus=MUS, controllers=CONTROLLERS, progress=None,
        compiled: bool = False) -> dict:
    """The benchmark JSON form: one row per (mu, controller, metric)."""
    rows = []
    units = {"pos_err_rad": "rad", "vel_err_rad_s": "rad/s", "dtau_mean": "N m/s", "tau_mean": "N m",
             "force_err_pct": "%", "dropped": "0/1", "drop_time_s": "s",
             "id_failures": "ticks", "id_fallbacks": "ticks"}
    for mu in mus:
        for c in controllers:
            name = f"mu={'inf' if math.isinf(mu) else f'{mu:g}'} {c}"
            if progress:
                progress(name)
            res = run_case(c, mu, seconds, compiled=compiled)
            for metric, val in res.items():
                ours = None if val is None or not math.isfinite(val) else float(val)
                rows.append({"case": name, "metric": metric, "unit": units[metric], "ours": ours,
                             "anchor_name": None, "anchor": None, "ratio": None})
    return {"benchmark": "manipulator", "seconds": seconds,
            "formulation": "compiled" if compiled else "paper", "rows": rows}
