"""Physical consistency of inertial parameters (Wensing et al. 2018; paper eq. 30-31).

A body's 10 parameters about its origin (m, h = m c, I_O) are those of some
non-negative mass distribution iff its pseudo-inertia matrix::

    J = [[ tr(I_O)/2 * 1 - I_O,  h ],
         [ h^T,                  m ]]        (4, 4), linear in the parameters

is positive semidefinite.  It implies m >= 0, I_C >= 0 and the triangle
inequalities of the principal moments; they are reported separately because
a user reading a report wants to know *which* property failed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from servoloop.calibration.inertial.layout import ParameterLayout, body_from_parameters

__all__ = [
    "pseudo_inertia",
    "BodyConsistency",
    "ConsistencyReport",
    "check_consistency",
    "check_urdf",
]


def pseudo_inertia(p10) -> np.ndarray:
    """4x4 pseudo-inertia of the 10 parameters (Pinocchio order) [kg m^2 / kg m / kg]."""
    m, hx, hy, hz, ixx, ixy, iyy, ixz, iyz, izz = np.asarray(p10, dtype=float)
    L = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    J = np.empty((4, 4))
    J[:3, :3] = 0.5 * np.trace(L) * np.eye(3) - L
    J[:3, 3] = J[3, :3] = (hx, hy, hz)
    J[3, 3] = m
    return J


@dataclass
class BodyConsistency:
    """Checks of one body; every margin is >= 0 when the check holds.

    Attributes
    ----------
    name : str
    mass : float [kg]
    lmi_min_eig : float, smallest eigenvalue of the pseudo-inertia [kg m^2]
    inertia_min_eig : float, smallest principal moment about the COM [kg m^2]
    triangle_margin : float, min over axes of (I_a + I_b - I_c) about the COM [kg m^2]
    """

    name: str
    mass: float
    lmi_min_eig: float
    inertia_min_eig: float
    triangle_margin: float

    def problems(self, eps: float = 0.0) -> list[str]:
        out = []
        if not self.mass > 0:
            out.append(f"body {self.name}: mass {self.mass:.6g} kg is not positive")
        if not self.lmi_min_eig >= eps:
            out.append(f"body {self.name}: pseudo-inertia min eigenvalue "
                       f"{self.lmi_min_eig:.3g} kg m^2 < {eps:.3g}")
        if not self.mass > 0:
            return out  # no centre of mass: the checks below have no meaning
        if not self.inertia_min_eig >= 0:
            out.append(f"body {self.name}: inertia about the COM is not positive semidefinite "
                       f"(min principal moment {self.inertia_min_eig:.3g} kg m^2)")
        if not self.triangle_margin >= 0:
            out.append(f"body {self.name}: principal moments violate the triangle inequality "
                       f"(margin {self.triangle_margin:.3g} kg m^2)")
        return out


@dataclass
class ConsistencyReport:
    """Result of :func:`check_consistency`.

    Attributes
    ----------
    bodies : list of BodyConsistency
    friction_problems : list of str, negative Fc, Fv or Ia (named by joint)
    eps : float, the LMI margin required [kg m^2]
    """

    bodies: list
    friction_problems: list = field(default_factory=list)
    eps: float = 0.0

    @property
    def problems(self) -> list[str]:
        out = [p for b in self.bodies for p in b.problems(self.eps)]
        return out + list(self.friction_problems)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "eps": self.eps,
            "problems": self.problems,
            "bodies": [vars(b).copy() for b in self.bodies],
        }


def _body(name: str, p10) -> BodyConsistency:
    m, _, I_c = body_from_parameters(p10)
    lmi = float(np.linalg.eigvalsh(pseudo_inertia(p10))[0])
    if m > 0:
        moments = np.linalg.eigvalsh(I_c)
        tri = min(moments[0] + moments[1] - moments[2], moments[0] + moments[2] - moments[1],
                  moments[1] + moments[2] - moments[0])
        return BodyConsistency(name, float(m), lmi, float(moments[0]), float(tri))
    return BodyConsistency(name, float(m), lmi, float("nan"), float("nan"))


def check_consistency(theta, layout: ParameterLayout, eps: float = 0.0,
                      friction_tol: float = 0.0) -> ConsistencyReport:
    """Check every body of ``theta`` (and its friction block, when present).

    Parameters
    ----------
    theta : ndarray (n_params,) full layout, or (n_inertial,) inertial block only
    layout : ParameterLayout
    eps : float, required pseudo-inertia margin [kg m^2] (0 = plain PSD)
    friction_tol : float, Fc, Fv, Ia down to -friction_tol count as >= 0
    """
    theta = np.asarray(theta, dtype=float)
    if theta.shape == (layout.n_inertial,):
        theta = layout.join(theta)
    inertial, friction = layout.split(theta)
    bodies = [_body(n, p) for n, p in zip(layout.body_names, inertial, strict=True)]
    fr = []
    for j, row in zip(layout.joint_names, friction, strict=True):
        for name, value in zip(("Fc", "Fv", "Ia"), row[:3], strict=True):
            if value < -friction_tol:
                fr.append(f"joint {j}: {name} = {value:.6g} is negative")
    return ConsistencyReport(bodies, fr, eps)


def check_urdf(urdf_path, eps: float = 0.0) -> ConsistencyReport:
    """:func:`check_consistency` on the inertial parameters a URDF states.

    Massless bodies (no ``<inertial>``) fail the mass check by design: the
    regressor and the SDP need every moving body to carry mass.
    """
    from servoloop.calibration.inertial.regressor import urdf_parameters

    layout, theta, _, _ = urdf_parameters(urdf_path)
    return check_consistency(theta, layout, eps)
