# Python-facing part of core_cy.dynamics._dynamics: Model, Data and thin wrappers.
# Included by _dynamics.pyx (same module, so the wrappers inline the checks).

from servoloop.core_cy.errors import ModelError, SingularInertiaError

_FRAME_CODES = {"world": FRAME_WORLD, "local": FRAME_LOCAL,
                "local_world_aligned": FRAME_LOCAL_WORLD_ALIGNED}


cdef inline double* _p(object a):
    return <double*>cnp.PyArray_DATA(<cnp.ndarray>a)


def _ro(arr, dtype):
    a = np.ascontiguousarray(arr, dtype=dtype).copy()
    a.setflags(write=False)
    return a


cdef class Model:
    """Immutable kinematic tree with inertias (Pinocchio's ``Model``).

    Build it with :meth:`Model.from_urdf`.  Attributes: ``nq``, ``nv``,
    ``nbodies``, ``n_actuated`` (the 1-dof joints), ``floating_base``,
    ``joint_names`` (q order; ``"root_joint"`` for the free-flyer, as
    Pinocchio), ``body_names`` (the link carried by each joint),
    ``frame_names`` (every link, fixed ones included), ``total_mass`` [kg],
    ``parents``, ``gravity`` [m/s^2], ``lower_limits`` / ``upper_limits``
    (nq,).  All arrays are read-only.
    """

    def __init__(self, desc, gravity=(0.0, 0.0, -9.81)):
        nb = len(desc.body_names)
        g = np.asarray(gravity, dtype=np.float64)
        if g.shape != (3,) or not np.all(np.isfinite(g)):
            raise ValueError(f"gravity: expected 3 finite numbers [m/s^2], got {gravity!r}")
        jtype = np.asarray(desc.jtype, dtype=np.int32)
        parent = np.asarray(desc.parent, dtype=np.int32)
        for i in range(nb):
            if parent[i] >= i:
                raise ModelError(f"body '{desc.body_names[i]}': parent index {parent[i]} "
                                 f"is not before it in {desc.source}")
            if jtype[i] == JOINT_FREEFLYER and (i != 0 or parent[i] != -1):
                raise ModelError(f"joint '{desc.joint_names[i]}': a free-flyer must be the "
                                 f"root joint in {desc.source}")
        # depth-first preorder (as parse_urdf and Pinocchio): every parent is on the
        # path from the root to the previous body; the kernels rely on subtrees
        # being contiguous ranges
        path = []
        for i in range(nb):
            while path and path[len(path) - 1] != parent[i]:
                path.pop()
            if parent[i] >= 0 and not path:
                raise ModelError(f"body '{desc.body_names[i]}': bodies are not in depth-first "
                                 f"order in {desc.source}")
            path.append(i)
        nvj = np.where(jtype == JOINT_FREEFLYER, 6, 1).astype(np.int32)
        nqj = np.where(jtype == JOINT_FREEFLYER, 7, 1).astype(np.int32)
        idx_q = (np.cumsum(nqj) - nqj).astype(np.int32)
        idx_v = (np.cumsum(nvj) - nvj).astype(np.int32)
        arrays = {
            "parent": _ro(parent, np.int32), "jtype": _ro(jtype, np.int32),
            "idx_q": _ro(idx_q, np.int32), "idx_v": _ro(idx_v, np.int32),
            "nv_joint": _ro(nvj, np.int32),
            "axis": _ro(desc.axis, np.float64), "R_tree": _ro(desc.R_tree, np.float64),
            "p_tree": _ro(desc.p_tree, np.float64), "mass": _ro(desc.mass, np.float64),
            "com": _ro(desc.com, np.float64), "I_com": _ro(desc.I_com, np.float64),
        }
        self._arrays = arrays
        self.c.nbodies = nb
        self.c.nq = int(nqj.sum())
        self.c.nv = int(nvj.sum())
        self.c.floating = 1 if (nb > 0 and jtype[0] == JOINT_FREEFLYER) else 0
        self.c.n_actuated = self.c.nv - 6 * self.c.floating
        self.c.parent = <const int*>cnp.PyArray_DATA(arrays["parent"])
        self.c.jtype = <const int*>cnp.PyArray_DATA(arrays["jtype"])
        self.c.idx_q = <const int*>cnp.PyArray_DATA(arrays["idx_q"])
        self.c.idx_v = <const int*>cnp.PyArray_DATA(arrays["idx_v"])
        self.c.nv_joint = <const int*>cnp.PyArray_DATA(arrays["nv_joint"])
        self.c.axis = <const double*>cnp.PyArray_DATA(arrays["axis"])
        self.c.R_tree = <const double*>cnp.PyArray_DATA(arrays["R_tree"])
        self.c.p_tree = <const double*>cnp.PyArray_DATA(arrays["p_tree"])
        self.c.mass = <const double*>cnp.PyArray_DATA(arrays["mass"])
        self.c.com = <const double*>cnp.PyArray_DATA(arrays["com"])
        self.c.I_com = <const double*>cnp.PyArray_DATA(arrays["I_com"])
        self.c.gravity[0] = g[0]
        self.c.gravity[1] = g[1]
        self.c.gravity[2] = g[2]
        self.c.total_mass = float(np.sum(desc.mass))
        self.nq, self.nv, self.nbodies = self.c.nq, self.c.nv, nb
        self.n_actuated = self.c.n_actuated
        self.floating_base = bool(self.c.floating)
        self.total_mass = self.c.total_mass
        self.joint_names = tuple(desc.joint_names)
        self.body_names = tuple(desc.body_names)
        self.actuated_joint_names = tuple(
            n for n, t in zip(desc.joint_names, jtype) if t != JOINT_FREEFLYER)
        self.source = desc.source
        self.parents = arrays["parent"]
        self.gravity = _ro(g, np.float64)
        self.lower_limits = _ro(desc.lower, np.float64)
        self.upper_limits = _ro(desc.upper, np.float64)
        frames = {}
        for name, (body, R, p) in desc.frames.items():
            frames[name] = (int(body), _ro(R, np.float64).reshape(9), _ro(p, np.float64))
        self._frames = frames
        self.frame_names = tuple(frames)

    @staticmethod
    def from_urdf(path, floating_base=False, mimic="error", gravity=(0.0, 0.0, -9.81)):
        """Build a model from a URDF file.

        Parameters
        ----------
        path : str or pathlib.Path
            URDF file.
        floating_base : bool
            Attach the root link to the world with a free-flyer
            (q += [x y z qx qy qz qw], v += [linear, angular] in the base frame).
        mimic : {"error", "independent"}
            ``<mimic>`` joints raise :class:`core_cy.errors.MimicJointError`
            unless ``"independent"``, which keeps them as ordinary joints
            (Pinocchio's default behaviour).
        gravity : (3,) float
            Gravity in the world frame [m/s^2] (Pinocchio's default).

        Returns
        -------
        Model

        Raises
        ------
        core_cy.errors.ModelError
            Unsupported joint, missing inertial, bad number... naming the
            joint or link and the file.
        """
        from servoloop.core_cy.dynamics.urdf import parse_urdf
        return Model(parse_urdf(path, floating_base=floating_base, mimic=mimic), gravity=gravity)

    def neutral(self):
        """Neutral configuration (nq,): zeros, identity quaternion for the free-flyer."""
        q = np.zeros(self.nq)
        if self.c.floating:
            q[6] = 1.0
        return q

    def inertial_parameters(self):
        """Dynamic parameters theta (10 nbodies,), Pinocchio's order per body.

        [m, m c_x, m c_y, m c_z, Ixx, Ixy, Iyy, Ixz, Iyz, Izz] with the
        inertia about the body frame origin [kg, kg m, kg m^2].
        """
        nb = self.nbodies
        mass = self._arrays["mass"]
        com = self._arrays["com"]
        I_com = self._arrays["I_com"]
        theta = np.zeros(10 * nb)
        for i in range(nb):
            m, c = mass[i], com[i]
            cx = np.array([[0, -c[2], c[1]], [c[2], 0, -c[0]], [-c[1], c[0], 0]])
            I = I_com[i] - m * cx @ cx
            theta[10 * i:10 * i + 10] = [m, m * c[0], m * c[1], m * c[2], I[0, 0], I[0, 1],
                                         I[1, 1], I[0, 2], I[1, 2], I[2, 2]]
        return theta

    def body_index(self, name):
        """Index of the body carrying link ``name`` (-1 for the world)."""
        try:
            return self._frames[name][0]
        except KeyError:
            raise KeyError(f"no link named '{name}' in {self.source}") from None

    def frame_placement(self, name):
        """(body index, R (3, 3), p (3,) [m]): link ``name``'s frame on its body.

        Body -1 is the world (links fixed to the root of a fixed-base model).
        """
        try:
            body, R, p = self._frames[name]
        except KeyError:
            raise KeyError(f"no link named '{name}' in {self.source}") from None
        return body, R.reshape(3, 3).copy(), p.copy()

    def tree_arrays(self):
        """Read-only arrays behind the C model (parent, jtype, axis, R_tree, ...)."""
        return dict(self._arrays)

    def __repr__(self):
        return (f"core_cy.Model(nq={self.nq}, nv={self.nv}, nbodies={self.nbodies}, "
                f"floating_base={self.floating_base}, source={self.source!r})")


