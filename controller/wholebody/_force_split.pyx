# cython: language_level=3
"""The balance tick's step 4, the contact forces shared among the stance feet, compiled
(issue 11: ``trot`` at 1 kHz).

:class:`ForceSplitKernel` is :func:`controller.wholebody.force_split.split_forces`
(the least weighted norm member of the forces with the ID's base wrench, a negative
normal force held at zero, the friction cone's hold loop and its ``cone_step``) and
``BalanceCore._split``'s glue around it (the lift-off weights per contact point, the
Coulomb answer's sliding contacts kept, ``tau_m -= J_j^T delta``) in C.  In NumPy the
split cost ~90 us of the trot's tick (``servoloop bench balance``: trot step 27 -> 121
us): a few dozen calls on arrays of 6 to 36 numbers.

The small dense solve is the one ``np.linalg.lstsq`` makes (``rcond`` 1e-12): the
6 x 6 system ``A W^-1 A^T lam = b``, rank deficient with fewer than three contacts.
With three or more it is positive definite and its one answer comes from a Cholesky
solve (0.1 us) unless a pivot falls under ``CHOL_MIN`` of the largest diagonal entry;
else (a trot's two-foot ticks) from its pseudo-inverse by a cyclic Jacobi
eigen-decomposition (the matrix is symmetric: its singular values are its eigenvalues'
sizes, so the terms kept and the minimum-norm ``lam`` are lstsq's).  LAPACK ``dgelsd``
(``scipy.linalg.cython_lapack``, the routine NumPy's ``lstsq`` calls) answers when the
Jacobi sweeps do not settle: ~4 us warm, and in the daemon, run cold between ticks, it
made the split 18 us a tick at p50 (Jacobi: 8).

Every buffer is allocated in ``__init__`` (sized for ``kmax`` contacts); the inner loops
run without the GIL.  ``force_split.py`` stays as the NumPy oracle
(``tests/unit/controller/test_force_split_compiled.py``).  The module-level
:func:`split_forces`, :func:`least_norm` and :func:`cone_step` make a kernel per call:
for tests, not for the tick; :func:`liftoff_weights` (the ``trot`` controller's weights
of every tick) allocates nothing with ``out``.
"""

import numpy as np

from servoloop.controller.wholebody.force_split import LIFTOFF_HORIZON_S, LIFTOFF_WEIGHT_MAX

from libc.math cimport INFINITY, copysign, fabs, isfinite, sqrt
from libc.string cimport memcpy, memset
from scipy.linalg.cython_lapack cimport dgelsd

from servoloop.controller.wholebody._liftoff cimport liftoff_weights_c

#: ``lstsq``'s ``rcond`` in the oracle: singular values under it (relative) count as zero
cdef double RCOND = 1e-12
#: the Jacobi eigen-decomposition's most sweeps (quadratic convergence: ~6 for a 6 x 6)
cdef int JACOBI_SWEEPS = 30
#: the Cholesky fast path's least pivot (squared, relative to M's largest diagonal entry):
#: M's condition stays near 1e8 or under, its answer lstsq's to ~1e-8 relative at worst
#: and ~1e-13 in practice; nearer singular, dgelsd as lstsq
cdef double CHOL_MIN = 1e-8


cdef bint _cholesky_solve(const double* M, double* b, double* L) noexcept nogil:
    # M x = b for a symmetric (6, 6) M whose Cholesky pivots all exceed CHOL_MIN of its
    # largest diagonal entry (then lstsq's answer to rounding: the system is far from its
    # rcond cut); x into b, True.  False, b untouched, for any other M
    cdef int i, j, c
    cdef double dmax = 0.0, e
    cdef double y[6]
    for i in range(6):
        if M[7 * i] > dmax:
            dmax = M[7 * i]
    if not dmax > 0.0:
        return False
    for j in range(6):
        e = M[7 * j]
        for c in range(j):
            e -= L[6 * j + c] * L[6 * j + c]
        if not e > CHOL_MIN * dmax:
            return False
        L[7 * j] = sqrt(e)
        for i in range(j + 1, 6):
            e = M[6 * i + j]
            for c in range(j):
                e -= L[6 * i + c] * L[6 * j + c]
            L[6 * i + j] = e / L[7 * j]
    for i in range(6):              # L y = b
        e = b[i]
        for c in range(i):
            e -= L[6 * i + c] * y[c]
        y[i] = e / L[7 * i]
    for i in range(5, -1, -1):      # L^T x = y
        e = y[i]
        for c in range(i + 1, 6):
            e -= L[6 * c + i] * b[c]
        b[i] = e / L[7 * i]
    return True


