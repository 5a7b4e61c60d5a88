# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled pivoting LCP solvers of seed 003 (nogil, no allocation).

- :c:func:`lemke_c`: Lemke's complementary pivoting on a dense tableau
  ``[I, -(Q + eps I), -1 | r]``; ties in the ratio test go to the
  artificial variable (it ends the run), then to the lowest row; the same
  rules as the NumPy reference in ``core_cy/contact/lcp.py`` history.
- :c:func:`lemke_ladder_c`: the authors' Tikhonov ladder (Moby), eps = 0,
  1e-20, 1e-16, 1e-12, 1e-8, 1e-4, each answer checked against the
  unregularised Q.
- :c:func:`ppm_c`: Alg. 2, principal pivoting for symmetric PSD LCPs,
  warm-started from the previous active set (§4.6: the same support is
  kept while it stays a solution, so the answer does not jump).

The ``def`` functions at the end are the entry points of
:mod:`core_cy.contact.lcp`.
"""

from libc.math cimport fabs
from libc.string cimport memset

from servoloop.core_cy.linalg._dense cimport cholesky_factor_rel, cholesky_solve

import numpy as np

__all__ = ["lemke_np", "lemke_ladder_np", "ppm_np", "LADDER"]

cdef double[6] _LADDER = [0.0, 1e-20, 1e-16, 1e-12, 1e-8, 1e-4]
LADDER = tuple(_LADDER[i] for i in range(6))


cdef int lemke_c(int n, const double* Q, const double* r, double eps, double* z, double* w,
                 double* T, int* basis, int max_iter, double tol) noexcept nogil:
    cdef int i, j, k, it, row = 0, entering, leaving, z0 = 2 * n, nc = 2 * n + 2, art, nz
    cdef double rmin, best, ratio, piv, f, x
    cdef double* prow
    cdef int* cols = &basis[n]
    if n == 0:
        return 0
    rmin = r[0]
    for i in range(n):
        if r[i] < rmin:
            rmin = r[i]
            row = i
    if rmin >= 0.0:
        for i in range(n):
            z[i] = 0.0
            w[i] = r[i]
        return 0
    # tableau columns: w (0..n-1), z (n..2n-1), z0 (2n), rhs (2n+1)
    for i in range(n):
        prow = &T[i * nc]
        for j in range(n):
            prow[j] = 0.0
            prow[n + j] = -Q[i * n + j]
        prow[i] = 1.0
        prow[n + i] -= eps
        prow[z0] = -1.0
        prow[z0 + 1] = r[i]
        basis[i] = i
    entering = z0
    for it in range(1, max_iter + 1):
        if it > 1:
            # ratio test over the rows with a positive entering coefficient
            best = 1e300
            row = -1
            for i in range(n):
                piv = T[i * nc + entering]
                if piv > tol:
                    ratio = T[i * nc + z0 + 1] / piv
                    if ratio < best:
                        best = ratio
            if best == 1e300:
                return LEMKE_RAY
            art = -1
            for i in range(n):
                piv = T[i * nc + entering]
                if piv > tol:
                    ratio = T[i * nc + z0 + 1] / piv
                    if ratio <= best + tol * (fabs(best) if fabs(best) > 1.0 else 1.0):
                        if basis[i] == z0:
                            art = i
                            break
                        if row < 0:
                            row = i
            if art >= 0:
                row = art
        prow = &T[row * nc]
        piv = prow[entering]
        # the pivot row is sparse (the w columns start as the identity and the
        # KKT LCPs have zero blocks): update only its nonzero columns
        nz = 0
        for j in range(nc):
            if prow[j] != 0.0:
                prow[j] /= piv
                cols[nz] = j
                nz += 1
        for i in range(n):
            if i != row:
                f = T[i * nc + entering]
                if f != 0.0:
                    for k in range(nz):
                        j = cols[k]
                        T[i * nc + j] -= f * prow[j]
        leaving = basis[row]
        basis[row] = entering
        if leaving == z0:
            break
        entering = leaving + n if leaving < n else leaving - n
    else:
        return LEMKE_LIMIT
    for i in range(n):
        z[i] = 0.0
    for i in range(n):
        if n <= basis[i] < 2 * n:
            x = T[i * nc + z0 + 1]
            z[basis[i] - n] = x if x > 0.0 else 0.0
    for i in range(n):
        x = r[i] + eps * z[i]
        for j in range(n):
            x += Q[i * n + j] * z[j]
        w[i] = x
    return it


cdef int lemke_ladder_c(int n, const double* Q, const double* r, double* z, double* w,
                        double* T, int* basis, double* eps_out, int* pivots_out,
                        double* resid_out) noexcept nogil:
    cdef int i, j, k, rc = LEMKE_FAILED, total = 0
    cdef double qmax = 1.0, rmax = 1.0, tol, ptol, zmax, bad, x
    if n == 0:
        eps_out[0] = 0.0
        pivots_out[0] = 0
        resid_out[0] = 0.0
        return 0
    for i in range(n * n):
        if fabs(Q[i]) > qmax:
            qmax = fabs(Q[i])
    for i in range(n):
        if fabs(r[i]) > rmax:
            rmax = fabs(r[i])
    tol = qmax * n * 2.220446049250313e-16 * 1e4
    # 1e-7 of the data: Lemke's dense pivoting on the QP's KKT LCPs (entries
    # 1 ... mu) leaves w ~ -1e-7 |r| of round-off, which is no violation
    if tol < 1e-7 * rmax:
        tol = 1e-7 * rmax
    ptol = n * 1e-13 * (qmax if qmax > rmax else rmax)
    resid_out[0] = -1.0
    for k in range(6):
        rc = lemke_c(n, Q, r, _LADDER[k], z, w, T, basis, 1000 if 50 * n < 1000 else 50 * n, ptol)
        if rc < 0:
            continue
        total += rc
        bad = 0.0
        zmax = 1.0
        for i in range(n):
            x = r[i]
            for j in range(n):
                x += Q[i * n + j] * z[j]
            w[i] = x
            if z[i] > zmax:
                zmax = z[i]
        for i in range(n):
            if -w[i] > bad:
                bad = -w[i]
            if fabs(z[i] * w[i]) > bad:
                bad = fabs(z[i] * w[i])
        resid_out[0] = bad
        if bad < tol * zmax:
            eps_out[0] = _LADDER[k]
            pivots_out[0] = total
            return 0
        rc = LEMKE_FAILED
    pivots_out[0] = total
    return rc


cdef int _principal_block(int m, const int* idx, int n, const double* Q, const double* r,
                          double* L, double* x, double rel_tol) noexcept nogil:
    # x = -Q[idx, idx]^-1 r[idx]; -1 if the block is singular to rel_tol
    cdef int i, j
    for i in range(m):
        for j in range(m):
            L[i * m + j] = Q[idx[i] * n + idx[j]]
        x[i] = -r[idx[i]]
    if cholesky_factor_rel(m, L, rel_tol) != 0:
        return -1
    cholesky_solve(m, L, x)
    return 0


cdef int ppm_c(int n, const double* Q, const double* r, double* z, double* w,
               unsigned char* act, double* work, int* idx, double tol) noexcept nogil:
    cdef int i, j, m, it, worst
    cdef double rmin, x, lo
    cdef double* L = work
    cdef double* xs = &work[n * n]
    if n == 0:
        return 0
    rmin = r[0]
    j = 0
    for i in range(n):
        if r[i] < rmin:
            rmin = r[i]
            j = i
    if rmin >= -tol:
        for i in range(n):
            z[i] = 0.0
            w[i] = r[i]
            act[i] = 0
        return 0
    m = 0
    for i in range(n):
        if act[i]:
            m += 1
    if m == 0:
        act[j] = 1
    for it in range(1, 4 * n + 11):
        m = 0
        for i in range(n):
            if act[i]:
                idx[m] = i
                m += 1
        memset(z, 0, n * sizeof(double))
        if m and _principal_block(m, idx, n, Q, r, L, xs, 1e-12) != 0:
            return -1                  # singular block (erratum E9): Lemke decides
        for i in range(m):
            z[idx[i]] = xs[i]
        # a negative active force leaves the set
        worst = -1
        lo = -tol
        for i in range(m):
            if xs[i] < lo:
                lo = xs[i]
                worst = idx[i]
        for i in range(n):
            x = r[i]
            for j in range(m):
                x += Q[i * n + idx[j]] * xs[j]
            w[i] = x
        if worst >= 0:
            act[worst] = 0
            continue
        # the most violated inactive row joins it
        worst = -1
        lo = -tol
        for i in range(n):
            if not act[i] and w[i] < lo:
                lo = w[i]
                worst = i
        if worst >= 0:
            act[worst] = 1
            continue
        for i in range(n):
            if z[i] < 0.0:
                z[i] = 0.0
        return it
    return -1


# ---------------------------------------------------------------- Python entry points
def lemke_np(const double[:, ::1] Q, const double[::1] r, double eps, int max_iter, double tol):
    """(z, w, rc) of :c:func:`lemke_c`; rc < 0 is a LEMKE_* failure code."""
    cdef int n = r.shape[0], rc
    z = np.zeros(n)
    w = np.zeros(n)
    T = np.empty(max(1, n * (2 * n + 2)))
    basis = np.empty(max(1, 3 * n + 2), dtype=np.intc)
    cdef double[::1] zv = z, wv = w, Tv = T
    cdef int[::1] bv = basis
    if n == 0:
        return z, w, 0
    with nogil:
        rc = lemke_c(n, &Q[0, 0], &r[0], eps, &zv[0], &wv[0], &Tv[0], &bv[0], max_iter, tol)
    return z, w, rc


def lemke_ladder_np(const double[:, ::1] Q, const double[::1] r):
    """(z, w, rc, eps, pivots, residual) of :c:func:`lemke_ladder_c`."""
    cdef int n = r.shape[0], rc, piv = 0
    cdef double eps = 0.0, res = 0.0
    z = np.zeros(n)
    w = np.zeros(n)
    T = np.empty(max(1, n * (2 * n + 2)))
    basis = np.empty(max(1, 3 * n + 2), dtype=np.intc)
    cdef double[::1] zv = z, wv = w, Tv = T
    cdef int[::1] bv = basis
    if n == 0:
        return z, w, 0, 0.0, 0, 0.0
    with nogil:
        rc = lemke_ladder_c(n, &Q[0, 0], &r[0], &zv[0], &wv[0], &Tv[0], &bv[0], &eps, &piv, &res)
    return z, w, rc, eps, piv, res


def ppm_np(const double[:, ::1] Q, const double[::1] r, active, double tol):
    """(z, w, iterations or -1, active flags) of :c:func:`ppm_c`."""
    cdef int n = r.shape[0], it
    z = np.zeros(n)
    w = np.zeros(n)
    act = np.zeros(max(1, n), dtype=np.uint8)
    for i in active:
        if 0 <= int(i) < n:
            act[int(i)] = 1
    work = np.empty(max(1, n * n + 2 * n))
    idx = np.empty(max(1, n), dtype=np.intc)
    cdef double[::1] zv = z, wv = w, wk = work
    cdef unsigned char[::1] av = act
    cdef int[::1] iv = idx
    if n == 0:
        return z, w, 0, act[:0]
    with nogil:
        it = ppm_c(n, &Q[0, 0], &r[0], &zv[0], &wv[0], &av[0], &wk[0], &iv[0], tol)
    return z, w, it, act[:n]