cdef class Data:
    """Preallocated workspace for one :class:`Model` (Pinocchio's ``Data``).

    Its arrays (``tau``, ``ddq``, ``M``, ``J``, ``Jcom``, ``com``, ``Y`` and
    the kinematics ``rotation_body_to_world`` (nb, 3, 3),
    ``position_body_in_world`` (nb, 3), ``velocity_body_local`` (nb, 6) and
    ``velocity_body_world`` (nb, 6), (linear; angular)) are overwritten by
    the next call that fills them.  One Data per thread.
    """

    def __init__(self, Model model not None):
        cdef int nb = model.nbodies, nv = model.nv
        ncol = 10 * nb + 4 * model.n_actuated
        self.model = model
        shapes = {
            "oR": (nb, 3, 3), "op": (nb, 3), "Sw": (nv, 6), "Iw": (nb, 12),
            "vw": (nb, 6), "v_local": (nb, 6), "aw": (nb, 6), "fw": (nb, 6),
            "Yc": (nb, 10), "Ia": (nb, 36), "pA": (nb, 6), "cw": (nb, 6),
            "U": (nv, 6), "Dinv": (nv,), "u": (nv,), "Bw": (nb, 60),
            # general scratch, then the (sin, cos) table of the joint angles
            "scratch": (max(64, 6 * nv) + 2 * nb,), "tau": (nv,), "ddq": (nv,), "M": (nv, nv),
            "J": (6, nv), "Jcom": (3, nv), "com": (3,), "Y": (nv, ncol),
        }
        arrays = {k: np.zeros(s) for k, s in shapes.items()}
        self._arrays = arrays

        self.c.oR = _p(arrays["oR"])
        self.c.op = _p(arrays["op"])
        self.c.Sw = _p(arrays["Sw"])
        self.c.Iw = _p(arrays["Iw"])
        self.c.vw = _p(arrays["vw"])
        self.c.v_local = _p(arrays["v_local"])
        self.c.aw = _p(arrays["aw"])
        self.c.fw = _p(arrays["fw"])
        self.c.Yc = _p(arrays["Yc"])
        self.c.Ia = _p(arrays["Ia"])
        self.c.pA = _p(arrays["pA"])
        self.c.cw = _p(arrays["cw"])
        self.c.U = _p(arrays["U"])
        self.c.Dinv = _p(arrays["Dinv"])
        self.c.u = _p(arrays["u"])
        self.c.Bw = _p(arrays["Bw"])
        self.c.scratch = _p(arrays["scratch"])
        self.c.tau = _p(arrays["tau"])
        self.c.ddq = _p(arrays["ddq"])
        self.c.M = _p(arrays["M"])
        self.c.J = _p(arrays["J"])
        self.c.Jcom = _p(arrays["Jcom"])
        self.c.com = _p(arrays["com"])
        self.c.Y = _p(arrays["Y"])
        self.tau, self.ddq, self.M = arrays["tau"], arrays["ddq"], arrays["M"]
        self.J, self.Jcom, self.com, self.Y = arrays["J"], arrays["Jcom"], arrays["com"], arrays["Y"]
        self.rotation_body_to_world = arrays["oR"]
        self.position_body_in_world = arrays["op"]
        self.velocity_body_local = arrays["v_local"]
        self.velocity_body_world = arrays["vw"]

    def __repr__(self):
        return f"core_cy.Data(for {self.model!r})"


