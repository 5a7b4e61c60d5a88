"""The attitude filter: quaternion helpers, and gyro + orientation registers fused."""

import math

import numpy as np
import pytest

from servoloop.controller.attitude import AttitudeFilter, quat_from_rpy, quat_multiply, quat_rpy
from servoloop.virtual_bus.imu_device import matrix_rpy, rpy_matrix


def _matrix(q):
    x, y, z, w = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


@pytest.mark.parametrize("rpy", [(0.1, -0.2, 0.3), (-1.0, 0.5, 2.5), (0.0, 0.0, -3.0)])
def test_rpy_round_trips_and_matches_the_matrix_convention(rpy):
    q = quat_from_rpy(*rpy)
    assert np.allclose(quat_rpy(q), rpy)
    assert np.allclose(_matrix(q), rpy_matrix(*rpy))
    assert np.allclose(matrix_rpy(rpy_matrix(*rpy)), rpy)
    a, b = quat_from_rpy(0.3, 0, 0), quat_from_rpy(0, 0.4, 0)
    assert np.allclose(_matrix(quat_multiply(a, b)), rpy_matrix(0.3, 0, 0) @ rpy_matrix(0, 0.4, 0))


def test_the_filter_follows_a_rotation_with_a_biased_gyro_and_quantised_registers():
    f = AttitudeFilter(mount_rpy=(0.0, 0.0, math.pi), gain=0.02)
    dt, bias = 0.001, np.array([0.02, -0.01, 0.015])
    rate = np.array([0.3, -0.2, 0.1])             # rad/s about the base axes, constant
    R = np.eye(3)
    mount = rpy_matrix(0, 0, math.pi)
    errs = []
    for k in range(3000):
        R = R @ rpy_matrix(*(rate * dt))            # small steps: fine as a rotation vector
        R_board = R @ mount
        rpy = np.round(np.array(matrix_rpy(R_board)) / math.radians(0.1)) * math.radians(0.1)
        f.update(mount.T @ rate + bias, rpy, dt)
        if k > 500:
            errs.append(np.linalg.norm(_matrix(f.q) - R))
    assert max(errs) < 5e-3            # < 0.3 deg despite 0.1 deg steps and a 0.02 rad/s bias
    assert np.allclose(f.omega, rate + mount @ bias)
