"""The Python wrappers: out= and workspace semantics, argument checks."""

import numpy as np
import pytest

from servoloop import core_cy
from servoloop.core_cy import errors
from tests.unit.core_cy.dynamics_cases import load, random_state


@pytest.fixture(scope="module")
def arm():
    model = load("ur5")
    q, v, a = random_state(model, np.random.default_rng(41))
    return model, core_cy.Data(model), q, v, a


def test_without_out_returns_the_workspace_array(arm):
    model, data, q, v, a = arm
    tau = core_cy.rnea(model, data, q, v, a)
    assert tau is data.tau
    first = tau.copy()
    core_cy.rnea(model, data, q, 2 * v, a)  # documented: overwritten by the next call
    assert not np.array_equal(tau, first)
    assert core_cy.crba(model, data, q) is data.M
    assert core_cy.aba(model, data, q, v, a) is data.ddq
    assert core_cy.regressor(model, data, q, v, a) is data.Y
    assert core_cy.frame_jacobian(model, data, q, 0) is data.J
    com, J = core_cy.center_of_mass(model, data, q, jacobian=True)
    assert com is data.com and J is data.Jcom


def test_out_is_filled_and_returned(arm):
    model, data, q, v, a = arm
    for fn, args, shape in [
        (core_cy.rnea, (q, v, a), (model.nv,)),
        (core_cy.nonlinear_effects, (q, v), (model.nv,)),
        (core_cy.gravity, (q,), (model.nv,)),
        (core_cy.crba, (q,), (model.nv, model.nv)),
        (core_cy.aba, (q, v, a), (model.nv,)),
        (core_cy.regressor, (q, v, a), (model.nv, 10 * model.nbodies + 4 * model.n_actuated)),
    ]:
        out = np.full(shape, np.nan)
        assert fn(model, data, *args, out=out) is out
        assert np.array_equal(out, fn(model, data, *args))
    out = np.empty(model.nq)
    assert core_cy.integrate(model, q, v, 0.1, out=out) is out


def test_bad_arguments_name_the_argument_and_shape(arm):
    model, data, q, v, a = arm
    with pytest.raises(ValueError, match=r"v: expected shape \(6,\)"):
        core_cy.rnea(model, data, q, v[:5], a)
    with pytest.raises(ValueError, match=r"q: expected shape \(6,\)"):
        core_cy.crba(model, data, np.zeros((6, 1)))
    with pytest.raises(ValueError, match=r"a: expected"):
        core_cy.rnea(model, data, q, v, "fast")
    with pytest.raises(ValueError, match=r"fext: expected shape \(6, 6\)"):
        core_cy.rnea(model, data, q, v, a, fext=np.zeros((6, 3)))
    with pytest.raises(ValueError, match=r"out: expected .*\(6, 6\)"):
        core_cy.crba(model, data, q, out=np.zeros((6, 6), dtype=np.float32))
    with pytest.raises(ValueError, match="out"):
        core_cy.rnea(model, data, q, v, a, out=np.zeros((2, 6))[:, 0])
    ro = np.zeros(6)
    ro.setflags(write=False)
    with pytest.raises(ValueError, match="writable"):
        core_cy.rnea(model, data, q, v, a, out=ro)
    with pytest.raises(TypeError):
        core_cy.rnea(None, data, q, v, a)


def test_lists_and_other_dtypes_are_converted(arm):
    model, data, q, v, a = arm
    v32 = v.astype(np.float32)
    expected = core_cy.rnea(model, data, q, v32.astype(np.float64), a).copy()
    got = core_cy.rnea(model, data, list(q), v32, np.asfortranarray(a))
    np.testing.assert_array_equal(got, expected)
    expected = core_cy.rnea(model, data, q, v, a).copy()
    strided = np.zeros(12)
    strided[::2] = q
    np.testing.assert_array_equal(core_cy.rnea(model, data, strided[::2], v, a), expected)


def test_data_of_another_model_is_refused(arm):
    model, _, q, v, a = arm
    other = core_cy.Data(load("arm"))
    with pytest.raises(ValueError, match="another Model"):
        core_cy.rnea(model, other, q, v, a)


def test_frame_lookup(arm):
    model, data, q, _, _ = arm
    with pytest.raises(KeyError, match="no link named 'nope'"):
        core_cy.frame_jacobian(model, data, q, "nope")
    with pytest.raises(IndexError):
        core_cy.frame_jacobian(model, data, q, model.nbodies)
    with pytest.raises(ValueError, match="frame"):
        core_cy.frame_jacobian(model, data, q, 0, frame="body")
    J_world_link = core_cy.frame_jacobian(model, data, q, "world")
    assert not J_world_link.any()  # a link fixed to the world does not move


