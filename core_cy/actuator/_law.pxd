# cython: language_level=3
"""The one compiled servo torque law (see core_cy/actuator/model.py for the physics).

cimported by core_cy/sim/_kernels.pyx (the simulator's joints),
core_cy/actuator/_actuator.pyx (the bench kernel and the virtual bus's
independent-servo integrator).  NumPy reference:
core_cy/actuator/reference.py servo_torque_reference.
"""

from libc.math cimport fabs

cdef enum:
    DRIVE_POSITION = 0    # demand = kp (goal - q) - kd qd
    DRIVE_VELOCITY = 1    # demand = kv (command - qd)
    DRIVE_TORQUE = 2      # demand = command (current / PWM mode)


cdef inline double law_clip(double x, double lo, double hi) noexcept nogil:
    return lo if x < lo else (hi if x > hi else x)


cdef inline double law_sign(double x) noexcept nogil:
    # np.sign semantics: sign(0) = 0 (a resting, unloaded joint gets no friction)
    return 1.0 if x > 0.0 else (-1.0 if x < 0.0 else 0.0)


cdef inline double drive_demand(int drive, double kp, double kd, double kv, double goal,
                                double q, double qd, double command, double* slope) noexcept nogil:
    """Torque the servo's controller asks for [N m]; slope <- d demand / d qd."""
    if drive == DRIVE_VELOCITY:
        slope[0] = -kv
        return kv * (command - qd)
    if drive == DRIVE_TORQUE:
        slope[0] = 0.0
        return command
    slope[0] = -kd
    return kp * (goal - q) - kd * qd


cdef inline double motor_torque(double demand, double qd, double stall_nm, double emf,
                                double limit_nm, double* slope) noexcept nogil:
    """The demand bounded by the motor line, then by the torque limit [N m].

    stall_nm: stall torque at the supply voltage; emf: back-EMF slope
    [N m s/rad] (the line is [-stall - emf qd, stall - emf qd]); limit_nm:
    firmware torque limit.  slope: in d demand/d qd, out d tau/d qd.
    """
    cdef double hi = stall_nm - emf * qd
    cdef double lo = -stall_nm - emf * qd
    cdef double t = demand
    if t > hi:
        t = hi
        slope[0] = -emf
    elif t < lo:
        t = lo
        slope[0] = -emf
    if t > limit_nm:
        t = limit_nm
        slope[0] = 0.0
    elif t < -limit_nm:
        t = -limit_nm
        slope[0] = 0.0
    return t


cdef inline double servo_torque(int drive, bint on, double kp, double kd, double kv,
                                double stall_nm, double emf, double limit_nm, double goal,
                                double q, double qd, double command, double* slope) noexcept nogil:
    """Active (motor) torque [N m]: 0 with torque off (the drive is open); slope <- d/d qd."""
    cdef double demand
    if not on:
        slope[0] = 0.0
        return 0.0
    demand = drive_demand(drive, kp, kd, kv, goal, q, qd, command, slope)
    return motor_torque(demand, qd, stall_nm, emf, limit_nm, slope)


cdef inline double passive_damping(double viscous, double off_damping, bint on) noexcept nogil:
    """Viscous coefficient of the gearbox [N m s/rad], plus the torque-off damping when off."""
    return viscous if on else viscous + off_damping


cdef inline double friction_stop(double net, double qd, double inertia_over_h,
                                 double budget) noexcept nogil:
    """Net torque after friction of magnitude ``budget`` [N m] (BAM's clip).

    Friction clips the torque that would stop the joint within one step h:
    a joint at rest stays at rest while |net| <= budget, and friction never
    reverses a motion within a step.
    """
    cdef double tau_stop = inertia_over_h * qd + net
    cdef double stop = fabs(tau_stop)
    return net - law_sign(tau_stop) * (stop if stop < budget else budget)
