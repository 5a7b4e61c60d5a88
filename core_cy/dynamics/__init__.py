"""Rigid-body dynamics on an immutable Model and a Data workspace.

Kernels in ``_dynamics.pyx`` (C interface in ``_dynamics.pxd``), the URDF
parser in :mod:`.urdf`, the NumPy reference in :mod:`.reference`.
"""

from servoloop.core_cy.dynamics._dynamics import (
    Data,
    Model,
    aba,
    aba_batch,
    center_of_mass,
    crba,
    forward_kinematics,
    frame_jacobian,
    gravity,
    integrate,
    nonlinear_effects,
    regressor,
    regressor_batch,
    rnea,
    rnea_batch,
)

__all__ = [
    "Model",
    "Data",
    "forward_kinematics",
    "rnea",
    "nonlinear_effects",
    "gravity",
    "crba",
    "aba",
    "frame_jacobian",
    "center_of_mass",
    "regressor",
    "integrate",
    "rnea_batch",
    "aba_batch",
    "regressor_batch",
]
