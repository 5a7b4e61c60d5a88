"""Physics behind the virtual servos: the Plant interface and one-load-per-servo physics.

A plant turns the servos' goals into motion.  The virtual bus calls
``plant.step(dt, goal_rad, torque_on, out_position, out_velocity, out_torque)``
with simulated time; the contact simulator provides a whole-robot plant with
the same method later.  Two optional methods let the bus pass register
state the contract does not carry: ``set_actuation(kp_scale, torque_limit_nm)``
(gain registers, torque/current limits) and ``set_state(position, velocity)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from servoloop.virtual_bus.actuator import ActuatorParams

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
    """One rigid load per servo, integrated with seed 000's actuator model.

    Each joint: ``I qdd = sat(-kp s (q - q_goal) - kd qd) - kc sgn(qd) - mgl sin(q - q_down)``
    with the active part saturated at the torque limit (stall torque by
    default) and ``s`` the gain scale the servo's gain registers set.  Servos
    switched (by :meth:`set_actuation`) to a velocity command get
    ``sat(kv (qd_goal - qd))`` with ``kv = 10 kd``, to a torque command
    (current / PWM mode) ``sat(tau_goal)``, as their active part.  Fixed
    substeps (default 0.5 ms) of semi-implicit Euler; the Coulomb term sticks
    (Karnopp): a joint at rest stays at rest while the other torques are
    below ``kc``, and friction never reverses a motion within a substep.
    Time is counted in integer nanoseconds so that repeated runs are
    bit-identical whatever the sequence of ``dt``.

    Parameters
    ----------
    params : sequence of ActuatorParams, length n
    substep_s : float
        Integration step, s.
    position0, velocity0 : (n,) array_like, optional
        Initial state, rad and rad/s (default zeros).
    """

    def __init__(self, params: Sequence[ActuatorParams], substep_s: float = 5e-4,
                 position0=None, velocity0=None):
        params = list(params)
        if not params:
            raise ValueError("IndependentServosPlant needs at least one servo")
        if not (0 < substep_s <= 0.01):
            raise ValueError(f"substep_s must be in (0, 0.01] s, got {substep_s!r}")
        self.n = len(params)
        self.params = tuple(params)

        def col(name):
            return np.array([getattr(p, name) for p in params], dtype=np.float64)

        self._kp, self._kd, self._kc = col("kp"), col("kd"), col("kc")
        self._stall = col("stall_torque")
        self._inv_inertia = 1.0 / col("inertia")
        self._mgl, self._q_down = col("gravity_torque"), col("gravity_down_rad")
        self._damping_off = col("damping_off")
        self._has_gravity = bool(np.any(self._mgl != 0.0))
        self._kp_eff = self._kp.copy()
        self._limit = self._stall.copy()
        # servos not in position control: 1 = velocity, 2 = torque (current / PWM) command
        self._mode = np.zeros(self.n, dtype=np.int8)
        self._special = False
        self._command = np.zeros(self.n)
        # velocity loop gain: a velocity servo ~10x stiffer than the position loop's damping
        self._kv = 10.0 * self._kd
        self._h_ns = int(round(substep_s * 1e9))
        self._h = self._h_ns * 1e-9
        self._acc_ns = 0
        self.time_ns = 0
        self.q = np.zeros(self.n) if position0 is None else np.array(position0, dtype=np.float64)
        self.v = np.zeros(self.n) if velocity0 is None else np.array(velocity0, dtype=np.float64)
        if self.q.shape != (self.n,) or self.v.shape != (self.n,):
            raise ValueError(f"position0/velocity0 must have shape ({self.n},)")
        self.tau = np.zeros(self.n)

    @property
    def substep_s(self) -> float:
        """Integration step, s."""
        return self._h

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
            Goal velocity (rad/s) for mode 1, goal torque (N*m) for mode 2.
        """
        np.multiply(self._kp, kp_scale, out=self._kp_eff)
        np.minimum(self._stall, torque_limit_nm, out=self._limit)
        if mode is not None:
            self._mode[:] = mode
            self._special = bool(self._mode.any())
        if command is not None:
            self._command[:] = command

    def set_state(self, position, velocity=None) -> None:
        """Place the joints, rad (and rad/s; default at rest)."""
        self.q[:] = position
        self.v[:] = 0.0 if velocity is None else velocity

    def step(self, dt, goal_rad, torque_on, out_position, out_velocity, out_torque) -> None:
        """See :meth:`Plant.step`."""
        self._acc_ns += int(round(dt * 1e9))
        k, self._acc_ns = divmod(self._acc_ns, self._h_ns)
        if k:
            goal = np.asarray(goal_rad, dtype=np.float64)
            on = np.asarray(torque_on, dtype=bool)
            for _ in range(k):
                self._substep(goal, on)
            self.time_ns += k * self._h_ns
        out_position[:] = self.q
        out_velocity[:] = self.v
        out_torque[:] = self.tau

    def _substep(self, goal: np.ndarray, on: np.ndarray) -> None:
        # ~25 small ufuncs: at 12 servos a substep costs ~15 us, the bulk of the server's time
        q, v, h = self.q, self.v, self._h
        tau_m = self._kp_eff * (goal - q)
        tau_m -= self._kd * v
        if self._special:
            mode = self._mode
            tau_m = np.where(mode == 1, self._kv * (self._command - v), tau_m)
            tau_m = np.where(mode == 2, self._command, tau_m)
        np.minimum(tau_m, self._limit, out=tau_m)
        np.maximum(tau_m, -self._limit, out=tau_m)
        tau_m *= on
        self.tau = tau_m
        tau = tau_m - np.where(on, 0.0, self._damping_off) * v
        if self._has_gravity:
            tau -= self._mgl * np.sin(q - self._q_down)
        kc = self._kc
        at_rest = v == 0.0
        # direction friction opposes: the motion, or (at rest) the torque that would start one
        s = np.where(at_rest, np.sign(tau), np.sign(v))
        acc = (tau - kc * s) * self._inv_inertia
        acc[at_rest & (np.abs(tau) <= kc)] = 0.0      # static friction holds
        v_new = v + acc * h
        v_new[v_new * v < 0.0] = 0.0                  # friction stops a motion, never reverses it
        self.v = v_new
        self.q = q + v_new * h
