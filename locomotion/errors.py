"""The errors of :mod:`servoloop.locomotion`: bad input (model file, task) vs a failed solve."""

from __future__ import annotations

__all__ = ["RomError", "RomInputError", "RomSolveError"]


class RomError(Exception):
    """Base of every reduced-order-model error."""


class RomInputError(RomError, ValueError):
    """Bad user input: an unknown model file, a malformed speed or incline list."""


class RomSolveError(RomError):
    """A trajectory optimisation or a learning run that could not be completed."""
