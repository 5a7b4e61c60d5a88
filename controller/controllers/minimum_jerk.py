"""Minimum-jerk interpolation (Flash & Hogan 1985): zero velocity and acceleration at both ends."""

from __future__ import annotations

__all__ = ["min_jerk_s", "min_jerk_ds"]


def min_jerk_s(tau: float) -> float:
    """Path fraction at normalized time ``tau`` in [0, 1] (clamped): 10t^3 - 15t^4 + 6t^5."""
    if tau <= 0.0:
        return 0.0
    if tau >= 1.0:
        return 1.0
    t3 = tau * tau * tau
    return t3 * (10.0 + tau * (-15.0 + 6.0 * tau))


def min_jerk_ds(tau: float) -> float:
    """d(min_jerk_s)/d(tau): 30t^2 - 60t^3 + 30t^4 (0 outside [0, 1])."""
    if tau <= 0.0 or tau >= 1.0:
        return 0.0
    t2 = tau * tau
    return 30.0 * t2 * (1.0 - tau) * (1.0 - tau)
