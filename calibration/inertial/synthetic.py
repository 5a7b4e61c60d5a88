"""Simulated identification data with known parameters (for tests and dry runs).

Torques come from the regressor itself (``W theta``), i.e. rigid-body
inverse dynamics plus the friction/armature model, so an identification run
on them has an exact answer to compare with.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from servoloop.calibration.inertial.excitation import FourierTrajectory, random_fourier
from servoloop.calibration.inertial.layout import ParameterLayout

__all__ = ["SimulatedData", "with_friction", "simulate", "planar_2r_urdf"]


@dataclass
class SimulatedData:
    """Samples of a simulated experiment: t (N,) [s]; Q, V, A, tau (N, n); tau_clean (N, n);
    sigma (n,) noise std per joint [N m]."""

    t: np.ndarray
    Q: np.ndarray
    V: np.ndarray
    A: np.ndarray
    tau: np.ndarray
    tau_clean: np.ndarray
    sigma: np.ndarray


def with_friction(theta, layout: ParameterLayout, Fc=0.05, Fv=0.02, Ia=1e-3, beta=0.0) -> np.ndarray:
    """Copy of ``theta`` with every joint's friction block set (scalars or (n_joints,) arrays)."""
    out = np.array(theta, dtype=float)
    n = len(layout.joint_names)
    for name, value in (("Fc", Fc), ("Fv", Fv), ("Ia", Ia), ("beta", beta)):
        vals = np.broadcast_to(np.asarray(value, dtype=float), (n,))
        for j in range(n):
            out[layout.friction_index(j, name)] = vals[j]
    return out


def simulate(model, theta, rng: np.random.Generator, duration_s: float = 20.0,
             rate_hz: float = 100.0, noise: float = 0.0, trajectory: FourierTrajectory | None = None,
             **fourier_kwargs) -> SimulatedData:
    """Sample a Fourier trajectory and its torques ``W theta`` (+ Gaussian noise).

    Parameters
    ----------
    model : RegressorModel (fixed base)
    theta : ndarray (p,), the true parameters
    rng : numpy Generator
    duration_s, rate_hz : float, length [s] and sampling rate [Hz]
    noise : float, noise std as a fraction of each joint's torque RMS
    trajectory : FourierTrajectory or None (default: ``random_fourier(rng, limits, **fourier_kwargs)``)
    """
    if trajectory is None:
        trajectory = random_fourier(rng, model.lower, model.upper, **fourier_kwargs)
    t = np.arange(0.0, duration_s, 1.0 / rate_hz)
    Q, V, A = trajectory(t)
    clean = model.torques(theta, Q, V, A)
    sigma = noise * np.sqrt(np.mean(clean**2, axis=0))
    tau = clean + rng.normal(size=clean.shape) * sigma
    return SimulatedData(t, Q, V, A, tau, clean, sigma)


_PLANAR_2R = """<?xml version="1.0"?>
<robot name="planar_2r">
  <link name="base"><inertial><mass value="1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial></link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/>
    <origin xyz="0 0 0" rpy="0 0 0"/><axis xyz="0 {a} {b}"/><limit lower="-3" upper="3" effort="5" velocity="5"/></joint>
  <link name="l1"><inertial><origin xyz="0.12 0.01 -0.02" rpy="0 0 0"/><mass value="0.4"/>
    <inertia ixx="2e-4" ixy="1e-5" ixz="-2e-5" iyy="3e-3" iyz="1e-5" izz="3.1e-3"/></inertial></link>
  <joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/>
    <origin xyz="0.25 0 0" rpy="0 0 0"/><axis xyz="0 {a} {b}"/><limit lower="-3" upper="3" effort="5" velocity="5"/></joint>
  <link name="l2"><inertial><origin xyz="0.1 -0.01 0.015" rpy="0 0 0"/><mass value="0.25"/>
    <inertia ixx="1e-4" ixy="-1e-5" ixz="1e-5" iyy="1.2e-3" iyz="-2e-5" izz="1.25e-3"/></inertial></link>
</robot>
"""


def planar_2r_urdf(gravity_in_plane: bool = True) -> str:
    """URDF text of a planar 2R arm (links 0.25 m, 0.4 and 0.25 kg), the textbook
    identification example.  Axes along y (gravity -z in the plane of motion) or
    along z (gravity along the axes).  COM offsets and products of inertia on
    every axis, so no regressor column vanishes by accident.  Digest 6.9: 6
    inertial base parameters (13 with friction) in the plane, 4 (11) along the axes.
    """
    a, b = (1, 0) if gravity_in_plane else (0, 1)
    return _PLANAR_2R.format(a=a, b=b)
