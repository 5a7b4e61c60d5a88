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

The Coulomb LCP's answer (``lcp_coulomb``) is as undistributed; its sticking contacts are
shared the same way with ``mu`` (the forces kept inside the friction cone) and ``keep``
(a sliding contact's force as the LCP gave it).

The same step as ``experiments/seed003_distribute.py``, written anew for the daemon's
stance-plane ID, where every declared stance foot is loaded (none held at zero for a row
the answer leaves open: that is the foot left floating at the next lift-off).

The daemon's tick runs it compiled (:mod:`._force_split`: ``BalanceCore._split`` and
``trot``'s :func:`liftoff_weights`; ~100 us a tick in NumPy); this module is its test
oracle, and seed 003's experiment uses its :func:`_least_norm`.
"""

from __future__ import annotations

import numpy as np

__all__ = ["LIFTOFF_HORIZON_S", "LIFTOFF_WEIGHT_MAX", "cone_step", "liftoff_weights", "split_forces"]

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
                 open_: np.ndarray | None = None, iters: int = 8, mu: float | None = None,
                 keep: np.ndarray | None = None):
    """Forces (k, 3) [N, world] of least weighted norm with the base wrench of ``forces``.

    Parameters
    ----------
    J : (3k, nv) world point Jacobians of the ID's contacts (base columns 0:6)
    forces : (k, 3) the ID's contact forces [N]
    weights : (k,) normal-force weights (tangential ones are 1)
    open_ : (k,) bool or None, contacts that stay unloaded
    mu : float or None, friction bound (the ``lcp_coulomb`` answer's split): every contact's
        force stays inside the cone ``|f_t| <= mu f_n`` (world z the normal).  A contact the
        split puts outside is held at its nearest force on the cone and the others solved
        again; whatever is still outside then is settled by taking the answer ``s`` of the way
        from ``forces`` (inside the cone) to that split, ``s`` in [0, 1] the largest that keeps
        every contact inside (the cone is convex and both ends have the wrench, so every
        point between does).
    keep : (k,) bool or None, contacts whose force stays as given (a sliding foot's, on the
        cone's edge); the others share the rest of the wrench

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
    f0 = forces.reshape(-1)
    wrench = A @ f0
    tol = 1e-6 * max(1.0, float(np.abs(wrench).max()))
    wdiag = np.ones(3 * k)
    wdiag[2::3] = weights
    free = np.ones(3 * k, dtype=bool)
    if open_ is not None:
        free[np.repeat(np.asarray(open_, dtype=bool), 3)] = False
    held = np.zeros(k, dtype=bool) if keep is None else np.array(keep, dtype=bool)
    fixed = f0.copy()                   # the held contacts' forces (as given, or projected)
    bounded = mu is not None and np.isfinite(mu)
    best = None
    # a contact the split puts outside the cone is held at its nearest force on the cone and
    # the others solved again (at most once per contact)
    for _ in range(k + 1 if bounded else 1):
        h3 = np.repeat(held, 3)
        x = _least_norm(A, wdiag, free & ~h3, wrench - A[:, h3] @ fixed[h3], iters)
        x[h3] = fixed[h3]
        if x[2::3].min() < -1e-9 or np.abs(A @ x - wrench).max() > tol:
            break
        best = x
        if not bounded:
            break
        f = x.reshape(k, 3)
        ft = np.sqrt(f[:, 0] ** 2 + f[:, 1] ** 2)
        out = ~held & _outside(ft, f[:, 2], mu)
        if not out.any():
            break
        fixed.reshape(k, 3)[out] = _onto_cone(f[out], ft[out], mu)
        held |= out
    if best is None:
        return forces.copy(), np.zeros_like(forces)
    new = best.reshape(k, 3)
    delta = new - forces
    if bounded:
        s = cone_step(forces, delta, mu)
        if s < 1.0:
            delta *= s
            new = forces + delta
    return new, delta


def _least_norm(A, wdiag, free, b, iters) -> np.ndarray:
    """(3k,) the least ``x^T W x`` with ``A x = b`` over the ``free`` entries (others 0), a
    normal force that comes out negative held at zero and the rest solved again."""
    free = free.copy()
    x = np.zeros(A.shape[1])
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
    return x


def _outside(ft, fn, mu: float):
    """(m,) bool: tangential forces ``ft`` (m,) [N] over the cone ``mu fn`` (normal forces
    ``fn`` (m,)) by more than rounding (1e-9 relative, 1e-12 N)."""
    return ft > mu * fn * (1.0 + 1e-9) + 1e-12


def _onto_cone(f: np.ndarray, ft: np.ndarray, mu: float) -> np.ndarray:
    """(m, 3) the nearest forces on the cone ``|f_t| <= mu f_n`` to ``f`` (m, 3), outside it
    (``ft`` (m,) their tangential norms)."""
    # the ray through f's tangential direction at slope mu: f_n' = (f_n + mu |f_t|) / (1 + mu^2)
    fn = np.maximum((f[:, 2] + mu * ft) / (1.0 + mu * mu), 0.0)
    out = np.empty_like(f)
    scale = np.where(ft > 0.0, mu * fn / np.where(ft > 0.0, ft, 1.0), 0.0)
    out[:, 0] = f[:, 0] * scale
    out[:, 1] = f[:, 1] * scale
    out[:, 2] = fn
    return out


def cone_step(forces: np.ndarray, delta: np.ndarray, mu: float) -> float:
    """The largest ``s`` in [0, 1] with every ``forces + s' delta`` (k, 3) [N] inside the cone
    ``|f_t| <= mu f_n`` for all ``s'`` in [0, s] (contacts with ``delta`` 0 aside); 0 when a
    moved contact of ``forces`` is on the edge or outside and ``delta`` leads out.

    Per contact ``g(s) = mu^2 f_n(s)^2 - |f_t(s)|^2`` is a quadratic; a contact whose end
    (``s = 1``) is inside the cone (``f_n >= 0`` and ``|f_t| <= mu f_n`` to rounding, 1e-9
    relative: the split's held contacts end on the edge) never binds (the cone is convex);
    for the others the step ends at ``g``'s first root after 0.
    """
    fn0, dn = forces[:, 2], delta[:, 2]
    m2 = mu * mu
    fn1 = fn0 + dn
    ft1 = forces[:, :2] + delta[:, :2]
    # a contact the step leaves alone (held: a sliding one, on the edge) does not bind
    moved = (delta != 0.0).any(axis=1)
    # outside as the split's hold loop tells (``_outside``): a contact it held on the edge
    # ends there to rounding, and a strict test made the step 0 or 1 by a last bit
    # (a contact starting unloaded has no step: the whole split or none)
    out = moved & ((fn1 < 0.0) | _outside(np.sqrt((ft1 * ft1).sum(axis=1)), fn1, mu))
    if not out.any():
        return 1.0
    s = 1.0
    for i in np.flatnonzero(out):
        ft, dt = forces[i, :2], delta[i, :2]
        c = m2 * fn0[i] ** 2 - ft @ ft
        if fn0[i] < 0.0 or c <= 0.0:        # on the edge (or outside) already: no step
            return 0.0
        a = m2 * dn[i] ** 2 - dt @ dt
        b = 2.0 * (m2 * fn0[i] * dn[i] - ft @ dt)
        # g(0) = c > 0 and g or f_n < 0 at 1: the first root in (0, 1]
        if abs(a) < 1e-12 * max(abs(b), c):
            r = -c / b if b < 0.0 else 1.0
        else:
            disc = max(b * b - 4.0 * a * c, 0.0)
            sq = np.sqrt(disc)
            # the roots, without cancellation: q = -(b + sign(b) sqrt), roots q / a and c / q
            qv = -0.5 * (b + np.copysign(sq, b))
            roots = [rt for rt in ((qv / a) if a != 0.0 else np.inf, (c / qv) if qv != 0.0 else np.inf)
                     if rt > 0.0]
            r = min(roots) if roots else 1.0
        s = min(s, r)
    # just inside the edge: rounding must not put the force out
    return max(0.0, s * (1.0 - 1e-9))
