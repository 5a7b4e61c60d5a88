"""Physical-consistency checker (digest section 8.8, the LMI part)."""

import numpy as np
import pytest

from servoloop import robots
from servoloop.calibration.inertial import (
    ParameterLayout,
    body_parameters,
    check_consistency,
    check_urdf,
    pseudo_inertia,
)

LAYOUT = ParameterLayout(("link",), ("joint",), (0,), 1)


def box(m=0.1, a=0.03, b=0.04, c=0.05, com=(0.01, -0.02, 0.03)):
    I_c = m / 12 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])
    return body_parameters(m, com, I_c)


def test_pseudo_inertia_matches_pinocchio():
    pin = pytest.importorskip("pinocchio")
    p = box()
    J = pin.Inertia.FromDynamicParameters(p).toPseudoInertia().toMatrix()
    assert np.allclose(pseudo_inertia(p), J, rtol=1e-12, atol=1e-18)


def test_a_solid_box_is_consistent():
    rep = check_consistency(box(), LAYOUT)
    assert rep.ok, rep.problems
    assert rep.bodies[0].lmi_min_eig > 0


def test_lmi_rejects_negative_mass():
    p = box()
    p[0] = -p[0]
    rep = check_consistency(p, LAYOUT)
    assert not rep.ok
    assert rep.bodies[0].lmi_min_eig < 0
    assert any("link" in s and "mass" in s for s in rep.problems)


def test_lmi_rejects_ixx_above_iyy_plus_izz():
    m = 0.1
    I_c = np.diag([3e-5, 1e-5, 1.5e-5])  # Ixx > Iyy + Izz: no mass distribution has it
    p = body_parameters(m, np.zeros(3), I_c)
    assert np.all(np.linalg.eigvalsh(I_c) > 0)  # positive definite, yet not physical
    rep = check_consistency(p, LAYOUT)
    assert not rep.ok
    assert rep.bodies[0].lmi_min_eig < 0
    assert rep.bodies[0].triangle_margin < 0
    assert any("triangle" in s for s in rep.problems)


def test_lmi_margin_and_negative_friction_are_reported():
    theta = LAYOUT.join(box(), [0.1, -0.01, 1e-3, -0.2])  # beta may be negative, Fv may not
    rep = check_consistency(theta, LAYOUT)
    assert rep.problems == ["joint joint: Fv = -0.01 is negative"]
    rep = check_consistency(theta[:10], LAYOUT, eps=1.0)  # inertial block only, huge margin
    assert any("pseudo-inertia" in s for s in rep.problems)


@pytest.mark.parametrize("name", robots.NAMES)
def test_built_in_robots_are_physically_consistent(name):
    rep = check_urdf(robots.urdf_path(name), eps=1e-9)
    assert rep.ok, rep.problems
    assert rep.to_dict()["ok"] is True


def test_check_urdf_names_the_bad_body(tmp_path):
    text = robots.urdf_path("arm").read_text()
    # make one link's inertia violate the triangle inequality
    text = text.replace('ixx="3.183360e-05"', 'ixx="9.0e-05"', 1)
    path = tmp_path / "bad_arm.urdf"
    path.write_text(text)
    rep = check_urdf(path)
    assert not rep.ok
    assert any("shoulder_link" in s for s in rep.problems)
