"""Base orientation from an IMU: the board's own orientation registers fused with its gyro.

A complementary filter on the unit quaternion (x, y, z, w; Pinocchio's
order): each tick the gyro rotates the last estimate forward (smooth,
drifts with the gyro bias), then the estimate is pulled a fraction
``gain`` of the way towards the board's roll/pitch/yaw registers (absolute,
but quantised to 0.1 deg and delayed by the board's own filter).  At 1 kHz
and ``gain`` 0.02 the registers' time constant is 50 ms; a gyro bias b then
leaves a steady error of b dt / gain (0.5 mrad for 0.01 rad/s).

Scalar arithmetic only: no array is made per tick.
"""

from __future__ import annotations

import math

__all__ = ["AttitudeFilter", "quat_from_rpy", "quat_multiply", "quat_rpy"]


def quat_multiply(a: tuple, b: tuple) -> tuple:
    """Hamilton product a * b of (x, y, z, w) quaternions."""
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return (aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz)


def quat_from_rpy(roll: float, pitch: float, yaw: float) -> tuple:
    """(x, y, z, w) of Rz(yaw) Ry(pitch) Rx(roll)."""
    cr, sr = math.cos(roll / 2), math.sin(roll / 2)
    cp, sp = math.cos(pitch / 2), math.sin(pitch / 2)
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    return (sr * cp * cy - cr * sp * sy, cr * sp * cy + sr * cp * sy,
            cr * cp * sy - sr * sp * cy, cr * cp * cy + sr * sp * sy)


def quat_rpy(q) -> tuple:
    """(roll, pitch, yaw) [rad], ZYX, of an (x, y, z, w) quaternion."""
    x, y, z, w = q
    roll = math.atan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    pitch = math.asin(max(-1.0, min(1.0, 2 * (w * y - z * x))))
    yaw = math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    return roll, pitch, yaw


def _exp(wx: float, wy: float, wz: float) -> tuple:
    """Quaternion of the rotation vector (wx, wy, wz) [rad]."""
    a = math.sqrt(wx * wx + wy * wy + wz * wz)
    if a < 1e-12:
        return (0.5 * wx, 0.5 * wy, 0.5 * wz, 1.0)
    s = math.sin(a / 2) / a
    return (wx * s, wy * s, wz * s, math.cos(a / 2))


class AttitudeFilter:
    """Base orientation in the world, from the board's registers and gyro.

    Parameters
    ----------
    mount_rpy : (3,) rad, the board's axes in the base frame (roll, pitch, yaw)
    gain : fraction of the way to the registers' orientation taken per update (0..1]

    Attributes
    ----------
    q : (x, y, z, w) base -> world, None until the first update
    omega : (3,) tuple, rad/s, angular velocity in the base frame
    """

    def __init__(self, mount_rpy=(0.0, 0.0, 0.0), gain: float = 0.02) -> None:
        if not 0 < gain <= 1:
            raise ValueError(f"attitude gain must be in (0, 1], got {gain}")
        self.gain = float(gain)
        self.mount = quat_from_rpy(*mount_rpy)                 # board -> base
        mx, my, mz, mw = self.mount
        self._mount_inv = (-mx, -my, -mz, mw)                  # base -> board
        # the same rotation as 9 numbers, row-major (board -> base), for _to_base
        x, y, z, w = self.mount
        self._M = (1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
                   2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
                   2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y))
        self.q = None
        self.omega = (0.0, 0.0, 0.0)

    def reset(self) -> None:
        self.q = None

    def _to_base(self, v) -> tuple:
        """A board-axes vector in base axes (mount * v * mount^-1)."""
        m = self._M
        a, b, c = v[0], v[1], v[2]
        return (m[0] * a + m[1] * b + m[2] * c, m[3] * a + m[4] * b + m[5] * c,
                m[6] * a + m[7] * b + m[8] * c)

    def update(self, gyro, rpy, dt: float) -> None:
        """One tick: ``gyro`` (3,) rad/s and ``rpy`` (3,) rad as the board reads them, ``dt`` s."""
        self.omega = w = self._to_base(gyro)
        measured = quat_multiply(quat_from_rpy(rpy[0], rpy[1], rpy[2]), self._mount_inv)
        q = self.q
        if q is None:
            self.q = measured
            return
        q = quat_multiply(q, _exp(w[0] * dt, w[1] * dt, w[2] * dt))
        # error rotation (base frame) from the prediction to the registers' orientation
        ex, ey, ez, ew = quat_multiply((-q[0], -q[1], -q[2], q[3]), measured)
        if ew < 0:
            ex, ey, ez, ew = -ex, -ey, -ez, -ew
        k = 2.0 * self.gain
        q = quat_multiply(q, _exp(k * ex, k * ey, k * ez))
        n = math.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
        self.q = (q[0] / n, q[1] / n, q[2] / n, q[3] / n)
