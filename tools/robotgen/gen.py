"""Generator for servoloop's built-in robot URDFs (kept outside the repo: robots/ holds no code).

Every link's inertial is a composite of primitives (servo boxes with datasheet masses,
aluminium/PLA/steel/rubber boxes, tubes, cylinders, spheres with mass = density * volume),
combined about the link's centre of mass with the parallel-axis theorem. The comment above
each <inertial> lists the parts, so a reader can redo the sum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

RHO = {"aluminium": 2700.0, "PLA": 1240.0, "steel": 7850.0, "rubber": 1100.0}

# ROBOTIS e-Manual specification tables (emanual.robotis.com/docs/en/dxl/...).
# dims are W x H x D [m]; the output shaft is taken along D.
SERVOS = {
    "XM430-W350": dict(mass=0.082, dims=(0.0285, 0.0465, 0.034), effort=4.1, rpm=46.0,
                       at="12.0 V"),
    "XL430-W250": dict(mass=0.0572, dims=(0.0285, 0.0465, 0.034), effort=1.5, rpm=61.0,
                       at="12.0 V"),
    "XL330-M288": dict(mass=0.018, dims=(0.020, 0.034, 0.026), effort=0.52, rpm=103.0,
                       at="5.0 V"),
    "AX-18A": dict(mass=0.0559, dims=(0.032, 0.050, 0.040), effort=1.8, rpm=97.0,
                   at="12 V"),
}


def rpm_to_rad_s(rpm: float) -> float:
    return rpm * 2.0 * math.pi / 60.0


@dataclass
class Part:
    desc: str
    mass: float
    center: np.ndarray
    inertia: np.ndarray  # about own centre, link axes
    shape: str  # box | cylinder | sphere
    size: tuple  # box: (x,y,z); cylinder: (radius, length, axis); sphere: (radius,)


def _box_I(m, sx, sy, sz):
    return np.diag([m * (sy**2 + sz**2) / 12, m * (sx**2 + sz**2) / 12, m * (sx**2 + sy**2) / 12])


def fmt_mm(v):
    return "x".join(f"{1000 * x:g}" for x in v)


def fmt_xyz(v):
    return " ".join(f"{x:.6g}" if abs(x) > 1e-12 else "0" for x in v)


def box(desc, material, size, center, mass=None):
    sx, sy, sz = size
    if mass is None:
        mass = RHO[material] * sx * sy * sz
        src = f"{material} {RHO[material]:g} kg/m3, solid box {fmt_mm(size)} mm -> {1000 * mass:.1f} g"
    else:
        src = f"{material}, box {fmt_mm(size)} mm, {1000 * mass:.1f} g"
    return Part(f"{desc}: {src}", mass, np.array(center, float), _box_I(mass, sx, sy, sz),
                "box", tuple(size))


def tube(desc, material, outer, wall, length, axis, center):
    """Square tube (outer x outer, wall thickness), axis along 'x'|'y'|'z'."""
    inner = outer - 2 * wall
    rho = RHO[material]
    mo, mi = rho * outer * outer * length, rho * inner * inner * length

    def dims(a):
        d = [a, a, a]
        d["xyz".index(axis)] = length
        return d

    I = _box_I(mo, *dims(outer)) - _box_I(mi, *dims(inner))
    m = mo - mi
    size = dims(outer)
    return Part(f"{desc}: {material} {rho:g} kg/m3, square tube {1000 * outer:g}x{1000 * outer:g} mm "
                f"wall {1000 * wall:g} mm, length {1000 * length:g} mm along {axis} -> {1000 * m:.1f} g "
                "(inertia = outer box - inner box)", m, np.array(center, float), I, "box", tuple(size))


def cylinder(desc, material, radius, length, axis, center, mass=None):
    if mass is None:
        mass = RHO[material] * math.pi * radius**2 * length
        src = (f"{material} {RHO[material]:g} kg/m3, solid cylinder r {1000 * radius:g} mm "
               f"length {1000 * length:g} mm along {axis} -> {1000 * mass:.1f} g")
    else:
        src = (f"{material}, solid cylinder r {1000 * radius:g} mm length {1000 * length:g} mm "
               f"along {axis}, {1000 * mass:.1f} g")
    ia = mass * radius**2 / 2
    ip = mass * (3 * radius**2 + length**2) / 12
    d = [ip, ip, ip]
    d["xyz".index(axis)] = ia
    return Part(f"{desc}: {src}", mass, np.array(center, float), np.diag(d), "cylinder",
                (radius, length, axis))


def sphere(desc, material, radius, center):
    mass = RHO[material] * 4 / 3 * math.pi * radius**3
    return Part(f"{desc}: {material} {RHO[material]:g} kg/m3, solid sphere r {1000 * radius:g} mm "
                f"-> {1000 * mass:.1f} g", mass, np.array(center, float),
                np.eye(3) * 0.4 * mass * radius**2, "sphere", (radius,))


def servo(model, shaft_axis, center, long_axis):
    """Servo case as a uniform box with the datasheet mass; D along the shaft, H along long_axis."""
    s = SERVOS[model]
    w, h, d = s["dims"]
    size = [0.0, 0.0, 0.0]
    size["xyz".index(shaft_axis)] = d
    size["xyz".index(long_axis)] = h
    rest = ({"x", "y", "z"} - {shaft_axis, long_axis}).pop()
    size["xyz".index(rest)] = w
    m = s["mass"]
    return Part(f"{model} servo: {1000 * m:g} g (ROBOTIS e-Manual), uniform box W{1000 * w:g} x "
                f"H{1000 * h:g} x D{1000 * d:g} mm", m, np.array(center, float),
                _box_I(m, *size), "box", tuple(size))


def composite(parts):
    m = sum(p.mass for p in parts)
    c = sum(p.mass * p.center for p in parts) / m
    I = np.zeros((3, 3))
    for p in parts:
        d = p.center - c
        I += p.inertia + p.mass * (d @ d * np.eye(3) - np.outer(d, d))
    return m, c, I


# ---------------------------------------------------------------- URDF writer
class Urdf:
    def __init__(self, name, header):
        self.name = name
        self.out = ['<?xml version="1.0"?>', header, f'<robot name="{name}">']
        self.mass = 0.0

    def link(self, name, parts, collision=None, note=None):
        m, c, I = composite(parts)
        self.mass += m
        ev = np.linalg.eigvalsh(I)
        assert ev.min() > 0 and ev[0] + ev[1] >= ev[2], (name, ev)
        o = self.out
        o.append(f'  <link name="{name}">')
        lines = [f"    inertial of {name}: {len(parts)} part(s), total {1000 * m:.1f} g"]
        if note:
            lines.append(f"    {note}")
        for p in parts:
            lines.append(f"      - {p.desc}, centred at ({fmt_xyz(p.center)}) m")
        lines.append("    Each part as a uniform solid (box I = m(b^2+c^2)/12, cylinder I_axis = m r^2/2,"
                     " I_perp = m(3r^2+l^2)/12, sphere I = 2/5 m r^2),")
        lines.append("    moved to the link centre of mass by the parallel-axis theorem.")
        o.append("    <!--\n" + "\n".join(lines) + "\n    -->")
        o.append("    <inertial>")
        o.append(f'      <origin xyz="{fmt_xyz(c)}" rpy="0 0 0"/>')
        o.append(f'      <mass value="{m:.6g}"/>')
        o.append(f'      <inertia ixx="{I[0, 0]:.6e}" ixy="{I[0, 1]:.6e}" ixz="{I[0, 2]:.6e}" '
                 f'iyy="{I[1, 1]:.6e}" iyz="{I[1, 2]:.6e}" izz="{I[2, 2]:.6e}"/>')
        o.append("    </inertial>")
        for p in parts:
            o.append("    <visual>")
            o.append(f'      <origin xyz="{fmt_xyz(p.center)}" rpy="{_rpy(p)}"/>')
            o.append(f"      <geometry>{_geom(p)}</geometry>")
            o.append("    </visual>")
        for kind, size, center in collision or []:
            o.append("    <collision>")
            o.append(f'      <origin xyz="{fmt_xyz(center)}" rpy="0 0 0"/>')
            if kind == "sphere":
                o.append(f'      <geometry><sphere radius="{size:g}"/></geometry>')
            else:
                o.append(f'      <geometry><box size="{fmt_xyz(size)}"/></geometry>')
            o.append("    </collision>")
        o.append("  </link>")

    def revolute(self, name, parent, child, xyz, axis, lower, upper, model):
        s = SERVOS[model]
        vel = rpm_to_rad_s(s["rpm"])
        self.out.append(
            f"  <!-- {name}: {model}; effort = stall torque {s['effort']:g} N m, velocity = no-load "
            f"speed {s['rpm']:g} rev/min = {vel:.4f} rad/s (ROBOTIS e-Manual, at {s['at']}) -->")
        self.out.append(f'  <joint name="{name}" type="revolute">')
        self.out.append(f'    <parent link="{parent}"/>')
        self.out.append(f'    <child link="{child}"/>')
        self.out.append(f'    <origin xyz="{fmt_xyz(xyz)}" rpy="0 0 0"/>')
        self.out.append(f'    <axis xyz="{fmt_xyz(axis)}"/>')
        self.out.append(f'    <limit lower="{lower:g}" upper="{upper:g}" effort="{s["effort"]:g}" '
                        f'velocity="{vel:.4f}"/>')
        self.out.append("  </joint>")

    def fixed(self, name, parent, child, xyz, comment=None):
        if comment:
            self.out.append(f"  <!-- {comment} -->")
        self.out.append(f'  <joint name="{name}" type="fixed">')
        self.out.append(f'    <parent link="{parent}"/>')
        self.out.append(f'    <child link="{child}"/>')
        self.out.append(f'    <origin xyz="{fmt_xyz(xyz)}" rpy="0 0 0"/>')
        self.out.append("  </joint>")

    def comment(self, text):
        self.out.append(f"  <!-- {text} -->")

    def text(self):
        return "\n".join(self.out + ["</robot>", ""])


def _rpy(p):
    if p.shape == "cylinder":
        axis = p.size[2]
        return {"x": "0 1.5707963 0", "y": "1.5707963 0 0", "z": "0 0 0"}[axis]
    return "0 0 0"


def _geom(p):
    if p.shape == "box":
        return f'<box size="{fmt_xyz(p.size)}"/>'
    if p.shape == "cylinder":
        return f'<cylinder radius="{p.size[0]:g}" length="{p.size[1]:g}"/>'
    return f'<sphere radius="{p.size[0]:g}"/>'
