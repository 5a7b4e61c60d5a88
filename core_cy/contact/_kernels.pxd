# Compiled contact kernels: force laws, plane detection, the PGS LCP solver.
# Everything here is nogil and allocation-free; core_cy/contact/laws.py wraps it.

cdef struct ContactLaw:
    # Hertz normal force K * depth**e plus damping ramped in over ramp_width
    double stiffness        # K [N / m**e]
    double exponent         # e [-]
    double damping_max      # c_max [N s / m]
    double ramp_width       # w [m]
    # smooth stick-slip friction (seed 002 / ADAMS law)
    double mu_static        # mu_s [-]
    double mu_dynamic       # mu_d [-]
    double v_static         # v_s [m/s]: |slip| where mu reaches mu_s
    double v_dynamic        # v_d [m/s]: |slip| where mu settles at mu_d (v_d > v_s)
    int cone                # 0: per-axis (square limit), 1: elliptic cone
    double cone_scale_x     # elliptic semi-axis scale along tangent x
    double cone_scale_y     # elliptic semi-axis scale along tangent y
    int clamp_normal        # 1: f_n >= 0 (no pulling)
    # anchored tangential spring-damper (0: off, the friction law above); the simulator
    # keeps each contact's anchor (core_cy/sim/_kernels.pyx _tangent_spring)
    double tangent_stiffness  # k_t [N/m]
    double tangent_damping    # c_t [N s/m]

cdef struct LCPStats:
    int iterations
    double residual         # natural-map residual, inf-norm [m/s]
    double complementarity  # max |lambda * w| over complementary pairs [N s m/s]

cdef double smoothstep(double x) noexcept nogil
cdef double damping_ramp(double depth, const ContactLaw* law) noexcept nogil
cdef double normal_force(double depth, double depth_rate, const ContactLaw* law) noexcept nogil
cdef double friction_coefficient(double slip, const ContactLaw* law) noexcept nogil
cdef double friction_slope(double slip, const ContactLaw* law) noexcept nogil
cdef void contact_damping(double depth, const double* v_local, const ContactLaw* law,
                          double* D) noexcept nogil
cdef void friction_force(double vx, double vy, double fn, const ContactLaw* law,
                         double* fx, double* fy) noexcept nogil
cdef void contact_force(double depth, const double* v_contact, const double* R_contact,
                        const ContactLaw* law, double* f_world) noexcept nogil
cdef void plane_frame(const double* normal, double* R) noexcept nogil
cdef double point_plane_gap(const double* p, const double* plane_point,
                            const double* normal) noexcept nogil
cdef int box_plane(const double* center, const double* R_box, const double* half,
                   const double* plane_point, const double* normal,
                   double* points, double* gaps) noexcept nogil
cdef LCPStats pgs_solve(int nc, const double* W, const double* b, const double* mu,
                        double* lam, double* w, int max_iter, double tol, int cone) noexcept nogil
cdef void lcp_stats(int nc, const double* W, const double* b, const double* mu,
                    const double* lam, double* w, int cone, LCPStats* st) noexcept nogil
