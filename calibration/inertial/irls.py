"""Iteratively reweighted least squares with a per-sample noise covariance.

The loop of the reference code (ConstrainedSysID, Han et al. 2020): rows are
grouped per sample (``ncv`` rows each, one per joint); an inner loop whitens
every sample with ``Omega^{-1/2}`` and re-estimates ``Omega`` from the
residuals; an outer loop gives weight 0 to samples with a whitened residual
beyond ``k`` (hard redescender), and a sample never gets its weight back.
The reference code cuts single rows; we cut the whole sample because the
whitening mixes its rows (see the comment at the cut).

Erratum (seed-001 digest, section 2): the code updates
``Omega <- Omega E E^T Omega / (N - p)`` with E the *whitened* residuals,
which gives Omega_k = Sigma^k: it collapses to 0 or diverges.  The
consistent update is the covariance of the un-whitened residuals,
``Omega^{1/2} E E^T Omega^{1/2} / (N - p)``; ``consistent=False`` reproduces
the code's form.  Two more choices of ours, both so that Omega estimates the
true noise covariance: the degrees of freedom are counted per joint pair
over the samples still weighted (``n - p / ncv``), and after samples were
cut at ``k`` the estimate is divided by the variance of a unit normal truncated at
``+-k`` (otherwise it shrinks by 3 % at k = 3, and the cut with it, at
every outer iteration).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import erf, exp, pi, sqrt

import numpy as np

from servoloop.calibration.errors import FitError

__all__ = ["IrlsResult", "irls", "truncated_variance"]


def truncated_variance(k: float) -> float:
    """Variance of a standard normal conditioned on |x| <= k."""
    phi = exp(-0.5 * k * k) / sqrt(2.0 * pi)
    mass = erf(k / sqrt(2.0))
    return 1.0 - 2.0 * k * phi / mass


@dataclass
class IrlsResult:
    """Result of :func:`irls`.

    Attributes
    ----------
    x : ndarray, the last fit's solution
    omega : ndarray (ncv, ncv), estimated noise covariance of one sample [unit of U ^2]
    weights : ndarray (N * ncv,), 0/1 row weights (equal within a sample)
    weight_iterations : int, outer loops run
    covariance_iterations : list of int, inner loops run in each outer loop
    omega_history : list of ndarray, every Omega of every inner loop, in order
    weight_history : list of ndarray, the row weights each outer loop used, in order
    converged : bool, the outer loop ended because the weights stopped changing
    """

    x: np.ndarray
    omega: np.ndarray
    weights: np.ndarray
    weight_iterations: int
    covariance_iterations: list = field(default_factory=list)
    omega_history: list = field(default_factory=list)
    weight_history: list = field(default_factory=list)
    converged: bool = False


def _sqrt_and_inv_sqrt(omega):
    w, V = np.linalg.eigh(omega)
    if w[0] <= 0:
        return None, None
    return (V * np.sqrt(w)) @ V.T, (V / np.sqrt(w)) @ V.T


def irls(Phi: np.ndarray, U: np.ndarray, ncv: int, fit, n_params: int | None = None,
         k: float = 3.0, consistent: bool = True, tol: float = 1e-4,
         max_weight_iterations: int = 20, max_covariance_iterations: int = 50) -> IrlsResult:
    """Robust, noise-whitened least squares.

    Parameters
    ----------
    Phi : ndarray (N * ncv, p), regressor rows, sample-major (sample i = rows i*ncv .. i*ncv+ncv-1)
    U : ndarray (N * ncv,), measured torques [N m]
    ncv : int, rows per sample (joints)
    fit : callable (Phi_hat, U_hat) -> x (p,), the solver of the weighted, whitened problem
    n_params : int or None, parameters for the degrees of freedom (default: rank of Phi)
    k : float, cut-off of the hard redescender on whitened residuals [sigma]
    consistent : bool, False = the reference code's covariance update (diverges; for comparison)
    tol : float, relative change of Omega (Frobenius) that ends the inner loop
    max_weight_iterations, max_covariance_iterations : int, hard caps of the two loops

    Returns
    -------
    IrlsResult
    """
    Phi = np.asarray(Phi, dtype=float)
    U = np.asarray(U, dtype=float).reshape(-1)
    if Phi.shape[0] != U.size or U.size % ncv:
        raise FitError(f"irls: Phi {Phi.shape} and U {U.shape} are not N x {ncv} rows")
    N = U.size // ncv
    p = Phi.shape[1]
    n_params = np.linalg.matrix_rank(Phi) if n_params is None else n_params
    Phi3 = Phi.reshape(N, ncv, p)
    U2 = U.reshape(N, ncv)
    D = np.ones((N, ncv))
    omega = np.eye(ncv)
    result = IrlsResult(np.zeros(p), omega, D.reshape(-1), 0)
    correction = 1.0
    for outer in range(max_weight_iterations):
        result.weight_history.append(D.reshape(-1).copy())
        n_inner = 0
        for _ in range(max_covariance_iterations):
            n_inner += 1
            half, S = _sqrt_and_inv_sqrt(omega)
            U_hat = D * (U2 @ S.T)
            Phi_hat = D[:, :, None] * np.einsum("ij,njp->nip", S, Phi3)
            x = np.asarray(fit(Phi_hat.reshape(-1, p), U_hat.reshape(-1)), dtype=float)
            E = U_hat - (Phi_hat @ x)
            dof = D.T @ D - n_params / ncv
            if np.any(dof <= 0):
                raise FitError(f"irls: too few weighted samples ({int(D.sum())} rows) "
                               f"for {n_params} parameters")
            cov_white = (E.T @ E) / dof
            new = (half @ cov_white @ half if consistent else omega @ cov_white @ omega) * correction
            new = 0.5 * (new + new.T)
            result.omega_history.append(new)
            if np.linalg.eigvalsh(new)[0] <= 0 or not np.all(np.isfinite(new)):
                break  # not a covariance any more: keep the last good one
            change = np.linalg.norm(new - omega) / max(np.linalg.norm(omega), 1e-300)
            omega = new
            if change <= tol:
                break
        result.x, result.omega = x, omega
        result.covariance_iterations.append(n_inner)
        result.weight_iterations = outer + 1
        # Residuals whitened with the Omega the fit used.  A whole sample is
        # cut when any of its rows exceeds k: whitening mixes the rows of a
        # sample, so a huge residual on one joint leaks into the others'
        # whitened rows, and cutting rows alone let Omega diverge on real
        # data (Coulomb sign flips after filtering).
        psi = np.repeat(np.all(np.abs(E) <= k, axis=1, keepdims=True).astype(float), ncv, axis=1)
        D_new = np.minimum(D, psi)
        if np.array_equal(D_new, D):
            result.converged = True
            break
        D = D_new
        if consistent:
            correction = 1.0 / truncated_variance(k)
    result.weights = D.reshape(-1)
    return result