# ---------------------------------------------------------------------------
# argument checks: a few C-level tests on the fast path, a helpful error else
# ---------------------------------------------------------------------------

cdef inline bint _ok(object x, Py_ssize_t n0, Py_ssize_t n1):
    # exact float64 C-contiguous ndarray of shape (n0,) (n1 < 0) or (n0, n1)
    cdef cnp.ndarray a
    if not cnp.PyArray_CheckExact(x):
        return False
    a = <cnp.ndarray>x
    if cnp.PyArray_TYPE(a) != cnp.NPY_DOUBLE or not cnp.PyArray_IS_C_CONTIGUOUS(a):
        return False
    if n1 < 0:
        return cnp.PyArray_NDIM(a) == 1 and cnp.PyArray_DIMS(a)[0] == n0
    return (cnp.PyArray_NDIM(a) == 2 and cnp.PyArray_DIMS(a)[0] == n0
            and cnp.PyArray_DIMS(a)[1] == n1)


cdef object _coerce(object x, tuple shape, str name):
    try:
        a = np.ascontiguousarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a float64 array of shape {shape}, "
                         f"got {type(x).__name__}") from None
    if a.shape != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {a.shape}")
    return a


cdef object _check_out(object out, tuple shape, str name):
    cdef Py_ssize_t n1 = shape[1] if len(shape) > 1 else -1
    if len(shape) == 3:
        if (cnp.PyArray_CheckExact(out) and out.dtype == np.float64 and out.shape == shape
                and out.flags.c_contiguous and out.flags.writeable):
            return out
    elif _ok(out, shape[0], n1) and cnp.PyArray_ISWRITEABLE(<cnp.ndarray>out):
        return out
    raise ValueError(f"{name}: expected a writable C-contiguous float64 array of shape "
                     f"{shape}, got {getattr(out, 'shape', type(out).__name__)}")


