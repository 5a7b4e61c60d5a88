"""Exceptions of the contact inverse dynamics."""

from __future__ import annotations

from servoloop.core_cy.errors import CoreError

__all__ = ["InverseDynamicsError", "ContactFrameError", "FloatingBaseError", "InfeasibleError"]


class InverseDynamicsError(CoreError):
    """Base class of the inverse-dynamics errors."""


class ContactFrameError(InverseDynamicsError, KeyError):
    """A contact named a link that the model does not have."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class FloatingBaseError(InverseDynamicsError, ValueError):
    """Contact inverse dynamics needs a floating-base model."""


class InfeasibleError(InverseDynamicsError, ArithmeticError):
    """No solution: the solver failed or its answer violates the constraints.

    ``residual`` is the largest constraint violation [N or m/s^2] found.
    """

    def __init__(self, message: str, residual: float = float("nan")):
        super().__init__(message)
        self.residual = residual
