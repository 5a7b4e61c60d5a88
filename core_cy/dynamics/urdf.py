"""URDF -> kinematic tree arrays, the input of :class:`core_cy.Model`.

Parsed with :mod:`xml.etree` only.  Supported joints: ``revolute``,
``continuous``, ``prismatic`` and ``fixed`` (merged into the parent body:
mass, centre of mass and inertia combined exactly), plus a free-flyer root
when ``floating_base=True``.

The body order equals Pinocchio's ``buildModelFromUrdf``: a depth-first walk
from the root link where the children of a link are visited in the order of
their joint *names* (urdfdom keeps joints in a ``std::map``), and bodies
reached through fixed joints are walked in place.

Deviation from Pinocchio, on purpose: a ``continuous`` joint is a plain
revolute joint with nq = 1 (Pinocchio uses nq = 2, [cos, sin]).  Servo
encoders report an angle, and keeping nq == number of joint angles keeps
every array of the control loop simple.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from servoloop.core_cy.errors import (
    MimicJointError,
    MissingInertialError,
    TreeStructureError,
    UnsupportedJointError,
    URDFSyntaxError,
    URDFValueError,
)

__all__ = ["TreeDescription", "parse_urdf", "rpy_to_matrix", "JOINT_TYPE_CODES"]

# Same codes as core_cy/dynamics/_dynamics.pxd (JOINT_*).
JOINT_TYPE_CODES = {"revolute": 0, "prismatic": 1, "freeflyer": 2}
_MOVING = {"revolute": "revolute", "continuous": "revolute", "prismatic": "prismatic"}
_UNSUPPORTED = {"planar", "floating"}


@dataclass
class TreeDescription:
    """Kinematic tree with fixed joints merged, ready for the compiled model.

    Arrays have one row per moving body, in Pinocchio's joint order.
    """

    source: str
    floating_base: bool
    joint_names: list[str]
    body_names: list[str]
    jtype: np.ndarray          # (nb,) int32, JOINT_TYPE_CODES
    parent: np.ndarray         # (nb,) int32, -1 = world
    axis: np.ndarray           # (nb, 3) unit axis in the body frame
    R_tree: np.ndarray         # (nb, 3, 3) body frame at q=0 in the parent frame
    p_tree: np.ndarray         # (nb, 3) [m]
    mass: np.ndarray           # (nb,) [kg]
    com: np.ndarray            # (nb, 3) [m], body frame
    I_com: np.ndarray          # (nb, 3, 3) [kg m^2] about the COM, body axes
    lower: np.ndarray          # (nq,) position limits [rad or m]
    upper: np.ndarray          # (nq,)
    frames: dict = field(default_factory=dict)  # link name -> (body, R (3,3), p (3,))


def rpy_to_matrix(rpy) -> np.ndarray:
    """URDF roll-pitch-yaw [rad] -> rotation matrix Rz(y) Ry(p) Rx(r), (3, 3)."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = (math.cos(r), math.sin(r), math.cos(p), math.sin(p),
                              math.cos(y), math.sin(y))
    return np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ])


class _Ctx:
    """Where we are in the file, for error messages."""

    def __init__(self, path: str):
        self.path = path

    def numbers(self, elem, attr, n, what, default=None):
        text = elem.get(attr) if elem is not None else None
        if text is None:
            if default is not None:
                return np.array(default, dtype=float)
            raise URDFValueError(f"{what}: missing attribute '{attr}' in {self.path}")
        try:
            vals = [float(t) for t in text.split()]
        except ValueError:
            raise URDFValueError(
                f"{what}: '{attr}=\"{text}\"' is not a list of numbers in {self.path}"
            ) from None
        if len(vals) != n or not all(math.isfinite(x) for x in vals):
            raise URDFValueError(
                f"{what}: '{attr}=\"{text}\"' must be {n} finite number(s) in {self.path}"
            )
        return np.array(vals, dtype=float)

    def origin(self, elem, what):
        org = elem.find("origin") if elem is not None else None
        xyz = self.numbers(org, "xyz", 3, what + " <origin>", default=(0.0, 0.0, 0.0))
        rpy = self.numbers(org, "rpy", 3, what + " <origin>", default=(0.0, 0.0, 0.0))
        return rpy_to_matrix(rpy), xyz


