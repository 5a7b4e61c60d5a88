"""A closed chain the kernels cannot answer: two fingers squeezing a box, asked to close further.

Box (0.3 kg, 6 DoF first) between two prismatic fingers on x, each touching
one face.  Asking both fingers to accelerate into the box asks both normal
rows to close at once, which no force can give (the internal squeeze moves
nothing).  The nearest feasible joint acceleration is the fingers' zero
(they may not approach), so the fallback must return that, with forces in
the friction pyramid and torques that satisfy the dynamics.  What the box
then does is the contact model's: with no-slip rows it is held; with
Coulomb friction and fingers that do not squeeze, no normal force arises
and it falls (a rigid grasp holds only what its squeeze carries).
"""

from __future__ import annotations

import numpy as np
import pytest

from servoloop.core_cy.inverse_dynamics import InfeasibleError, SystemInverseDynamics

MASS, G, R = 0.3, 9.81, 0.05


def squeeze():
    nv = 8
    M = np.zeros((nv, nv))
    M[:3, :3] = MASS * np.eye(3)
    M[3:6, 3:6] = 1e-3 * np.eye(3)
    M[6, 6] = M[7, 7] = 0.5
    h = np.zeros(nv)
    h[2] = MASS * G
    # rows of each finger's velocity relative to the box point, in (t1 = y, t2 = z, n = outward)
    N = np.zeros((2, nv))
    S = np.zeros((2, nv))
    T = np.zeros((2, nv))
    N[0, 0], N[0, 6] = 1.0, -1.0            # left face, n = -x; finger 1 moves +x
    N[1, 0], N[1, 7] = -1.0, -1.0           # right face, n = +x; finger 2 moves -x
    S[0, 1], S[0, 5] = -1.0, R              # -v_y - (w x r)_y, r = (-R, 0, 0)
    T[0, 2], T[0, 4] = -1.0, -R
    S[1, 1], S[1, 5] = -1.0, -R             # r = (+R, 0, 0)
    T[1, 2], T[1, 4] = -1.0, R
    return M, h, N, S, T


@pytest.mark.parametrize("variant", ["qp", "lcp_coulomb", "lcp_noslip"])
def test_fingers_asked_to_close_into_a_held_box_get_the_nearest_feasible_motion(variant):
    M, h, N, S, T = squeeze()
    mu = 1.0
    gap, v = np.zeros(2), np.zeros(8)
    qdd_des = np.zeros(8)
    qdd_des[6:] = 1.0                        # both fingers into the box: impossible
    strict = SystemInverseDynamics(8, 2, mu, variant, fallback=False)
    with pytest.raises(InfeasibleError):
        strict.solve(M, h, N, S, T, gap, v, qdd_des)
    r = SystemInverseDynamics(8, 2, mu, variant).solve(M, h, N, S, T, gap, v, qdd_des)
    assert r.diagnostics.fallback
    # the fingers may not approach (nearest feasible: zero), the box does not fall
    assert np.allclose(r.qdd[6:], 0.0, atol=1e-5), r.qdd
    f = np.asarray(r.contact_forces)         # (f_t1, f_t2, f_n) per pad
    assert np.all(f[:, 2] >= -1e-9)
    if variant == "lcp_noslip":
        assert np.allclose(r.qdd[:6], 0.0, atol=1e-5), r.qdd                 # held
        assert np.sum(f[:, 1]) == pytest.approx(-MASS * G, rel=1e-6)          # carried by friction
    else:
        assert np.all(np.abs(f[:, 0]) + np.abs(f[:, 1]) <= mu * f[:, 2] + 1e-6)
        assert r.qdd[2] == pytest.approx(-G, abs=1e-6)                         # falls
    # M qdd + h = [0; tau] + J^T f
    gen = S.T @ f[:, 0] + T.T @ f[:, 1] + N.T @ f[:, 2]
    lhs = M @ r.qdd + h
    assert np.allclose(lhs[:6], gen[:6], atol=1e-6)
    assert np.allclose(lhs[6:], r.tau + gen[6:], atol=1e-6)
