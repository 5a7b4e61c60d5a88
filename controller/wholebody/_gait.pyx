# cython: language_level=3
"""The trot's per-tick references, compiled (issue 11: trot at 1 kHz).

:func:`swing_progress_into` is :meth:`gait.TrotGait.swing_progress` and
:func:`swing_targets` fills the stance flags and the swing references of
:meth:`trot_planner.TrotPlanner.update` for every foot in one call (before:
~25 NumPy calls on 3-vectors per swinging foot per tick).  The arithmetic is
the NumPy code's, operation for operation (``np.mod``'s sign rule, ``pow``
where it had ``**``), so the numbers agree to rounding.
"""

from libc.math cimport copysign, fmod, pow


cdef inline double _mod1(double a) noexcept nogil:
    # np.mod(a, 1.0): the remainder with the divisor's sign (+0.0 for an exact multiple)
    cdef double m = fmod(a, 1.0)
    if m != 0.0:
        if m < 0.0:
            m += 1.0
    else:
        m = copysign(0.0, 1.0)
    return m


def swing_progress_into(double t, double period, double duty, const double[::1] touchdown,
                        double[::1] out):
    """Per foot: swing progress u in [0, 1), or -1 in stance, at gait time ``t`` [s], into
    ``out`` (feet,).  ``touchdown`` (feet,): the phase each foot lands at."""
    cdef Py_ssize_t i, nf = touchdown.shape[0]
    cdef double phase, u
    if out.shape[0] != nf:
        raise ValueError(f"swing_progress_into: out has {out.shape[0]} entries, touchdown {nf}")
    with nogil:
        phase = _mod1(t / period)
        for i in range(nf):
            # the swing ends at the touchdown phase and lasts (1 - duty) of the cycle
            u = _mod1(phase - (touchdown[i] - (1.0 - duty))) / (1.0 - duty)
            out[i] = u if u < 1.0 else -1.0


def swing_targets(const double[::1] u_all, double period, double duty, double step_height,
                  double ground_z, const double[::1] base_position, const double[::1] vel,
                  const double[:, :] base_rotation, const double[:, ::1] offset,
                  const double[:, ::1] liftoff, unsigned char[::1] stance,
                  double[:, ::1] swing_position, double[:, ::1] swing_velocity,
                  double[:, ::1] swing_acceleration):
    """Stance flags and swing references of every foot at progress ``u_all`` (feet,).

    A foot with ``u < 0`` is in stance; a swinging one follows the spline from its
    ``liftoff`` (feet, 3) point to a touchdown point ahead of its hip: the base reference
    ``base_position`` (3,) moved on at ``vel`` (3,) [m/s] to touchdown, plus the foot's
    ``offset`` (feet, 3) turned by ``base_rotation`` (3, 3), plus half the stance travel,
    on the ground ``ground_z`` [m].  Writes ``stance`` (feet,) and ``swing_position``,
    ``swing_velocity``, ``swing_acceleration`` (feet, 3) [m, m/s, m/s^2] of swing feet.
    """
    cdef Py_ssize_t i, k, nf = u_all.shape[0]
    cdef double T = (1.0 - duty) * period            # TrotGait.swing_time
    cdef double half_stance = 0.5 * (duty * period)  # 0.5 * TrotGait.stance_time
    cdef double u, left, s, ds, dds, d, h16
    cdef double target[3]
    if (stance.shape[0] != nf or offset.shape[0] != nf or liftoff.shape[0] != nf
            or swing_position.shape[0] != nf or swing_velocity.shape[0] != nf
            or swing_acceleration.shape[0] != nf or base_position.shape[0] != 3
            or vel.shape[0] != 3 or base_rotation.shape[0] != 3 or base_rotation.shape[1] != 3):
        raise ValueError(f"swing_targets: expected {nf} feet in every per-foot array and 3-vectors")
    with nogil:
        for i in range(nf):
            u = u_all[i]
            if u < 0.0:
                stance[i] = 1
                continue
            stance[i] = 0
            left = (1.0 - u) * T
            for k in range(3):
                target[k] = ((base_position[k] + vel[k] * left)
                             + (base_rotation[k, 0] * offset[i, 0] + base_rotation[k, 1] * offset[i, 1]
                                + base_rotation[k, 2] * offset[i, 2])) + vel[k] * half_stance
            target[2] = ground_z
            # TrotGait.swing_reference: smoothstep in the plane, 16 h u^2 (1 - u)^2 in height
            s = u * u * (3.0 - 2.0 * u)
            ds = 6.0 * u * (1.0 - u) / T
            dds = (6.0 - 12.0 * u) / (T * T)
            for k in range(3):
                d = target[k] - liftoff[i, k]
                swing_position[i, k] = liftoff[i, k] + s * d
                swing_velocity[i, k] = ds * d
                swing_acceleration[i, k] = dds * d
            h16 = step_height * 16.0
            swing_position[i, 2] = ground_z + h16 * u * u * pow(1.0 - u, 2.0)
            swing_velocity[i, 2] = h16 * (2.0 * u - 6.0 * u * u + 4.0 * pow(u, 3.0)) / T
            swing_acceleration[i, 2] = h16 * (2.0 - 12.0 * u + 12.0 * u * u) / (T * T)
