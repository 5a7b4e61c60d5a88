"""Physically consistent identification of inertial, friction and armature parameters.

The method of Zhang, Haugk & Vasudevan, "System Identification For
Constrained Robots" (arXiv 2408.08830, 2024): the
regressor ``W(q, v, a) theta = tau`` with 10 inertial parameters per body
(Pinocchio's order) and ``[Fc, Fv, Ia, beta]`` per joint, regrouping to base
parameters by pivoted QR, least squares under the pseudo-inertia LMI (a
convex SDP, Clarabel through cvxpy), IRLS with the corrected covariance
update, a physical-consistency checker, and closed chains through the
G(q) projection (:mod:`calibration.inertial.closed_chain`).  See
``shared/papers/seed-001-digest.md``.

Typical use::

    from servoloop.calibration.inertial import identify_from_log, write_report
    result = identify_from_log("log.npz", "robot.urdf", method="sdp")
    write_report(result, "inertial.yaml")
"""

from servoloop.calibration.inertial import command
from servoloop.calibration.inertial.base_params import BaseParameters, regroup, regroup_model
from servoloop.calibration.inertial.closed_chain import ClosedChain, LoopClosure
from servoloop.calibration.inertial.consistency import (
    BodyConsistency,
    ConsistencyReport,
    check_consistency,
    check_urdf,
    pseudo_inertia,
)
from servoloop.calibration.inertial.excitation import FourierTrajectory, random_fourier
from servoloop.calibration.inertial.identify import (
    METHODS,
    InertialResult,
    identify,
    identify_from_log,
    identify_stacked,
    load_joint_log,
    write_report,
)
from servoloop.calibration.inertial.irls import IrlsResult, irls, truncated_variance
from servoloop.calibration.inertial.layout import (
    FRICTION_NAMES,
    INERTIAL_NAMES,
    PAPER_FROM_PIN,
    PIN_FROM_PAPER,
    ParameterLayout,
    body_from_parameters,
    body_parameters,
)
from servoloop.calibration.inertial.regressor import (
    RegressorModel,
    available_backends,
    friction_columns,
    urdf_parameters,
)
from servoloop.calibration.inertial.signals import (
    FilterSettings,
    central_difference,
    decimate,
    lowpass,
    prepare_samples,
)
from servoloop.calibration.inertial.solvers import (
    DEFAULT_EPS,
    SolverResult,
    solve_friction,
    solve_ols,
    solve_sdp,
)
from servoloop.calibration.inertial.synthetic import (
    SimulatedData,
    planar_2r_urdf,
    simulate,
    with_friction,
)

__all__ = [
    "command",
    "BaseParameters", "regroup", "regroup_model",
    "ClosedChain", "LoopClosure",
    "BodyConsistency", "ConsistencyReport", "check_consistency", "check_urdf", "pseudo_inertia",
    "FourierTrajectory", "random_fourier",
    "METHODS", "InertialResult", "identify", "identify_from_log", "identify_stacked", "load_joint_log", "write_report",
    "IrlsResult", "irls", "truncated_variance",
    "FRICTION_NAMES", "INERTIAL_NAMES", "PAPER_FROM_PIN", "PIN_FROM_PAPER", "ParameterLayout",
    "body_from_parameters", "body_parameters",
    "RegressorModel", "available_backends", "friction_columns", "urdf_parameters",
    "FilterSettings", "central_difference", "decimate", "lowpass", "prepare_samples",
    "DEFAULT_EPS", "SolverResult", "solve_friction", "solve_ols", "solve_sdp",
    "SimulatedData", "planar_2r_urdf", "simulate", "with_friction",
]
