"""The estimate stage: the robot's state from this tick's servo and IMU readings.

First the servo -> joint mapping of positions, velocities and efforts
(:class:`~servoloop.controller.joint_map.JointMap`); then, for a floating-base
robot with an IMU on the bus (config ``imu:``), the base's orientation,
position, velocities and contacts
(:class:`~servoloop.controller.base_estimator.BaseEstimator`) into
``state.base``.  A servo whose read failed stays NaN (never a stale number),
so telemetry shows the gap and no controller sees a plausible wrong value;
the base estimate then keeps its last value with ``valid`` False.
"""

from __future__ import annotations

import numpy as np

from servoloop.controller.controllers import JointState
from servoloop.controller.joint_map import JointMap

__all__ = ["Estimator"]


class Estimator:
    """Fills ``state`` and ``current`` in place from the bound reading arrays.

    Parameters
    ----------
    joint_map : JointMap
    state : JointState (n), the loop's measured state
    current : (n,) float, servo effort (A or load ratio) in the joint's sign
    base : BaseEstimator or None, run after the joint map (it reads ``state``)
    """

    def __init__(self, joint_map: JointMap, state: JointState, current: np.ndarray, base=None) -> None:
        self.joint_map = joint_map
        self.state = state
        self.current = current
        #: BaseEstimator or None (fixed base, or no IMU)
        self.base = base
        self._position = self._velocity = self._effort = None

    def bind(self, position: np.ndarray, velocity: np.ndarray, effort: np.ndarray | None) -> None:
        """The arrays the read stage fills each tick ((n,), servo space, SI)."""
        self._position, self._velocity, self._effort = position, velocity, effort

    def run(self, elapsed_s: float = 0.0) -> None:
        """servo -> joint for this tick (no allocation); ``elapsed_s``: s since the last
        estimate (0: one tick period), for the base estimate's integration."""
        self.joint_map.to_joint(self._position, self._velocity, self._effort, self.state, self.current)
        if self.base is not None:
            self.base.run(elapsed_s)