def test_batch_shape_errors(arm):
    model, _, q, v, a = arm
    Q = np.tile(q, (3, 1))
    V = np.tile(v, (3, 1))
    with pytest.raises(ValueError, match=r"A: expected shape \(3, 6\)"):
        core_cy.rnea_batch(model, Q, V, V[:2])
    with pytest.raises(ValueError, match="Q"):
        core_cy.rnea_batch(model, q, V, V)
    with pytest.raises(ValueError, match="data"):
        core_cy.aba_batch(model, Q, V, V, data=core_cy.Data(load("arm")))


def test_singular_articulated_inertia_is_reported(tmp_path):
    path = tmp_path / "massless.urdf"
    path.write_text(
        '<robot name="m"><link name="base"/><link name="tip"><inertial><mass value="0"/>'
        '<inertia ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0"/></inertial></link>'
        '<joint name="j" type="revolute"><parent link="base"/><child link="tip"/>'
        '<axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>')
    model = core_cy.Model.from_urdf(path)
    data = core_cy.Data(model)
    with pytest.raises(errors.SingularInertiaError, match="'tip'"):
        core_cy.aba(model, data, np.zeros(1), np.zeros(1), np.ones(1))
    with pytest.raises(errors.SingularInertiaError, match="row 0"):
        core_cy.aba_batch(model, np.zeros((2, 1)), np.zeros((2, 1)), np.ones((2, 1)))


def test_kernels_release_the_gil():
    # two threads on two workspaces give the same answers as one thread
    import threading

    model = load("solo12")
    rng = np.random.default_rng(42)
    states = [random_state(model, rng) for _ in range(50)]
    Q, V, A = (np.array([s[i] for s in states]) for i in range(3))
    expected = core_cy.rnea_batch(model, Q, V, A)
    results = [None, None]

    def work(k):
        results[k] = core_cy.rnea_batch(model, Q, V, A)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        np.testing.assert_array_equal(r, expected)


def test_regressor_out_with_garbage_is_fully_overwritten():
    # the kernel zeroes only the entries it does not write: start from NaN
    model = load("solo12")
    data = core_cy.Data(model)
    rng = np.random.default_rng(43)
    Q, V, A = (np.array(x) for x in zip(*[random_state(model, rng) for _ in range(3)], strict=True))
    out = np.full((3, model.nv, 10 * model.nbodies + 4 * model.n_actuated), np.nan)
    core_cy.regressor_batch(model, Q, V, A, out=out)
    for k in range(3):
        np.testing.assert_array_equal(out[k], core_cy.regressor(model, data, Q[k], V[k], A[k]))


def test_model_refuses_bodies_not_in_depth_first_order():
    from servoloop.core_cy.dynamics.urdf import parse_urdf
    from tests.unit.core_cy.dynamics_cases import case_path

    desc = parse_urdf(case_path("solo12")[0], floating_base=True)
    # move the second leg's hip before the first leg's knee: parents stay earlier,
    # but the first leg's subtree is no longer a contiguous range
    order = [0, 1, 2, 4, 3, *range(5, len(desc.body_names))]
    inv = {old: new for new, old in enumerate(order)}
    desc.parent = np.array([inv[desc.parent[o]] if desc.parent[o] >= 0 else -1 for o in order],
                           dtype=np.int32)
    for field in ("jtype", "axis", "R_tree", "p_tree", "mass", "com", "I_com"):
        setattr(desc, field, getattr(desc, field)[order])
    desc.body_names = [desc.body_names[o] for o in order]
    desc.joint_names = [desc.joint_names[o] for o in order]
    with pytest.raises(errors.ModelError, match="depth-first"):
        core_cy.Model(desc)


def test_inline_sincos_matches_libm():
    # the kernels' own sin/cos of joint angles (see _dynamics.pyx): within 2 ulp of
    # libm over the range of joint angles, libm itself beyond 1e5 and for inf/nan
    from servoloop.core_cy.dynamics._dynamics import _sincos_check

    rng = np.random.default_rng(44)
    x = np.concatenate([rng.uniform(-7, 7, 20000), rng.uniform(-1e5, 1e5, 20000),
                        np.arange(-64, 65) * np.pi / 4, [0.0, -0.0, 1e-300, 3e5, -1e9]])
    s, c = _sincos_check(x)
    assert np.abs(s - np.sin(x)).max() <= 2.3e-16
    assert np.abs(c - np.cos(x)).max() <= 2.3e-16
    s, c = _sincos_check(np.array([np.inf, np.nan]))
    assert np.isnan(s).all() and np.isnan(c).all()