cdef inline void _same(Model model, Data data) except *:
    if data.model is not model:
        raise ValueError("data: this Data was built for another Model")


# ---------------------------------------------------------------------------
# public functions
# ---------------------------------------------------------------------------

def forward_kinematics(Model model not None, Data data not None, q, v=None):
    """Placements of every body, and their velocities when ``v`` is given.

    Parameters
    ----------
    q : (nq,) float64
    v : (nv,) float64, optional

    Fills ``data.rotation_body_to_world`` (nb, 3, 3),
    ``data.position_body_in_world`` (nb, 3) [m] and, with ``v``,
    ``data.velocity_body_local`` (nb, 6) (Pinocchio's ``data.v``) and
    ``data.velocity_body_world`` (nb, 6), [m/s; rad/s].
    """
    _same(model, data)
    if not _ok(q, model.nq, -1):
        q = _coerce(q, (model.nq,), "q")
    cdef double* pv = NULL
    if v is not None:
        if not _ok(v, model.nv, -1):
            v = _coerce(v, (model.nv,), "v")
        pv = _p(v)
    cdef double* pq = _p(q)
    with nogil:
        fk_c(&model.c, &data.c, pq, pv)


def rnea(Model model not None, Data data not None, q, v, a, fext=None, out=None):
    """Inverse dynamics tau = M(q) a + C(q, v) v + g(q) - sum J_i^T fext_i.

    Parameters
    ----------
    q : (nq,) float64, configuration.
    v : (nv,) float64, velocity [rad/s, m/s].
    a : (nv,) float64, acceleration [rad/s^2, m/s^2].
    fext : (nbodies, 6) float64, optional
        External wrench applied to each body, in its local frame at its
        origin (force [N]; torque [N m]), as Pinocchio's ``fext``.
    out : (nv,) float64, optional

    Returns
    -------
    tau : (nv,) [N m, N]; ``data.tau`` (overwritten by the next call) unless ``out``.
    """
    _same(model, data)
    cdef int nq = model.c.nq, nv = model.c.nv
    if not _ok(q, nq, -1):
        q = _coerce(q, (nq,), "q")
    if not _ok(v, nv, -1):
        v = _coerce(v, (nv,), "v")
    if not _ok(a, nv, -1):
        a = _coerce(a, (nv,), "a")
    cdef double* pf = NULL
    if fext is not None:
        if not _ok(fext, model.c.nbodies, 6):
            fext = _coerce(fext, (model.c.nbodies, 6), "fext")
        pf = _p(fext)
    if out is None:
        out = data.tau
    else:
        out = _check_out(out, (nv,), "out")
    cdef double* pq = _p(q)
    cdef double* pv = _p(v)
    cdef double* pa = _p(a)
    cdef double* po = _p(out)
    with nogil:
        rnea_c(&model.c, &data.c, pq, pv, pa, pf, 1, po)
    return out


def nonlinear_effects(Model model not None, Data data not None, q, v, out=None):
    """C(q, v) v + g(q), (nv,) [N m]; ``data.tau`` unless ``out``."""
    _same(model, data)
    cdef int nq = model.c.nq, nv = model.c.nv
    if not _ok(q, nq, -1):
        q = _coerce(q, (nq,), "q")
    if not _ok(v, nv, -1):
        v = _coerce(v, (nv,), "v")
    if out is None:
        out = data.tau
    else:
        out = _check_out(out, (nv,), "out")
    cdef double* pq = _p(q)
    cdef double* pv = _p(v)
    cdef double* po = _p(out)
    with nogil:
        rnea_c(&model.c, &data.c, pq, pv, NULL, NULL, 1, po)
    return out


def gravity(Model model not None, Data data not None, q, out=None):
    """Generalized gravity g(q), (nv,) [N m]; ``data.tau`` unless ``out``."""
    _same(model, data)
    cdef int nq = model.c.nq, nv = model.c.nv
    if not _ok(q, nq, -1):
        q = _coerce(q, (nq,), "q")
    if out is None:
        out = data.tau
    else:
        out = _check_out(out, (nv,), "out")
    cdef double* pq = _p(q)
    cdef double* po = _p(out)
    with nogil:
        rnea_c(&model.c, &data.c, pq, NULL, NULL, NULL, 1, po)
    return out


