"""The planar five-link biped of seed 004 (Chen & Posa), symbolic in casadi.

Mass layout (digest section 4, the authors' URDF): each thigh and shank is a
2.5 kg point mass at its midpoint (length 0.5 m), the torso a 10 kg mass
0.3 m above the hip with pitch inertia 0.5 kg m^2; 20 kg in all.  **Inertia
choice**: the authors' code (zero leg-link inertia), not the paper's "non-zero
inertia" wording, so our costs compare with their published code.

Coordinates.  The floating model has ``q7 = [x, z, pitch, hip_st, hip_sw,
knee_st, knee_sw]`` (the authors' order with L = stance).  The trajectory
optimiser uses the *pinned* model, ``q = [pitch, hip_st, hip_sw, knee_st,
knee_sw]`` (5), with the stance foot fixed at the origin: all angles, so a
leg swap is a permutation of ``q`` and the hip position is a function of it.
All rotations are about +y (foot = hip - 0.5 (sin a, cos a) per link).
"""

from __future__ import annotations

import casadi as ca
import numpy as np

__all__ = ["G", "M_LEG", "M_TORSO", "L_LINK", "L_TORSO", "I_TORSO", "TOTAL_MASS", "KNEE_LIMITS",
           "HIP_LIMITS", "U_MAX", "SWAP", "FiveLink", "five_link", "urdf_text"]

G = 9.81                  #: gravity [m/s^2]
M_LEG, M_TORSO = 2.5, 10.0  #: link masses [kg]
L_LINK, L_TORSO = 0.5, 0.3  #: thigh/shank length, hip-to-torso-mass [m]
I_TORSO = 0.5             #: torso pitch inertia [kg m^2]
TOTAL_MASS = M_TORSO + 4 * M_LEG
KNEE_LIMITS = (np.deg2rad(5.0), np.deg2rad(90.0))   #: [rad], the authors' code
HIP_LIMITS = (-np.pi / 2, np.pi / 2)                 #: [rad]
U_MAX = 100.0             #: joint torque bound [N m] (digest placeholder; the paper gives none)
#: index permutation of the pinned q that swaps stance and swing legs
SWAP = np.array([0, 2, 1, 4, 3])


def _points(hip, pitch, h1, h2, k1, k2):
    """Point masses and feet of one configuration, as casadi 2-vectors."""
    def seg(a):
        return ca.vertcat(ca.sin(a), ca.cos(a))
    a1, a2 = pitch + h1, pitch + h2
    knee1, knee2 = hip - L_LINK * seg(a1), hip - L_LINK * seg(a2)
    foot1, foot2 = knee1 - L_LINK * seg(a1 + k1), knee2 - L_LINK * seg(a2 + k2)
    masses = [
        (M_TORSO, hip + L_TORSO * seg(pitch)),
        (M_LEG, hip - 0.5 * L_LINK * seg(a1)), (M_LEG, knee1 - 0.5 * L_LINK * seg(a1 + k1)),
        (M_LEG, hip - 0.5 * L_LINK * seg(a2)), (M_LEG, knee2 - 0.5 * L_LINK * seg(a2 + k2)),
    ]
    return masses, foot1, foot2


def _lagrangian_terms(q, v, masses):
    """Mass matrix (n, n) and bias h = C v + g (n,) of point masses plus the torso inertia."""
    n = q.shape[0]
    M = ca.SX.zeros(n, n)
    V = 0
    for m, p in masses:
        J = ca.jacobian(p, q)
        M += m * (J.T @ J)
        V += m * G * p[1]
    e = ca.SX.zeros(n)
    e[n - 5] = 1.0                                 # pitch is the first angle in both models
    M += I_TORSO * (e @ e.T)
    h = ca.jacobian(M @ v, q) @ v - 0.5 * ca.gradient(v.T @ M @ v, q) + ca.gradient(V, q)
    return M, h, V


