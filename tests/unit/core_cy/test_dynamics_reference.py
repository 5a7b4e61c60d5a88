"""Every compiled kernel against the slow NumPy reference (core_cy.dynamics.reference).

Randomized states with fixed seeds; agreement to 1e-9 relative.  Talos is
left to the Pinocchio oracle tests (the reference is slow on 33 bodies).
"""

import numpy as np
import pytest

from servoloop import core_cy
from servoloop.core_cy.dynamics import reference as ref
from tests.unit.core_cy.dynamics_cases import BUILTIN, assert_close, load, random_state

ROBOTS = BUILTIN + ("ur5", "panda", "solo12")
N_STATES = 3


def _states(model, seed):
    rng = np.random.default_rng(seed)
    for _ in range(N_STATES):
        q, v, a = random_state(model, rng)
        yield q, v, a, rng.normal(size=(model.nbodies, 6))


@pytest.mark.parametrize("name", ROBOTS)
def test_rnea_family_matches_reference(name):
    model = load(name)
    data = core_cy.Data(model)
    zero = np.zeros(model.nv)
    for q, v, a, fext in _states(model, 1):
        assert_close(core_cy.rnea(model, data, q, v, a), ref.rnea(model, q, v, a), what="rnea")
        assert_close(core_cy.rnea(model, data, q, v, a, fext=fext),
                     ref.rnea(model, q, v, a, fext=fext), what="rnea fext")
        assert_close(core_cy.nonlinear_effects(model, data, q, v),
                     ref.rnea(model, q, v, zero), what="nle")
        assert_close(core_cy.gravity(model, data, q), ref.rnea(model, q, zero, zero),
                     what="gravity")


@pytest.mark.parametrize("name", ROBOTS)
def test_crba_and_aba_match_reference(name):
    model = load(name)
    data = core_cy.Data(model)
    for q, v, tau, fext in _states(model, 2):
        assert_close(core_cy.crba(model, data, q), ref.crba(model, q), what="crba")
        assert_close(core_cy.aba(model, data, q, v, tau), ref.aba(model, q, v, tau), what="aba")
        assert_close(core_cy.aba(model, data, q, v, tau, fext=fext),
                     ref.aba(model, q, v, tau, fext=fext), what="aba fext")


@pytest.mark.parametrize("name", ROBOTS)
def test_kinematics_match_reference(name):
    model = load(name)
    data = core_cy.Data(model)
    for q, v, _, _ in _states(model, 3):
        core_cy.forward_kinematics(model, data, q, v)
        for i, (R, p) in enumerate(ref.placements(model, q)):
            assert_close(data.rotation_body_to_world[i], R, what=f"R body {i}")
            assert_close(data.position_body_in_world[i], p, what=f"p body {i}")
            # local velocity = local Jacobian of the body frame times v
            assert_close(data.velocity_body_local[i], ref.jacobian(model, q, i, "local") @ v,
                         what=f"v body {i}")
            assert_close(data.velocity_body_world[i], ref.jacobian(model, q, i, "world") @ v,
                         what=f"v world body {i}")


@pytest.mark.parametrize("name", ROBOTS)
def test_frame_jacobians_match_reference(name):
    model = load(name)
    data = core_cy.Data(model)
    names = list(model.frame_names)
    rng = np.random.default_rng(4)
    for q, _, _, _ in _states(model, 4):
        for link in rng.choice(names, size=min(4, len(names)), replace=False):
            body, R_l, p_l = model.frame_placement(str(link))
            for frame in ("world", "local", "local_world_aligned"):
                assert_close(core_cy.frame_jacobian(model, data, q, str(link), frame),
                             ref.jacobian(model, q, body, frame, R_l, p_l),
                             what=f"J {link} {frame}")


@pytest.mark.parametrize("name", ROBOTS)
def test_center_of_mass_matches_reference(name):
    model = load(name)
    data = core_cy.Data(model)
    for q, _, _, _ in _states(model, 5):
        com_ref, J_ref = ref.center_of_mass(model, q)
        com, J = core_cy.center_of_mass(model, data, q, jacobian=True)
        assert_close(com, com_ref, what="com")
        assert_close(J, J_ref, what="Jcom")
        assert_close(core_cy.center_of_mass(model, data, q), com_ref, what="com alone")


@pytest.mark.parametrize("name", ROBOTS)
def test_regressor_matches_reference(name):
    model = load(name)
    data = core_cy.Data(model)
    for q, v, a, _ in _states(model, 6):
        assert_close(core_cy.regressor(model, data, q, v, a), ref.regressor(model, q, v, a),
                     what="regressor")


@pytest.mark.parametrize("name", ROBOTS)
def test_integrate_matches_reference(name):
    model = load(name)
    for q, v, _, _ in _states(model, 7):
        for dt in (1e-3, 0.37, 1.0):
            assert_close(core_cy.integrate(model, q, v, dt), ref.integrate(model, q, v, dt),
                         what=f"integrate dt={dt}")
