# cython: language_level=3
# Small dense linear algebra for the compiled kernels: one copy, cimported by
# core_cy/dynamics, core_cy/sim and core_cy/contact.
#
#     from servoloop.core_cy.linalg._dense cimport cross3, cholesky_factor, cholesky_solve
#
# Everything is ``cdef inline ... noexcept nogil`` and allocation-free, so it
# compiles into each caller as if written there (no call across modules, and
# the C compiler still sees constant sizes such as the 6 of ldlt_solve(6, ...)).
# Matrices are row-major C arrays; 3x3 rotations are 9-vectors; spatial
# 6-vectors are (linear; angular).  Where an output may not alias an input the
# comment says so.  core_cy/linalg/reference.py states each kernel in NumPy and
# core_cy/linalg/_dense.pyx has the Python entry points the tests call.

from libc.math cimport sqrt


# ------------------------------------------------------------------ 3- and 6-vectors

cdef inline void cross3(const double* a, const double* b, double* out) noexcept nogil:
    # out = np.cross(a, b); out may alias a or b (locals first)
    cdef double x = a[1] * b[2] - a[2] * b[1]
    cdef double y = a[2] * b[0] - a[0] * b[2]
    cdef double z = a[0] * b[1] - a[1] * b[0]
    out[0] = x
    out[1] = y
    out[2] = z


cdef inline double dot3(const double* a, const double* b) noexcept nogil:
    # a @ b, (3,)
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


cdef inline double dot6(const double* a, const double* b) noexcept nogil:
    # a @ b, (6,): written out, the spatial kernels call it in their inner loops
    return (a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
            + a[3] * b[3] + a[4] * b[4] + a[5] * b[5])


cdef inline double dot_acc(double s, int n, const double* a, const double* b) noexcept nogil:
    # s + a @ b, (n,), summed from s in index order (a matrix row plus its offset)
    cdef int k
    for k in range(n):
        s += a[k] * b[k]
    return s


cdef inline double dot(int n, const double* a, const double* b) noexcept nogil:
    # a @ b, (n,), summed from index 0
    return dot_acc(0.0, n, a, b)


# ------------------------------------------------------------------ 3x3 and 6x6

cdef inline void mat3_vec(const double* R, const double* x, double* out) noexcept nogil:
    # out = R @ x; out must not alias x
    out[0] = R[0] * x[0] + R[1] * x[1] + R[2] * x[2]
    out[1] = R[3] * x[0] + R[4] * x[1] + R[5] * x[2]
    out[2] = R[6] * x[0] + R[7] * x[1] + R[8] * x[2]


cdef inline void mat3t_vec(const double* R, const double* x, double* out) noexcept nogil:
    # out = R.T @ x; out must not alias x
    out[0] = R[0] * x[0] + R[3] * x[1] + R[6] * x[2]
    out[1] = R[1] * x[0] + R[4] * x[1] + R[7] * x[2]
    out[2] = R[2] * x[0] + R[5] * x[1] + R[8] * x[2]


cdef inline void mat3_mul(const double* A, const double* B, double* C) noexcept nogil:
    # C = A @ B; C must not alias A or B
    cdef int r, k
    for r in range(3):
        for k in range(3):
            C[3 * r + k] = A[3 * r] * B[k] + A[3 * r + 1] * B[3 + k] + A[3 * r + 2] * B[6 + k]


cdef inline void mat3_congruence_sym(const double* R, const double* S, double* out) noexcept nogil:
    # out = R @ S @ R.T for a symmetric S (full storage); out exactly symmetric,
    # must not alias R (may alias S: S is read into T first)
    cdef double T[9]
    cdef int r, k
    for r in range(3):
        for k in range(3):
            T[3 * r + k] = R[3 * r] * S[k] + R[3 * r + 1] * S[3 + k] + R[3 * r + 2] * S[6 + k]
    for r in range(3):
        for k in range(r, 3):
            out[3 * r + k] = T[3 * r] * R[3 * k] + T[3 * r + 1] * R[3 * k + 1] + T[3 * r + 2] * R[3 * k + 2]
            out[3 * k + r] = out[3 * r + k]


cdef inline void mat6_vec(const double* A, const double* x, double* out) noexcept nogil:
    # out = A @ x, A (6, 6); out must not alias x
    cdef int r
    for r in range(6):
        out[r] = dot6(&A[6 * r], x)


# ------------------------------------------------------------------ (m, n) products

cdef inline void matvec_add(int m, int n, const double* A, const double* x, const double* b,
                            double* y) noexcept nogil:
    # y = b + A @ x, A (m, n); each row summed from b[i] in column order; y must
    # not alias x (may alias b)
    cdef int i
    for i in range(m):
        y[i] = dot_acc(b[i], n, &A[i * n], x)


