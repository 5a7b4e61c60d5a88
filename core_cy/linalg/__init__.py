"""Small dense linear algebra for the compiled kernels: the one copy in core_cy.

The kernels are ``cdef inline ... noexcept nogil`` functions in
``core_cy/linalg/_dense.pxd``, cimported by every .pyx that needs them
(``core_cy/dynamics``, ``core_cy/sim``, ``core_cy/contact``)::

    from servoloop.core_cy.linalg._dense cimport cholesky_factor, cholesky_solve

They allocate nothing and hold no Python objects; matrices are row-major C
arrays, 3x3 rotations 9-vectors, spatial 6-vectors (linear; angular).

=========================  ==========================================  ==================
kernel                     computes (NumPy)                            used by
=========================  ==========================================  ==================
``cross3(a, b, out)``      ``np.cross(a, b)``, out may alias a or b    dynamics, sim
``dot3``, ``dot6``,        ``a @ b`` for (3,), (6,), (n,)              dynamics, sim
``dot(n, a, b)``
``dot_acc(s, n, a, b)``    ``s + a @ b``, summed from s                (matvec_add)
``mat3_vec``,              ``R @ x``, ``R.T @ x``, R (3, 3)            dynamics, contact
``mat3t_vec``
``mat3_mul``               ``A @ B`` (3, 3)                            dynamics
``mat3_congruence_sym``    ``R @ S @ R.T``, S symmetric                dynamics
``mat6_vec``               ``A @ x``, A (6, 6)                         dynamics (ABA)
``matvec_add``             ``b + A @ x``, A (m, n)                     contact (LCP stats)
``gram_rows``              ``A @ A.T``, A (m, n)                       sim (Delassus)
``matTvec_acc``            ``y += A.T @ x``                            sim (impulses)
``cholesky_factor``        lower triangle <- ``np.linalg.cholesky``,   sim (mass matrix)
                           returns -1 if not SPD
``cholesky_factor_rel``    the same with a rank test: -1 when a        contact (Alg. 2)
                           pivot^2 <= rel_tol A[j, j]
``solve_lower``,           ``L^-1 x``, ``L^-T x``                      sim, inverse
                                                                       dynamics
``solve_lower_t``
``cholesky_solve``         ``A^-1 x`` from the factor                  sim
``ldlt_solve(n, A, b, w)`` ``np.linalg.solve(A, b)`` for SPD A,        dynamics (ABA
                           no square root, -1 if not SPD               free-flyer)
=========================  ==========================================  ==================

``core_cy/linalg/reference.py`` states each in NumPy and
``core_cy/linalg/_dense.pyx`` exposes Python entry points (``*_np``) for the
randomized tests in ``tests/unit/core_cy/test_linalg.py``.  Python-level
code (inverse dynamics, references) uses NumPy directly.
"""

__all__: list[str] = []
