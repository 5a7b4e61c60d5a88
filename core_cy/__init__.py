"""Compiled rigid-body dynamics on an immutable Model and a Data workspace.

Pinocchio's split and conventions (q/v layout, free-flyer, Jacobian rows
(linear; angular), 10 inertial parameters per body), so results compare
number for number::

    from servoloop import core_cy
    model = core_cy.Model.from_urdf("robot.urdf", floating_base=True)
    data = core_cy.Data(model)
    tau = core_cy.rnea(model, data, q, v, a)   # data.tau, overwritten next call

The dynamics kernels live in ``core_cy/dynamics/_dynamics.pyx`` (C interface for other .pyx
modules in ``_dynamics.pxd``); the slow NumPy reference they are tested
against is :mod:`core_cy.dynamics.reference`.

One subpackage per concept: :mod:`.dynamics` (model, URDF, RNEA/CRBA/ABA,
Jacobians, regressor), :mod:`.actuator` (the servo model), :mod:`.contact`
(contact laws, the LCP solvers: PGS, Lemke, PPM), :mod:`.linalg` (the small
dense kernels the compiled code shares), :mod:`.sim` (the simulator, seed
002) and :mod:`.inverse_dynamics` (seed 003).  The dynamics are imported here; the
rest on first use, so that ``from servoloop import core_cy`` stays cheap in
the daemon.
"""

import importlib as _importlib

from servoloop.core_cy.dynamics import (
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
from servoloop.core_cy.errors import CoreError, ModelError

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
    "JointSettings",
    "ServoModel",
    "ContactPoints",
    "contact_points_from_urdf",
    "inverse_dynamics",
    "InverseDynamicsError",
    "sim",
    "contact",
    "actuator",
    "linalg",
]

_LAZY = {
    "Simulator": "servoloop.core_cy.sim.simulator",
    "BatchSimulator": "servoloop.core_cy.sim.simulator",
    "SimConfig": "servoloop.core_cy.sim.simulator",
    "SimulationError": "servoloop.core_cy.sim.simulator",
    "ContactLaw": "servoloop.core_cy.contact.laws",
    "LCPResult": "servoloop.core_cy.contact.lcp",
    "solve_lcp_pgs": "servoloop.core_cy.contact.lcp",
    "Ground": "servoloop.core_cy.sim.model",
    "JointSettings": "servoloop.core_cy.sim.model",
    "ServoModel": "servoloop.core_cy.actuator.model",
    "ContactPoints": "servoloop.core_cy.sim.model",
    "contact_points_from_urdf": "servoloop.core_cy.sim.model",
    "InverseDynamicsError": "servoloop.core_cy.inverse_dynamics.errors",
}
_SUBMODULES = ("dynamics", "sim", "contact", "inverse_dynamics", "actuator", "linalg")


def __getattr__(name):
    if name in _SUBMODULES:
        return _importlib.import_module(f"servoloop.core_cy.{name}")
    if name in _LAZY:
        return getattr(_importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'core_cy' has no attribute {name!r}")
