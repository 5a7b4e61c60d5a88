"""Regrouping to base parameters by QR with column pivoting (Gautier 1990).

With ``W`` the stacked regressor, a permutation ``[P_b P_d]`` splits its
columns into ``r = rank(W)`` independent ones (``Y = W P_b``) and dependent
ones with ``W P_d = Y K_d``.  Then (paper eqs. 15-17)::

    pi    = (P_b^T + K_d P_d^T) theta          base parameters, Y pi = W theta
    theta = P_b (pi - K_d theta_d) + P_d theta_d    for any theta_d

The rank and the choice of columns are made on the column-normalised matrix
(masses and inertias differ by 1e4 in SI on servo-sized robots, which would
otherwise steer the pivoting by units); ``K_d`` is solved on the raw one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg

from servoloop.calibration.errors import FitError

__all__ = ["BaseParameters", "regroup", "regroup_model"]

# Rank threshold on |R_ii| / |R_00| of the column-normalised QR.  Structural
# dependencies give ~1e-15; genuine columns of random states are > 1e-6.
RANK_TOL = 1e-9
# Entries of the column-normalised K_d below this are roundoff of exact zeros.
ZERO_TOL = 1e-10
# A column whose norm is below this fraction of the largest one is zero.
ZERO_COLUMN_TOL = 1e-10


@dataclass(frozen=True)
class BaseParameters:
    """The result of :func:`regroup`.

    Attributes
    ----------
    idx_b : ndarray (r,) int, sorted columns of theta kept as base columns
    idx_d : ndarray (p - r,) int, sorted dependent columns
    K_d : ndarray (r, p - r), W[:, idx_d] = W[:, idx_b] K_d
    n_params : int, p
    """

    idx_b: np.ndarray
    idx_d: np.ndarray
    K_d: np.ndarray
    n_params: int

    @property
    def rank(self) -> int:
        return len(self.idx_b)

    @property
    def P_b(self) -> np.ndarray:
        """(p, r) selection matrix of the base columns."""
        return np.eye(self.n_params)[:, self.idx_b]

    @property
    def P_d(self) -> np.ndarray:
        """(p, p - r) selection matrix of the dependent columns."""
        return np.eye(self.n_params)[:, self.idx_d]

    @property
    def matrix(self) -> np.ndarray:
        """(r, p) map theta -> pi, P_b^T + K_d P_d^T (eq. 16)."""
        return self.P_b.T + self.K_d @ self.P_d.T

    def base_regressor(self, W: np.ndarray) -> np.ndarray:
        """Y = W P_b: the base columns of W (..., r)."""
        return np.asarray(W)[..., self.idx_b]

    def pi_from_theta(self, theta) -> np.ndarray:
        """pi (r,) = (P_b^T + K_d P_d^T) theta (eq. 16)."""
        theta = np.asarray(theta, dtype=float)
        return theta[self.idx_b] + self.K_d @ theta[self.idx_d]

    def theta_from_pi(self, pi, theta_d=None) -> np.ndarray:
        """theta (p,) = P_b (pi - K_d theta_d) + P_d theta_d (eq. 17); theta_d = 0 by default."""
        theta_d = np.zeros(len(self.idx_d)) if theta_d is None else np.asarray(theta_d, dtype=float)
        theta = np.empty(self.n_params)
        theta[self.idx_b] = np.asarray(pi, dtype=float) - self.K_d @ theta_d
        theta[self.idx_d] = theta_d
        return theta

    def names(self, names) -> list[str]:
        """Readable base-parameter names: ``Izz + 0.045 m_link2 + ...`` style, (r,)."""
        out = []
        for i, b in enumerate(self.idx_b):
            terms = [names[b]]
            for k, d in enumerate(self.idx_d):
                c = self.K_d[i, k]
                if c != 0.0:
                    terms.append(f"{c:+.4g} {names[d]}")
            out.append(" ".join(terms))
        return out


def regroup(W: np.ndarray, rank_tol: float = RANK_TOL) -> BaseParameters:
    """Base parameters of the stacked regressor ``W`` (M, p), M >= p.

    Build ``W`` from many random states (structure) or from the data itself;
    columns that are identically zero become dependent with K_d = 0.
    """
    W = np.asarray(W, dtype=float)
    if W.ndim != 2 or W.shape[0] < W.shape[1]:
        raise FitError(f"regroup needs a stacked regressor with rows >= columns, got {W.shape}")
    p = W.shape[1]
    norms = np.linalg.norm(W, axis=0)
    if norms.max() == 0.0:
        raise FitError("regroup: the regressor is all zeros (no motion?)")
    # Columns that are zero up to roundoff (e.g. 1e-14 from a sin(0) of a
    # fixed axis) must stay zero: normalising them would make them look independent.
    zero = norms <= ZERO_COLUMN_TOL * norms.max()
    scale = np.where(zero, 1.0, norms)
    Ws = np.where(zero, 0.0, W / scale)
    _, R, perm = scipy.linalg.qr(Ws, mode="economic", pivoting=True)
    diag = np.abs(np.diag(R))
    r = int(np.sum(diag > rank_tol * diag[0]))
    idx_b = np.sort(perm[:r])
    idx_d = np.sort(perm[r:])
    # K_d in normalised units from the QR of the base block, then back to SI.
    Q_b, R_b = np.linalg.qr(Ws[:, idx_b])
    K_s = scipy.linalg.solve_triangular(R_b, Q_b.T @ Ws[:, idx_d])
    K_s[np.abs(K_s) < ZERO_TOL] = 0.0
    # Ws = W diag(1/scale): W_d = W_b diag(1/s_b) K_s diag(s_d)
    K_d = K_s / scale[idx_b][:, None] * scale[idx_d][None, :]
    return BaseParameters(idx_b=idx_b, idx_d=idx_d, K_d=K_d, n_params=p)


def regroup_model(model, n_samples: int = 400, seed: int = 0, scale: float = 2.0) -> BaseParameters:
    """Structural base parameters of a :class:`RegressorModel` from random states.

    q uniform within the joint limits (clipped to +-pi), v and a uniform in
    +-``scale`` [rad/s, rad/s^2]; ``n_samples`` states.
    """
    rng = np.random.default_rng(seed)
    lo = np.maximum(model.lower, -np.pi)
    hi = np.minimum(model.upper, np.pi)
    nq = len(lo)
    Q = rng.uniform(lo, hi, size=(n_samples, nq))
    if model.floating_base:
        raise FitError("regroup_model: random free-flyer states are not supported; "
                       "call regroup() on a stacked regressor")
    V = rng.uniform(-scale, scale, size=(n_samples, model.nv))
    A = rng.uniform(-scale, scale, size=(n_samples, model.nv))
    return regroup(model.stacked(Q, V, A))
