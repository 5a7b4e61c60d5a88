# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled contact inverse dynamics (seed 003): the kernels behind :class:`ContactInverseDynamics`.

One :class:`CIDCore` per (model, contact list, variant) holds every buffer;
:meth:`CIDCore.solve` runs without the GIL and allocates nothing:

1. assembly: ``fk_c`` -> contact points, gaps, point-Jacobian rows in the
   contact frame (t1, t2, n) -> ``crba_c`` (+ armature) -> ``rnea_c`` (h);
2. reduced form (digest §2): A = M[:nb, :nb] = L L^T, every contact row's
   base part enters only as ``y = L^-1 row_b^T`` (nb-vector), so every
   contact matrix is a Gram matrix of the y's (never an n x n inverse);
3. the variant:

   - ``lcp_noslip``: Alg. 1 by Gram-Schmidt on the tangent y's (a residual
     below 1e-5 of the row's norm is dependent), the normal LCP
     ``Q = Z^T Z`` (Z: the normal y's projected off the kept tangents) by
     Alg. 2 warm-started from the last active set, Lemke's ladder if Alg. 2
     gives up; the §4.5 check and, if it fails, the nearest joint
     acceleration that lets every contact stick (a min-norm correction
     of the joint accelerations so that the rows Alg. 1 dropped hold with the
     kept ones, exact by Gram-Schmidt), then the LCP again;
   - ``lcp_coulomb``: the Anitescu-Potra LCP with the 4-edge pyramid, Lemke
     with the regularisation ladder;
   - ``qp``: Stage I, the Coulomb LCP in the QP's contact-space terms (H, c:
     ``1/2 f^T H f + c^T f`` over the pyramid, its KKT conditions without the
     paper's ``-mu lambda`` on the normal rows; with that term, the paper's
     relaxed form, as the fallback) solved by Lemke; Stage II, the min-norm
     torque over Stage I's optimal face ``{Y^T f = Y^T f0, f_j = 0 where
     Stage I's slack is open, pyramid tight where it slides}``, also by Lemke
     on its KKT LCP (the equalities as pairs of inequalities).  Why, in
     :mod:`servoloop.core_cy.inverse_dynamics` and at :func:`_qp`.

