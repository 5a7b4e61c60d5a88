"""Test oracle: the trot planner's tick in NumPy, as it ran before :mod:`._gait`.

``TrotPlanner.update`` up to issue 11 (commit 0b38359), kept to compare the
compiled references with it (tests/unit/controller/test_balance_compiled.py); since
then each swing lands at its foot's lift-off height (``TrotPlanner.ground_z`` None).
"""

from __future__ import annotations

import numpy as np

from servoloop.controller.wholebody.balance import Targets
from servoloop.controller.wholebody.trot_planner import TrotPlanner

__all__ = ["ReferenceTrotPlanner"]


class ReferenceTrotPlanner(TrotPlanner):
    """:class:`TrotPlanner` with its NumPy ``update``."""

    def update(self, t: float, q, v) -> Targets:
        """Targets at time ``t`` [s] since the trot began, state ``q`` (nq,), ``v`` (nv,)."""
        tg, r, g = self.targets, self.robot, self.gait
        dt = 0.0 if self._t_prev is None else max(0.0, t - self._t_prev)
        self._t_prev = t
        step = self.accel * dt
        # min/max, not np.clip: the same number without a ufunc call per tick
        self.speed += float(min(max(self.speed_goal - self.speed, -step), step))
        vel = self.speed * self.heading
        tg.base_velocity[:] = vel
        tg.base_position[:2] += vel[:2] * dt
        lead = tg.base_position[:2] - q[:2]
        n = np.linalg.norm(lead)
        if n > self.max_lead:
            tg.base_position[:2] = q[:2] + lead * (self.max_lead / n)
        tgait = t - self.stand_time
        if tgait < 0.0:
            tg.stance[:] = True
            return tg
        u_all = g.swing_progress(tgait)
        r.kinematics(q)
        for i, foot in enumerate(r.feet):
            u = u_all[i]
            if u < 0.0:
                tg.stance[i] = True
                continue
            if self._prev_stance[i]:
                self.liftoff[i] = r.foot_position(foot)
            tg.stance[i] = False
            left = (1.0 - u) * g.swing_time
            base_td = tg.base_position + vel * left
            target = base_td + tg.base_rotation @ self.offset[i] + vel * (0.5 * g.stance_time)
            # issue 11: each foot lands at its own lift-off height unless ground_z is set
            gz = self.liftoff[i, 2] if self.ground_z is None else self.ground_z
            target[2] = gz
            p, dp, ddp = g.swing_reference(u, self.liftoff[i], target, gz)
            tg.swing_position[i], tg.swing_velocity[i], tg.swing_acceleration[i] = p, dp, ddp
        self._prev_stance[:] = tg.stance
        return tg