@dataclass
class _Link:
    name: str
    mass: float = 0.0
    com: np.ndarray = field(default_factory=lambda: np.zeros(3))
    I_com: np.ndarray = field(default_factory=lambda: np.zeros((3, 3)))
    has_inertial: bool = False


@dataclass
class _Joint:
    name: str
    kind: str
    parent: str
    child: str
    R: np.ndarray
    p: np.ndarray
    axis: np.ndarray
    lower: float
    upper: float


def _parse_link(ctx: _Ctx, el) -> _Link:
    name = el.get("name")
    link = _Link(name)
    inertial = el.find("inertial")
    if inertial is None:
        return link
    what = f"link '{name}'"
    R, c = ctx.origin(inertial, what + " <inertial>")
    mass_el = inertial.find("mass")
    if mass_el is None:
        raise URDFValueError(f"{what}: <inertial> without <mass> in {ctx.path}")
    m = float(ctx.numbers(mass_el, "value", 1, what + " <mass>")[0])
    if m < 0:
        raise URDFValueError(f"{what}: negative mass {m} in {ctx.path}")
    iel = inertial.find("inertia")
    if iel is None:
        raise URDFValueError(f"{what}: <inertial> without <inertia> in {ctx.path}")
    v = {k: float(ctx.numbers(iel, k, 1, what + " <inertia>")[0])
         for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
    Iin = np.array([[v["ixx"], v["ixy"], v["ixz"]],
                    [v["ixy"], v["iyy"], v["iyz"]],
                    [v["ixz"], v["iyz"], v["izz"]]])
    link.mass, link.com, link.I_com, link.has_inertial = m, c, R @ Iin @ R.T, True
    return link


def _parse_joint(ctx: _Ctx, el, mimic: str) -> _Joint:
    name = el.get("name")
    kind = el.get("type")
    what = f"joint '{name}'"
    if name is None:
        raise URDFValueError(f"a <joint> without a name in {ctx.path}")
    if kind in _UNSUPPORTED:
        raise UnsupportedJointError(
            f"{what}: type '{kind}' is not supported (revolute, continuous, prismatic, "
            f"fixed; a free-flyer only as the root via floating_base=True) in {ctx.path}"
        )
    if kind not in _MOVING and kind != "fixed":
        raise UnsupportedJointError(f"{what}: unknown joint type '{kind}' in {ctx.path}")
    if el.find("mimic") is not None and kind != "fixed" and mimic != "independent":
        raise MimicJointError(
            f"{what}: <mimic> joints are not supported (pass mimic='independent' to treat "
            f"it as an independent joint, as Pinocchio does by default) in {ctx.path}"
        )
    par, chi = el.find("parent"), el.find("child")
    if par is None or chi is None or par.get("link") is None or chi.get("link") is None:
        raise URDFValueError(f"{what}: missing <parent link=...> or <child link=...> in {ctx.path}")
    R, p = ctx.origin(el, what)
    axis = ctx.numbers(el.find("axis"), "xyz", 3, what + " <axis>", default=(1.0, 0.0, 0.0))
    lower, upper = -math.inf, math.inf
    if kind in ("revolute", "prismatic"):
        n = float(np.linalg.norm(axis))
        if n < 1e-12:
            raise URDFValueError(f"{what}: zero <axis> in {ctx.path}")
        axis = axis / n
        lim = el.find("limit")
        if lim is None:
            # required by the URDF spec, and urdfdom (Pinocchio) rejects the file too
            raise URDFValueError(f"{what}: a {kind} joint needs a <limit> element in {ctx.path}")
        lower = float(ctx.numbers(lim, "lower", 1, what + " <limit>", default=(0.0,))[0])
        upper = float(ctx.numbers(lim, "upper", 1, what + " <limit>", default=(0.0,))[0])
    elif kind == "continuous":
        n = float(np.linalg.norm(axis))
        if n < 1e-12:
            raise URDFValueError(f"{what}: zero <axis> in {ctx.path}")
        axis = axis / n
    return _Joint(name, kind, par.get("link"), chi.get("link"), R, p, axis, lower, upper)


def _read_tree(path: str, mimic: str):
    ctx = _Ctx(path)
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise URDFSyntaxError(f"not well-formed XML: {exc} in {path}") from None
    except OSError as exc:
        raise URDFSyntaxError(f"cannot read {path}: {exc}") from None
    if root.tag != "robot":
        raise URDFSyntaxError(f"root element is <{root.tag}>, expected <robot> in {path}")
    links: dict[str, _Link] = {}
    for el in root.findall("link"):
        name = el.get("name")
        if name is None:
            raise URDFValueError(f"a <link> without a name in {path}")
        if name in links:
            raise TreeStructureError(f"link '{name}' defined twice in {path}")
        links[name] = _parse_link(ctx, el)
    joints: dict[str, _Joint] = {}
    for el in root.findall("joint"):
        j = _parse_joint(ctx, el, mimic)
        if j.name in joints:
            raise TreeStructureError(f"joint '{j.name}' defined twice in {path}")
        joints[j.name] = j
    return ctx, links, joints


def _check_tree(ctx, links, joints):
    parent_of: dict[str, str] = {}
    children: dict[str, list[_Joint]] = {name: [] for name in links}
    for j in joints.values():
        for ln in (j.parent, j.child):
            if ln not in links:
                raise TreeStructureError(
                    f"joint '{j.name}': link '{ln}' is not defined in {ctx.path}")
        if j.child in parent_of:
            raise TreeStructureError(
                f"link '{j.child}' has two parent joints ('{parent_of[j.child]}' and "
                f"'{j.name}') in {ctx.path}")
        parent_of[j.child] = j.name
        children[j.parent].append(j)
    roots = [n for n in links if n not in parent_of]
    if len(roots) != 1:
        raise TreeStructureError(
            f"expected exactly one root link, found {roots or 'none (a cycle)'} in {ctx.path}")
    # urdfdom stores joints in a std::map: children are visited by joint name.
    for lst in children.values():
        lst.sort(key=lambda j: j.name)
    return roots[0], children


class _Body:
    def __init__(self, name, joint, kind, parent, R, p, axis, lower, upper):
        self.name, self.joint, self.kind, self.parent = name, joint, kind, parent
        self.R, self.p, self.axis, self.lower, self.upper = R, p, axis, lower, upper
        self.mass, self.mc, self.I_origin = 0.0, np.zeros(3), np.zeros((3, 3))
        self.has_inertial = False

    def add(self, link: _Link, R, p):
        """Merge a link rigidly attached at (R, p) in this body's frame (exact)."""
        if not link.has_inertial:
            return
        c = R @ link.com + p
        cx = np.array([[0, -c[2], c[1]], [c[2], 0, -c[0]], [-c[1], c[0], 0]])
        # Parallel axis: inertia about the body origin, summed exactly.
        self.I_origin = self.I_origin + R @ link.I_com @ R.T - link.mass * cx @ cx
        self.mass += link.mass
        self.mc = self.mc + link.mass * c
        self.has_inertial = True


def parse_urdf(path, floating_base: bool = False, mimic: str = "error") -> TreeDescription:
    """Read a URDF file into a :class:`TreeDescription`.

    Parameters
    ----------
    path : str or Path
        URDF file.
    floating_base : bool
        Attach the root link to the world by a free-flyer (nq 7, nv 6).
    mimic : {"error", "independent"}
        What to do with ``<mimic>`` joints: raise (default), or treat them as
        independent joints as Pinocchio's ``buildModelFromUrdf`` does.

    Raises
    ------
    core_cy.errors.ModelError
        Subclasses name the joint or link and the file.
    """
    if mimic not in ("error", "independent"):
        raise ValueError(f"mimic must be 'error' or 'independent', got {mimic!r}")
    path = str(Path(path))
    ctx, links, joints = _read_tree(path, mimic)
    root, children = _check_tree(ctx, links, joints)
    bodies: list[_Body] = []
    frames: dict[str, tuple] = {}
    eye = np.eye(3)
    if floating_base:
        b = _Body(root, "root_joint", "freeflyer", -1, eye, np.zeros(3), np.zeros(3),
                  -math.inf, math.inf)
        b.add(links[root], eye, np.zeros(3))
        bodies.append(b)
        frames[root] = (0, eye, np.zeros(3))
        start = 0
    else:
        frames[root] = (-1, eye, np.zeros(3))
        start = -1

    def walk(link_name, body, R, p):
        # (R, p): placement of link_name's frame in the frame of `body`.
        for j in children[link_name]:
            Rj, pj = R @ j.R, R @ j.p + p
            if j.kind == "fixed":
                if body >= 0:
                    bodies[body].add(links[j.child], Rj, pj)
                frames[j.child] = (body, Rj, pj)
                walk(j.child, body, Rj, pj)
                continue
            b = _Body(j.child, j.name, _MOVING[j.kind], body, Rj, pj, j.axis, j.lower, j.upper)
            b.add(links[j.child], eye, np.zeros(3))
            bodies.append(b)
            idx = len(bodies) - 1
            frames[j.child] = (idx, eye, np.zeros(3))
            walk(j.child, idx, eye, np.zeros(3))

    walk(root, start, eye, np.zeros(3))
    for b in bodies:
        if not b.has_inertial and b.kind != "freeflyer":
            raise MissingInertialError(
                f"joint '{b.joint}' moves link '{b.name}', which has no <inertial> "
                f"(nor any link fixed to it) in {path}")
        if not b.has_inertial:
            raise MissingInertialError(
                f"root link '{b.name}' of the free-flyer has no <inertial> in {path}")
    return _finish(path, floating_base, bodies, frames)


def _finish(path, floating_base, bodies, frames) -> TreeDescription:
    nb = len(bodies)
    mass = np.array([b.mass for b in bodies], dtype=float)
    com = np.zeros((nb, 3))
    I_com = np.zeros((nb, 3, 3))
    for i, b in enumerate(bodies):
        if b.mass > 0:
            c = b.mc / b.mass
            cx = np.array([[0, -c[2], c[1]], [c[2], 0, -c[0]], [-c[1], c[0], 0]])
            com[i] = c
            I_com[i] = b.I_origin + b.mass * cx @ cx
        else:
            I_com[i] = b.I_origin
    lower, upper = [], []
    for b in bodies:
        if b.kind == "freeflyer":
            lower += [-math.inf] * 7
            upper += [math.inf] * 7
        else:
            lower.append(b.lower)
            upper.append(b.upper)
    return TreeDescription(
        source=path,
        floating_base=floating_base,
        joint_names=[b.joint for b in bodies],
        body_names=[b.name for b in bodies],
        jtype=np.array([JOINT_TYPE_CODES[b.kind] for b in bodies], dtype=np.int32),
        parent=np.array([b.parent for b in bodies], dtype=np.int32),
        axis=np.array([b.axis for b in bodies], dtype=float).reshape(nb, 3),
        R_tree=np.array([b.R for b in bodies], dtype=float).reshape(nb, 3, 3),
        p_tree=np.array([b.p for b in bodies], dtype=float).reshape(nb, 3),
        mass=mass,
        com=com,
        I_com=I_com,
        lower=np.array(lower, dtype=float),
        upper=np.array(upper, dtype=float),
        frames=frames,
    )
