"""Compiled rigid-body dynamics on an immutable Model and a Data workspace.

Pinocchio's split and conventions (q/v layout, free-flyer, Jacobian rows
(linear; angular), 10 inertial parameters per body), so results compare
number for number::

    import core_cy
    model = core_cy.Model.from_urdf("robot.urdf", floating_base=True)
    data = core_cy.Data(model)
    tau = core_cy.rnea(model, data, q, v, a)   # data.tau, overwritten next call

The kernels live in ``core_cy/_dynamics.pyx`` (C interface for other .pyx
modules in ``_dynamics.pxd``); the slow NumPy reference they are tested
against is :mod:`core_cy.reference`.
"""

from core_cy._dynamics import (
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
from core_cy.errors import CoreError, ModelError

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
    "CoreError",
    "ModelError",
]
