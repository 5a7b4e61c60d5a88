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

The contact simulator (:mod:`core_cy.sim`, seed 002 compliant and rigid LCP
contact), the contact laws (:mod:`core_cy.contact`), inverse dynamics with
rigid contact and friction (:mod:`core_cy.inverse_dynamics`, seed 003) and
the servo actuator model (:mod:`core_cy.actuator`, seed 000) are exported
here too, imported on first use so that ``import core_cy`` stays cheap in
the daemon.
"""

import importlib as _importlib

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
    # imported on first use (see _LAZY)
    "Simulator",
    "BatchSimulator",
    "SimConfig",
    "SimulationError",
    "ContactLaw",
    "LCPResult",
    "solve_lcp_pgs",
    "Ground",
    "ServoParams",
    "ContactPoints",
    "contact_points_from_urdf",
    "RobotPlant",
    "inverse_dynamics",
    "InverseDynamicsError",
    "sim",
    "contact",
    "actuator",
]

_LAZY = {
    "Simulator": "core_cy.sim",
    "BatchSimulator": "core_cy.sim",
    "SimConfig": "core_cy.sim",
    "SimulationError": "core_cy.sim",
    "ContactLaw": "core_cy.contact",
    "LCPResult": "core_cy.contact",
    "solve_lcp_pgs": "core_cy.contact",
    "Ground": "core_cy.sim_model",
    "ServoParams": "core_cy.sim_model",
    "ContactPoints": "core_cy.sim_model",
    "contact_points_from_urdf": "core_cy.sim_model",
    "RobotPlant": "core_cy.sim_plant",
    "InverseDynamicsError": "core_cy.inverse_dynamics",
}
_SUBMODULES = ("sim", "contact", "inverse_dynamics", "actuator")


def __getattr__(name):
    if name in _SUBMODULES:
        return _importlib.import_module(f"core_cy.{name}")
    if name in _LAZY:
        return getattr(_importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'core_cy' has no attribute {name!r}")
