"""Model.from_urdf: structure, fixed-joint merging, and errors that name the place."""

import numpy as np
import pytest

from servoloop import core_cy
from servoloop.core_cy import errors
from tests.unit.core_cy.dynamics_cases import assert_close, load

INERTIAL = ('<inertial><origin xyz="{c}" rpy="{rpy}"/><mass value="{m}"/>'
            '<inertia ixx="0.02" ixy="0.001" ixz="0.002" iyy="0.03" iyz="0.003" izz="0.04"/>'
            '</inertial>')
LIMIT = '<limit lower="-1" upper="1" effort="1" velocity="1"/>'


def link(name, m=1.0, c="0.01 0.02 0.03", rpy="0.1 0.2 0.3", inertial=True):
    body = INERTIAL.format(c=c, rpy=rpy, m=m) if inertial else ""
    return f'<link name="{name}">{body}</link>'


def joint(name, kind, parent, child, extra=LIMIT, origin='xyz="0 0 0.1" rpy="0 0 0"',
          axis="0 0 1"):
    return (f'<joint name="{name}" type="{kind}"><parent link="{parent}"/>'
            f'<child link="{child}"/><origin {origin}/><axis xyz="{axis}"/>{extra}</joint>')


def write(tmp_path, *elems, name="r.urdf"):
    path = tmp_path / name
    path.write_text('<robot name="t">' + "".join(elems) + "</robot>")
    return path


def chain(tmp_path, kind="revolute", extra=LIMIT, second=None, **kw):
    return write(tmp_path, link("base"), link("l1"), link("l2", **kw),
                 joint("j1", "revolute", "base", "l1"),
                 joint("j2", kind, "l1", "l2", extra=extra) if second is None else second)


def test_attributes_and_neutral(tmp_path):
    model = core_cy.Model.from_urdf(chain(tmp_path))
    assert (model.nq, model.nv, model.nbodies) == (2, 2, 2)
    assert model.joint_names == ("j1", "j2")
    assert model.body_names == ("l1", "l2")
    assert model.total_mass == pytest.approx(2.0)
    assert np.array_equal(model.neutral(), np.zeros(2))
    assert set(model.frame_names) == {"base", "l1", "l2"}
    fb = core_cy.Model.from_urdf(chain(tmp_path), floating_base=True)
    assert (fb.nq, fb.nv, fb.nbodies) == (9, 8, 3)
    assert fb.joint_names[0] == "root_joint"
    assert fb.total_mass == pytest.approx(3.0)
    assert np.array_equal(fb.neutral(), [0, 0, 0, 0, 0, 0, 1, 0, 0])
    assert np.array_equal(fb.lower_limits[7:], [-1, -1])


def test_model_is_immutable():
    model = load("ur5")
    for arr in [model.parents, model.gravity, model.lower_limits, *model.tree_arrays().values()]:
        with pytest.raises(ValueError):
            arr[0] = 1
    with pytest.raises(AttributeError):
        model.nq = 3
    with pytest.raises(AttributeError):
        model.total_mass = 1.0


def test_fixed_joint_merged_exactly(tmp_path):
    # l2 on a fixed joint with an offset and rotation: one moving body whose
    # 10 parameters are the exact sum of both links' parameters in l1's frame
    fixed = joint("jf", "fixed", "l1", "l2", extra="", origin='xyz="0.3 -0.2 0.1" rpy="0.4 -0.5 0.6"')
    merged = core_cy.Model.from_urdf(chain(tmp_path, second=fixed, m=2.5))
    assert merged.nbodies == 1 and merged.body_names == ("l1",)
    assert merged.total_mass == pytest.approx(3.5)
    from servoloop.core_cy.dynamics.urdf import rpy_to_matrix

    def params(m, c, R_in, R, p):
        Ic = R @ R_in @ np.array([[0.02, 0.001, 0.002], [0.001, 0.03, 0.003],
                                  [0.002, 0.003, 0.04]]) @ R_in.T @ R.T
        c = R @ np.asarray(c) + p
        Io = Ic + m * (c @ c * np.eye(3) - np.outer(c, c))
        return np.array([m, *(m * c), Io[0, 0], Io[0, 1], Io[1, 1], Io[0, 2], Io[1, 2], Io[2, 2]])

    R_in = rpy_to_matrix([0.1, 0.2, 0.3])
    expected = (params(1.0, [0.01, 0.02, 0.03], R_in, np.eye(3), np.zeros(3))
                + params(2.5, [0.01, 0.02, 0.03], R_in, rpy_to_matrix([0.4, -0.5, 0.6]),
                         np.array([0.3, -0.2, 0.1])))
    assert_close(merged.inertial_parameters(), expected, rtol=1e-14)
    body, R, p = merged.frame_placement("l2")
    assert body == 0 and np.allclose(p, [0.3, -0.2, 0.1])
    assert np.allclose(R, rpy_to_matrix([0.4, -0.5, 0.6]))