cdef bint _pinv_solve(double* M, double* b, double* V) noexcept nogil:
    # b <- M^+ b for a symmetric (6, 6) M (overwritten), the pseudo-inverse as lstsq with
    # rcond RCOND: M's singular values are its eigenvalues' sizes, so the cyclic Jacobi
    # eigen-decomposition M = V diag(lam) V^T and the terms of |lam| > RCOND max |lam|.
    # A few kB of data and code against dgelsd's ~9 kB workspace and a dozen LAPACK
    # routines (in the daemon, with the bus and the estimator between two ticks, dgelsd
    # ran cold: the split 18 us a tick at p50 against 5 us in a loop).  False when the
    # sweeps do not settle (b untouched)
    cdef int sweep, p, q, r
    cdef double off, tot, apq, theta, t, c, sn, arp, arq, big, cut, e
    cdef double y[6]
    memset(V, 0, 36 * sizeof(double))
    for r in range(6):
        V[7 * r] = 1.0
    tot = 0.0
    for r in range(36):
        tot += M[r] * M[r]
    for sweep in range(JACOBI_SWEEPS + 1):
        off = 0.0
        for p in range(5):
            for q in range(p + 1, 6):
                off += M[6 * p + q] * M[6 * p + q]
        if off <= 1e-32 * tot:
            break
        if sweep == JACOBI_SWEEPS:
            return False
        for p in range(5):
            for q in range(p + 1, 6):
                apq = M[6 * p + q]
                if apq == 0.0:
                    continue
                # the rotation zeroing M[p, q] (its smaller angle, Golub & Van Loan 8.4)
                theta = (M[7 * q] - M[7 * p]) / (2.0 * apq)
                if fabs(theta) > 1e150:
                    t = 0.5 / theta
                else:
                    t = 1.0 / (fabs(theta) + sqrt(theta * theta + 1.0))
                    if theta < 0.0:
                        t = -t
                c = 1.0 / sqrt(t * t + 1.0)
                sn = t * c
                for r in range(6):          # M P
                    arp = M[6 * r + p]
                    arq = M[6 * r + q]
                    M[6 * r + p] = c * arp - sn * arq
                    M[6 * r + q] = sn * arp + c * arq
                for r in range(6):          # P^T (M P)
                    arp = M[6 * p + r]
                    arq = M[6 * q + r]
                    M[6 * p + r] = c * arp - sn * arq
                    M[6 * q + r] = sn * arp + c * arq
                M[6 * p + q] = M[6 * q + p] = 0.0
                for r in range(6):          # V P
                    arp = V[6 * r + p]
                    arq = V[6 * r + q]
                    V[6 * r + p] = c * arp - sn * arq
                    V[6 * r + q] = sn * arp + c * arq
    big = 0.0
    for r in range(6):
        if fabs(M[7 * r]) > big:
            big = fabs(M[7 * r])
    cut = RCOND * big
    for p in range(6):              # y = diag(1 / lam) V^T b over the kept terms
        y[p] = 0.0
        if fabs(M[7 * p]) > cut:
            e = 0.0
            for r in range(6):
                e += V[6 * r + p] * b[r]
            y[p] = e / M[7 * p]
    for r in range(6):
        e = 0.0
        for p in range(6):
            e += V[6 * r + p] * y[p]
        b[r] = e
    return True


cdef inline bint _outside(double ft, double fn, double mu) noexcept nogil:
    # force_split._outside: |f_t| over the cone mu f_n by more than rounding
    return ft > mu * fn * (1.0 + 1e-9) + 1e-12


