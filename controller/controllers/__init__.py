"""Controllers by name: one module each, one interface (:class:`Controller`).

Built-ins are imported lazily, so a controller whose optional dependency is
missing (``gravity_comp`` needs ``core_cy``) does not break the others.  A
user adds one with :func:`register` or by naming ``package.module:Class``
in the config.
"""

from __future__ import annotations

import importlib

from servoloop.controller.controllers.base import (
    BaseState,
    Command,
    Controller,
    ControllerContext,
    JointState,
)
from servoloop.controller.errors import ControllerParamError

__all__ = [
    "Controller",
    "ControllerContext",
    "Command",
    "BaseState",
    "JointState",
    "register",
    "get_controller_class",
    "make_controller",
    "available",
    "BUILTIN",
    "import_beside",
]

BUILTIN = {
    "hold": "servoloop.controller.controllers.hold:HoldController",
    "trajectory": "servoloop.controller.controllers.trajectory:TrajectoryController",
    "gravity_comp": "servoloop.controller.controllers.gravity_comp:GravityCompController",
    "wbc": "servoloop.controller.controllers.wbc:WbcController",
    "trot": "servoloop.controller.controllers.trot:TrotController",
    "walk": "servoloop.controller.controllers.walk:WalkController",
}
_REGISTRY: dict[str, type[Controller]] = {}


def register(name: str, cls: type[Controller]) -> None:
    """Make ``cls`` available under ``name`` (overrides a built-in of that name)."""
    if not (isinstance(cls, type) and issubclass(cls, Controller)):
        raise TypeError(f"register({name!r}, ...): {cls!r} is not a Controller subclass")
    _REGISTRY[name] = cls


def available() -> list[str]:
    """Names that :func:`get_controller_class` accepts (besides ``module:Class``)."""
    return sorted(set(BUILTIN) | set(_REGISTRY))


def import_beside(mod_name: str, base_dir=None):
    """Import ``mod_name``; when it is not installed, from ``base_dir`` (the config's folder).

    A user's controller or plant module sits next to the robot config; it
    must not need PYTHONPATH.  ``sys.path`` is extended only for this import.
    """
    import sys

    try:
        return importlib.import_module(mod_name)
    except ModuleNotFoundError as exc:
        top = mod_name.split(".")[0]
        if base_dir is None or exc.name != top:
            raise
        folder = str(base_dir)
        sys.path.insert(0, folder)
        try:
            return importlib.import_module(mod_name)
        finally:
            if folder in sys.path:
                sys.path.remove(folder)


def _import(spec: str, name: str, base_dir=None) -> type[Controller]:
    mod_name, _, attr = spec.partition(":")
    try:
        mod = import_beside(mod_name, base_dir)
        cls = getattr(mod, attr)
    except (ImportError, AttributeError) as exc:
        raise ControllerParamError(f"controller {name!r}: cannot import {spec}: {exc}") from exc
    if not (isinstance(cls, type) and issubclass(cls, Controller)):
        raise ControllerParamError(f"controller {name!r}: {spec} is not a Controller subclass")
    return cls


def get_controller_class(name: str, base_dir=None) -> type[Controller]:
    """The controller class for a registry name or ``package.module:Class``
    (a module next to the config, in ``base_dir``, is found too).

    Raises
    ------
    ControllerParamError
        Unknown name (lists the known ones) or an import that fails.
    """
    if name in _REGISTRY:
        return _REGISTRY[name]
    if name in BUILTIN:
        cls = _import(BUILTIN[name], name)
        _REGISTRY[name] = cls
        return cls
    if ":" in name:
        return _import(name, name, base_dir)
    raise ControllerParamError(
        f"unknown controller {name!r}; available: {', '.join(available())} "
        "(or package.module:ClassName)"
    )


def make_controller(name: str, ctx: ControllerContext, params: dict | None = None) -> Controller:
    """Instantiate the controller ``name`` with checked ``params``."""
    return get_controller_class(name, ctx.base_dir)(ctx, params or {})