def crba(Model model not None, Data data not None, q, out=None):
    """Joint-space inertia matrix M(q), (nv, nv) symmetric [kg m^2, kg].

    Both triangles are filled.  ``data.M`` (overwritten by the next call)
    unless ``out``.
    """
    _same(model, data)
    cdef int nq = model.c.nq, nv = model.c.nv
    if not _ok(q, nq, -1):
        q = _coerce(q, (nq,), "q")
    if out is None:
        out = data.M
    else:
        out = _check_out(out, (nv, nv), "out")
    cdef double* pq = _p(q)
    cdef double* po = _p(out)
    with nogil:
        crba_c(&model.c, &data.c, pq, po)
    return out


def aba(Model model not None, Data data not None, q, v, tau, fext=None, out=None):
    """Forward dynamics: ddq with M ddq + C v + g = tau + sum J_i^T fext_i.

    Parameters
    ----------
    q : (nq,), v : (nv,), tau : (nv,) [N m, N]
    fext : (nbodies, 6), optional, local frame (force; torque), see :func:`rnea`.
    out : (nv,), optional

    Returns
    -------
    ddq : (nv,) [rad/s^2, m/s^2]; ``data.ddq`` unless ``out``.

    Raises
    ------
    core_cy.errors.SingularInertiaError
        If an articulated inertia is not positive definite (massless leaf...).
    """
    _same(model, data)
    cdef int nq = model.c.nq, nv = model.c.nv, rc
    if not _ok(q, nq, -1):
        q = _coerce(q, (nq,), "q")
    if not _ok(v, nv, -1):
        v = _coerce(v, (nv,), "v")
    if not _ok(tau, nv, -1):
        tau = _coerce(tau, (nv,), "tau")
    cdef double* pf = NULL
    if fext is not None:
        if not _ok(fext, model.c.nbodies, 6):
            fext = _coerce(fext, (model.c.nbodies, 6), "fext")
        pf = _p(fext)
    if out is None:
        out = data.ddq
    else:
        out = _check_out(out, (nv,), "out")
    cdef double* pq = _p(q)
    cdef double* pv = _p(v)
    cdef double* pt = _p(tau)
    cdef double* po = _p(out)
    with nogil:
        rc = aba_c(&model.c, &data.c, pq, pv, pt, pf, po)
    if rc != 0:
        _singular(model, rc)
    return out


cdef _singular(Model model, int rc):
    raise SingularInertiaError(
        f"aba: articulated inertia of body '{model.body_names[rc - 1]}' (joint "
        f"'{model.joint_names[rc - 1]}') is not positive definite in {model.source}")


def frame_jacobian(Model model not None, Data data not None, q, body_name_or_index,
                   frame="world", out=None):
    """Jacobian (6, nv) of a body or link frame, rows (linear; angular) as Pinocchio.

    Parameters
    ----------
    q : (nq,)
    body_name_or_index : str or int
        A link name (any link, fixed ones included) or a body index.
    frame : {"world", "local", "local_world_aligned"}
        Pinocchio's WORLD (spatial velocity at the world origin), LOCAL and
        LOCAL_WORLD_ALIGNED conventions.
    out : (6, nv), optional

    Returns
    -------
    J : (6, nv); ``data.J`` unless ``out``.
    """
    _same(model, data)
    cdef int nq = model.c.nq, nv = model.c.nv, body, code
    cdef double* pR = NULL
    cdef double* pp = NULL
    if not _ok(q, nq, -1):
        q = _coerce(q, (nq,), "q")
    try:
        code = _FRAME_CODES[frame]
    except (KeyError, TypeError):
        raise ValueError(f"frame: expected one of {sorted(_FRAME_CODES)}, got {frame!r}") from None
    if isinstance(body_name_or_index, str):
        try:
            entry = model._frames[body_name_or_index]
        except KeyError:
            raise KeyError(f"no link named '{body_name_or_index}' in {model.source}") from None
        body = entry[0]
        pR = _p(entry[1])
        pp = _p(entry[2])
    else:
        body = body_name_or_index
        if body < 0 or body >= model.c.nbodies:
            raise IndexError(f"body index {body} out of range [0, {model.c.nbodies})")
    if out is None:
        out = data.J
    else:
        out = _check_out(out, (6, nv), "out")
    cdef double* pq = _p(q)
    cdef double* po = _p(out)
    with nogil:
        _placements(&model.c, &data.c, pq)
        jacobian_c(&model.c, &data.c, body, pR, pp, code, po)
    return out


def center_of_mass(Model model not None, Data data not None, q, jacobian=False):
    """Centre of mass in world [m], (3,); with ``jacobian=True`` also (3, nv).

    Returns ``data.com`` (and ``data.Jcom``), overwritten by the next call.
    """
    _same(model, data)
    if not _ok(q, model.c.nq, -1):
        q = _coerce(q, (model.c.nq,), "q")
    cdef double* pq = _p(q)
    cdef double* pJ = data.c.Jcom if jacobian else NULL
    with nogil:
        com_c(&model.c, &data.c, pq, data.c.com, pJ)
    if jacobian:
        return data.com, data.Jcom
    return data.com