cdef inline void gram_rows(int m, int n, const double* A, double* G) noexcept nogil:
    # G = A @ A.T, A (m, n), G (m, m) exactly symmetric (upper triangle mirrored)
    cdef int r, c, k
    cdef double g
    for r in range(m):
        for c in range(r, m):
            g = 0.0
            for k in range(n):
                g += A[r * n + k] * A[c * n + k]
            G[r * m + c] = g
            G[c * m + r] = g


cdef inline void matTvec_acc(int m, int n, const double* A, const double* x, double* y) noexcept nogil:
    # y += A.T @ x, A (m, n), x (m,), y (n,); rows with x[r] == 0 are skipped
    # (contact impulses: most are zero)
    cdef int r, k
    cdef double g
    for r in range(m):
        g = x[r]
        if g != 0.0:
            for k in range(n):
                y[k] += A[r * n + k] * g


# ------------------------------------------------------------------ SPD solves

cdef inline int cholesky_factor(int n, double* A) noexcept nogil:
    # In place: the lower triangle of A (n, n) becomes L with A = L @ L.T
    # (np.linalg.cholesky); the strict upper triangle is left as it was.
    # Returns 0, or -1 if A is not positive definite (a pivot <= 0 or NaN: a
    # blown-up state must not go on silently).
    cdef int i, j, k
    cdef double s
    for j in range(n):
        s = A[j * n + j]
        for k in range(j):
            s -= A[j * n + k] * A[j * n + k]
        if not s > 0.0:
            return -1
        s = sqrt(s)
        A[j * n + j] = s
        for i in range(j + 1, n):
            # L[i, j] = (A[i, j] - sum_k L[i, k] L[j, k]) / L[j, j]
            for k in range(j):
                A[i * n + j] -= A[i * n + k] * A[j * n + k]
            A[i * n + j] /= s
    return 0


cdef inline int cholesky_factor_rel(int n, double* A, double rel_tol) noexcept nogil:
    # cholesky_factor with a rank test: a pivot whose square is not above
    # rel_tol times its diagonal entry A[j, j] counts as singular (-1).  A PSD
    # matrix of lower rank otherwise "factors" through round-off (seed 003's
    # Alg. 2 on a singular principal block, erratum E9).
    cdef int i, j, k
    cdef double s
    for j in range(n):
        s = A[j * n + j]
        for k in range(j):
            s -= A[j * n + k] * A[j * n + k]
        if not s > rel_tol * A[j * n + j]:
            return -1
        s = sqrt(s)
        A[j * n + j] = s
        for i in range(j + 1, n):
            for k in range(j):
                A[i * n + j] -= A[i * n + k] * A[j * n + k]
            A[i * n + j] /= s
    return 0


cdef inline void solve_lower(int n, const double* L, double* x) noexcept nogil:
    # x <- L^-1 x, forward substitution on the lower triangle of L
    # (scipy.linalg.solve_triangular(L, x, lower=True))
    cdef int i, k
    cdef double s
    for i in range(n):
        s = x[i]
        for k in range(i):
            s -= L[i * n + k] * x[k]
        x[i] = s / L[i * n + i]


cdef inline void solve_lower_t(int n, const double* L, double* x) noexcept nogil:
    # x <- L^-T x, backward substitution reading the lower triangle of L by columns
    cdef int i, k
    cdef double s
    for i in range(n - 1, -1, -1):
        s = x[i]
        for k in range(i + 1, n):
            s -= L[k * n + i] * x[k]
        x[i] = s / L[i * n + i]


cdef inline void cholesky_solve(int n, const double* L, double* x) noexcept nogil:
    # x <- A^-1 x with L from cholesky_factor (scipy.linalg.cho_solve)
    solve_lower(n, L, x)
    solve_lower_t(n, L, x)


cdef inline int ldlt_solve(int n, const double* A, double* b, double* work) noexcept nogil:
    # Solve A x = b in place (b <- x) for an SPD A (n, n) by A = L D L^T.
    # work: n * n + n doubles (L with D on its diagonal, then 1 / D); A is only
    # read.  Returns 0, or -1 if a pivot is not > 0.  n divisions and no square
    # root: for the 6x6 free-flyer step of ABA it took half the time of a
    # Cholesky solve.
    cdef int i, j, k
    cdef double s
    cdef double* L = work
    cdef double* Dinv = &work[n * n]
    for i in range(n):
        for j in range(i):
            s = A[n * i + j]
            for k in range(j):
                s -= L[n * i + k] * L[n * j + k] * L[n * k + k]
            L[n * i + j] = s * Dinv[j]
        s = A[n * i + i]
        for k in range(i):
            s -= L[n * i + k] * L[n * i + k] * L[n * k + k]
        if not s > 0.0:
            return -1
        L[n * i + i] = s          # D_i on the diagonal
        Dinv[i] = 1.0 / s
    for i in range(n):
        for k in range(i):
            b[i] -= L[n * i + k] * b[k]
    for i in range(n):
        b[i] *= Dinv[i]
    for i in range(n - 1, -1, -1):
        for k in range(i + 1, n):
            b[i] -= L[n * k + i] * b[k]
    return 0
