"""Physics behind the virtual servos: the Plant interface and one-load-per-servo physics.

A plant turns the servos' goals into motion.  The virtual bus calls
``plant.step(dt, goal_rad, torque_on, out_position, out_velocity, out_torque)``
with simulated time; the contact simulator provides a whole-robot plant with
the same method (:mod:`virtual_bus.robot_plant`).  Two optional methods let
the bus pass register state the contract does not carry:
``set_actuation(kp_scale, torque_limit_nm[, mode, command])`` (gain
registers, torque/current limits, velocity / torque command modes) and
``set_state(position, velocity)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from servoloop.core_cy.actuator import IndependentServos
from servoloop.virtual_bus.actuator import Actuator

__all__ = ["Plant", "IndependentServosPlant"]


@runtime_checkable
class Plant(Protocol):
    """What the virtual bus needs from physics.

    Attributes
    ----------
    n : int
        Number of servos (joints).  Joint i is the i-th servo of the list the
        bus was built from (for ``--robot``, the order of ``servos:`` in the
        robot YAML), in the servo's own frame: 0 rad at the raw centre, the
        servo's positive direction.  A robot plant maps its joints through
        the config's ``direction`` and ``offset`` itself.
    """

    n: int

    def step(self, dt: float, goal_rad: np.ndarray, torque_on: np.ndarray,
             out_position: np.ndarray, out_velocity: np.ndarray, out_torque: np.ndarray) -> None:
        """Advance by ``dt`` s of simulated time and write the joint state.

        Parameters
        ----------
        dt : float
            Simulated time to advance, s (>= 0).
        goal_rad : (n,) float64
            Goal position of each servo, rad (0 = the servo's raw centre).
        torque_on : (n,) bool
            Whether each servo drives its joint.
        out_position, out_velocity, out_torque : (n,) float64
            Filled in place: joint position (rad), velocity (rad/s) and the
            actuator's motor torque (N*m, what its current sensor sees).
        """
        ...


class IndependentServosPlant:
    """One rigid load per servo, on the one servo law (compiled).

    Each joint is :class:`core_cy.actuator.IndependentServos`: seed 000's PD
    demand (or, for servos switched by :meth:`set_actuation` to a velocity or
    torque command, the velocity loop or the command) bounded by the motor
    line at the supply voltage (the servo's no-load speed) and the torque
    limit, the gearbox's Coulomb and viscous friction (plus the torque-off
    damping with torque off), an optional pendulum load.  Fixed substeps
    (default 0.5 ms) of semi-implicit Euler.  Time is counted in integer
    nanoseconds so that repeated runs are bit-identical whatever the
    sequence of ``dt``.

    Parameters
    ----------
    params : sequence of Actuator, length n
        Servo model and load of each joint (:func:`virtual_bus.default_actuator`).
    substep_s : float
        Integration step, s.
    position0, velocity0 : (n,) array_like, optional
        Initial state, rad and rad/s (default zeros).
    """

    def __init__(self, params: Sequence[Actuator], substep_s: float = 5e-4,
                 position0=None, velocity0=None):
        params = list(params)
        if not params:
            raise ValueError("IndependentServosPlant needs at least one servo")
        for k, p in enumerate(params):
            if not isinstance(p, Actuator):
                raise TypeError(f"IndependentServosPlant: params[{k}] must be an Actuator "
                                f"(servo model + load), got {type(p).__name__}")
        if not (0 < substep_s <= 0.01):
            raise ValueError(f"substep_s must be in (0, 0.01] s, got {substep_s!r}")
        self.n = len(params)
        self.params = tuple(params)
        self._joints = IndependentServos(
            [p.servo for p in params], [p.inertia_kg_m2 for p in params],
            [p.load.gravity_torque_nm for p in params], [p.load.gravity_down_rad for p in params])
        self._h_ns = int(round(substep_s * 1e9))
        self._h = self._h_ns * 1e-9
        self._acc_ns = 0
        self.time_ns = 0
        j = self._joints
        if position0 is not None:
            j.q[:] = np.asarray(position0, dtype=np.float64)
        if velocity0 is not None:
            j.qd[:] = np.asarray(velocity0, dtype=np.float64)

    @property
    def substep_s(self) -> float:
        """Integration step, s."""
        return self._h

    @property
    def q(self) -> np.ndarray:
        """Joint positions (n,), rad."""
        return self._joints.q

    @property
    def v(self) -> np.ndarray:
        """Joint velocities (n,), rad/s."""
        return self._joints.qd

    @property
    def tau(self) -> np.ndarray:
        """Motor torques of the last substep (n,), N m."""
        return self._joints.tau

    def set_actuation(self, kp_scale: np.ndarray, torque_limit_nm: np.ndarray,
                      mode: np.ndarray | None = None, command: np.ndarray | None = None) -> None:
        """Per-servo register state the Plant contract does not carry, all (n,).

        Parameters
        ----------
        kp_scale : float64
            Position gain relative to the factory gains (1 = factory).
        torque_limit_nm : float64
            Limit of the active torque, N*m (capped at the stall torque).
        mode : int8, optional
            0 position control (default), 1 velocity command, 2 torque command.
        command : float64, optional
            Goal velocity (rad/s) for mode 1, goal torque (N*m) for mode 2;
            both stay inside the motor line like the position drive.
        """
        self._joints.set_actuation(kp_scale, torque_limit_nm)
        if mode is not None:
            self._joints.drive[:] = mode
        if command is not None:
            self._joints.command[:] = command

    def set_state(self, position, velocity=None) -> None:
        """Place the joints, rad (and rad/s; default at rest)."""
        self._joints.q[:] = position
        self._joints.qd[:] = 0.0 if velocity is None else velocity

    def step(self, dt, goal_rad, torque_on, out_position, out_velocity, out_torque) -> None:
        """See :meth:`Plant.step`."""
        self._acc_ns += int(round(dt * 1e9))
        k, self._acc_ns = divmod(self._acc_ns, self._h_ns)
        if k:
            self._joints.step(k, self._h, goal_rad, torque_on)
            self.time_ns += k * self._h_ns
        out_position[:] = self._joints.q
        out_velocity[:] = self._joints.qd
        out_torque[:] = self._joints.tau