def regressor(Model model not None, Data data not None, q, v, a, out=None):
    """Joint-torque regressor Y(q, v, a), (nv, 10 nbodies + 4 n_actuated).

    ``Y[:, :10 nb] @ model.inertial_parameters() == rnea(q, v, a)``; then
    per actuated (1-dof) joint j, in joint order, the friction/armature
    columns ``[sign(v_j), v_j, a_j, 1]`` (sign(0) = 0) on row j, for the
    parameters [Coulomb, viscous, armature, offset].  ``data.Y`` unless ``out``.
    """
    _same(model, data)
    cdef int nq = model.c.nq, nv = model.c.nv
    if not _ok(q, nq, -1):
        q = _coerce(q, (nq,), "q")
    if not _ok(v, nv, -1):
        v = _coerce(v, (nv,), "v")
    if not _ok(a, nv, -1):
        a = _coerce(a, (nv,), "a")
    ncol = 10 * model.c.nbodies + 4 * model.c.n_actuated
    if out is None:
        out = data.Y
    else:
        out = _check_out(out, (nv, ncol), "out")
    cdef double* pq = _p(q)
    cdef double* pv = _p(v)
    cdef double* pa = _p(a)
    cdef double* po = _p(out)
    with nogil:
        regressor_c(&model.c, &data.c, pq, pv, pa, po)
    return out


def integrate(Model model not None, q, v, double dt=1.0, out=None):
    """Configuration q (+) v dt, (nq,), as ``pinocchio.integrate(model, q, v * dt)``.

    1-dof joints: q + v dt.  Free-flyer: M(q) exp6(v dt) with v in the base
    frame, quaternion renormalised.  Returns a new array unless ``out``.
    """
    cdef int nq = model.c.nq, nv = model.c.nv
    if not _ok(q, nq, -1):
        q = _coerce(q, (nq,), "q")
    if not _ok(v, nv, -1):
        v = _coerce(v, (nv,), "v")
    if out is None:
        out = np.empty(nq)
    else:
        out = _check_out(out, (nq,), "out")
    cdef double* pq = _p(q)
    cdef double* pv = _p(v)
    cdef double* po = _p(out)
    with nogil:
        integrate_c(&model.c, pq, pv, dt, po)
    return out


# ---------------------------------------------------------------------------
# batch forms: GIL released for the whole sweep; threads > 1 splits the N
# states into contiguous chunks, one per POSIX thread, each on its own Data
# ---------------------------------------------------------------------------

# POSIX threads rather than OpenMP (prange): libgomp's threads spin at the
# end of a parallel region, and on a machine whose other cores are busy
# (the controller's real-time loop, other jobs) the spinning thread took
# the core from the one still working: 2 threads measured up to 8x *slower*
# than threads=1 on the 2-core dev box under load (load average 3.5), where
# pthread_join sleeps and the same sweep took 1.0x.
# Threads are started per call (~10-20 us each, glibc reuses their stacks).
cdef extern from "<pthread.h>" nogil:
    ctypedef unsigned long pthread_t   # opaque to us: only stored and passed back
    ctypedef struct pthread_attr_t:
        pass
    int pthread_create(pthread_t* thread, const pthread_attr_t* attr,
                       void* (*start)(void*) noexcept nogil, void* arg)
    int pthread_join(pthread_t thread, void** retval)

cdef enum:
    # upper bound of threads=: the per-call job tables live on the stack
    _MAX_THREADS = 256

cdef enum:
    _KERNEL_RNEA = 0
    _KERNEL_ABA = 1
    _KERNEL_REGRESSOR = 2

cdef struct _BatchJob:
    int kernel                  # _KERNEL_*
    const ModelC* m
    DataC* d                    # this chunk's own workspace
    const double* Q             # (N, nq), whole batch
    const double* V             # (N, nv)
    const double* A             # (N, nv): accelerations, or torques for ABA
    double* out                 # (N, nv) or (N, nv, ncol)
    Py_ssize_t k0, k1           # rows [k0, k1) of this chunk
    Py_ssize_t bad              # ABA: first singular row of the chunk, else -1
    int rc                      # ABA: its aba_c code

# Data._arrays key of the extra per-thread workspaces (created once, reused)
_WORKERS_KEY = "_batch_workspaces"


cdef tuple _batch_args(Model model, Q, V, A, str nameA):
    if not (cnp.PyArray_Check(Q) and cnp.PyArray_NDIM(<cnp.ndarray>Q) == 2):
        Q = np.asarray(Q, dtype=np.float64)
        if Q.ndim != 2:
            raise ValueError(f"Q: expected shape (N, {model.c.nq}), got {Q.shape}")
    cdef Py_ssize_t n = Q.shape[0]
    if not _ok(Q, n, model.c.nq):
        Q = _coerce(Q, (n, model.c.nq), "Q")
    if not _ok(V, n, model.c.nv):
        V = _coerce(V, (n, model.c.nv), "V")
    if not _ok(A, n, model.c.nv):
        A = _coerce(A, (n, model.c.nv), nameA)
    return n, Q, V, A