def _raises(path, exc, *words, **kw):
    with pytest.raises(exc) as info:
        core_cy.Model.from_urdf(path, **kw)
    msg = str(info.value)
    assert str(path) in msg, msg
    for w in words:
        assert w in msg, msg
    assert isinstance(info.value, errors.ModelError)
    return msg


@pytest.mark.parametrize("kind", ["planar", "floating", "screw"])
def test_unsupported_joint_names_joint_and_file(tmp_path, kind):
    _raises(chain(tmp_path, kind=kind), errors.UnsupportedJointError, "'j2'", kind)


def test_mimic_raises_by_default_and_opt_in_keeps_it_independent(tmp_path):
    mimic = LIMIT + '<mimic joint="j1" multiplier="1"/>'
    path = chain(tmp_path, extra=mimic)
    _raises(path, errors.MimicJointError, "'j2'", "mimic")
    model = core_cy.Model.from_urdf(path, mimic="independent")
    assert model.nv == 2


def test_panda_default_raises_on_its_mimic_finger():
    from tests.unit.core_cy.dynamics_cases import case_path

    path, _, _ = case_path("panda")
    _raises(path, errors.MimicJointError, "panda_finger_joint2")


def test_missing_inertial_on_moving_body(tmp_path):
    path = chain(tmp_path, inertial=False)
    _raises(path, errors.MissingInertialError, "'j2'", "'l2'")


def test_massless_moving_link_with_fixed_child_inertia_is_fine(tmp_path):
    path = write(tmp_path, link("base"), link("l1", inertial=False), link("tip"),
                 joint("j1", "revolute", "base", "l1"),
                 joint("jt", "fixed", "l1", "tip", extra=""))
    assert core_cy.Model.from_urdf(path).total_mass == pytest.approx(1.0)


@pytest.mark.parametrize("bad, word", [
    ('xyz="0 0 nan"', "xyz"),
    ('xyz="0 0"', "xyz"),
    ('xyz="0 0 zero"', "xyz"),
    ('xyz="0 0 0" rpy="0 inf 0"', "rpy"),
])
def test_bad_numbers_name_joint_and_attribute(tmp_path, bad, word):
    path = write(tmp_path, link("base"), link("l1"),
                 joint("j1", "revolute", "base", "l1", origin=bad))
    _raises(path, errors.URDFValueError, "'j1'", word)


def test_bad_mass_names_link(tmp_path):
    path = write(tmp_path, link("base"), link("l1", m="-1"), joint("j1", "revolute", "base", "l1"))
    _raises(path, errors.URDFValueError, "'l1'", "mass")
    path = write(tmp_path, link("base"), link("l1", m="heavy"),
                 joint("j1", "revolute", "base", "l1"))
    _raises(path, errors.URDFValueError, "'l1'", "heavy")


def test_missing_limit_and_zero_axis(tmp_path):
    _raises(chain(tmp_path, extra=""), errors.URDFValueError, "'j2'", "limit")
    path = write(tmp_path, link("base"), link("l1"),
                 joint("j1", "revolute", "base", "l1", axis="0 0 0"))
    _raises(path, errors.URDFValueError, "'j1'", "axis")


def test_tree_errors(tmp_path):
    path = write(tmp_path, link("base"), link("l1"), joint("j1", "revolute", "base", "nowhere"))
    _raises(path, errors.TreeStructureError, "'j1'", "'nowhere'")
    path = write(tmp_path, link("a"), link("b"), joint("j1", "revolute", "a", "b"),
                 joint("j2", "revolute", "b", "a"))
    _raises(path, errors.TreeStructureError, "root")
    path = write(tmp_path, link("a"), link("b"), link("c"), joint("j1", "revolute", "a", "c"),
                 joint("j2", "revolute", "b", "c"))
    _raises(path, errors.TreeStructureError, "'c'")


def test_not_xml_and_not_robot(tmp_path):
    path = tmp_path / "broken.urdf"
    path.write_text("<robot><link name='a'></robot>")
    _raises(path, errors.URDFSyntaxError)
    path = tmp_path / "sdf.urdf"
    path.write_text("<sdf/>")
    _raises(path, errors.URDFSyntaxError, "<sdf>")
    missing = tmp_path / "missing.urdf"
    _raises(missing, errors.URDFSyntaxError)


def test_built_in_robots_load():
    for name in ("bench", "arm", "quadruped", "humanoid"):
        model = load(name)
        assert model.nbodies >= 1
        assert model.total_mass > 0
