"""Contact models: compliant force laws and plane detection.

Python entry points over the nogil kernels of ``core_cy/contact/_kernels.pyx``
(shapes and dtypes checked here).  ``core_cy/contact/reference.py`` holds the
slow NumPy references they are tested against.

The rigid-contact LCP solvers are in :mod:`core_cy.contact.lcp`.

Sign conventions: the gap of a point above a plane is ``n^T (p - P)`` [m],
negative when penetrating; ``depth = -gap``.  A contact frame is a (3, 3)
rotation whose columns are (t1, t2, n) in world axes.  Rigid-contact
unknowns are ordered per contact as (t1, t2, n).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from servoloop.core_cy.contact import _kernels as _k

__all__ = [
    "ContactLaw",
    "damping_ramp",
    "normal_force",
    "friction_coefficient",
    "friction_force",
    "contact_force",
    "plane_frame",
    "sphere_plane",
    "point_plane",
    "box_plane",
]

CONES = {"per_axis": 0, "elliptic": 1}


@dataclass(frozen=True)
class ContactLaw:
    """Compliant contact parameters (seed 002, Table I lost: values are ours).

    Defaults suit an XM430-sized 2.5 kg quadruped on 15 mm sphere feet: about
    0.5 mm of static penetration per foot, damping that stops touchdown
    bounce, and a stick band of 5 mm/s (the simulator's linearly implicit
    Euler step keeps the steep friction slope stable at dt = 1 ms).

    Attributes
    ----------
    stiffness : float
        Hertz K [N / m**exponent].
    exponent : float
        Hertz exponent e (1.5 for a sphere).
    damping_max : float
        c_max [N s / m], reached at depth ``ramp_width``.
    ramp_width : float
        Smoothstep ramp distance w [m]; damping is 0 at touchdown.
    mu_static, mu_dynamic : float
        Static and dynamic friction coefficients.
    v_static, v_dynamic : float
        Slip speeds [m/s] at which mu reaches mu_static, then settles at
        mu_dynamic (v_dynamic > v_static).
    cone : str
        "per_axis" (seed 002's printed law, square limit) or "elliptic".
    cone_scale_x, cone_scale_y : float
        Semi-axis scales of the elliptic cone (1, 1 = circular).
    clamp_normal : bool
        Never pull (f_n >= 0).
    tangent_stiffness, tangent_damping : float
        k_t [N/m], c_t [N s/m].  0 (default): friction is the stick-slip law above.
        k_t > 0 (the simulator only): friction is a spring-damper anchored where the
        contact point touched down, capped at mu_static f_n by sliding the anchor; with
        mu_static = inf it never slips.  Integrated linearly implicitly in the spring.
    """

    stiffness: float = 2.0e5
    exponent: float = 1.5
    damping_max: float = 150.0
    ramp_width: float = 1.0e-3
    mu_static: float = 0.9
    mu_dynamic: float = 0.8
    v_static: float = 0.005
    v_dynamic: float = 0.01
    cone: str = "elliptic"
    cone_scale_x: float = 1.0
    cone_scale_y: float = 1.0
    clamp_normal: bool = True
    tangent_stiffness: float = 0.0
    tangent_damping: float = 0.0

    def __post_init__(self):
        if self.cone not in CONES:
            raise ValueError(f"ContactLaw.cone: {self.cone!r}; choose one of {', '.join(CONES)}")
        if not self.v_dynamic > self.v_static > 0.0:
            raise ValueError(
                f"ContactLaw: need v_dynamic > v_static > 0, got {self.v_dynamic}, {self.v_static}"
            )
        if self.stiffness < 0 or self.damping_max < 0 or self.ramp_width < 0:
            raise ValueError("ContactLaw: stiffness, damping_max and ramp_width must be >= 0")
        if not (self.tangent_stiffness >= 0.0 and self.tangent_damping >= 0.0):
            raise ValueError(f"ContactLaw: tangent_stiffness and tangent_damping must be >= 0, got "
                             f"{self.tangent_stiffness}, {self.tangent_damping}")
        if self.tangent_stiffness == 0.0 and not (math.isfinite(self.mu_static)
                                                  and math.isfinite(self.mu_dynamic)):
            raise ValueError("ContactLaw: an infinite mu needs the anchored tangential spring "
                             "(tangent_stiffness > 0); the stick-slip law needs a finite mu")

    def as_kernel_dict(self) -> dict:
        """The dict form the compiled kernels take (cone and clamp as ints)."""
        d = asdict(self)
        d["cone"] = CONES[self.cone]
        d["clamp_normal"] = int(self.clamp_normal)
        return d


def _vec(x, name: str, shape=None) -> np.ndarray:
    a = np.ascontiguousarray(x, dtype=np.float64)
    if shape is not None and a.shape != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {a.shape}")
    return a


def damping_ramp(law: ContactLaw, depth) -> np.ndarray:
    """Damping coefficient c(depth) = c_max S(depth / w) [N s/m]; depth (n,) [m]."""
    d = _vec(np.atleast_1d(depth), "depth").ravel()
    out = np.empty_like(d)
    _k.damping_ramp_np(law.as_kernel_dict(), d, out)
    return out


def normal_force(law: ContactLaw, depth, depth_rate) -> np.ndarray:
    """Normal force [N], depth (n,) [m] (>0 in contact), depth_rate (n,) [m/s]."""
    d = _vec(np.atleast_1d(depth), "depth").ravel()
    r = _vec(np.broadcast_to(depth_rate, d.shape), "depth_rate").ravel()
    out = np.empty_like(d)
    _k.normal_force_np(law.as_kernel_dict(), d, r, out)
    return out


def friction_coefficient(law: ContactLaw, slip) -> np.ndarray:
    """Signed stick-slip coefficient mu(v) (odd, C1); slip (n,) [m/s]."""
    v = _vec(np.atleast_1d(slip), "slip").ravel()
    out = np.empty_like(v)
    _k.friction_coefficient_np(law.as_kernel_dict(), v, out)
    return out


def friction_force(law: ContactLaw, slip, fn) -> np.ndarray:
    """Tangential force (n, 2) [N] opposing slip (n, 2) [m/s] under normal force fn (n,) [N]."""
    s = _vec(np.atleast_2d(slip), "slip")
    if s.ndim != 2 or s.shape[1] != 2:
        raise ValueError(f"slip: expected shape (n, 2), got {s.shape}")
    f = _vec(np.broadcast_to(fn, (s.shape[0],)), "fn")
    out = np.empty_like(s)
    _k.friction_force_np(law.as_kernel_dict(), s, f, out)
    return out


def contact_force(law: ContactLaw, depth: float, v_contact, R_contact) -> np.ndarray:
    """World force (3,) [N] on a body at one contact.

    depth [m] (>0 in contact), v_contact (3,) world velocity of the contact
    point [m/s], R_contact (3, 3) contact frame (columns t1, t2, n).
    """
    if law.tangent_stiffness > 0.0:
        raise ValueError("contact_force: law.tangent_stiffness > 0 (the anchored tangential spring) "
                         "needs each contact's anchor, which the compiled Simulator keeps")
    out = np.empty(3)
    _k.contact_force_np(
        law.as_kernel_dict(), float(depth), _vec(v_contact, "v_contact", (3,)),
        _vec(R_contact, "R_contact", (3, 3)), out,
    )
    return out


def plane_frame(normal) -> np.ndarray:
    """Contact frame (3, 3) for a plane of unit normal ``normal`` (3,)."""
    n = _vec(normal, "normal", (3,))
    n = n / np.linalg.norm(n)
    out = np.empty((3, 3))
    _k.plane_frame_np(np.ascontiguousarray(n), out)
    return out


def point_plane(p, plane_point=(0.0, 0.0, 0.0), normal=(0.0, 0.0, 1.0)) -> float:
    """Signed gap [m] of point p (3,) above the plane."""
    n = _vec(normal, "normal", (3,))
    n = n / np.linalg.norm(n)
    return float(n @ (_vec(p, "p", (3,)) - _vec(plane_point, "plane_point", (3,))))


def sphere_plane(center, radius: float, plane_point=(0.0, 0.0, 0.0), normal=(0.0, 0.0, 1.0)):
    """Contact of a sphere with a plane.

    Returns
    -------
    point : (3,) the sphere's lowest point along -n [m]
    gap : float, signed distance [m] (negative when penetrating)
    frame : (3, 3) contact frame
    """
    n = _vec(normal, "normal", (3,))
    n = n / np.linalg.norm(n)
    c = _vec(center, "center", (3,))
    gap = float(n @ (c - _vec(plane_point, "plane_point", (3,)))) - float(radius)
    return c - radius * n, gap, plane_frame(n)


def box_plane(center, rotation_box_to_world, half_extents, plane_point=(0.0, 0.0, 0.0),
              normal=(0.0, 0.0, 1.0)):
    """The 8 box corners (8, 3) [m] and their signed gaps (8,) [m] to the plane."""
    n = _vec(normal, "normal", (3,))
    n = np.ascontiguousarray(n / np.linalg.norm(n))
    pts = np.empty((8, 3))
    gaps = np.empty(8)
    _k.box_plane_np(
        _vec(center, "center", (3,)), _vec(rotation_box_to_world, "rotation_box_to_world", (3, 3)),
        _vec(half_extents, "half_extents", (3,)), _vec(plane_point, "plane_point", (3,)), n,
        pts, gaps,
    )
    return pts, gaps
