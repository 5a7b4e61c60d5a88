# Compiled pivoting LCP solvers (seed 003): Lemke with the regularisation
# ladder and Alg. 2 (principal pivoting, warm-started).  nogil, no allocation:
# the caller owns every buffer.  core_cy/inverse_dynamics/_cid.pyx cimports them.
#
# LCP: w = Q z + r >= 0, z >= 0, z^T w = 0; Q (n, n) row-major.

# Lemke's complementary pivoting on Q + eps I (covering vector 1).
# T: n * (2n + 2) doubles (the tableau), basis: 3n + 2 ints (the basis, then
# the pivot row's nonzero columns).  Returns the pivots
# (>= 0), LEMKE_RAY on ray termination, LEMKE_LIMIT at max_iter pivots.
# z, w (n,) are written on success (w = (Q + eps I) z + r).
cdef enum:
    LEMKE_RAY = -1
    LEMKE_LIMIT = -2
    LEMKE_FAILED = -3

cdef int lemke_c(int n, const double* Q, const double* r, double eps, double* z, double* w,
                 double* T, int* basis, int max_iter, double tol) noexcept nogil

# Lemke on Q, then Q + eps I for eps in the ladder (0, 1e-20 ... 1e-4) until the
# answer passes the complementarity check against the unregularised Q.
# Returns 0 (eps_out, pivots_out set) or one of the LEMKE_* codes of the last try;
# resid_out: the largest violation of the last try.
cdef int lemke_ladder_c(int n, const double* Q, const double* r, double* z, double* w,
                        double* T, int* basis, double* eps_out, int* pivots_out,
                        double* resid_out) noexcept nogil

# Alg. 2 (modified PPM I) for a symmetric PSD Q, warm-started from the
# active set act (flags, n chars, 1 = z > 0; updated in place).  work: n*n + 2n
# doubles, idx: n ints.  Returns the iterations (>= 1, or 0 when r >= -tol),
# or -1 when a sub-block is singular, it stalls or reaches 4n + 10 iterations
# (the caller then uses Lemke).
cdef int ppm_c(int n, const double* Q, const double* r, double* z, double* w,
               unsigned char* act, double* work, int* idx, double tol) noexcept nogil
