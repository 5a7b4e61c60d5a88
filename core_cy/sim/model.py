"""What the simulator needs besides the rigid-body model: contact geometry,
ground plane, the servos' models and joint settings, solver settings.

Contact geometry is read from the URDF's ``<collision>`` elements: a sphere
becomes one contact candidate (body, centre in the body frame, radius), a
box its 8 corners (radius 0), and a point is a sphere of radius 0.  Bodies
are numbered as in :func:`core_cy.dynamics.urdf.parse_urdf` (fixed links merged into
their moving parent), which is also core_cy.Model's and Pinocchio's order.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from servoloop.core_cy.actuator import ServoModel, default_servo_model
from servoloop.core_cy.actuator.defaults import XM430_W350_FIGURES
from servoloop.core_cy.dynamics.urdf import parse_urdf, rpy_to_matrix

__all__ = [
    "ContactPoints",
    "JointSettings",
    "SIM_XM430_GAINS",
    "simulator_servo_model",
    "derived_armature",
    "RigidSettings",
    "Ground",
    "contact_points_from_urdf",
    "contact_points_from_spec",
    "shape_points",
    "SHAPES",
    "box_corners",
]


# The quadruped's XM430-W350 in the simulator: the datasheet motor line (stall
# torque, no-load speed at 12 V) with kd, kc and armature from the ToddlerBot
# XM430 identification (FIELD-NOTES d2) and kp our choice (the smallest round
# value with which the built-in quadruped's trot walks forward instead of
# sagging and scuffing).  That identification has no torque-off damping of its
# own (its frictionloss is the whole torque-off resistance), so none here.
SIM_XM430_GAINS = {"kp_nm_per_rad": 20.0, "kd_nm_s_per_rad": 0.15, "coulomb_nm": 0.134,
                   "armature_kg_m2": 0.0012, "torque_off_damping_nm_s_per_rad": 0.0}


#: The XM430-W350's gear ratio (e-Manual specifications: 353.5 : 1).
XM430_W350_GEAR_RATIO = 353.5
#: The rotor inertia [kg m^2] the identified XM430 armature implies at the motor shaft
#: (rotor and first gear stage): armature / N^2 = 0.0012 / 353.5^2 = 9.6e-9.
XM430_ROTOR_INERTIA_KG_M2 = SIM_XM430_GAINS["armature_kg_m2"] / XM430_W350_GEAR_RATIO ** 2
#: Models whose armature the simulator derives from the XM430's (:func:`derived_armature`);
#: every other model but the XM430-W350 has none (ROBOTIS publishes no rotor inertia).
DERIVED_ARMATURE_MODELS = ("XM540-W270",)


def derived_armature(stall_torque_nm: float, gear_ratio: float) -> float:
    """Reflected rotor inertia [kg m^2] of an X-series servo without an identification.

    armature = J_rotor N^2, N the gear ratio (e-Manual).  No ROBOTIS page gives a rotor
    inertia, so J_rotor is the XM430's (:data:`XM430_ROTOR_INERTIA_KG_M2`, from its
    identified armature) scaled by the motor's stall torque at the rotor, stall / N: the
    same coreless technology in a longer rotor has inertia and torque in proportion.  For
    the XM540-W270 (10.6 N m at 12 V, 272.5 : 1) the rotor torque is 3.35x the XM430-W350's
    (4.1 N m, 353.5 : 1), J_rotor 3.2e-8 kg m^2, the armature 0.0024 kg m^2 (2.0x the
    XM430's).  A cross-check by size: the XM540's case is ~1.25x the XM430's in each
    dimension, and a geometrically similar rotor's inertia grows as size^5: 3.1x.
    """
    if not (stall_torque_nm > 0 and gear_ratio > 0):
        raise ValueError(f"derived_armature: stall torque {stall_torque_nm} N m and gear ratio "
                         f"{gear_ratio} must be > 0")
    xm430_rotor_torque = XM430_W350_FIGURES.stall_torque_nm / XM430_W350_GEAR_RATIO
    rotor = XM430_ROTOR_INERTIA_KG_M2 * (stall_torque_nm / gear_ratio) / xm430_rotor_torque
    return rotor * gear_ratio ** 2


def simulator_servo_model(datasheet=None, model: str = "XM430-W350") -> ServoModel:
    """The servo model the simulator gives a joint driven by a ``model`` servo.

    The model's defaults from its ``datasheet`` figures
    (:func:`core_cy.actuator.default_servo_model`), with the identified XM430
    gains above for the XM430-W350 and the armature of :func:`derived_armature`
    for the :data:`DERIVED_ARMATURE_MODELS` (their datasheet's ``gear_ratio``).
    Without figures: the XM430-W350
    (:data:`core_cy.actuator.defaults.XM430_W350_FIGURES`).
    """
    if datasheet is None:
        if model != "XM430-W350":
            raise ValueError(f"simulator_servo_model: give the datasheet figures of {model}")
        datasheet = XM430_W350_FIGURES
    servo = default_servo_model(datasheet, model)
    if model == "XM430-W350":
        servo = servo.with_overrides(SIM_XM430_GAINS)
    elif model in DERIVED_ARMATURE_MODELS:
        servo = servo.with_overrides({"armature_kg_m2": derived_armature(
            datasheet.stall_torque_nm, datasheet.gear_ratio)})
    return servo


@dataclass(frozen=True)
class JointSettings:
    """How the simulator applies the servo law at its joints, and the joint stops.

    The servo's Coulomb friction ``-coulomb sgn(qd)`` has sgn regularised
    linearly over ``|qd| < sign_band`` [rad/s] so explicit integrators do
    not chatter.  Past the model's position limits a joint meets a
    compliant mechanical stop (the bracket and horn of a real servo), torque
    on or off: ``tau_stop = -stop_stiffness (q - limit) - stop_damping qd``,
    one-sided (it pushes out of the stop, never pulls in); stop_stiffness = 0
    disables it.  Without it a robot that lies down with torque off folds
    its knees through the limits, which no real robot can.

    Attributes: sign_band [rad/s], stop_stiffness [N m/rad], stop_damping [N m s/rad].
    """

    sign_band: float = 0.05
    # A leg of the built-in quadruped (~0.2 N m of gravity) rests 4 mrad
    # into a stop; with the armature the stop rings at ~25 Hz, damping ratio ~0.5.
    stop_stiffness: float = 50.0
    stop_damping: float = 0.3


#: rigid-contact LCP solvers (SimCore's lcp_solver codes)
RIGID_SOLVERS = {"pgs": 0, "lemke": 1}


@dataclass(frozen=True)
class RigidSettings:
    """Velocity-level rigid contact (Anitescu-Potra time stepping).

    mu: friction coefficient (``inf``: no tangential bound, sticking while
    loaded; an unloaded contact still carries no friction); baumgarte:
    fraction of the penetration removed per step (0..1); margin [m]:
    candidate contacts with gap below it enter the LCP (w_n = J_n v + gap/dt
    keeps them from closing faster than the gap); solver: "pgs" (projected
    Gauss-Seidel, warm-started, max_iter sweeps to tol; cone "per_axis":
    |f_t1|, |f_t2| <= mu f_n, or "elliptic") or "lemke" (seed 003's simulator,
    Moby: the Stewart-Trinkle / Anitescu-Potra LCP with the 4-direction
    pyramid |f_t1| + |f_t2| <= mu f_n solved exactly by Lemke's pivoting with
    the regularisation ladder; mu above 1e3, inf included, enters as 1e3;
    cone is then unused).
    """

    mu: float = 0.8
    baumgarte: float = 0.2
    margin: float = 0.005
    max_iter: int = 50
    tol: float = 1e-6
    cone: str = "per_axis"
    solver: str = "pgs"

    def __post_init__(self):
        if self.solver not in RIGID_SOLVERS:
            raise ValueError(f"RigidSettings.solver: {self.solver!r}; choose one of "
                             f"{', '.join(RIGID_SOLVERS)}")
        if not self.mu >= 0.0:
            raise ValueError(f"RigidSettings.mu must be >= 0 (inf allowed), got {self.mu}")


@dataclass(frozen=True)
class Ground:
    """A plane through ``point`` [m] with unit ``normal`` (any orientation)."""

    point: tuple = (0.0, 0.0, 0.0)
    normal: tuple = (0.0, 0.0, 1.0)

    @staticmethod
    def slope(angle_rad: float, axis: str = "x") -> Ground:
        """A plane through the origin tilted by ``angle_rad`` about world y (rising toward -x)."""
        if axis != "x":
            raise ValueError(f"Ground.slope: axis {axis!r} not supported, use 'x'")
        return Ground((0.0, 0.0, 0.0), (np.sin(angle_rad), 0.0, np.cos(angle_rad)))

    def unit_normal(self) -> np.ndarray:
        n = np.asarray(self.normal, dtype=float)
        return n / np.linalg.norm(n)


@dataclass
class ContactPoints:
    """Contact candidates: body index (k,), centre in the body frame (k, 3) [m], radius (k,) [m]."""

    body: np.ndarray
    position: np.ndarray
    radius: np.ndarray
    names: list = field(default_factory=list)

    def __len__(self) -> int:
        return int(self.body.shape[0])

    @staticmethod
    def concat(parts: list[ContactPoints]) -> ContactPoints:
        if not parts:
            return ContactPoints(np.zeros(0, np.int32), np.zeros((0, 3)), np.zeros(0))
        return ContactPoints(
            np.concatenate([p.body for p in parts]).astype(np.int32),
            np.concatenate([p.position for p in parts]),
            np.concatenate([p.radius for p in parts]),
            sum((p.names for p in parts), []),
        )


def _origin(el):
    o = el.find("origin")
    if o is None:
        return np.eye(3), np.zeros(3)
    xyz = np.array([float(s) for s in o.get("xyz", "0 0 0").split()])
    rpy = np.array([float(s) for s in o.get("rpy", "0 0 0").split()])
    return rpy_to_matrix(rpy), xyz


SHAPES = {"box": 3, "sphere": 1, "cylinder": 2}   # shape -> number of size values
_RIM = 8                                           # points on each rim of a cylinder


def shape_points(body: int, shape: str, size, rotation, center, name: str) -> ContactPoints:
    """Contact candidates of one primitive on ``body``, placed by ``rotation`` (3, 3) and ``center`` (3,).

    ``size``: box the full edge lengths [m]; sphere [radius]; cylinder
    [radius, length] along its z axis (URDF's convention).  A sphere is one
    point with its radius, a box its 8 corners, a cylinder 8 points on the
    rim of each end cap (radius 0): a wheel or a round foot rests on its rim
    as on a real floor.
    """
    if shape not in SHAPES:
        raise ValueError(f"{name}: shape must be one of {sorted(SHAPES)}, not {shape!r}")
    size = [float(v) for v in size]
    if len(size) != SHAPES[shape] or min(size) < 0:
        raise ValueError(f"{name}: a {shape} needs {SHAPES[shape]} non-negative size value(s), got {size}")
    center = np.asarray(center, dtype=float)
    if shape == "sphere":
        return ContactPoints(np.array([body], np.int32), center[None].copy(), np.array([size[0]]), [name])
    if shape == "box":
        local = box_corners(body, size, name=name)
    else:
        r, length = size
        ang = np.arange(_RIM) * (2.0 * np.pi / _RIM)
        rim = np.stack([r * np.cos(ang), r * np.sin(ang), np.zeros(_RIM)], axis=1)
        pos = np.concatenate([rim + [0.0, 0.0, -0.5 * length], rim + [0.0, 0.0, 0.5 * length]])
        local = ContactPoints(np.full(2 * _RIM, body, np.int32), pos, np.zeros(2 * _RIM),
                              [f"{name}:rim{k}" for k in range(2 * _RIM)])
    local.position = center + local.position @ np.asarray(rotation, dtype=float).T
    return local


def contact_points_from_urdf(path, floating_base: bool = True, links=None,
                             boxes: bool = True) -> ContactPoints:
    """Contact candidates from the URDF's collision spheres, boxes and cylinders.

    Parameters
    ----------
    path : str or Path
        URDF file.
    links : iterable of str, optional
        Links whose collision geometry is used; default: every link with a
        ``<collision>`` (the built-in robots collide with their feet only:
        spheres on the quadruped, boxes on the humanoid).  Meshes are skipped
        (declare primitives for them in the config's ``simulation.contacts``).
    boxes : bool
        Add the 8 corners of collision boxes and the rims of cylinders (else spheres only).

    Raises
    ------
    ValueError naming the file when no contact geometry is found.
    """
    path = str(path)
    tree = parse_urdf(path, floating_base=floating_base)
    root = ET.parse(path).getroot()
    parts = []
    for link in root.findall("link"):
        name = link.get("name")
        if links is not None and name not in links:
            continue
        body, R_link, p_link = tree.frames[name]
        for col in link.findall("collision"):
            R_c, p_c = _origin(col)
            geom = col.find("geometry")
            if geom is None:
                continue
            sph, box, cyl = geom.find("sphere"), geom.find("box"), geom.find("cylinder")
            centre = R_link @ p_c + p_link
            if sph is not None:
                parts.append(shape_points(body, "sphere", [sph.get("radius")], R_link @ R_c, centre, name))
            elif box is not None and boxes:
                size = box.get("size").split()
                parts.append(shape_points(body, "box", size, R_link @ R_c, centre, name))
            elif cyl is not None and boxes:
                size = [cyl.get("radius"), cyl.get("length")]
                parts.append(shape_points(body, "cylinder", size, R_link @ R_c, centre, name))
    pts = ContactPoints.concat(parts)
    if len(pts) == 0:
        raise ValueError(f"{Path(path).name}: no collision sphere, box or cylinder on "
                         f"{'any link' if links is None else 'links ' + str(list(links))}; declare "
                         "contacts in the config (simulation.contacts)")
    return pts


def contact_points_from_spec(path, contacts, floating_base: bool = True) -> ContactPoints:
    """Contact candidates declared by hand: ``contacts`` items with ``link``, ``shape``, ``size``, ``origin``.

    ``origin`` (3,) [m] is the primitive's centre in the link's frame (axes
    aligned with the link's).  Raises ValueError naming the item for an
    unknown link or a bad shape.
    """
    tree = parse_urdf(str(path), floating_base=floating_base)
    parts = []
    for k, c in enumerate(contacts):
        where = f"simulation.contacts[{k}]"
        if c.link not in tree.frames:
            known = ", ".join(sorted(tree.frames))
            raise ValueError(f"{where}: link {c.link!r} is not in {Path(path).name} (links: {known})")
        body, R_link, p_link = tree.frames[c.link]
        centre = R_link @ np.asarray(c.origin, dtype=float) + p_link
        pts = shape_points(body, c.shape, c.size, R_link, centre, f"{where} {c.link}")
        # named "LINK:where..." as the URDF's are "LINK[:corner k]": the controllers and the
        # estimator find a link's points by the name's first field (a "where LINK" prefix hid
        # them: wbc.feet and the estimator's feet found no link with geometry)
        pts.names = [f"{c.link}:{where}" + nm[len(f"{where} {c.link}"):] for nm in pts.names]
        parts.append(pts)
    return ContactPoints.concat(parts)


def box_corners(body: int, size, center=(0.0, 0.0, 0.0), name: str = "box") -> ContactPoints:
    """The 8 corners of an axis-aligned box of ``size`` (3,) [m] on ``body``, as points."""
    half = 0.5 * np.asarray(size, dtype=float)
    signs = np.array([[sx, sy, sz] for sz in (-1, 1) for sy in (-1, 1) for sx in (-1, 1)])
    return ContactPoints(np.full(8, body, dtype=np.int32), np.asarray(center, float) + signs * half,
                         np.zeros(8), [f"{name}:corner{k}" for k in range(8)])