def _batch_data(Model model, data):
    if data is None:
        return Data(model)
    if not isinstance(data, Data) or (<Data>data).model is not model:
        raise ValueError("data: expected a core_cy.Data built for this model")
    return data


cdef int _batch_threads(object threads, Py_ssize_t n) except -1:
    """Number of chunks to run: threads (0 = os.cpu_count()), at most n, at least 1."""
    cdef Py_ssize_t t
    try:
        t = operator.index(threads)
    except TypeError:
        raise TypeError(f"threads: expected an int (0 = all cores), got "
                        f"{type(threads).__name__}") from None
    if t < 0 or t > _MAX_THREADS:
        raise ValueError(f"threads: expected 0 (all cores) or 1..{_MAX_THREADS}, got {t}")
    if t == 0:
        t = min(os.cpu_count() or 1, _MAX_THREADS)
    if t > n:
        t = n
    return 1 if t < 1 else <int>t


cdef int _batch_jobs(int kernel, Model model, Data d, int nt, Py_ssize_t n, object Q,
                     object V, object A, object out, _BatchJob* jobs) except -1:
    """Fill jobs[0:nt]: chunk t = rows [n t / nt, n (t + 1) / nt) on workspace t.

    Workspace 0 is ``d``; the nt - 1 others are cached on ``d`` (made once).
    """
    cdef list extra
    cdef int t
    if nt > 1:
        extra = d._arrays.get(_WORKERS_KEY)
        if extra is None:
            extra = []
            d._arrays[_WORKERS_KEY] = extra
        while len(extra) < nt - 1:
            extra.append(Data(model))
    for t in range(nt):
        jobs[t].kernel = kernel
        jobs[t].m = &model.c
        jobs[t].d = &d.c if t == 0 else &(<Data>extra[t - 1]).c
        jobs[t].Q = _p(Q)
        jobs[t].V = _p(V)
        jobs[t].A = _p(A)
        jobs[t].out = _p(out)
        jobs[t].k0 = (n * t) // nt
        jobs[t].k1 = (n * (t + 1)) // nt
        jobs[t].bad = -1
        jobs[t].rc = 0
    return 0


cdef void* _run_job(void* arg) noexcept nogil:
    # What threads=1 runs on the whole range and each thread on its chunk:
    # every state goes through the same kernel call on a workspace of its
    # own, so the results do not depend on the number of threads, bit for bit.
    cdef _BatchJob* j = <_BatchJob*>arg
    cdef const ModelC* m = j.m
    cdef Py_ssize_t k, nq = m.nq, nv = m.nv
    cdef Py_ssize_t ystride = nv * (10 * m.nbodies + 4 * m.n_actuated)
    if j.kernel == _KERNEL_RNEA:
        for k in range(j.k0, j.k1):
            rnea_c(m, j.d, j.Q + k * nq, j.V + k * nv, j.A + k * nv, NULL, 1, j.out + k * nv)
    elif j.kernel == _KERNEL_ABA:
        for k in range(j.k0, j.k1):
            j.rc = aba_c(m, j.d, j.Q + k * nq, j.V + k * nv, j.A + k * nv, NULL, j.out + k * nv)
            if j.rc != 0:
                j.bad = k
                break
    else:
        # regressor_c with its zero fill done differently: one memset of the
        # state's whole (nv, ncol) block, then the blocks that can be nonzero
        # (the same values).  The batch output is cold memory: one long
        # memset streams whole cache lines where regressor_c's 2 nv short
        # ones (the better choice on its cache-resident data.Y) do not.
        # Measured (N = 1000, out= reused, best of 20, load 0.8): ur5 0.87 ->
        # 0.81 us/state, solo12 3.84 -> 3.34, talos 15.6 -> 12.1.  One memset
        # of the whole chunk first was worse (solo12 7 vs 5.5 us on a loaded
        # box): the zeros reach memory before the blocks are written on them.
        for k in range(j.k0, j.k1):
            memset(j.out + k * ystride, 0, ystride * sizeof(double))
            _regressor_blocks(m, j.d, j.Q + k * nq, j.V + k * nv, j.A + k * nv,
                              j.out + k * ystride)
    return NULL


