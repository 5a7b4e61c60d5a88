"""The no-slip contact ID's forces shared among the stance feet (issue 11, seed 003's split).

With the feet stuck (tangential forces unbounded) the contact forces that give the
no-slip ID's base wrench form a family: with four coplanar feet, horizontal squeezes
between feet and a twist of the normal forces across the diagonals (+ - - +).  Alg. 2
returns an end of it, a stance foot at zero force (measured in the daemon, quadruped,
lockstep through the virtual bus: a foot at < 2 % of the load on every four-foot tick),
and at a planned lift-off the lifting foot may carry all of it.  Every member keeps the
ID's accelerations, so :func:`split_forces` picks the one of least weighted norm
``sum_i w_i f_n,i^2 + |f_t,i|^2``, pushing only;
:func:`liftoff_weights` makes a foot's weight grow over the last ``LIFTOFF_HORIZON_S``
of its stance, so its load goes to the feet that stay before it lifts.  The torques
change by ``-J_j^T delta`` (the joint columns of the contact Jacobians).

The same step as ``experiments/seed003_distribute.py``, written anew for the daemon's
stance-plane ID, where every declared stance foot is loaded (none held at zero for a row
the answer leaves open: that is the foot left floating at the next lift-off).
"""

from __future__ import annotations

import numpy as np

__all__ = ["LIFTOFF_HORIZON_S", "LIFTOFF_WEIGHT_MAX", "liftoff_weights", "split_forces"]

#: the last part of a foot's stance [s] over which its normal-force weight grows
LIFTOFF_HORIZON_S = 0.03
#: a foot's weight at its lift-off (relative to 1 for a foot that stays)
LIFTOFF_WEIGHT_MAX = 1.0e4


def liftoff_weights(gait, t: float, stance, dt: float, horizon: float = LIFTOFF_HORIZON_S,
                    out: np.ndarray | None = None) -> np.ndarray:
    """(feet,) normal-force weights: 1, rising as ``(horizon / tau)^2`` over the last ``horizon``
    seconds before a stance foot's planned lift-off (``tau`` [s] left, at least one tick;
    at most LIFTOFF_WEIGHT_MAX).

    gait : :class:`controller.wholebody.gait.TrotGait`; t : gait time [s] (negative while the
    robot stands before the trot: every weight 1); stance : (feet,) bool; dt : tick [s].
    """
    st = np.asarray(stance, dtype=bool)
    w = np.ones(st.size) if out is None else out
    w[:] = 1.0
    if horizon <= 0.0:
        return w
    period = gait.period
    # a foot lifts off (1 - duty) of a cycle before its touchdown phase
    lift_phase = np.mod(gait.touchdown - (1.0 - gait.duty), 1.0)
    # s to the next lift-off (standing before the trot, t < 0: the first one, at t = 0 on)
    ahead = max(-t, 0.0)
    left = np.mod(lift_phase - max(t, 0.0) / period, 1.0) * period + ahead
    left = np.maximum(left, dt)
    lifting = st & (left <= horizon + 1e-12)
    w[lifting] = np.minimum((horizon / left[lifting]) ** 2, LIFTOFF_WEIGHT_MAX)
    return w


def split_forces(J: np.ndarray, forces: np.ndarray, weights: np.ndarray,
                 open_: np.ndarray | None = None, iters: int = 8):
    """Forces (k, 3) [N, world] of least weighted norm with the base wrench of ``forces``.

    Parameters
    ----------
    J : (3k, nv) world point Jacobians of the ID's contacts (base columns 0:6)
    forces : (k, 3) the ID's contact forces [N]
    weights : (k,) normal-force weights (tangential ones are 1)
    open_ : (k,) bool or None, contacts that stay unloaded

    Returns
    -------
    new : (k, 3) the split forces; ``delta`` (k, 3) their change (``tau -= J_j^T delta``).
        Both the ID's own answer (``delta = 0``) when no pushing-only split has its wrench.

    A normal force that comes out negative is held at zero and the rest solved again.
    """
    forces = np.asarray(forces, dtype=float)
    k = forces.shape[0]
    if k == 0:
        return forces.copy(), np.zeros_like(forces)
    A = J[:, :6].T                                   # (6, 3k): forces -> base wrench
    b = A @ forces.reshape(-1)
    wdiag = np.ones(3 * k)
    wdiag[2::3] = weights
    free = np.ones(3 * k, dtype=bool)
    if open_ is not None:
        free[np.repeat(np.asarray(open_, dtype=bool), 3)] = False
    x = np.zeros(3 * k)
    for _ in range(iters):
        x[:] = 0.0
        idx = np.flatnonzero(free)
        if idx.size == 0:
            break
        Af = A[:, idx]
        Wi = 1.0 / wdiag[idx]
        # min x^T W x s.t. Af x = b: x = W^-1 Af^T (Af W^-1 Af^T)^+ b; Af is rank deficient
        # with fewer than three contacts (lstsq)
        lam = np.linalg.lstsq((Af * Wi) @ Af.T, b, rcond=1e-12)[0]
        x[idx] = Wi * (Af.T @ lam)
        neg = np.flatnonzero(free[2::3] & (x[2::3] < 0.0))
        if neg.size == 0:
            break
        worst = neg[np.argmin(x[3 * neg + 2])]
        free[3 * worst:3 * worst + 3] = False
    new = x.reshape(k, 3)
    if (np.any(new[:, 2] < -1e-9)
            or np.abs(A @ x - b).max() > 1e-6 * max(1.0, float(np.abs(b).max()))):
        return forces.copy(), np.zeros_like(forces)
    return new, new - forces