class FiveLink:
    """casadi Functions of the five-link biped (build once with :func:`five_link`).

    Pinned model (q, v: (5,)): ``M(q)`` (5, 5), ``h(q, v)`` (5,), ``B`` (5, 4)
    (joint torques on [hip_st, hip_sw, knee_st, knee_sw]), ``hip(q)``,
    ``com(q)``, ``swing_foot(q)`` (2,) relative to the stance foot [m], their
    velocities, ``com_acc(q, v, a)`` [m/s^2], ``v7(q, v)`` (7,) the floating
    velocity, ``impact(q, v) -> (v_plus (5,), impulse (2,))`` with the legs
    relabelled, ``momentum(q, v)`` angular momentum about the stance foot.
    Floating model (q7, v7: (7,)): ``M7``, ``h7``, ``energy7``, ``feet7(q7) -> (4,)``,
    ``J7_stance`` (2, 7), ``Jdotv7_stance`` (2,), ``J7_swing``, ``momentum7_swing`` (about
    the swing foot), ``impact7(q, v) -> (v7_plus, impulse)`` before relabelling.
    """

    def __init__(self) -> None:
        q, v, a = ca.SX.sym("q", 5), ca.SX.sym("v", 5), ca.SX.sym("a", 5)
        pitch, h1, h2, k1, k2 = (q[i] for i in range(5))
        # hip from the pinned stance foot at the origin
        s1 = pitch + h1
        hip = L_LINK * ca.vertcat(ca.sin(s1) + ca.sin(s1 + k1), ca.cos(s1) + ca.cos(s1 + k1))
        masses, _, foot2 = _points(hip, pitch, h1, h2, k1, k2)
        M, h, V = _lagrangian_terms(q, v, masses)
        com = sum(m * p for m, p in masses) / TOTAL_MASS
        Jcom = ca.jacobian(com, q)
        com_vel = Jcom @ v
        com_acc = Jcom @ a + ca.jacobian(com_vel, q) @ v
        self.B = np.vstack([np.zeros((1, 4)), np.eye(4)])
        self.M = ca.Function("M", [q], [M])
        self.h = ca.Function("h", [q, v], [h])
        self.energy = ca.Function("energy", [q, v], [0.5 * v.T @ M @ v + V])
        self.hip = ca.Function("hip", [q], [hip])
        self.com = ca.Function("com", [q], [com])
        self.com_vel = ca.Function("com_vel", [q, v], [com_vel])
        self.com_acc = ca.Function("com_acc", [q, v, a], [com_acc])
        self.swing_foot = ca.Function("swing_foot", [q], [foot2])
        self.swing_foot_vel = ca.Function("swing_foot_vel", [q, v], [ca.jacobian(foot2, q) @ v])
        hip_vel = ca.jacobian(hip, q) @ v
        self.v7 = ca.Function("v7", [q, v], [ca.vertcat(hip_vel, v)])
        # angular momentum about the stance foot (y axis, x-z plane: L = z*px - x*pz sign as r x p)
        Lmom = I_TORSO * v[0]
        for m, p in masses:
            pv = ca.jacobian(p, q) @ v
            Lmom += m * (p[1] * pv[0] - p[0] * pv[1])
        self.momentum = ca.Function("momentum", [q, v], [Lmom])
        self._floating()
        self._impact(q, v)

    def _floating(self) -> None:
        q7, v7 = ca.SX.sym("q7", 7), ca.SX.sym("v7", 7)
        masses, foot1, foot2 = _points(q7[0:2], q7[2], q7[3], q7[4], q7[5], q7[6])
        M7, h7, V7 = _lagrangian_terms(q7, v7, masses)
        self.M7 = ca.Function("M7", [q7], [M7])
        self.energy7 = ca.Function("energy7", [q7, v7], [0.5 * v7.T @ M7 @ v7 + V7])
        J1 = ca.jacobian(foot1, q7)
        self.J7_stance = ca.Function("J7_stance", [q7], [J1])
        self.Jdotv7_stance = ca.Function("Jdotv7_stance", [q7, v7], [ca.jacobian(J1 @ v7, q7) @ v7])
        self.h7 = ca.Function("h7", [q7, v7], [h7])
        self.feet7 = ca.Function("feet7", [q7], [ca.vertcat(foot1, foot2)])
        self.J7_swing = ca.Function("J7_swing", [q7], [ca.jacobian(foot2, q7)])
        Lmom = I_TORSO * v7[2]
        for m, p in masses:
            pv = ca.jacobian(p, q7) @ v7
            r = p - foot2                                # about the impact point
            Lmom += m * (r[1] * pv[0] - r[0] * pv[1])
        self.momentum7_swing = ca.Function("momentum7_swing", [q7, v7], [Lmom])

    def _impact(self, q, v) -> None:
        """Perfectly inelastic touchdown of the swing foot, then the leg relabelling."""
        q7 = ca.vertcat(self.hip(q), q)
        M7, J = self.M7(q7), self.J7_swing(q7)
        K = ca.blockcat([[M7, -J.T], [J, ca.SX.zeros(2, 2)]])
        rhs = ca.vertcat(M7 @ self.v7(q, v), ca.SX.zeros(2))
        sol = ca.solve(K, rhs)
        v7p, impulse = sol[:7], sol[7:]
        self.impact7 = ca.Function("impact7", [q, v], [v7p, impulse])
        self.impact = ca.Function("impact", [q, v], [v7p[2:][list(SWAP)], impulse])


_MODEL: list[FiveLink] = []


def five_link() -> FiveLink:
    """The (cached) five-link model: building it takes ~0.1 s of symbolic work."""
    if not _MODEL:
        _MODEL.append(FiveLink())
    return _MODEL[0]


def urdf_text() -> str:
    """A URDF of the floating five-link robot (x, z prismatic, pitch revolute), for core_cy.

    Joint names: ``base_x``, ``base_z``, ``pitch``, ``hip_L``, ``knee_L``, ``hip_R``, ``knee_R``.
    Point masses carry a zero inertia (the digest's mass layout); the torso has I_yy = 0.5.
    """
    def link(name, mass=0.0, z=0.0, iyy=0.0):
        return (f'<link name="{name}"><inertial><origin xyz="0 0 {z}"/><mass value="{mass}"/>'
                f'<inertia ixx="{iyy}" ixy="0" ixz="0" iyy="{iyy}" iyz="0" izz="{iyy}"/>'
                f"</inertial></link>")

    def joint(name, kind, parent, child, axis, z=0.0):
        return (f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
                f'<origin xyz="0 0 {z}"/><axis xyz="{axis}"/>'
                f'<limit lower="-10" upper="10" effort="100" velocity="100"/></joint>')

    parts = ['<robot name="five_link">', link("world"), link("slider_x"), link("slider_z"),
             link("torso", M_TORSO, L_TORSO, I_TORSO),
             joint("base_x", "prismatic", "world", "slider_x", "1 0 0"),
             joint("base_z", "prismatic", "slider_x", "slider_z", "0 0 1"),
             joint("pitch", "revolute", "slider_z", "torso", "0 1 0")]
    for side in "LR":
        parts += [link(f"thigh_{side}", M_LEG, -L_LINK / 2), link(f"shank_{side}", M_LEG, -L_LINK / 2),
                  joint(f"hip_{side}", "revolute", "torso", f"thigh_{side}", "0 1 0"),
                  joint(f"knee_{side}", "revolute", f"thigh_{side}", f"shank_{side}", "0 1 0",
                        -L_LINK)]
    return "\n".join([*parts, "</robot>"])
