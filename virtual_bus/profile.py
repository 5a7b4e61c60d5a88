"""The X / MX (2.0) motion profile: Profile Velocity and Profile Acceleration.

In the position modes (3, 4, 5) with a velocity-based profile (Drive Mode bit 2
clear) a servo does not track its Goal Position but a trapezoid towards it: at most
Profile Velocity, speeding up and braking at Profile Acceleration (0: at once); 0
Profile Velocity is no profile (e-Manual XM430-W350, "Profile Velocity":
https://emanual.robotis.com/docs/en/dxl/x/xm430-w350/#profile-velocity).  The
trajectory is what Position / Velocity Trajectory (140, 136) report.  The
time-based profile (Drive Mode bit 2) is not emulated: such a servo goes straight
to its goal.
"""

from __future__ import annotations

import numpy as np

from servoloop.virtual_bus.memory import decode

__all__ = ["profile_registers", "step_profile"]


def profile_registers(info, mem, plant_mode) -> tuple[float, float]:
    """(Profile Velocity rad/s, Profile Acceleration rad/s^2) of a servo; (0, 0): no profile."""
    reg = info.reg
    pv, pa = reg.get("profile_velocity"), reg.get("profile_acceleration")
    time_based = "drive_mode" in reg and mem[reg["drive_mode"].address] & 4
    if pv is None or plant_mode != 0 or time_based or info.protocol != 2:
        return 0.0, 0.0
    return decode(pv, mem) * pv.scale, (decode(pa, mem) * pa.scale if pa is not None else 0.0)


def step_profile(dt: float, goal, torque_on, mode, position, vmax_all, amax_all, traj, vel) -> None:
    """Advance every servo's trajectory ``traj`` (rad) and its speed ``vel`` (rad/s) by ``dt`` s.

    Servos with torque on and a profile move towards ``goal``; the others' trajectory is
    the goal (torque on) or the present position (torque off, so a profile starts there
    when torque comes on).  ``traj`` is then the goal the plant tracks.
    """
    on = torque_on & (vmax_all > 0) & (mode == 0)
    off = ~on
    traj[off] = np.where(torque_on[off], goal[off], position[off])
    vel[off] = 0.0
    if dt <= 0 or not on.any():
        return
    vmax, amax = vmax_all[on], amax_all[on]
    e = goal[on] - traj[on]
    braking = np.sqrt(2.0 * amax * np.abs(e))          # the speed it can still stop from
    want = np.sign(e) * np.where(amax > 0, np.minimum(vmax, braking), vmax)
    step_v = np.where(amax > 0, amax * dt, np.inf)
    v = vel[on] + np.clip(want - vel[on], -step_v, step_v)
    move = v * dt
    arrive = np.abs(move) >= np.abs(e)
    traj[on] = np.where(arrive, goal[on], traj[on] + move)
    vel[on] = np.where(arrive, 0.0, v)
