"""The identification model of a robot: W(q, v, a) theta = tau.

:class:`RegressorModel` is the one place that knows which dynamics library
computes the inertial columns.  ``core_cy.regressor_batch`` is used when the
compiled module provides it; otherwise Pinocchio's
``computeJointTorqueRegressor`` plus :func:`friction_columns` (same layout,
see :mod:`calibration.inertial.layout`).  Both give the same numbers (tested).

The inertial parameters written in the URDF come from ``core_cy.dynamics.urdf`` (pure
Python), so reading them never needs either backend.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from servoloop.calibration.errors import FitError
from servoloop.calibration.inertial.layout import ParameterLayout, body_parameters

__all__ = ["RegressorModel", "friction_columns", "available_backends", "urdf_parameters"]


def friction_columns(V: np.ndarray, A: np.ndarray, dofs, nv: int) -> np.ndarray:
    """Friction/armature columns [sign(v), v, a, 1] of each joint in ``dofs``.

    Parameters
    ----------
    V, A : ndarray (N, nv)
        Joint velocities [rad/s] and accelerations [rad/s^2].
    dofs : sequence of int
        Velocity index of each joint that gets friction columns.
    nv : int

    Returns
    -------
    ndarray (N, nv, 4 * len(dofs))
        Joint k's four columns are non-zero in row ``dofs[k]`` only; sign(0) = 0.
    """
    V = np.atleast_2d(np.asarray(V, dtype=float))
    A = np.atleast_2d(np.asarray(A, dtype=float))
    out = np.zeros((V.shape[0], nv, 4 * len(dofs)))
    for k, j in enumerate(dofs):
        out[:, j, 4 * k] = np.sign(V[:, j])
        out[:, j, 4 * k + 1] = V[:, j]
        out[:, j, 4 * k + 2] = A[:, j]
        out[:, j, 4 * k + 3] = 1.0
    return out


def urdf_parameters(urdf_path, floating_base: bool = False):
    """Layout and parameters a URDF states, without any dynamics backend.

    Returns
    -------
    layout : ParameterLayout
    theta : ndarray (n_params,), inertial block from the URDF, friction zero
    lower, upper : ndarray (n_joints,), joint position limits [rad or m]
    """
    from servoloop.core_cy.dynamics.urdf import parse_urdf

    tree = parse_urdf(str(urdf_path), floating_base=floating_base)
    first = 6 if floating_base else 0
    joints = [n for n, t in zip(tree.joint_names, tree.jtype, strict=True) if t != 2]
    nv = first + len(joints)
    layout = ParameterLayout(tuple(tree.body_names), tuple(joints), tuple(range(first, nv)), nv)
    inertial = [body_parameters(m, c, I_c) for m, c, I_c in zip(tree.mass, tree.com, tree.I_com, strict=True)]
    skip = 7 if floating_base else 0  # the free-flyer's 7 q entries have no limits
    return layout, layout.join(np.array(inertial)), tree.lower[skip:], tree.upper[skip:]


def _core_cy_ready() -> bool:
    try:
        from servoloop import core_cy
    except ImportError:
        return False
    return all(hasattr(core_cy, n) for n in ("Model", "regressor_batch", "rnea_batch"))


def available_backends() -> list[str]:
    """Names usable as ``backend=``: ``core_cy`` (when compiled) and ``pinocchio`` (when installed)."""
    out = ["core_cy"] if _core_cy_ready() else []
    try:
        import pinocchio  # noqa: F401
        out.append("pinocchio")
    except ImportError:
        pass
    return out


class RegressorModel:
    """A robot as identification sees it.

    Parameters
    ----------
    urdf_path : str or Path
    backend : {"auto", "core_cy", "pinocchio"}
        "auto" takes core_cy when it provides the regressor, else Pinocchio.
    floating_base : bool
        Free-flyer root (its 6 velocity rows get no friction columns).

    Attributes
    ----------
    layout : ParameterLayout
    theta_urdf : ndarray (n_params,)
        The URDF's inertial parameters, friction block zero.
    lower, upper : ndarray (nv,) joint position limits (fixed base) [rad or m].
    """

    def __init__(self, urdf_path, backend: str = "auto", floating_base: bool = False):
        self.urdf_path = Path(urdf_path)
        self.layout, self.theta_urdf, self.lower, self.upper = urdf_parameters(
            self.urdf_path, floating_base)
        self.nv = self.layout.nv
        self.floating_base = floating_base
        self.backend = self._pick(backend)
        self._setup()

    def _pick(self, backend: str) -> str:
        have = available_backends()
        if backend == "auto":
            if not have:
                raise FitError("no dynamics backend: core_cy has no regressor_batch and "
                               "pinocchio is not installed")
            return have[0]
        if backend not in ("core_cy", "pinocchio"):
            raise ValueError(f"backend {backend!r}: choose auto, core_cy or pinocchio")
        if backend not in have:
            raise FitError(f"backend {backend!r} is not available here (have: {have})")
        return backend

    def _setup(self):
        if self.backend == "core_cy":
            from servoloop import core_cy

            self._model = core_cy.Model.from_urdf(str(self.urdf_path),
                                                  floating_base=self.floating_base)
            self._data = core_cy.Data(self._model)
            return
        import pinocchio as pin

        root = pin.JointModelFreeFlyer() if self.floating_base else None
        path = str(self.urdf_path)
        self._model = pin.buildModelFromUrdf(path, root) if root else pin.buildModelFromUrdf(path)
        if self._model.nq != self._model.nv + (1 if self.floating_base else 0):
            raise FitError(f"{path}: continuous joints are nq=2 in Pinocchio; use the core_cy backend")
        if self._model.njoints - 1 != self.layout.n_bodies:
            raise FitError(f"{path}: Pinocchio has {self._model.njoints - 1} bodies, "
                           f"core_cy.dynamics.urdf {self.layout.n_bodies}")
        self._data = self._model.createData()

    def _check(self, Q, V, A):
        Q, V, A = (np.atleast_2d(np.asarray(x, dtype=float)) for x in (Q, V, A))
        nq = self.nv + (1 if self.floating_base else 0)
        if Q.shape[1] != nq or V.shape != (Q.shape[0], self.nv) or A.shape != V.shape:
            raise ValueError(f"{self.urdf_path.name}: Q {Q.shape}, V {V.shape}, A {A.shape}; "
                             f"need (N, {nq}), (N, {self.nv}), (N, {self.nv})")
        return Q, V, A

    def regressor_batch(self, Q, V, A) -> np.ndarray:
        """W for N states: (N, nv, n_params); rows are joint torques [N m or N]."""
        Q, V, A = self._check(Q, V, A)
        if self.backend == "core_cy":
            from servoloop import core_cy

            W = np.asarray(core_cy.regressor_batch(self._model, Q, V, A))
            if W.shape[-1] != self.layout.n_params:
                raise FitError(f"core_cy.regressor_batch gave {W.shape[-1]} columns, "
                               f"layout needs {self.layout.n_params}")
            return W.reshape(Q.shape[0], self.nv, self.layout.n_params)
        import pinocchio as pin

        out = np.empty((Q.shape[0], self.nv, self.layout.n_params))
        ni = self.layout.n_inertial
        for i in range(Q.shape[0]):
            out[i, :, :ni] = pin.computeJointTorqueRegressor(self._model, self._data, Q[i], V[i], A[i])
        out[:, :, ni:] = friction_columns(V, A, self.layout.friction_dofs, self.nv)
        return out

    def regressor(self, q, v, a) -> np.ndarray:
        """W for one state: (nv, n_params)."""
        return self.regressor_batch(q[None], v[None], a[None])[0]

    def stacked(self, Q, V, A) -> np.ndarray:
        """W of N states stacked sample by sample: (N * nv, n_params)."""
        return self.regressor_batch(Q, V, A).reshape(-1, self.layout.n_params)

    def torques(self, theta, Q, V, A) -> np.ndarray:
        """tau = W theta for N states: (N, nv)."""
        return self.regressor_batch(Q, V, A) @ np.asarray(theta, dtype=float)

    def body_index(self, body: str) -> int:
        """Index of a moving body by name (a link merged by a fixed joint: use its parent body)."""
        try:
            return self.layout.body_names.index(body)
        except ValueError:
            raise FitError(f"{self.urdf_path.name}: no moving body {body!r} "
                           f"(bodies: {', '.join(self.layout.body_names)})") from None

    def point_kinematics(self, q, body: str, point) -> tuple[np.ndarray, np.ndarray]:
        """World position (3,) [m] and Jacobian (3, nv) of a point fixed in a body.

        Parameters
        ----------
        q : ndarray (nq,)
        body : str, moving body name
        point : (3,) coordinates in the body frame [m]
        """
        i = self.body_index(body)
        q = np.asarray(q, dtype=float)
        point = np.asarray(point, dtype=float)
        if self.backend == "core_cy":
            from servoloop import core_cy

            core_cy.forward_kinematics(self._model, self._data, q)
            R = np.array(self._data.rotation_body_to_world[i])
            o = np.array(self._data.position_body_in_world[i])
            J6 = np.array(core_cy.frame_jacobian(self._model, self._data, q, i,
                                                 frame="local_world_aligned"))
        else:
            import pinocchio as pin

            pin.computeJointJacobians(self._model, self._data, q)
            M = self._data.oMi[i + 1]
            R, o = M.rotation, M.translation
            J6 = pin.getJointJacobian(self._model, self._data, i + 1,
                                      pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
        r = R @ point
        skew = np.array([[0.0, -r[2], r[1]], [r[2], 0.0, -r[0]], [-r[1], r[0], 0.0]])
        # v_point = v_origin + w x r = J_lin qd - [r]x J_ang qd
        return o + r, J6[:3] - skew @ J6[3:]

    def rnea_batch(self, Q, V, A) -> np.ndarray:
        """Rigid-body inverse dynamics with the URDF's inertias (no friction): (N, nv)."""
        Q, V, A = self._check(Q, V, A)
        if self.backend == "core_cy":
            from servoloop import core_cy

            return np.asarray(core_cy.rnea_batch(self._model, Q, V, A))
        import pinocchio as pin

        return np.array([pin.rnea(self._model, self._data, q, v, a) for q, v, a in zip(Q, V, A, strict=True)])