cdef void _run_jobs(_BatchJob* jobs, int nt) noexcept nogil:
    # chunk 0 in the calling thread, the others in threads started here; a
    # chunk whose thread cannot be started runs here too (same result, slower)
    cdef pthread_t tids[_MAX_THREADS]
    cdef bint started[_MAX_THREADS]
    cdef int t
    for t in range(1, nt):
        started[t] = pthread_create(&tids[t], NULL, _run_job, &jobs[t]) == 0
    _run_job(&jobs[0])
    for t in range(1, nt):
        if started[t]:
            pthread_join(tids[t], NULL)
        else:
            _run_job(&jobs[t])


cdef object _batch(int kernel, Model model, object Q, object V, object A, object out,
                   object data, object threads, str nameA):
    n, Q, V, A = _batch_args(model, Q, V, A, nameA)
    cdef Data d = _batch_data(model, data)
    cdef int nt = _batch_threads(threads, n), t
    cdef _BatchJob jobs[_MAX_THREADS]
    if kernel == _KERNEL_REGRESSOR:
        shape = (n, model.c.nv, 10 * model.c.nbodies + 4 * model.c.n_actuated)
    else:
        shape = (n, model.c.nv)
    out = np.empty(shape) if out is None else _check_out(out, shape, "out")
    _batch_jobs(kernel, model, d, nt, n, Q, V, A, out, jobs)
    with nogil:
        if nt == 1:
            _run_job(&jobs[0])
        else:
            _run_jobs(jobs, nt)
    # chunks are in row order: the first chunk that failed has the first bad row
    for t in range(nt):
        if jobs[t].bad >= 0:
            raise SingularInertiaError(
                f"aba_batch row {jobs[t].bad}: articulated inertia of body "
                f"'{model.body_names[jobs[t].rc - 1]}' is not positive definite "
                f"in {model.source}")
    return out


def rnea_batch(Model model not None, Q, V, A, out=None, data=None, threads=1):
    """RNEA over N states: (N, nv) torques from Q (N, nq), V (N, nv), A (N, nv).

    Parameters
    ----------
    Q : (N, nq) float64; V, A : (N, nv) float64 [rad/s, rad/s^2, m/s, m/s^2]
    out : (N, nv) float64, optional
    data : Data, optional
        Workspace (a new one per call otherwise).  The GIL is released for
        the whole sweep.
    threads : int, optional
        1 (default): the whole sweep on ``data``, in the calling thread.
        T > 1: the N states are cut into min(T, N) contiguous chunks run at
        once by POSIX threads (the calling one included), each on its own
        workspace: ``data`` and T - 1 extra ones created on first use and
        cached on ``data`` (pass the same ``data`` to allocate nothing per
        call).  0: ``os.cpu_count()`` threads.  Every state goes through the
        same kernel whatever T, so results are bit-identical to ``threads=1``.
        Worth it from a few hundred states up and only on idle cores: each
        call starts its threads (~10-20 us each).

    Returns
    -------
    tau : (N, nv) [N m, N], a new array unless ``out``.
    """
    return _batch(_KERNEL_RNEA, model, Q, V, A, out, data, threads, "A")


def aba_batch(Model model not None, Q, V, TAU, out=None, data=None, threads=1):
    """ABA over N states: (N, nv) accelerations from Q (N, nq), V, TAU (N, nv).

    Parameters
    ----------
    Q : (N, nq) float64; V, TAU : (N, nv) float64 [rad/s, N m, m/s, N]
    out : (N, nv) float64, optional
    data : Data, optional
        Workspace (a new one per call otherwise); GIL released for the sweep.
    threads : int, optional
        Threads over contiguous chunks of the N states, as :func:`rnea_batch`
        (1 default, 0 = all cores); results bit-identical to ``threads=1``.

    Returns
    -------
    ddq : (N, nv) [rad/s^2, m/s^2], a new array unless ``out``.

    Raises
    ------
    core_cy.errors.SingularInertiaError
        Naming the first (lowest) row whose articulated inertia is not
        positive definite; the rows after it in its chunk are not written.
    """
    return _batch(_KERNEL_ABA, model, Q, V, TAU, out, data, threads, "TAU")


def regressor_batch(Model model not None, Q, V, A, out=None, data=None, threads=1):
    """Regressor over N states: (N, nv, 10 nbodies + 4 n_actuated).

    Parameters
    ----------
    Q : (N, nq) float64; V, A : (N, nv) float64
    out : (N, nv, 10 nbodies + 4 n_actuated) float64, optional
    data : Data, optional
        Workspace (a new one per call otherwise); GIL released for the sweep.
    threads : int, optional
        Threads over contiguous chunks of the N states, as :func:`rnea_batch`
        (1 default, 0 = all cores); results bit-identical to ``threads=1``.

    Returns
    -------
    Y : (N, nv, 10 nbodies + 4 n_actuated), ``Y[k]`` = :func:`regressor` of
    state k; a new array unless ``out``.
    """
    return _batch(_KERNEL_REGRESSOR, model, Q, V, A, out, data, threads, "A")