Units: accelerations [m/s^2, rad/s^2] and forces [N] (impulse / dt).
"""

from libc.math cimport fabs, sqrt, INFINITY
from libc.string cimport memcpy, memset

import numpy as np

from servoloop.core_cy.dynamics._dynamics cimport Model, ModelC, Data, DataC, fk_c, crba_c, rnea_c
from servoloop.core_cy.contact._pivot cimport lemke_ladder_c, ppm_c
from servoloop.core_cy.linalg._dense cimport cholesky_factor, solve_lower, solve_lower_t

__all__ = ["CIDCore", "VARIANT_CODES", "STATUS"]

cdef enum:
    V_QP = 0
    V_NOSLIP = 1
    V_COULOMB = 2

# Stage II keeps off the contacts whose gap at the end of the step would exceed
# this [m]: 10 um is far above the round-off of dt^2 w_n and far below a step
CLOSED_GAP_M = 1e-5
cdef double CLOSED_GAP = CLOSED_GAP_M
# Alg. 1's singular test: residual^2 below this fraction of |y|^2 is dependent
cdef double ALG1_TOL = 1e-6
# QP,inf: the pyramid of an infinite mu is |f_t1| + |f_t2| <= MU_INF_CAP f_n
cdef double MU_INF_CAP = 10.0
# Stage II treats a Stage I slack or cone multiplier w as zero when the motion
# it stands for over the step, dt^2 w, is below this [m]: a 1e-7 m change of a
# foot's height must not switch the support (continuity, digest §9.15), and a
# foot that opens or slides 1 um in a tick is closed for the simulator's LCP
cdef double FACE_GAP = 1e-6
# lcp_noslip: LCP passes at most while the released (sliding) contacts settle
cdef int NOSLIP_PASSES = 6
cdef bint RELEASE_TOUCHING = 0

VARIANT_CODES = {"qp": V_QP, "lcp_noslip": V_NOSLIP, "lcp_coulomb": V_COULOMB}

cdef enum:
    OK = 0
    E_MASS = 1          # A not positive definite
    E_LCP = 2           # Lemke failed even with the ladder
    E_NOSLIP = 3        # no-slip constraints violated after the fallback
    E_NOSLIP_SET = 5    # no consistent set of sticking contacts within NOSLIP_PASSES
    E_STAGE1 = 4

STATUS = {
    OK: "ok",
    E_MASS: "the base inertia A = M[:6, :6] is not positive definite (a NaN state?)",
    E_LCP: "Lemke found no solution even with regularisation 1e-4",
    E_NOSLIP: "the no-slip contact constraints are violated even after the §4.5 fallback",
    E_NOSLIP_SET: "no consistent set of sticking contacts (a loaded contact released or an unloaded one "
                  "holding friction) within the passes",
    E_STAGE1: "Stage I (Lemke on its KKT LCP) found no solution",
}


cdef inline double _dot(int n, const double* a, const double* b) noexcept nogil:
    cdef int k
    cdef double s = 0.0
    for k in range(n):
        s += a[k] * b[k]
    return s


cdef inline double _fmax(double a, double b) noexcept nogil:
    return a if a > b else b


cdef int _gs_add(int dim, int m, double* U, double* R, int ldr, const double* y,
                 double rel_tol, double* tmp) noexcept nogil:
    # Gram-Schmidt (twice, for round-off): try to add y (dim,) to the m
    # orthonormal rows of U (m, dim).  On success U gets row m and column m
    # of R (ldr wide, upper triangular, Y = R^T U) is written; returns 1.
    # Returns 0 (nothing changed) when the residual's square is below
    # rel_tol of |y|^2: y depends on the rows kept (Alg. 1's singular test).
    cdef int j, k, p
    cdef double a, nn = _dot(dim, y, y), rr
    memcpy(tmp, y, dim * sizeof(double))
    for j in range(m):
        R[j * ldr + m] = 0.0
    for p in range(2):
        for j in range(m):
            a = _dot(dim, &U[j * dim], tmp)
            R[j * ldr + m] += a
            for k in range(dim):
                tmp[k] -= a * U[j * dim + k]
    rr = _dot(dim, tmp, tmp)
    if not (rr > rel_tol * nn) or nn == 0.0:
        return 0
    rr = sqrt(rr)
    R[m * ldr + m] = rr
    for k in range(dim):
        U[m * dim + k] = tmp[k] / rr
    return 1


cdef class CIDCore:
    """Buffers and kernels of one contact inverse-dynamics problem (see module doc).

    Built by :class:`core_cy.inverse_dynamics.ContactInverseDynamics`, which
    owns the Python face; arrays it exposes (``tau``, ``qdd``, ``f_local``
    ...) are views of this object's buffers, overwritten by each solve.
    """

    cdef Model model
    cdef Data data
    cdef ModelC* m
    cdef DataC* d
    cdef readonly int nv, nb, na, kc, variant, n2, ka, external
    cdef double dt, baumgarte, margin
    cdef double frame[9]
    cdef double normal[3]
    cdef double plane_point[3]
    cdef object _keep
    # contact description (kc)
    cdef int* c_body
    cdef double* c_pos
    cdef double* c_rad
    cdef double* mu
    cdef double* armature
    # assembly
    cdef double* M
    cdef double* h
    cdef double* L
    cdef double* Nr
    cdef double* Sr
    cdef double* Tr
    cdef double* gap
    cdef double* bn
    cdef double* bs
    cdef double* bt
    cdef double* cn
    cdef double* cs
    cdef double* ct
    cdef double* YN
    cdef double* YS
    cdef double* YT
    cdef const double* vcur
    cdef double* aq
    cdef double* aq_des
    cdef double* u0
    cdef double* sv
    cdef double* tmp
    cdef double* U
    cdef double* RK
    cdef double* et
    cdef int* act_idx
    cdef int* kept
    # LCP
    cdef double* Q
    cdef double* r
    cdef double* z
    cdef double* w
    cdef double* T
    cdef int* basis
    cdef int* iwork
    cdef unsigned char* warm          # (kc,) Alg. 2 active flags, caller's indices
    cdef unsigned char* actf
    cdef unsigned char* slide         # (ka,) lcp_noslip: tangent rows released (unloaded, separating)
    cdef unsigned char* free5         # (5ka,) qp: Stage II may move this force (on Stage I's optimal face)
    # QP
    cdef double* Y5
    cdef double* Rq
    cdef double* cG
    cdef double* f0
    cdef double* f
    cdef double* w1                   # (6ka,) Stage I's KKT slacks (5ka) and cone multipliers (ka)
    # fallback
    cdef double* V
    cdef double* D
    cdef double* Wb
    cdef double* cW
    cdef double* rhs
    # outputs
    cdef double* tau
    cdef double* qdd
    cdef double* flocal
    cdef double* forces
    cdef double* tau1
    cdef double* qdd1
    cdef public object aq_a, tau_a, qdd_a, flocal_a, forces_a, tau1_a, qdd1_a, gap_a, active_a
    # diagnostics of the last solve
    cdef readonly int iterations, fallback, stage2, nullity, n_kept, n_lcp
    cdef readonly double regularization, residual, complementarity, cone_violation, penetration
    cdef readonly double violation

    def __init__(self, Model model, Data data, body, position, radius, mu, armature,
                 frame, plane_point, int variant, double dt, double baumgarte, double margin,
                 int nv_external=-1):
        # model None: an externally assembled system of nv_external DoF, 6 of them
        # unactuated (see run_rows); body/position/radius then only size the contact list
        self.model = model
        self.data = data
        self.external = model is None
        if self.external:
            if nv_external < 6:
                raise ValueError(f"an external system needs nv >= 6 (6 unactuated DoF first), got {nv_external}")
            self.m = NULL
            self.d = NULL
            self.nv = nv_external
            self.nb = 6
        else:
            self.m = &model.c
            self.d = &data.c
            self.nv = model.nv
            self.nb = 6 if model.floating_base else 0
        self.na = self.nv - self.nb
        self.kc = len(body)
        self.variant = variant
        self.dt = dt
        self.baumgarte = baumgarte
        self.margin = margin
        fr = np.ascontiguousarray(frame, dtype=float).reshape(9)
        for i in range(9):
            self.frame[i] = fr[i]
        for i in range(3):
            self.normal[i] = fr[3 * i + 2]
            self.plane_point[i] = float(plane_point[i])
        cdef int kc = self.kc, nv = self.nv, na = self.na, nb = self.nb
        cdef int n2 = 7 * kc + 2 * nb + 2
        self.n2 = n2
        sizes = dict(
            c_pos=3 * kc, c_rad=kc, mu=kc, armature=max(na, 1),
            M=nv * nv, h=nv, L=36, Nr=kc * nv, Sr=kc * nv, Tr=kc * nv, gap=kc, bn=kc, bs=kc,
            bt=kc, cn=kc, cs=kc, ct=kc, YN=6 * kc, YS=6 * kc, YT=6 * kc, aq=max(na, 1),
            aq_des=max(na, 1), u0=6, sv=6, tmp=max(nv, 2 * kc, 6) + 6, U=36, RK=36, et=6,
            Q=n2 * n2, r=n2, z=n2, w=n2, T=max(n2 * (2 * n2 + 2), kc * kc + 2 * kc),
            Y5=30 * kc, Rq=5 * kc * max(na, 1), cG=5 * kc, f0=5 * kc, f=5 * kc, w1=6 * kc,
            V=12 * kc,
            # D: Stage II's (2k, na) rows, and the no-slip LCP's (k, 6) projected normals (a
            # system with fewer than 3 actuated joints needs the latter's size)
            D=max(2 * kc * max(na, 1), 6 * kc), Wb=max(na, 1) * max(na, 1), cW=max(na, 1),
            rhs=max(2 * kc, na, 6), tau=max(na, 1), qdd=nv, flocal=3 * kc, forces=3 * kc, tau1=max(na, 1),
            qdd1=nv)
        arrays = {name: np.zeros(max(n, 1)) for name, n in sizes.items()}
        ints = {name: np.zeros(max(n, 1), dtype=np.intc) for name, n in
                dict(c_body=kc, act_idx=kc, kept=6, basis=3 * n2 + 2, iwork=max(kc, n2)).items()}
        flags = {name: np.zeros(max(kc, 1), dtype=np.uint8) for name in ("warm", "actf", "slide")}
        flags["free5"] = np.zeros(max(5 * kc, 1), dtype=np.uint8)
        self._keep = (arrays, ints, flags)
        arrays["c_pos"][:3 * kc] = np.ascontiguousarray(position, dtype=float).reshape(-1)
        arrays["c_rad"][:kc] = radius
        arrays["mu"][:kc] = mu
        arrays["armature"][:na] = armature
        ints["c_body"][:kc] = body
        cdef double[::1] a
        cdef int[::1] ia
        cdef unsigned char[::1] fa
        ia = ints["c_body"]; self.c_body = &ia[0]
        ia = ints["act_idx"]; self.act_idx = &ia[0]
        ia = ints["kept"]; self.kept = &ia[0]
        ia = ints["basis"]; self.basis = &ia[0]
        ia = ints["iwork"]; self.iwork = &ia[0]
        fa = flags["warm"]; self.warm = &fa[0]
        fa = flags["actf"]; self.actf = &fa[0]
        fa = flags["slide"]; self.slide = &fa[0]
        fa = flags["free5"]; self.free5 = &fa[0]
        a = arrays["c_pos"]; self.c_pos = &a[0]
        a = arrays["c_rad"]; self.c_rad = &a[0]
        a = arrays["mu"]; self.mu = &a[0]
        a = arrays["armature"]; self.armature = &a[0]
        a = arrays["M"]; self.M = &a[0]
        a = arrays["h"]; self.h = &a[0]
        a = arrays["L"]; self.L = &a[0]
        a = arrays["Nr"]; self.Nr = &a[0]
        a = arrays["Sr"]; self.Sr = &a[0]
        a = arrays["Tr"]; self.Tr = &a[0]
        a = arrays["gap"]; self.gap = &a[0]
        a = arrays["bn"]; self.bn = &a[0]
        a = arrays["bs"]; self.bs = &a[0]
        a = arrays["bt"]; self.bt = &a[0]
        a = arrays["cn"]; self.cn = &a[0]
        a = arrays["cs"]; self.cs = &a[0]
        a = arrays["ct"]; self.ct = &a[0]
        a = arrays["YN"]; self.YN = &a[0]
        a = arrays["YS"]; self.YS = &a[0]
        a = arrays["YT"]; self.YT = &a[0]
        a = arrays["aq"]; self.aq = &a[0]
        a = arrays["aq_des"]; self.aq_des = &a[0]
        a = arrays["u0"]; self.u0 = &a[0]
        a = arrays["sv"]; self.sv = &a[0]
        a = arrays["tmp"]; self.tmp = &a[0]
        a = arrays["U"]; self.U = &a[0]
        a = arrays["RK"]; self.RK = &a[0]
        a = arrays["et"]; self.et = &a[0]
        a = arrays["Q"]; self.Q = &a[0]
        a = arrays["r"]; self.r = &a[0]
        a = arrays["z"]; self.z = &a[0]
        a = arrays["w"]; self.w = &a[0]
        a = arrays["T"]; self.T = &a[0]
        a = arrays["Y5"]; self.Y5 = &a[0]
        a = arrays["Rq"]; self.Rq = &a[0]
        a = arrays["cG"]; self.cG = &a[0]
        a = arrays["f0"]; self.f0 = &a[0]
        a = arrays["f"]; self.f = &a[0]
        a = arrays["w1"]; self.w1 = &a[0]
        a = arrays["V"]; self.V = &a[0]
        a = arrays["D"]; self.D = &a[0]
        a = arrays["Wb"]; self.Wb = &a[0]
        a = arrays["cW"]; self.cW = &a[0]
        a = arrays["rhs"]; self.rhs = &a[0]
        a = arrays["tau"]; self.tau = &a[0]
        a = arrays["qdd"]; self.qdd = &a[0]
        a = arrays["flocal"]; self.flocal = &a[0]
        a = arrays["forces"]; self.forces = &a[0]
        a = arrays["tau1"]; self.tau1 = &a[0]
        a = arrays["qdd1"]; self.qdd1 = &a[0]
        self.tau_a = arrays["tau"][:na]
        self.aq_a = arrays["aq"][:na]
        self.qdd_a = arrays["qdd"][:nv]
        self.flocal_a = arrays["flocal"][:3 * kc].reshape(kc, 3)
        self.forces_a = arrays["forces"][:3 * kc].reshape(kc, 3)
        self.tau1_a = arrays["tau1"][:na]
        self.qdd1_a = arrays["qdd1"][:nv]
        self.gap_a = arrays["gap"][:kc]
        self.active_a = ints["act_idx"]

    # ------------------------------------------------------------------ Python face
    def set_ground(self, frame, plane_point):
        """Contact frame (3, 3) (columns t1, t2, n) and a point of the plane (3,) [m]."""
        fr = np.ascontiguousarray(frame, dtype=float).reshape(9)
        for i in range(9):
            self.frame[i] = fr[i]
        for i in range(3):
            self.normal[i] = fr[3 * i + 2]
            self.plane_point[i] = float(plane_point[i])

    cpdef void set_plane_point(self, double x, double y, double z):
        """Move the plane (its normal kept) through (x, y, z) [m]: no allocation, no NumPy."""
        self.plane_point[0] = x
        self.plane_point[1] = y
        self.plane_point[2] = z

    def set_mu(self, mu):
        """Friction coefficients (kc,) for the next solves."""
        for i in range(self.kc):
            self.mu[i] = float(mu[i])

    def get_warm(self):
        """Indices (caller's order) of the contacts in Alg. 2's last active set."""
        return [i for i in range(self.kc) if self.warm[i]]

    def set_warm(self, active):
        memset(self.warm, 0, self.kc)
        for i in active:
            if 0 <= int(i) < self.kc:
                self.warm[int(i)] = 1

    def lcp_data(self):
        """(Q, r) of the last LCP the solve built (copies): the no-slip normal LCP,
        the Coulomb LCP, or the QP's last KKT LCP (Stage II if it ran)."""
        n = self.n_lcp
        Q = np.empty((n, n))
        r = np.empty(n)
        for i in range(n):
            r[i] = self.r[i]
            for j in range(n):
                Q[i, j] = self.Q[i * n + j]
        return Q, r

    def stage1_kkt(self):
        """qp, after a solve with Stage II: Stage I's KKT slacks (5ka,) [m/s^2], its cone
        multipliers (ka,) and the flags of the forces Stage II was free to move (5ka,)."""
        n5 = 5 * self.ka
        w = np.array([self.w1[i] for i in range(n5)])
        lam = np.array([self.w1[n5 + i] for i in range(self.ka)])
        free = np.array([bool(self.free5[i]) for i in range(n5)])
        return w, lam, free

    def active_indices(self):
        """The caller's indices of the contacts within the margin in the last solve."""
        return np.asarray(self.active_a[:self.ka], dtype=int).copy()

    def run(self, const double[::1] q, const double[::1] v, const double[::1] qdd_des,
            int stage2=1):
        """One solve into the buffers; returns a status code (0 = ok, see STATUS)."""
        cdef int rc
        if self.external:
            raise TypeError("run: this workspace has no model (built for run_rows)")
        with nogil:
            rc = self.solve(&q[0], &v[0], &qdd_des[0], stage2)
        return rc

    def run_rows(self, const double[:, ::1] M, const double[::1] h, const double[:, ::1] N,
                 const double[:, ::1] S, const double[:, ::1] T, const double[::1] gap,
                 const double[::1] v, const double[::1] qdd_des, int stage2=1):
        """One solve of an externally assembled system (built with ``model=None``).

        M (nv, nv) without armature (added here), h (nv,), contact rows N, S,
        T (kc, nv) in each contact's own axes, gaps (kc,) [m], v and qdd_des
        (nv,); the first 6 DoF are the unactuated ones.  Contacts whose gap is
        not below the margin take no force.  Returns a status code (0 = ok).
        """
        cdef int nv = self.nv, kc = self.kc, rc, i
        if not self.external:
            raise TypeError("run_rows: this workspace assembles from its model; use run()")
        if (M.shape[0] != nv or M.shape[1] != nv or h.shape[0] != nv or v.shape[0] != nv
                or qdd_des.shape[0] != nv or gap.shape[0] != kc):
            raise ValueError(f"run_rows: expected M ({nv}, {nv}), h, v, qdd_des ({nv},), gap ({kc},)")
        if (N.shape[0] != kc or N.shape[1] != nv or S.shape[0] != kc or S.shape[1] != nv
                or T.shape[0] != kc or T.shape[1] != nv):
            raise ValueError(f"run_rows: contact rows N, S, T must be ({kc}, {nv})")
        with nogil:
            self.begin(&v[0], &qdd_des[0])
            memcpy(self.M, &M[0, 0], nv * nv * sizeof(double))
            for i in range(self.na):
                self.M[(self.nb + i) * nv + self.nb + i] += self.armature[i]
            memcpy(self.h, &h[0], nv * sizeof(double))
            self.ka = 0
            for i in range(kc):
                if not gap[i] < self.margin:
                    continue
                self.act_idx[self.ka] = i
                self.gap[self.ka] = gap[i]
                memcpy(&self.Nr[self.ka * nv], &N[i, 0], nv * sizeof(double))
                memcpy(&self.Sr[self.ka * nv], &S[i, 0], nv * sizeof(double))
                memcpy(&self.Tr[self.ka * nv], &T[i, 0], nv * sizeof(double))
                self.ka += 1
            rc = self.rows_done(&v[0])
            if rc == OK:
                rc = self.variant_and_finish(stage2)
        return rc

    # ------------------------------------------------------------------ kernels
    cdef void begin(self, const double* v, const double* qdd_des) noexcept nogil:
        cdef int i
        self.iterations = 0
        self.fallback = 0
        self.stage2 = 0
        self.nullity = 0
        self.regularization = 0.0
        self.violation = 0.0
        for i in range(self.na):
            self.aq_des[i] = qdd_des[self.nb + i]
            self.aq[i] = qdd_des[self.nb + i]
        self.vcur = v

    cdef int solve(self, const double* q, const double* v, const double* qdd_des,
                   int stage2) noexcept nogil:
        cdef int rc
        self.begin(v, qdd_des)
        rc = self.assemble(q, v)
        if rc != OK:
            return rc
        return self.variant_and_finish(stage2)

    cdef int variant_and_finish(self, int stage2) noexcept nogil:
        cdef int rc = OK
        self.constants()
        if self.ka == 0:
            memcpy(self.sv, self.u0, self.nb * sizeof(double))
        elif self.variant == V_NOSLIP:
            rc = _noslip(self)
        elif self.variant == V_COULOMB:
            rc = _coulomb(self)
        else:
            rc = _qp(self, stage2)
        if rc != OK:
            return rc
        self.finish()
        return OK

    cdef int assemble(self, const double* q, const double* v) noexcept nogil:
        # M (+ armature), h, the candidate contacts' rows in the contact frame,
        # A = L L^T and the y's of every row
        cdef int i, j, k, b, c, nv = self.nv, nb = self.nb, ka = 0
        cdef double centre[3]
        cdef double p[3]
        cdef double col[3]
        cdef double g, phi
        cdef const double* S
        cdef const double* R
        fk_c(self.m, self.d, q, v)
        for i in range(self.kc):
            b = self.c_body[i]
            R = &self.d.oR[9 * b]
            for c in range(3):
                centre[c] = (R[3 * c] * self.c_pos[3 * i] + R[3 * c + 1] * self.c_pos[3 * i + 1]
                             + R[3 * c + 2] * self.c_pos[3 * i + 2] + self.d.op[3 * b + c])
            g = 0.0
            for c in range(3):
                g += self.normal[c] * (centre[c] - self.plane_point[c])
            g -= self.c_rad[i]
            if not g < self.margin:
                continue
            self.act_idx[ka] = i
            self.gap[ka] = g
            for c in range(3):
                p[c] = centre[c] - self.c_rad[i] * self.normal[c]
            memset(&self.Nr[ka * nv], 0, nv * sizeof(double))
            memset(&self.Sr[ka * nv], 0, nv * sizeof(double))
            memset(&self.Tr[ka * nv], 0, nv * sizeof(double))
            j = b
            while j >= 0:
                for k in range(self.m.idx_v[j], self.m.idx_v[j] + self.m.nv_joint[j]):
                    S = &self.d.Sw[6 * k]
                    # world velocity of the point p: v - p x w
                    col[0] = S[0] - (p[1] * S[5] - p[2] * S[4])
                    col[1] = S[1] - (p[2] * S[3] - p[0] * S[5])
                    col[2] = S[2] - (p[0] * S[4] - p[1] * S[3])
                    self.Sr[ka * nv + k] = (self.frame[0] * col[0] + self.frame[3] * col[1]
                                            + self.frame[6] * col[2])
                    self.Tr[ka * nv + k] = (self.frame[1] * col[0] + self.frame[4] * col[1]
                                            + self.frame[7] * col[2])
                    self.Nr[ka * nv + k] = (self.frame[2] * col[0] + self.frame[5] * col[1]
                                            + self.frame[8] * col[2])
                j = self.m.parent[j]
            ka += 1
        self.ka = ka
        crba_c(self.m, self.d, q, self.M)
        for i in range(nv):                     # symmetric to round-off, as the NumPy path
            for j in range(i):
                g = 0.5 * (self.M[i * nv + j] + self.M[j * nv + i])
                self.M[i * nv + j] = g
                self.M[j * nv + i] = g
        for i in range(self.na):
            self.M[(nb + i) * nv + nb + i] += self.armature[i]
        rnea_c(self.m, self.d, q, v, NULL, NULL, 1, self.h)
        return self.rows_done(v)

    cdef int rows_done(self, const double* v) noexcept nogil:
        # the biases of the candidate rows, A = L L^T and the y's of every row
        cdef int i, j, nv = self.nv, nb = self.nb, ka = self.ka
        cdef double phi
        for i in range(ka):
            phi = self.gap[i] * (self.baumgarte if self.gap[i] < 0.0 else 1.0)
            self.bn[i] = (_dot(nv, &self.Nr[i * nv], v) + phi / self.dt) / self.dt
            self.bs[i] = _dot(nv, &self.Sr[i * nv], v) / self.dt
            self.bt[i] = _dot(nv, &self.Tr[i * nv], v) / self.dt
        if nb:
            for i in range(nb):
                for j in range(nb):
                    self.L[i * nb + j] = self.M[i * nv + j]
            if cholesky_factor(nb, self.L) != 0:
                return E_MASS
            for i in range(ka):
                _lower_solve_into(nb, self.L, &self.Nr[i * nv], &self.YN[6 * i])
                _lower_solve_into(nb, self.L, &self.Sr[i * nv], &self.YS[6 * i])
                _lower_solve_into(nb, self.L, &self.Tr[i * nv], &self.YT[6 * i])
        return OK

    cdef void constants(self) noexcept nogil:
        # with the joint acceleration aq: c_* = row_q . aq + bias, u0 = L^-1 d_b,
        # d_b = -B aq - h_b (the base rows with zero contact force)
        cdef int i, j, nv = self.nv, nb = self.nb, na = self.na
        cdef double s
        for i in range(self.ka):
            self.cn[i] = self.bn[i] + _dot(na, &self.Nr[i * nv + nb], self.aq)
            self.cs[i] = self.bs[i] + _dot(na, &self.Sr[i * nv + nb], self.aq)
            self.ct[i] = self.bt[i] + _dot(na, &self.Tr[i * nv + nb], self.aq)
        for i in range(nb):
            s = -self.h[i]
            for j in range(na):
                s -= self.M[i * nv + nb + j] * self.aq[j]
            self.u0[i] = s
        if nb:
            solve_lower(nb, self.L, self.u0)

    # ---------------------------------------------------------------- outputs
    cdef void finish(self) noexcept nogil:
        # a_b = L^-T sv; tau = (M qdd + h - R^T f)_q; world forces; diagnostics
        cdef int i, j, k, c, nv = self.nv, nb = self.nb, na = self.na, ka = self.ka
        cdef double s, fn, ft1, ft2
        cdef double* gen = self.tmp
        memcpy(self.qdd, self.sv, nb * sizeof(double))
        if nb:
            solve_lower_t(nb, self.L, self.qdd)
        memcpy(&self.qdd[nb], self.aq, na * sizeof(double))
        memset(self.forces, 0, 3 * self.kc * sizeof(double))
        memset(self.flocal, 0, 3 * self.kc * sizeof(double))
        for i in range(nv):
            gen[i] = _dot(nv, &self.M[i * nv], self.qdd) + self.h[i]
        self.cone_violation = 0.0
        self.penetration = 0.0
        self.complementarity = 0.0 if self.variant != V_COULOMB else self.complementarity
        for i in range(ka):
            fn = self.f[i]
            ft1 = self.f[ka + i] - self.f[2 * ka + i]
            ft2 = self.f[3 * ka + i] - self.f[4 * ka + i]
            c = self.act_idx[i]
            self.flocal[3 * c] = ft1
            self.flocal[3 * c + 1] = ft2
            self.flocal[3 * c + 2] = fn
            for k in range(3):
                self.forces[3 * c + k] = (self.frame[3 * k] * ft1 + self.frame[3 * k + 1] * ft2
                                          + self.frame[3 * k + 2] * fn)
            for j in range(nv):
                gen[j] -= self.Nr[i * nv + j] * fn + self.Sr[i * nv + j] * ft1 + self.Tr[i * nv + j] * ft2
            s = _dot(nv, &self.Nr[i * nv], self.qdd) + self.bn[i]     # w_n
            self.penetration = _fmax(self.penetration, -s)
            self.complementarity = _fmax(self.complementarity, fabs(fn * s))
            self.cone_violation = _fmax(self.cone_violation, -fn)
            if self.mu[c] < INFINITY:
                self.cone_violation = _fmax(self.cone_violation,
                                            fabs(ft1) + fabs(ft2) - self.mu[c] * fn)
        self.residual = 0.0
        for i in range(nb):
            self.residual = _fmax(self.residual, fabs(gen[i]))
        memcpy(self.tau, &gen[nb], na * sizeof(double))


# ------------------------------------------------------------------ the variants
# Module-level kernels on a CIDCore (its buffers): lcp_noslip (_noslip ...
# _dropped_residual), then lcp_coulomb and qp (_pyramid_terms ... _qp).

cdef int _noslip(CIDCore self) noexcept nogil:
    # The contacts whose tangent rows hold follow the LCP's answer: a contact it
    # leaves unloaded and separating (f_n = 0, w_n > 0) cannot hold a tangential
    # force (the plant's friction bound is mu * 0), so its tangent rows are
    # released and the LCP solved again; a released contact that the new answer
    # loads (f_n > 0) sticks again (a loaded contact at mu = inf does not slide).
    # Without the release an unloaded foot 1 um up kept "sticking" and the closed
    # loop diverged within ten ticks; with a release decided once (two passes),
    # a landing foot released on the first pass and loaded on the second slid
    # with 60 N on it while a lifted stance foot held 130 N tangentially with no
    # normal force, and the mu = inf trot fell at its first touchdown.  At most
    # NOSLIP_PASSES passes (a cycle keeps the last answer).
    cdef int rc, i, p, changed, its = 0
    cdef double wn, wtol
    memset(self.slide, 0, self.ka)
    for p in range(NOSLIP_PASSES):
        if p:
            memcpy(self.aq, self.aq_des, self.na * sizeof(double))
            self.constants()
            self.fallback = 0
        rc = _noslip_pass(self)
        its += self.iterations
        self.iterations = its
        if rc != OK:
            return rc
        changed = 0
        wtol = 1e-9 * _fmax(9.81, _kin_tol(self) / 1e-7)
        for i in range(self.ka):
            if self.f[i] == 0.0 and not self.slide[i]:
                wn = _dot(self.nb, &self.YN[6 * i], self.sv) + self.cn[i]
                if wn > wtol or RELEASE_TOUCHING:
                    self.slide[i] = 1
                    changed = 1
            elif self.f[i] > 0.0 and self.slide[i]:
                self.slide[i] = 0
                changed = 1
        if not changed:
            return OK
    # the passes did not settle: the last answer loads a released contact (it would
    # slide under load) or leaves one unloaded that holds a tangential force
    return E_NOSLIP_SET


cdef int _noslip_pass(CIDCore self) noexcept nogil:
    cdef int rc, i
    cdef double tol
    rc = _noslip_lcp(self)
    if rc != OK:
        return rc
    tol = _kin_tol(self)
    if self.violation > tol:
        # §4.5: the desired joint acceleration cannot be met without a
        # slip; take the nearest one that can (every candidate sticks),
        # then solve the LCP again
        self.fallback = 1
        _consistent_joint_accel(self)
        self.constants()
        i = self.iterations
        rc = _noslip_lcp(self)
        self.iterations += i
        if rc != OK:
            return rc
        # the correction is exact up to round-off and the residual of the
        # rows Alg. 1 counted as dependent
        if self.violation > 1e-6 * _fmax(tol / 1e-7, 1.0) + 2.0 * _dropped_residual(self):
            return E_NOSLIP
    return OK


cdef double _kin_tol(CIDCore self) noexcept nogil:
    # contact-acceleration error [m/s^2] below which qdd_des counts as consistent:
    # relative to gravity and the tangential/joint terms (not bn: a gap over
    # dt^2 can be 1e5 m/s^2); settled stances leave ~2e-7 m/s^2 here
    cdef int i
    cdef double s = 9.81
    for i in range(self.na):
        s = _fmax(s, fabs(self.aq_des[i]))
    for i in range(self.ka):
        s = _fmax(s, _fmax(fabs(self.bs[i]), fabs(self.bt[i])))
    return 1e-7 * s


cdef int _noslip_lcp(CIDCore self) noexcept nogil:
    cdef int i, j, k, nk = 0, nb = self.nb, ka = self.ka, it, piv = 0
    cdef double s, eps = 0.0, res = 0.0, scale
    cdef double* Z = self.D               # (ka, 6) normal y's projected off the kept rows
    cdef double* s0 = self.tmp            # 6 + scratch
    cdef double* scr = &self.tmp[6]
    # Alg. 1: tangent rows whose base parts stay independent (a residual
    # below 1e-5 of the row's norm is dependent: a base pitched by 1e-9 rad
    # must not make the feet's rows "independent" and demand huge forces)
    for i in range(ka):
        if nk >= nb:
            break
        if self.slide[i]:
            continue
        if _gs_add(nb, nk, self.U, self.RK, 6, &self.YS[6 * i], ALG1_TOL, scr):
            self.kept[nk] = i
            self.et[nk] = self.cs[i]
            nk += 1
        if nk < nb and _gs_add(nb, nk, self.U, self.RK, 6, &self.YT[6 * i], ALG1_TOL, scr):
            self.kept[nk] = ka + i
            self.et[nk] = self.ct[i]
            nk += 1
    self.n_kept = nk
    # s0 = P u0 - U R^-T e_t  (P: projector off span(U))
    _project_off(nb, nk, self.U, self.u0, s0)
    for i in range(nk):                   # et <- R^-T et (forward, R^T lower)
        s = self.et[i]
        for k in range(i):
            s -= self.RK[k * 6 + i] * self.et[k]
        self.et[i] = s / self.RK[i * 6 + i]
    for i in range(nk):
        for k in range(nb):
            s0[k] -= self.U[i * nb + k] * self.et[i]
    for i in range(ka):
        _project_off(nb, nk, self.U, &self.YN[6 * i], &Z[6 * i])
    for i in range(ka):
        for j in range(i + 1):
            s = _dot(nb, &Z[6 * i], &Z[6 * j])
            self.Q[i * ka + j] = s
            self.Q[j * ka + i] = s
        self.r[i] = _dot(nb, &self.YN[6 * i], s0) + self.cn[i]
    self.n_lcp = ka
    # Alg. 2 from the caller's last active set
    for i in range(ka):
        self.actf[i] = self.warm[self.act_idx[i]]
    scale = 1.0
    for i in range(ka * ka):
        scale = _fmax(scale, fabs(self.Q[i]))
    for i in range(ka):
        scale = _fmax(scale, fabs(self.r[i]))
    it = ppm_c(ka, self.Q, self.r, self.z, self.w, self.actf, self.T, self.iwork,
               1e-10 * scale)
    if it < 0:
        if lemke_ladder_c(ka, self.Q, self.r, self.z, self.w, self.T, self.basis, &eps,
                          &piv, &res) != 0:
            return E_LCP
        it = piv
        self.regularization = eps
        for i in range(ka):
            self.actf[i] = self.z[i] > 0.0
    self.iterations = it
    for i in range(ka):
        self.warm[self.act_idx[i]] = self.actf[i]
    # s = s0 + Z f_n; the tangent forces from u = u0 + Y_N f_n
    memcpy(self.sv, s0, nb * sizeof(double))
    memcpy(scr, self.u0, nb * sizeof(double))
    for i in range(ka):
        if self.z[i] != 0.0:
            for k in range(nb):
                self.sv[k] += Z[6 * i + k] * self.z[i]
                scr[k] += self.YN[6 * i + k] * self.z[i]
    memset(self.f, 0, 5 * ka * sizeof(double))
    for i in range(ka):
        self.f[i] = self.z[i]
    # f_t = -R^-1 (U u + R^-T e_t); et already holds R^-T e_t
    for i in range(nk):
        self.rhs[i] = -(_dot(nb, &self.U[i * nb], scr) + self.et[i])
    for i in range(nk - 1, -1, -1):
        s = self.rhs[i]
        for k in range(i + 1, nk):
            s -= self.RK[i * 6 + k] * self.rhs[k]
        self.rhs[i] = s / self.RK[i * 6 + i]
    for i in range(nk):
        j = self.kept[i]
        if j < ka:
            self.f[ka + j] = self.rhs[i]           # f_t1 (signed, stored in the s+ slot)
        else:
            self.f[3 * ka + j - ka] = self.rhs[i]  # f_t2 in the t+ slot
    # the rows Alg. 1 dropped, and non-penetration
    self.violation = 0.0
    for i in range(ka):
        if not self.slide[i]:
            self.violation = _fmax(self.violation, fabs(_dot(nb, &self.YS[6 * i], self.sv)
                                                       + self.cs[i]))
            self.violation = _fmax(self.violation, fabs(_dot(nb, &self.YT[6 * i], self.sv)
                                                       + self.ct[i]))
        self.violation = _fmax(self.violation, -(_dot(nb, &self.YN[6 * i], self.sv)
                                                 + self.cn[i]))
    return OK


cdef void _consistent_joint_accel(CIDCore self) noexcept nogil:
    # §4.5: min |aq - aq_des|^2 such that the tangent rows Alg. 1 dropped
    # hold whenever the kept ones do.  A dropped row's base part is
    # y_d = Y_K alpha (+ a residual below Alg. 1's threshold), so it holds
    # iff (C_q,d - alpha^T C_q,K) aq + (b_d - alpha^T b_K) = 0: one linear
    # condition D_d aq = e_d per dropped row, with exactly Alg. 1's notion of
    # dependence (a separate rank decision here would disagree with it on
    # weakly independent rows, 1e-9 of a pitched base, and the LCP would
    # then slip by their residual x the normal forces' base motion).
    # aq = aq_des + x, x the min-norm solution of D x = e - D aq_des, by
    # Gram-Schmidt on D's rows with the right side carried along.
    cdef int i, j, k, k2, d, ka = self.ka, nb = self.nb, na = self.na, nv = self.nv
    cdef int nk = self.n_kept, nd = 0, nw = 0
    cdef double s, nn, rr
    cdef double* alpha = self.rhs
    cdef double* e = self.Q                 # the LCP buffers are free here
    cdef double* scr = self.T
    cdef const double* row
    for d in range(2 * ka):
        k = self.slide[d if d < ka else d - ka]
        for j in range(nk):
            if self.kept[j] == d:
                k = 1
        if k:
            continue
        row = &self.YS[6 * d] if d < ka else &self.YT[6 * (d - ka)]
        for j in range(nk):                 # R_K alpha = U y_d (back substitution)
            alpha[j] = _dot(nb, &self.U[j * nb], row)
        for j in range(nk - 1, -1, -1):
            s = alpha[j]
            for k in range(j + 1, nk):
                s -= self.RK[j * 6 + k] * alpha[k]
            alpha[j] = s / self.RK[j * 6 + j]
        _tangent_joint_row(self, d, &self.D[nd * na], &e[nd])
        for j in range(nk):
            _tangent_joint_row(self, self.kept[j], scr, &rr)
            for k in range(na):
                self.D[nd * na + k] -= alpha[j] * scr[k]
            e[nd] -= alpha[j] * rr
        e[nd] = -e[nd] - _dot(na, &self.D[nd * na], self.aq_des)
        nd += 1
    for i in range(nd):
        memcpy(scr, &self.D[i * na], na * sizeof(double))
        rr = e[i]
        nn = _dot(na, scr, scr)
        for k in range(2):
            for j in range(nw):
                s = _dot(na, &self.Wb[j * na], scr)
                rr -= s * self.cW[j]
                for k2 in range(na):
                    scr[k2] -= s * self.Wb[j * na + k2]
        s = _dot(na, scr, scr)
        if nw < na and s > 1e-20 * nn and nn > 0.0:
            s = sqrt(s)
            for k2 in range(na):
                self.Wb[nw * na + k2] = scr[k2] / s
            self.cW[nw] = rr / s
            nw += 1
    for k in range(na):
        s = self.aq_des[k]
        for j in range(nw):
            s += self.cW[j] * self.Wb[j * na + k]
        self.aq[k] = s


cdef void _tangent_joint_row(CIDCore self, int d, double* out, double* bias) noexcept nogil:
    # tangent row d (< ka: S of contact d, else T of contact d - ka): its joint
    # part (na,) and its velocity bias
    if d < self.ka:
        memcpy(out, &self.Sr[d * self.nv + self.nb], self.na * sizeof(double))
        bias[0] = self.bs[d]
    else:
        memcpy(out, &self.Tr[(d - self.ka) * self.nv + self.nb], self.na * sizeof(double))
        bias[0] = self.bt[d - self.ka]


cdef double _dropped_residual(CIDCore self) noexcept nogil:
    # max over the dropped tangent rows of |y_d - U^T U y_d| |sv|: how far
    # Alg. 1's "dependent" lets such a row move with the base [m/s^2]
    cdef int d, j, k, nb = self.nb
    cdef double worst = 0.0, a
    cdef const double* row
    cdef double* t = &self.tmp[6]
    for d in range(2 * self.ka):
        if self.slide[d if d < self.ka else d - self.ka]:
            continue
        row = &self.YS[6 * d] if d < self.ka else &self.YT[6 * (d - self.ka)]
        _project_off(nb, self.n_kept, self.U, row, t)
        a = sqrt(_dot(nb, t, t))
        worst = _fmax(worst, a)
    return worst * sqrt(_dot(nb, self.sv, self.sv))


cdef void _pyramid_terms(CIDCore self, int ke) noexcept nogil:
    # Y5 (5ka, nb): y's of [N; S; -S; T; -T] (direction-major, digest §1);
    # cG (5ka,): the rows' accelerations with zero contact force
    cdef int i, k, ka = self.ka, nb = self.nb, nv = self.nv
    cdef double s
    cdef double* m0 = &self.tmp[0]
    for i in range(ka):
        for k in range(nb):
            self.Y5[6 * i + k] = self.YN[6 * i + k]
            self.Y5[6 * (ka + i) + k] = self.YS[6 * i + k]
            self.Y5[6 * (2 * ka + i) + k] = -self.YS[6 * i + k]
            self.Y5[6 * (3 * ka + i) + k] = self.YT[6 * i + k]
            self.Y5[6 * (4 * ka + i) + k] = -self.YT[6 * i + k]
        self.cG[i] = _dot(nb, &self.YN[6 * i], self.u0) + self.cn[i]
        s = _dot(nb, &self.YS[6 * i], self.u0) + self.cs[i]
        self.cG[ka + i] = s
        self.cG[2 * ka + i] = -s
        s = _dot(nb, &self.YT[6 * i], self.u0) + self.ct[i]
        self.cG[3 * ka + i] = s
        self.cG[4 * ka + i] = -s
    # ke = 1 (the QP's relaxed fallback), QP,inf: with no friction bound the
    # contact-space terms of the tangent rows would demand exact sticking
    # (infeasible as soon as the joint accelerations are not consistent with
    # it); their forces follow the
    # paper's kinetic-energy term instead, Y (L^-1 ((M v)_b / dt - h_b)),
    # which always has a minimum
    if not ke or not _any_inf(self):
        return
    for k in range(nb):
        m0[k] = _dot(nv, &self.M[k * nv], self.vcur) / self.dt - self.h[k]
    solve_lower(nb, self.L, m0)
    for i in range(ka):
        if self.mu[self.act_idx[i]] < INFINITY:
            continue
        s = _dot(nb, &self.YS[6 * i], m0)
        self.cG[ka + i] = s
        self.cG[2 * ka + i] = -s
        s = _dot(nb, &self.YT[6 * i], m0)
        self.cG[3 * ka + i] = s
        self.cG[4 * ka + i] = -s


cdef double _mu_eff(CIDCore self, int i) noexcept nogil:
    # active contact i's friction coefficient in the pyramid rows: QP,inf keeps
    # a (very wide) pyramid so Stage I's feasible set stays bounded and its
    # KKT LCP always has a solution Lemke reaches
    cdef double mu = self.mu[self.act_idx[i]]
    return mu if mu < MU_INF_CAP else MU_INF_CAP


cdef int _any_inf(CIDCore self) noexcept nogil:
    cdef int i
    for i in range(self.ka):
        if not self.mu[self.act_idx[i]] < INFINITY:
            return 1
    return 0


cdef int _friction_lcp(CIDCore self, int qp) noexcept nogil:
    # z = [f (5ka); lambda (every contact)]; Coulomb (qp = 0): the
    # Anitescu-Potra LCP (lcp_coulomb, and the QP's Stage I); qp = 1: the KKT
    # LCP of the paper's relaxed Stage I (the QP's fallback), the same matrix
    # with -mu lambda on the normal rows (max dissipation without
    # complementarity between sliding and the normal gap)
    cdef int i, j, k, ka = self.ka, n5 = 5 * ka, nl = 0, n, piv = 0
    cdef double s, eps = 0.0, res = 0.0
    for i in range(ka):                # every contact: mu = inf is capped (MU_INF_CAP)
        self.iwork[nl] = i
        nl += 1
    n = n5 + nl
    self.n_lcp = n
    memset(self.Q, 0, n * n * sizeof(double))
    for i in range(n5):
        for j in range(i + 1):
            s = _dot(self.nb, &self.Y5[6 * i], &self.Y5[6 * j])
            self.Q[i * n + j] = s
            self.Q[j * n + i] = s
        self.r[i] = self.cG[i]
    for j in range(nl):
        i = self.iwork[j]
        for k in range(1, 5):
            self.Q[(k * ka + i) * n + n5 + j] = 1.0
            self.Q[(n5 + j) * n + k * ka + i] = -1.0
        self.Q[(n5 + j) * n + i] = _mu_eff(self, i)
        if qp:
            self.Q[i * n + n5 + j] = -_mu_eff(self, i)
        self.r[n5 + j] = 0.0
    if lemke_ladder_c(n, self.Q, self.r, self.z, self.w, self.T, self.basis, &eps, &piv,
                      &res) != 0:
        return E_LCP
    self.iterations += piv
    self.regularization = _fmax(self.regularization, eps)
    for i in range(n):
        self.complementarity = _fmax(self.complementarity, fabs(self.z[i] * self.w[i]))
    memcpy(self.f, self.z, n5 * sizeof(double))
    return OK


cdef void _base_from_forces(CIDCore self) noexcept nogil:
    # sv = u0 + Y5^T f (then a_b = L^-T sv in finish)
    cdef int j, k
    memcpy(self.sv, self.u0, self.nb * sizeof(double))
    for j in range(5 * self.ka):
        if self.f[j] != 0.0:
            for k in range(self.nb):
                self.sv[k] += self.Y5[6 * j + k] * self.f[j]


cdef int _coulomb(CIDCore self) noexcept nogil:
    cdef int rc
    _pyramid_terms(self, 0)
    rc = _friction_lcp(self, 0)
    if rc != OK:
        return rc
    _base_from_forces(self)
    return OK


cdef int _qp(CIDCore self, int stage2) noexcept nogil:
    cdef int rc, i, j, k, ka = self.ka, n5 = 5 * ka, nb = self.nb, na = self.na
    cdef int nv = self.nv, ne, n, piv = 0, rank = 0, nsl
    cdef double s, eps = 0.0, res = 0.0, scale, tol
    cdef double* t = self.rhs
    # Stage I: the KKT LCP of the paper's complementarity-free QP has -mu lambda
    # on the normal rows (a sliding contact opens at mu |v_t+|): at 1 kHz with
    # the joint accelerations imposed, a foot sliding at 0.5 m/s then "lifts"
    # at 5 cm/s and the QP pushes the base up (qp_mu 40-57 % force error).
    # Without that term it is the Coulomb LCP (the simulator's model; QP,inf
    # with the pyramid capped at MU_INF_CAP).  If Lemke gives up, the relaxed
    # one (the paper's; QP,inf's tangent rows then carry the kinetic-energy
    # term), which always has a minimum.
    _pyramid_terms(self, 0)
    rc = _friction_lcp(self, 0)
    if rc != OK:
        _pyramid_terms(self, 1)
        rc = _friction_lcp(self, 1)
    if rc != OK:
        return E_STAGE1
    _base_from_forces(self)
    self.finish()                            # Stage I's answer, kept for diagnostics
    memcpy(self.tau1, self.tau, na * sizeof(double))
    memcpy(self.qdd1, self.qdd, nv * sizeof(double))
    # nullity of Stage I's Hessian Y5 Y5^T: 5ka - rank(Y5)
    for i in range(n5):
        if rank < nb:
            rank += _gs_add(nb, rank, self.U, self.RK, 6, &self.Y5[6 * i], 1e-20, self.tmp)
    self.nullity = n5 - rank
    if not stage2 or self.nullity == 0:
        return OK
    # Stage II: min 1/2 |t - Rq f|^2 over the forces that solve Stage I's
    # problem with its multipliers.  Every such f has Stage I's base motion
    # (Y5^T f = Y5^T f0, the paper's nullspace), and Stage I's slacks and cone
    # multipliers stay complementary to it: f_j = 0 where Stage I's slack w_j
    # > tol, the pyramid tight (mu f_n = sum f_t) where the contact slides
    # (multiplier > tol).  The nullspace alone is not enough: it lets Stage II
    # load a foot that separates, or slide a foot more than friction allows,
    # whenever that lowers the torque, a distribution the simulator never
    # produces (qp_mu, rigid mu 0.1, 2 s: the loaded feet differed from the
    # simulator's on 70 % of the ticks).  A contact that does not end the step
    # closed (predicted gap dt^2 w_n above CLOSED_GAP) keeps Stage I's forces.
    # t = tau + Rq_free f0_free: Stage I's torque without the free forces.
    memcpy(self.f0, self.f, n5 * sizeof(double))
    memcpy(self.w1, self.w, n5 * sizeof(double))
    memcpy(&self.w1[n5], &self.z[n5], ka * sizeof(double))
    tol = FACE_GAP / (self.dt * self.dt)
    for i in range(ka):
        self.actf[i] = (self.dt * self.dt * (_dot(nb, &self.YN[6 * i], self.sv) + self.cn[i])
                        < CLOSED_GAP) and self.w1[i] <= tol
        for k in range(na):
            s = self.Nr[i * nv + nb + k]
            self.Rq[i * na + k] = s
            s = self.Sr[i * nv + nb + k]
            self.Rq[(ka + i) * na + k] = s
            self.Rq[(2 * ka + i) * na + k] = -s
            s = self.Tr[i * nv + nb + k]
            self.Rq[(3 * ka + i) * na + k] = s
            self.Rq[(4 * ka + i) * na + k] = -s
    for j in range(n5):
        self.free5[j] = self.actf[j % ka] and self.w1[j] <= tol
    memcpy(t, self.tau, na * sizeof(double))
    for j in range(n5):
        if self.free5[j] and self.f0[j] != 0.0:
            for k in range(na):
                t[k] += self.Rq[j * na + k] * self.f0[j]
    ne = nb
    nsl = 0                          # sliding free contacts: a reversed pyramid row each
    for i in range(ka):
        if self.free5[i] and self.w1[n5 + i] > tol:
            nsl += 1
    n = n5 + 2 * ne + ka + nsl
    self.n_lcp = n
    memset(self.Q, 0, n * n * sizeof(double))
    scale = 0.0
    for i in range(n5):
        if not self.free5[i]:
            continue
        for j in range(i + 1):
            if not self.free5[j]:
                continue
            s = _dot(na, &self.Rq[i * na], &self.Rq[j * na])
            self.Q[i * n + j] = s
            self.Q[j * n + i] = s
            scale = _fmax(scale, fabs(s))
        self.r[i] = -_dot(na, &self.Rq[i * na], t)
    scale = _fmax(scale, 1e-12)
    # equality rows y_k^T f = y_k^T f0 over the free forces, scaled to the Hessian's size
    for k in range(ne):
        s = 0.0
        for j in range(n5):
            s = _fmax(s, fabs(self.Y5[6 * j + k]))
        s = scale / s if s > 0.0 else 0.0
        res = 0.0
        for j in range(n5):
            eps = s * self.Y5[6 * j + k] if self.free5[j] else 0.0
            res += eps * self.f0[j]
            self.Q[(n5 + k) * n + j] = eps
            self.Q[(n5 + ne + k) * n + j] = -eps
            self.Q[j * n + n5 + k] = -eps
            self.Q[j * n + n5 + ne + k] = eps
        self.r[n5 + k] = -res
        self.r[n5 + ne + k] = res
    for i in range(n5):
        if not self.free5[i]:
            self.r[i] = scale        # w_i = scale > 0: z_i = 0 (f_i stays f0_i), no coupling
    # the pyramid rows (every contact: mu = inf is capped, MU_INF_CAP); a sliding
    # contact's also reversed (the pyramid tight)
    nsl = n5 + 2 * ne + ka
    for i in range(ka):
        k = n5 + 2 * ne + i
        self.r[k] = scale
        if not self.free5[i]:        # its normal force is fixed: so are its tangents (above)
            continue
        self.r[k] = 0.0
        s = _mu_eff(self, i) * scale
        self.Q[k * n + i] = s
        self.Q[i * n + k] = -s
        for rc in range(1, 5):
            self.Q[k * n + rc * ka + i] = -scale
            self.Q[(rc * ka + i) * n + k] = scale
        if self.w1[n5 + i] > tol:
            k = nsl
            nsl += 1
            self.r[k] = 0.0
            self.Q[k * n + i] = -s
            self.Q[i * n + k] = s
            for rc in range(1, 5):
                self.Q[k * n + rc * ka + i] = scale
                self.Q[(rc * ka + i) * n + k] = -scale
    eps = 0.0
    if lemke_ladder_c(n, self.Q, self.r, self.z, self.w, self.T, self.basis, &eps, &piv,
                      &res) != 0:
        # Stage II is a refinement: without it Stage I's answer stands
        memcpy(self.f, self.f0, n5 * sizeof(double))
        return OK
    self.iterations += piv
    self.stage2 = 1
    for j in range(n5):
        self.f[j] = self.z[j] if self.free5[j] else self.f0[j]
    _base_from_forces(self)
    return OK


# ------------------------------------------------------------------ small dense helpers
cdef void _lower_solve_into(int n, const double* L, const double* b, double* x) noexcept nogil:
    # x = L^-1 b
    memcpy(x, b, n * sizeof(double))
    solve_lower(n, L, x)


cdef void _project_off(int dim, int m, const double* U, const double* y, double* out) noexcept nogil:
    # out = y - U^T (U y), U (m, dim) orthonormal rows
    cdef int j, k
    cdef double a
    memcpy(out, y, dim * sizeof(double))
    for j in range(m):
        a = _dot(dim, &U[j * dim], out)
        for k in range(dim):
            out[k] -= a * U[j * dim + k]
