"""Slow NumPy references for core_cy/contact/_kernels.pyx (tests only).

Written straight from seed 002's equations (with errata A9-A12 applied) so
that the compiled kernels have an independent statement to agree with.
"""

from __future__ import annotations

import numpy as np

__all__ = ["smoothstep", "damping_ramp", "normal_force", "friction_coefficient",
           "friction_force", "friction_slope", "contact_damping", "lcp_natural_residual"]


def smoothstep(x):
    x = np.clip(np.asarray(x, dtype=float), 0.0, 1.0)
    return 3 * x**2 - 2 * x**3


def _step(x, x0, h0, x1, h1):
    return h0 + (h1 - h0) * smoothstep((x - x0) / (x1 - x0))


def damping_ramp(law, depth):
    return law.damping_max * smoothstep(np.asarray(depth, dtype=float) / law.ramp_width)


def normal_force(law, depth, depth_rate):
    d = np.asarray(depth, dtype=float)
    f = law.stiffness * np.maximum(d, 0.0) ** law.exponent + damping_ramp(law, d) * depth_rate
    f = np.where(d > 0, f, 0.0)
    return np.maximum(f, 0.0) if law.clamp_normal else f


def friction_coefficient(law, v):
    v = np.asarray(v, dtype=float)
    a = np.abs(v)
    inner = _step(v, -law.v_static, -law.mu_static, law.v_static, law.mu_static)
    mid = np.sign(v) * _step(a, law.v_static, law.mu_static, law.v_dynamic, law.mu_dynamic)
    out = np.sign(v) * law.mu_dynamic
    return np.where(a <= law.v_static, inner, np.where(a <= law.v_dynamic, mid, out))


def friction_force(law, slip, fn):
    slip = np.atleast_2d(np.asarray(slip, dtype=float))
    fn = np.broadcast_to(np.asarray(fn, dtype=float), slip.shape[:1])
    if law.cone == "per_axis":
        return -friction_coefficient(law, slip) * fn[:, None]
    s = np.linalg.norm(slip, axis=1)
    safe = np.where(s > 0, s, 1.0)
    scale = np.array([law.cone_scale_x, law.cone_scale_y])
    f = -(friction_coefficient(law, s) * fn / safe)[:, None] * slip * scale
    return np.where((s > 0)[:, None] & (fn > 0)[:, None], f, 0.0)


def lcp_natural_residual(W, b, mu, lam, cone="per_axis"):
    """inf-norm of lam - proj(lam - w) over every (t1, t2, n) block."""
    w = W @ lam + b
    res = 0.0
    for c in range(len(mu)):
        ln, wn = lam[3 * c + 2], w[3 * c + 2]
        res = max(res, abs(min(ln, wn)))
        p = lam[3 * c:3 * c + 2] - w[3 * c:3 * c + 2]
        lim = mu[c] * ln
        if cone == "per_axis":
            p = np.clip(p, -lim, lim)
        elif np.linalg.norm(p) > lim:
            p = p * lim / np.linalg.norm(p)
        res = max(res, float(np.max(np.abs(lam[3 * c:3 * c + 2] - p))))
    return res


def friction_slope(law, v):
    """d mu / d v of :func:`friction_coefficient` (central finite difference)."""
    h = 1e-7 * law.v_static
    v = np.asarray(v, dtype=float)
    return (friction_coefficient(law, v + h) - friction_coefficient(law, v - h)) / (2 * h)


def contact_damping(law, depth, v_local):
    """PSD D = -df/dv (3, 3) in the contact frame, as the compiled kernel builds it."""
    D = np.zeros((3, 3))
    fn = float(normal_force(law, depth, -v_local[2]))
    if depth <= 0 or fn <= 0:
        return D
    D[2, 2] = float(damping_ramp(law, depth))
    if law.cone == "per_axis":
        D[0, 0] = fn * max(float(friction_slope(law, v_local[0])), 0.0)
        D[1, 1] = fn * max(float(friction_slope(law, v_local[1])), 0.0)
        return D
    s = float(np.hypot(v_local[0], v_local[1]))
    if s < 1e-9:
        m = ms = 1.5 * law.mu_static / law.v_static
        u = np.array([1.0, 0.0])
    else:
        m = float(friction_coefficient(law, s)) / s
        ms = max(float(friction_slope(law, s)), 0.0)
        u = np.asarray(v_local[:2]) / s
    T = fn * (ms * np.outer(u, u) + m * (np.eye(2) - np.outer(u, u)))
    D[:2, :2] = np.diag([law.cone_scale_x, law.cone_scale_y]) @ T
    return D