cdef double _cone_step(int k, const double* f0, const double* delta, double mu) noexcept nogil:
    # force_split.cone_step: the largest s in [0, 1] keeping every moved contact in the cone
    cdef double m2 = mu * mu, s = 1.0, r, rt
    cdef double fn0, dn, fn1, ftx, fty, dtx, dty, c, a, b, disc, sq, qv, r1, r2
    cdef int i
    cdef bint any_out = False
    cdef const double* f
    cdef const double* d
    for i in range(k):
        f = f0 + 3 * i
        d = delta + 3 * i
        if d[0] == 0.0 and d[1] == 0.0 and d[2] == 0.0:
            continue            # held (a sliding contact, on the edge): does not bind
        fn1 = f[2] + d[2]
        ftx = f[0] + d[0]
        fty = f[1] + d[1]
        if fn1 < 0.0 or _outside(sqrt(ftx * ftx + fty * fty), fn1, mu):
            any_out = True
            break
    if not any_out:
        return 1.0
    for i in range(k):
        f = f0 + 3 * i
        d = delta + 3 * i
        if d[0] == 0.0 and d[1] == 0.0 and d[2] == 0.0:
            continue
        fn0 = f[2]
        dn = d[2]
        fn1 = fn0 + dn
        ftx = f[0] + d[0]
        fty = f[1] + d[1]
        if not (fn1 < 0.0 or _outside(sqrt(ftx * ftx + fty * fty), fn1, mu)):
            continue            # its end is inside: the cone is convex, it never binds
        c = m2 * (fn0 * fn0) - (f[0] * f[0] + f[1] * f[1])
        if fn0 < 0.0 or c <= 0.0:       # on the edge (or outside) already: no step
            return 0.0
        dtx = d[0]
        dty = d[1]
        a = m2 * (dn * dn) - (dtx * dtx + dty * dty)
        b = 2.0 * (m2 * fn0 * dn - (f[0] * dtx + f[1] * dty))
        # g(0) = c > 0 and g or f_n < 0 at 1: the first root in (0, 1]
        if fabs(a) < 1e-12 * (fabs(b) if fabs(b) > c else c):
            r = -c / b if b < 0.0 else 1.0
        else:
            disc = b * b - 4.0 * a * c
            if disc < 0.0:
                disc = 0.0
            sq = sqrt(disc)
            # the roots without cancellation: q = -(b + sign(b) sqrt), roots q / a and c / q
            qv = -0.5 * (b + copysign(sq, b))
            r1 = qv / a if a != 0.0 else INFINITY
            r2 = c / qv if qv != 0.0 else INFINITY
            r = INFINITY
            if r1 > 0.0:
                r = r1
            if r2 > 0.0 and r2 < r:
                r = r2
            if r == INFINITY:
                r = 1.0
        if r < s:
            s = r
    # just inside the edge: rounding must not put the force out
    rt = s * (1.0 - 1e-9)
    return rt if rt > 0.0 else 0.0


