"""Exceptions of the ``core_cy`` package.

Every error about a robot description names the joint or link and the file
it came from, so that a user can go straight to the offending line.
"""

from __future__ import annotations

__all__ = [
    "CoreError",
    "ModelError",
    "URDFSyntaxError",
    "URDFValueError",
    "UnsupportedJointError",
    "MimicJointError",
    "MissingInertialError",
    "TreeStructureError",
    "SingularInertiaError",
]


class CoreError(Exception):
    """Base class of every ``core_cy`` error."""


class ModelError(CoreError, ValueError):
    """A robot description that cannot be turned into a :class:`core_cy.Model`."""


class URDFSyntaxError(ModelError):
    """The file is not well-formed XML or has no ``<robot>`` root."""


class URDFValueError(ModelError):
    """A number or attribute that is missing, malformed or not finite."""


class UnsupportedJointError(ModelError):
    """A joint type the kernels do not implement (planar, floating, unknown)."""


class MimicJointError(UnsupportedJointError):
    """A ``<mimic>`` joint without the explicit ``mimic="independent"`` opt-in."""


class MissingInertialError(ModelError):
    """A moving body with no ``<inertial>`` (or zero mass) anywhere on it."""


class TreeStructureError(ModelError):
    """Missing links, several roots, a cycle, or a link with two parents."""


class SingularInertiaError(CoreError, ArithmeticError):
    """An articulated or joint-space inertia that is not positive definite."""
