# cython: language_level=3
"""C-level interface of the rigid-body kernels, for other .pyx modules.

Usage from another Cython module (e.g. the contact simulator)::

    from servoloop.core_cy.dynamics._dynamics cimport Model, Data, ModelC, DataC, aba_c, fk_c
    cdef Model model = ...            # core_cy.Model (Python object)
    cdef Data data = core_cy.Data(model)
    with nogil:
        fk_c(&model.c, &data.c, q_ptr, v_ptr)
        aba_c(&model.c, &data.c, q_ptr, v_ptr, tau_ptr, NULL, ddq_ptr)

Conventions (Pinocchio's, so results compare number for number):

- bodies are numbered 0..nbodies-1 in depth-first order, parent[i] < i,
  parent == -1 for a body attached to the world; a free-flyer can only be
  body 0 (``floating == 1``);
- q layout: free-flyer [x y z qx qy qz qw] then one entry per 1-dof joint;
  v layout: free-flyer [linear(local) angular(local)] then one per joint;
- 3x3 rotations are row-major 9-vectors; spatial motions and forces are
  6-vectors (linear; angular);
- "world" spatial quantities (``vw``, ``aw``, ``fw``, ``Sw``) are expressed
  in world axes at the world origin (Pinocchio's WORLD convention); "local"
  ones in the body frame at the body origin;
- external forces ``fext`` are (nbodies, 6) row-major, each in its body's
  local frame (force; torque), and are *applied to* the body;
- every kernel is ``noexcept nogil`` and allocates nothing: all scratch
  lives in DataC, so one DataC must not be used by two threads at once.
"""

cdef enum:
    JOINT_REVOLUTE = 0
    JOINT_PRISMATIC = 1
    JOINT_FREEFLYER = 2

cdef enum:
    FRAME_WORLD = 0
    FRAME_LOCAL = 1
    FRAME_LOCAL_WORLD_ALIGNED = 2

cdef struct ModelC:
    int nbodies
    int nq
    int nv
    int floating            # 1 when body 0 is a free-flyer on the world
    int n_actuated          # nv - 6 * floating: the 1-dof joints
    const int* parent       # (nbodies,)
    const int* jtype        # (nbodies,) JOINT_*
    const int* idx_q        # (nbodies,) first q index of the body's joint
    const int* idx_v        # (nbodies,) first v index
    const int* nv_joint     # (nbodies,) 1 or 6
    const double* axis      # (nbodies, 3) unit joint axis in the body frame
    const double* R_tree    # (nbodies, 9) rotation of the body frame (q=0) in the parent frame
    const double* p_tree    # (nbodies, 3) origin of the body frame in the parent frame [m]
    const double* mass      # (nbodies,) [kg]
    const double* com       # (nbodies, 3) centre of mass in the body frame [m]
    const double* I_com     # (nbodies, 9) rotational inertia about the COM, body axes [kg m^2]
    double gravity[3]       # world gravity [m/s^2], (0, 0, -9.81)
    double total_mass       # [kg]

cdef struct DataC:
    # --- filled by fk_c, crba_c, aba_c, com_c, regressor_c (placements, motion subspaces);
    #     rnea_c works in local frames and leaves them untouched ---
    double* oR              # (nbodies, 9) rotation body -> world
    double* op              # (nbodies, 3) body origin in world [m]
    double* Sw              # (nv, 6) joint motion subspace columns, world frame
    double* Iw              # (nbodies, 12) world COM (3), inertia about it, world axes (9): fk_c, crba_c, aba_c
    # --- velocities: fk_c with v (vw, v_local), aba_c and regressor_c (vw, aw) ---
    double* vw              # (nbodies, 6) body spatial velocity, world frame
    double* v_local         # (nbodies, 6) body spatial velocity, body frame (fk_c only)
    double* aw              # (nbodies, 6) spatial acceleration (incl. -gravity), world
    double* fw              # (nbodies, 6) reserved (world joint forces)
    # --- scratch for CRBA / ABA / COM / regressor ---
    double* Yc              # (nbodies, 10) composite inertia: m, h(3), I_O(6: xx xy yy xz yz zz)
    double* Ia              # (nbodies, 36) articulated inertia, world frame
    double* pA              # (nbodies, 6) articulated bias force, world frame
    double* cw              # (nbodies, 6) velocity-product acceleration, world frame
    double* U               # (nv, 6)
    double* Dinv            # (nv,)
    double* u               # (nv,)
    double* Bw              # (nbodies, 60) body regressor (6x10) in world frame
    double* scratch         # (max(64, 6*nv) + 2*nbodies,) scratch of the kernels
    # --- outputs owned by the workspace (returned when out= is not given) ---
    double* tau             # (nv,)
    double* ddq             # (nv,)
    double* M               # (nv, nv)
    double* J               # (6, nv)
    double* Jcom            # (3, nv)
    double* com             # (3,)
    double* Y               # (nv, 10*nbodies + 4*n_actuated)

cdef class Model:
    cdef ModelC c
    cdef object _arrays         # keeps the numpy arrays behind the C pointers alive
    cdef readonly int nq, nv, nbodies, n_actuated
    cdef readonly bint floating_base
    cdef readonly double total_mass
    cdef readonly tuple joint_names, body_names, actuated_joint_names, frame_names
    cdef readonly object source, parents, gravity
    cdef readonly object lower_limits, upper_limits
    cdef readonly dict _frames

cdef class Data:
    cdef DataC c
    cdef readonly Model model
    cdef object _arrays
    cdef readonly object tau, ddq, M, J, Jcom, com, Y
    cdef readonly object rotation_body_to_world, position_body_in_world
    cdef readonly object velocity_body_local, velocity_body_world

cdef void fk_c(const ModelC* m, DataC* d, const double* q, const double* v) noexcept nogil
# rnea_c: v, a, fext may be NULL (zero); uses d.Ia as scratch, does not touch
# d.oR / d.op / d.Sw / d.vw (call fk_c for those).
cdef void rnea_c(const ModelC* m, DataC* d, const double* q, const double* v,
                 const double* a, const double* fext, int with_gravity,
                 double* tau) noexcept nogil
cdef void crba_c(const ModelC* m, DataC* d, const double* q, double* M) noexcept nogil
# aba_c returns 0, or 1 + the index of the body whose articulated inertia is
# not positive definite.  v and tau must not be NULL (v may point to zeros).
cdef int aba_c(const ModelC* m, DataC* d, const double* q, const double* v,
               const double* tau, const double* fext, double* ddq) noexcept nogil
# jacobian_c reads the placements of the last fk_c (or any kernel): call fk_c first.
# R_local / p_local: the frame's placement on the body (NULL = the body frame).
cdef void jacobian_c(const ModelC* m, DataC* d, int body, const double* R_local,
                     const double* p_local, int frame, double* J) noexcept nogil
cdef void com_c(const ModelC* m, DataC* d, const double* q, double* com,
                double* Jcom) noexcept nogil
cdef void regressor_c(const ModelC* m, DataC* d, const double* q, const double* v,
                      const double* a, double* Y) noexcept nogil
cdef void integrate_c(const ModelC* m, const double* q, const double* v, double dt,
                      double* qout) noexcept nogil
