"""The one interface every controller implements, and the arrays it works on.

A controller sees joint space only (rad, rad/s, N*m, joint order of the
config); the daemon maps servos to joints and back, clamps to limits and
turns torque into current or goal offsets.  Arrays are allocated once by the
daemon and filled in place every tick, so ``update`` must not keep
references to new objects.

To add a controller: subclass :class:`Controller`, give it a ``name`` and
register it (``controller.controllers.register``), or name it in the config
as ``package.module:ClassName``; the loop does not change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from servoloop.controller.errors import ControllerParamError

__all__ = ["BaseState", "JointState", "Command", "ControllerContext", "Controller", "joint_vector"]


@dataclass
class BaseState:
    """Estimated floating-base state, filled in place by the estimate stage each tick.

    Attributes
    ----------
    position : (3,) m, base origin in the world frame
    quaternion : (4,) x, y, z, w: orientation of the base in the world (Pinocchio's order)
    linear_velocity : (3,) m/s, base origin velocity in the *base* frame (Pinocchio's
        free-flyer velocity layout, so ``v[:6] = [linear_velocity, angular_velocity]``)
    angular_velocity : (3,) rad/s, in the base frame (the gyro's frame after its mounting)
    contact : (k,) bool, foot in contact, in the order of ``feet``
    feet : tuple of str, link names of the feet the estimator watches
    valid : False until the estimator has converged (or when its inputs failed this tick)
    """

    position: np.ndarray = field(default_factory=lambda: np.zeros(3))
    quaternion: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, 0.0, 1.0]))
    linear_velocity: np.ndarray = field(default_factory=lambda: np.zeros(3))
    angular_velocity: np.ndarray = field(default_factory=lambda: np.zeros(3))
    contact: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    feet: tuple[str, ...] = ()
    valid: bool = False


@dataclass
class JointState:
    """Measured joint state, arrays of shape (n,), filled in place each tick.

    Attributes
    ----------
    position : rad
    velocity : rad/s
    effort : N*m (NaN where the servo reports no calibrated torque)
    base : BaseState or None
    """

    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray
    #: the floating base's estimate (None for a fixed-base robot or with no base estimator)
    base: BaseState | None = None

    @classmethod
    def zeros(cls, n: int) -> JointState:
        return cls(np.zeros(n), np.zeros(n), np.full(n, np.nan))


@dataclass
class Command:
    """What a controller asks for, arrays of shape (n,), filled in place.

    Attributes
    ----------
    position : rad, goal joint position.
    effort : N*m, feed-forward joint torque (0: none).
    kp : N*m/rad, host-side stiffness, used only for servos in current mode.
    kd : N*m*s/rad, host-side damping, current mode only.
    velocity : rad/s, goal joint velocity, used only for servos in velocity (wheel) mode
        (``servos[].mode: velocity``); the safety stage clamps it to ``max_velocity`` and
        limits its acceleration.  0 (the default): the wheel stands still.
    """

    position: np.ndarray
    effort: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    velocity: np.ndarray = None

    def __post_init__(self) -> None:
        if self.velocity is None:
            self.velocity = np.zeros(np.shape(self.position)[0])

    @classmethod
    def zeros(cls, n: int) -> Command:
        return cls(np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n))

    def copy_from(self, other: Command) -> None:
        self.position[:] = other.position
        self.effort[:] = other.effort
        self.kp[:] = other.kp
        self.kd[:] = other.kd
        self.velocity[:] = other.velocity


@dataclass
class ControllerContext:
    """What a controller may know about the robot.

    Attributes
    ----------
    joint_names : tuple of str, length n
    lower, upper : (n,) joint limits, rad
    dt : float, tick period, s
    base_dir : Path, folder relative paths in params are taken from
    config : RobotConfig, the whole config (servo modes, model, ...)
    """

    joint_names: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    dt: float
    base_dir: Path = field(default_factory=Path.cwd)
    config: Any = None

    @property
    def n(self) -> int:
        return len(self.joint_names)

    @classmethod
    def from_config(cls, cfg) -> ControllerContext:
        return cls(
            joint_names=cfg.joint_names,
            lower=np.array([s.min for s in cfg.servos], dtype=float),
            upper=np.array([s.max for s in cfg.servos], dtype=float),
            dt=1.0 / cfg.loop.rate_hz,
            base_dir=cfg.base_dir,
            config=cfg,
        )


def joint_vector(ctx: ControllerContext, value: Any, what: str, default: np.ndarray | None = None,
                 check_limits: bool = True) -> np.ndarray:
    """A (n,) joint vector from a ``{joint: rad}`` mapping or a length-n list.

    Joints a mapping leaves out take ``default`` (required then).

    Raises
    ------
    ControllerParamError
        Unknown joint, wrong length, not a number, or outside the joint limits.
    """
    n = ctx.n
    if isinstance(value, dict):
        if default is None:
            missing = [j for j in ctx.joint_names if j not in value]
            if missing:
                raise ControllerParamError(f"{what}: no value for joints {missing}")
            out = np.zeros(n)
        else:
            out = np.array(default, dtype=float, copy=True)
        index = {j: i for i, j in enumerate(ctx.joint_names)}
        for j, v in value.items():
            if j not in index:
                raise ControllerParamError(
                    f"{what}: unknown joint {j!r}; joints are {', '.join(ctx.joint_names)}"
                )
            out[index[j]] = _number(v, f"{what}[{j}]")
    elif isinstance(value, (list, tuple, np.ndarray)):
        if len(value) != n:
            raise ControllerParamError(f"{what}: expected {n} values (one per joint), got {len(value)}")
        out = np.array([_number(v, f"{what}[{i}]") for i, v in enumerate(value)], dtype=float)
    else:
        raise ControllerParamError(f"{what}: expected a {{joint: rad}} mapping or a list, got {value!r}")
    if check_limits:
        bad = np.flatnonzero((out < ctx.lower) | (out > ctx.upper))
        if bad.size:
            i = int(bad[0])
            raise ControllerParamError(
                f"{what}: joint {ctx.joint_names[i]!r} = {out[i]:.4f} rad is outside its limits "
                f"[{ctx.lower[i]:.4f}, {ctx.upper[i]:.4f}]"
            )
    return out


def _number(v: Any, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)):
        raise ControllerParamError(f"{what}: expected a number, got {v!r}")
    f = float(v)
    if not np.isfinite(f):
        raise ControllerParamError(f"{what}: must be finite, got {f}")
    return f


class Controller:
    """Base class: one controller, one module, one registry name.

    Life: ``__init__(ctx, params)`` checks the parameters (raise
    :class:`ControllerParamError` naming the key) -> ``start(state)`` once
    with the measured state before the ramp -> ``update(t, state, command)``
    every tick.  Runtime changes from the command socket come in two steps:
    ``check_params`` / ``check_goal`` (any thread, pure, raise on bad input)
    then ``apply_params`` / ``apply_goal`` (loop thread, between ticks).
    """

    name = "base"
    #: parameter keys this controller accepts (others are an error)
    param_keys: tuple[str, ...] = ()

    def __init__(self, ctx: ControllerContext, params: dict | None = None) -> None:
        self.ctx = ctx
        self.params = self.check_params(dict(params or {}), initial=True)

    # -- parameters -------------------------------------------------------
    def check_params(self, params: dict, initial: bool = False) -> dict:
        """Validate ``params``; return the normalized form.  Pure."""
        unknown = [k for k in params if k not in self.param_keys]
        if unknown:
            known = ", ".join(self.param_keys) or "none"
            raise ControllerParamError(
                f"controller {self.name!r}: unknown parameter {unknown[0]!r}; known: {known}"
            )
        return params

    def apply_params(self, params: dict) -> None:
        """Take checked parameters (loop thread)."""
        self.params.update(params)

    def check_goal(self, goal: Any) -> np.ndarray:
        """A goal joint position (n,) rad from a mapping or list, within limits."""
        raise ControllerParamError(f"controller {self.name!r} takes no goals")

    def apply_goal(self, goal: np.ndarray) -> None:
        raise ControllerParamError(f"controller {self.name!r} takes no goals")

    # -- the loop ---------------------------------------------------------
    def start(self, state: JointState) -> None:
        """Called once, with the measured state, before the startup ramp."""

    def update(self, t: float, state: JointState, command: Command) -> None:
        """Fill ``command`` in place for time ``t`` (s since the run state began)."""
        raise NotImplementedError

    def status(self) -> dict:
        """Small JSON-able dict for the ``status`` command."""
        return {"name": self.name}