cdef class ForceSplitKernel:
    """Compiled step 4 of one :class:`BalanceCore` (see the module docstring).

    Parameters
    ----------
    kmax : int, the most contacts a split is asked for (every foot's points)
    nv : int, the model's velocity dimension (Jacobian columns; base columns 0:6)
    foot_counts : (nf,) int or None, contact points per foot (for :meth:`split_stance`)
    open_n : float [N], a Coulomb contact's normal force at or under which it is unloaded
    stick_margin : float, a Coulomb contact sticks while ``|f_t| < stick_margin mu f_n``
    iters : int, the most solves of the negative-normal active set per least-norm step
    fast : bool, the 6 x 6 solves by Cholesky, else Jacobi, dgelsd only when neither
        answers (False: dgelsd alone, for tests)
    """

    cdef readonly int kmax, nv, nf, iters
    cdef readonly double open_n, stick_margin
    #: least-norm solves so far, and those the Cholesky fast path / Jacobi answered
    cdef readonly long solves, cholesky, jacobi
    #: Cholesky and Jacobi before dgelsd (False: dgelsd alone, the oracle's routine)
    cdef readonly bint fast
    cdef int lwork
    cdef int[::1] counts, iwork
    cdef double[::1] At, wdiag, fixed, x, best, delta, new, w, work
    cdef double[::1] wrench, bb, M, L, rhs, sv
    cdef unsigned char[::1] free, free3, free_ls, held, out, keep

    def __init__(self, int kmax, int nv, foot_counts=None, double open_n=1e-9,
                 double stick_margin=1.0 - 1e-6, int iters=8, bint fast=True):
        if kmax < 1 or nv < 6:
            raise ValueError(f"ForceSplitKernel: kmax ({kmax}) >= 1 and nv ({nv}) >= 6 expected")
        self.kmax, self.nv, self.iters, self.fast = kmax, nv, iters, fast
        self.open_n, self.stick_margin = open_n, stick_margin
        self.counts = np.ascontiguousarray([] if foot_counts is None else foot_counts, dtype=np.intc)
        self.nf = self.counts.shape[0]
        n3 = 3 * kmax
        self.At = np.zeros(6 * n3)
        self.wdiag, self.fixed = np.zeros(n3), np.zeros(n3)
        self.x, self.best, self.delta, self.new = np.zeros(n3), np.zeros(n3), np.zeros(n3), np.zeros(n3)
        self.w = np.zeros(kmax)
        self.wrench, self.bb, self.rhs, self.sv = np.zeros(6), np.zeros(6), np.zeros(6), np.zeros(6)
        self.M = np.zeros(36)
        self.L = np.zeros(36)
        self.free = np.zeros(n3, dtype=np.uint8)
        self.free3 = np.zeros(n3, dtype=np.uint8)
        self.free_ls = np.zeros(n3, dtype=np.uint8)
        self.held = np.zeros(kmax, dtype=np.uint8)
        self.out = np.zeros(kmax, dtype=np.uint8)
        self.keep = np.zeros(kmax, dtype=np.uint8)
        # dgelsd's workspace for 6 x 6, one right side: asked once
        cdef int m6 = 6, one = 1, rank = 0, info = 0, lq = -1
        cdef double wq = 0.0, rc = RCOND
        cdef int iq = 0
        cdef double[::1] Mq = np.eye(6).reshape(-1), bq = np.zeros(6), sq = np.zeros(6)
        dgelsd(&m6, &m6, &one, &Mq[0], &m6, &bq[0], &m6, &sq[0], &rc, &rank, &wq, &lq, &iq, &info)
        self.lwork = max(int(wq), 256)
        self.work = np.zeros(self.lwork)
        self.iwork = np.zeros(max(iq, 64), dtype=np.intc)

    # ------------------------------------------------------------------ C helpers
    cdef int _least_norm(self, int n3, const unsigned char* free_in, const double* b,
                         double* x) noexcept nogil:
        # force_split._least_norm: x (n3,) of least x^T W x with A x = b over the free
        # entries, a negative normal force held at zero and the rest solved again.
        # 0, or -1 for a non-finite system (NumPy's lstsq does not return on NaN), or
        # -2 when dgelsd fails (its SVD did not converge)
        cdef unsigned char* free = &self.free_ls[0]
        cdef const double* At = &self.At[0]
        cdef const double* wd = &self.wdiag[0]
        cdef double* M = &self.M[0]
        cdef double* rhs = &self.rhs[0]
        cdef const double* a
        cdef double wi, ai, xv, wv
        cdef int it, c, i, j, worst, nfree, m6 = 6, one = 1, rank = 0, info = 0
        cdef int lwork = self.lwork
        cdef double rc = RCOND
        memcpy(free, free_in, n3)
        for it in range(self.iters):
            memset(x, 0, n3 * sizeof(double))
            # M = A_f W^-1 A_f^T (6, 6), upper triangle then mirrored (symmetric exactly)
            memset(M, 0, 36 * sizeof(double))
            nfree = 0
            for c in range(n3):
                if not free[c]:
                    continue
                nfree += 1
                wi = 1.0 / wd[c]
                a = At + 6 * c
                for i in range(6):
                    ai = a[i] * wi
                    for j in range(i, 6):
                        M[6 * i + j] += ai * a[j]
            if nfree == 0:
                break
            for i in range(6):
                rhs[i] = b[i]
                for j in range(i):
                    M[6 * i + j] = M[6 * j + i]
            for i in range(36):
                if not isfinite(M[i]):
                    return -1
            for i in range(6):
                if not isfinite(rhs[i]):
                    return -1
            # lam = lstsq(M, b, rcond=1e-12)[0], into rhs: with M well inside positive
            # definite (three or more contacts) its one answer by Cholesky (0.1 us), else the
            # minimum-norm one (rank < 6 with fewer than three contacts) as lstsq finds it
            self.solves += 1
            if self.fast and _cholesky_solve(M, rhs, &self.L[0]):
                self.cholesky += 1
            elif self.fast and _pinv_solve(M, rhs, &self.L[0]):
                self.jacobi += 1
            else:
                # the Jacobi sweeps did not settle (not seen): M was overwritten, again
                memset(M, 0, 36 * sizeof(double))
                for c in range(n3):
                    if free[c]:
                        wi = 1.0 / wd[c]
                        a = At + 6 * c
                        for i in range(6):
                            ai = a[i] * wi
                            for j in range(6):
                                M[6 * i + j] += ai * a[j]
                for i in range(6):
                    rhs[i] = b[i]
                dgelsd(&m6, &m6, &one, M, &m6, rhs, &m6, &self.sv[0], &rc, &rank, &self.work[0],
                       &lwork, &self.iwork[0], &info)
                if info != 0:
                    return -2
            # x_f = W^-1 A_f^T lam
            for c in range(n3):
                if free[c]:
                    a = At + 6 * c
                    xv = 0.0
                    for i in range(6):
                        xv += a[i] * rhs[i]
                    x[c] = xv / wd[c]
            # the most negative free normal force (the first of equals) is held at zero
            worst = -1
            wv = 0.0
            for j in range(n3 // 3):
                if free[3 * j + 2] and x[3 * j + 2] < 0.0 and (worst < 0 or x[3 * j + 2] < wv):
                    worst = j
                    wv = x[3 * j + 2]
            if worst < 0:
                break
            free[3 * worst] = free[3 * worst + 1] = free[3 * worst + 2] = 0
        return 0

    cdef int _split(self, int k, const double* J, int ldj, const double* f0,
                    const double* weights, const unsigned char* open_, const unsigned char* keep,
                    double mu, double* new, double* delta) noexcept nogil:
        # split_forces: 1 with new / delta (3k,) the split, 0 with the ID's own answer
        # (delta 0: no pushing split has the wrench, or non-finite inputs), -1 / -2 as
        # _least_norm's failures (new / delta as for 0)
        cdef int n3 = 3 * k, c, r, j, it, loops, st = 0
        cdef double* At = &self.At[0]
        cdef double* wrench = &self.wrench[0]
        cdef double* bb = &self.bb[0]
        cdef double* x = &self.x[0]
        cdef double* best = &self.best[0]
        cdef double* fixed = &self.fixed[0]
        cdef double* wd = &self.wdiag[0]
        cdef unsigned char* free = &self.free[0]
        cdef unsigned char* free3 = &self.free3[0]
        cdef unsigned char* held = &self.held[0]
        cdef unsigned char* out = &self.out[0]
        cdef double tol, e, worst_res, s, ft, fn, scale
        cdef bint bounded = isfinite(mu), found = False, finite = True, any_out
        memcpy(new, f0, n3 * sizeof(double))
        memset(delta, 0, n3 * sizeof(double))
        # A^T (3k, 6): the base columns of the contact rows; wrench = A f0
        for c in range(n3):
            for r in range(6):
                At[6 * c + r] = J[c * ldj + r]
                finite = finite and isfinite(J[c * ldj + r])
            finite = finite and isfinite(f0[c])
        for j in range(k):
            finite = finite and isfinite(weights[j])
        if not finite:
            return 0
        tol = 0.0
        for r in range(6):
            e = 0.0
            for c in range(n3):
                e += At[6 * c + r] * f0[c]
            wrench[r] = e
            if fabs(e) > tol:
                tol = fabs(e)
        tol = 1e-6 * (tol if tol > 1.0 else 1.0)
        for j in range(k):
            wd[3 * j] = wd[3 * j + 1] = 1.0
            wd[3 * j + 2] = weights[j]
            free[3 * j] = free[3 * j + 1] = free[3 * j + 2] = 0 if (open_ != NULL and open_[j]) else 1
            held[j] = 1 if (keep != NULL and keep[j]) else 0
        memcpy(fixed, f0, n3 * sizeof(double))
        # a contact the split puts outside the cone is held at its nearest force on the cone
        # and the others solved again (at most once per contact)
        loops = k + 1 if bounded else 1
        for it in range(loops):
            for c in range(n3):
                free3[c] = free[c] and not held[c // 3]
            for r in range(6):
                e = wrench[r]
                for c in range(n3):
                    if held[c // 3]:
                        e -= At[6 * c + r] * fixed[c]
                bb[r] = e
            st = self._least_norm(n3, free3, bb, x)
            if st != 0:
                return st
            for c in range(n3):
                if held[c // 3]:
                    x[c] = fixed[c]
            # pulling, or the wrench lost (an inconsistent system): stop at the last good one
            any_out = False
            for j in range(k):
                if x[3 * j + 2] < -1e-9:
                    any_out = True
            worst_res = 0.0
            for r in range(6):
                e = -wrench[r]
                for c in range(n3):
                    e += At[6 * c + r] * x[c]
                if fabs(e) > worst_res:
                    worst_res = fabs(e)
            if any_out or worst_res > tol:
                break
            memcpy(best, x, n3 * sizeof(double))
            found = True
            if not bounded:
                break
            any_out = False
            for j in range(k):
                out[j] = 0
                if held[j]:
                    continue
                ft = sqrt(x[3 * j] * x[3 * j] + x[3 * j + 1] * x[3 * j + 1])
                if _outside(ft, x[3 * j + 2], mu):
                    out[j] = 1
                    any_out = True
                    # _onto_cone: the ray through f's tangential direction at slope mu
                    fn = (x[3 * j + 2] + mu * ft) / (1.0 + mu * mu)
                    if fn < 0.0:
                        fn = 0.0
                    scale = mu * fn / ft if ft > 0.0 else 0.0
                    fixed[3 * j] = x[3 * j] * scale
                    fixed[3 * j + 1] = x[3 * j + 1] * scale
                    fixed[3 * j + 2] = fn
            if not any_out:
                break
            for j in range(k):
                if out[j]:
                    held[j] = 1
        if not found:
            return 0
        for c in range(n3):
            new[c] = best[c]
            delta[c] = best[c] - f0[c]
        if bounded:
            s = _cone_step(k, f0, delta, mu)
            if s < 1.0:
                for c in range(n3):
                    delta[c] *= s
                    new[c] = f0[c] + delta[c]
        return 1

    # ------------------------------------------------------------------ Python API
    def split(self, const double[:, ::1] J, const double[:, ::1] forces,
              const double[::1] weights, double mu=float("inf"), keep=None, open_=None,
              double[:, ::1] new=None, double[:, ::1] delta=None):
        """:func:`force_split.split_forces` into ``new``, ``delta`` (k, 3) [N].

        J : (3k, nv) contact rows; forces : (k, 3); weights : (k,); mu : the friction bound
        (``inf``: none, the oracle's ``None``); keep, open_ : (k,) bool or None.  Returns
        1 when a pushing-only split with the wrench was found (0: ``new`` = ``forces``,
        ``delta`` = 0; also for non-finite inputs, where NumPy's ``lstsq`` does not return).
        """
        cdef int k = forces.shape[0], st
        if (k > self.kmax or forces.shape[1] != 3 or J.shape[0] != 3 * k or J.shape[1] != self.nv
                or weights.shape[0] != k or new is None or delta is None
                or new.shape[0] != k or delta.shape[0] != k):
            raise ValueError(f"ForceSplitKernel.split: expected J (3k, {self.nv}), forces, new, "
                             f"delta (k, 3), weights (k,) with k <= {self.kmax}; got J "
                             f"{(J.shape[0], J.shape[1])}, forces {(forces.shape[0], forces.shape[1])}")
        if k == 0:
            return 0
        cdef const unsigned char[::1] kp = None if keep is None else np.ascontiguousarray(keep, dtype=np.uint8)
        cdef const unsigned char[::1] op = None if open_ is None else np.ascontiguousarray(open_, dtype=np.uint8)
        if (kp is not None and kp.shape[0] != k) or (op is not None and op.shape[0] != k):
            raise ValueError(f"ForceSplitKernel.split: keep / open_ must be ({k},)")
        cdef const unsigned char* kptr = NULL
        cdef const unsigned char* optr = NULL
        if kp is not None:
            kptr = &kp[0]
        if op is not None:
            optr = &op[0]
        with nogil:
            st = self._split(k, &J[0, 0], J.shape[1], &forces[0, 0], &weights[0], optr, kptr, mu,
                             &new[0, 0], &delta[0, 0])
        _raise_for(st)
        return 1 if st == 1 else 0

    def least_norm(self, const double[:, ::1] A, const double[::1] wdiag, free,
                   const double[::1] b, double[::1] x):
        """:func:`force_split._least_norm` into ``x`` (3k,): A (6, 3k), wdiag (3k,),
        free (3k,) bool, b (6,)."""
        cdef int n3 = A.shape[1], c, r, st
        if A.shape[0] != 6 or n3 > 3 * self.kmax or wdiag.shape[0] != n3 or x.shape[0] != n3:
            raise ValueError(f"ForceSplitKernel.least_norm: expected A (6, 3k), k <= {self.kmax}")
        cdef const unsigned char[::1] fr = np.ascontiguousarray(free, dtype=np.uint8)
        for c in range(n3):
            self.wdiag[c] = wdiag[c]
            for r in range(6):
                self.At[6 * c + r] = A[r, c]
        with nogil:
            st = self._least_norm(n3, &fr[0], &b[0], &x[0])
        _raise_for(st)

    def split_stance(self, const double[:, ::1] Js, int ms, double[:, ::1] forces,
                     const double[::1] liftoff_weights, const unsigned char[::1] stance,
                     bint coulomb, double mu, double[::1] tau_m):
        """``BalanceCore._split``: ``forces`` (k, 3) [N] and ``tau_m`` (nv - 6,) [N m, model
        order] of the ID's answer shared among the stance feet, in place.

        Js : the stance points' rows (``Js[:ms]``, ``ms`` = 3k, feet in order); liftoff_weights,
        stance : (nf,) each foot's normal-force weight, and its stance flag; coulomb : the
        ``lcp_coulomb`` answer (its sliding contacts kept, the split inside the cone ``mu``),
        else the no-slip one (every contact shared, no cone).  Returns True when the forces
        changed (``tau_m -= J_j^T delta``).
        """
        cdef int k = ms // 3, nv = self.nv, f, p, j = 0, c, r, st
        cdef double fz, t, e
        cdef bint all_kept = True
        if (ms % 3 or k > self.kmax or Js.shape[0] < ms or Js.shape[1] != nv
                or forces.shape[0] != k or forces.shape[1] != 3 or tau_m.shape[0] != nv - 6
                or liftoff_weights.shape[0] != self.nf or stance.shape[0] != self.nf):
            raise ValueError(f"ForceSplitKernel.split_stance: expected Js (>= {ms}, {nv}), forces "
                             f"({k}, 3), tau_m ({nv - 6},), liftoff_weights and stance "
                             f"({self.nf},); got forces {(forces.shape[0], forces.shape[1])}")
        if k == 0:
            return False
        for f in range(self.nf):
            if stance[f]:
                for p in range(self.counts[f]):
                    if j < k:
                        self.w[j] = liftoff_weights[f]
                    j += 1
        if j != k:
            raise ValueError(f"ForceSplitKernel.split_stance: the stance feet have {j} points, "
                             f"the forces {k} contacts")
        cdef double* fp = &forces[0, 0]
        cdef unsigned char* kp = NULL
        if coulomb:
            # sliding: on the cone's edge with a load (rounding aside); an unloaded contact
            # is shared like a no-slip one
            kp = &self.keep[0]
            for j in range(k):
                fz = fp[3 * j + 2]
                t = mu * self.stick_margin * fz
                kp[j] = fz > self.open_n and (fp[3 * j] * fp[3 * j] + fp[3 * j + 1] * fp[3 * j + 1]) >= t * t
                all_kept = all_kept and kp[j]
            if all_kept:
                return False
        cdef double* dl = &self.delta[0]
        cdef double* nw = &self.new[0]
        cdef const double* J = &Js[0, 0]
        cdef double* tm = &tau_m[0]
        with nogil:
            st = self._split(k, J, nv, fp, &self.w[0], NULL, kp, mu if coulomb else INFINITY,
                             nw, dl)
        _raise_for(st)
        if st != 1:
            return False
        for c in range(3 * k):
            if dl[c] != 0.0:
                break
        else:
            return False
        with nogil:
            # tau_m -= J[:, 6:].T @ delta
            for c in range(nv - 6):
                e = 0.0
                for r in range(3 * k):
                    e += J[r * nv + 6 + c] * dl[r]
                tm[c] -= e
            memcpy(fp, nw, 3 * k * sizeof(double))
        return True


cdef _raise_for(int st):
    # the kernel's failures as the oracle's (np.linalg.lstsq raises LinAlgError)
    if st == -2:
        raise np.linalg.LinAlgError("SVD did not converge in Linear Least Squares")


def split_forces(J, forces, weights, open_=None, iters=8, mu=None, keep=None, fast=True):
    """:func:`controller.wholebody.force_split.split_forces`, compiled: ``(new, delta)``
    (k, 3) [N] (a kernel per call: for tests and one-off use; ``fast`` as the kernel's)."""
    forces = np.ascontiguousarray(forces, dtype=float).reshape(-1, 3)
    J = np.ascontiguousarray(J, dtype=float)
    k = forces.shape[0]
    new, delta = forces.copy(), np.zeros_like(forces)
    if k == 0:
        return new, delta
    kern = ForceSplitKernel(k, J.shape[1], iters=iters, fast=fast)
    kern.split(J, forces, np.ascontiguousarray(weights, dtype=float),
               INFINITY if mu is None else float(mu), keep, open_, new, delta)
    return new, delta


def least_norm(A, wdiag, free, b, iters):
    """:func:`controller.wholebody.force_split._least_norm`, compiled: x (3k,)."""
    A = np.ascontiguousarray(A, dtype=float)
    x = np.zeros(A.shape[1])
    kern = ForceSplitKernel(max(A.shape[1] // 3, 1), 6, iters=iters)
    kern.least_norm(A, np.ascontiguousarray(wdiag, dtype=float), free,
                    np.ascontiguousarray(b, dtype=float), x)
    return x


def cone_step(forces, delta, double mu):
    """:func:`controller.wholebody.force_split.cone_step`, compiled."""
    cdef const double[:, ::1] f = np.ascontiguousarray(forces, dtype=float).reshape(-1, 3)
    cdef const double[:, ::1] d = np.ascontiguousarray(delta, dtype=float).reshape(-1, 3)
    if f.shape[0] != d.shape[0]:
        raise ValueError(f"cone_step: forces {(f.shape[0], f.shape[1])} and delta {(d.shape[0], d.shape[1])} differ")
    if f.shape[0] == 0:
        return 1.0
    return _cone_step(f.shape[0], &f[0, 0], &d[0, 0], mu)


def liftoff_weights(gait, double t, stance, double dt, double horizon=LIFTOFF_HORIZON_S,
                    out=None):
    """:func:`controller.wholebody.force_split.liftoff_weights`, compiled (8 us a tick in
    NumPy): (feet,) normal-force weights, 1 rising as ``(horizon / tau)^2`` over the last
    ``horizon`` seconds before a stance foot's planned lift-off (``tau`` [s] left, at least
    ``dt``; at most LIFTOFF_WEIGHT_MAX), into ``out`` when given.

    gait : :class:`controller.wholebody.gait.TrotGait`; t : gait time [s] (negative: standing
    before the trot); stance : (feet,) bool; dt : tick [s].
    """
    cdef const double[::1] td = np.ascontiguousarray(gait.touchdown, dtype=np.float64)
    cdef const unsigned char[::1] st = np.ascontiguousarray(stance, dtype=bool).view(np.uint8)
    cdef int n = td.shape[0]
    if st.shape[0] != n or (out is not None and out.shape[0] != n):
        raise ValueError(f"liftoff_weights: expected stance and out ({n},) as the gait's feet")
    w = np.ones(n) if out is None else out
    cdef double[::1] wv = w         # a (feet,) float array: out's own, not a copy
    cdef double period = gait.period, duty = gait.duty, wmax = LIFTOFF_WEIGHT_MAX
    liftoff_weights_c(td, st, t, period, duty, dt, horizon, wmax, wv)
    return w
