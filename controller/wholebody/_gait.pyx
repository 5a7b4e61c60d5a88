# cython: language_level=3
"""The trot's per-tick references, compiled (issue 11: trot at 1 kHz).

:class:`TrotKernel` computes what :meth:`gait.TrotGait.swing_progress` and
:meth:`gait.TrotGait.swing_reference` give :meth:`trot_planner.TrotPlanner.update`,
for every foot in two calls on buffers bound once (before: ~25 NumPy calls
on 3-vectors per swinging foot per tick).  The arithmetic is
the NumPy code's, operation for operation (``np.mod``'s sign rule, ``pow``
where it had ``**``), so the numbers agree to rounding.
"""

import numpy as np

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


cdef inline void _height(double u, double h, double T, double land_depth, double land_fraction,
                         double lift_mix,
                         double* z, double* dz, double* ddz) noexcept nogil:
    # gait.swing_height, operation for operation: an arc (zero velocity, upward acceleration
    # at lift-off) into a slow final descent (land_depth over the last land_fraction of the swing)
    cdef double d = land_depth if land_depth < 0.5 * h else 0.5 * h
    cdef double F = land_fraction
    cdef double ua = 1.0 - F
    cdef double g, a, b, c, x, y, A, p2, p3, xy
    cdef double bump = 3125.0 / 108.0   # gait._BUMP
    if u >= ua:
        z[0] = d * (1.0 - u) / F
        dz[0] = -d / (F * T)
        ddz[0] = 0.0
        return
    g = -ua / F
    a = 10.0 - 4.0 * g
    b = 7.0 * g - 15.0
    c = 6.0 - 3.0 * g
    x = u / ua
    y = 1.0 - x
    A = h - 0.5 * d
    p2 = A * lift_mix * bump
    p3 = A * (1.0 - lift_mix) * 64.0
    xy = x * y
    z[0] = p2 * x * xy * y * y + p3 * pow(xy, 3.0) + d * pow(x, 3.0) * (a + x * (b + x * c))
    dz[0] = ((p2 * xy * y * (2.0 - 5.0 * x) + p3 * 3.0 * xy * xy * (1.0 - 2.0 * x)
              + d * x * x * (3.0 * a + x * (4.0 * b + x * 5.0 * c)))) / (ua * T)
    ddz[0] = ((p2 * y * (2.0 + x * (-16.0 + x * 20.0)) + p3 * 6.0 * xy * (1.0 - 5.0 * xy)
               + d * x * (6.0 * a + x * (12.0 * b + x * 20.0 * c)))) / pow(ua * T, 2.0)


cdef void _swing(const double[::1] u_all, double period, double duty, double step_height,
                 double ground_z, double land_depth, double land_fraction, double lift_mix,
                 const double[::1] base_position, const double[::1] vel,
                 const double[:, :] base_rotation, const double[:, ::1] offset,
                 const double[:, ::1] liftoff, unsigned char[::1] stance,
                 unsigned char[::1] prev_stance, double[:, ::1] swing_position,
                 double[:, ::1] swing_velocity, double[:, ::1] swing_acceleration) noexcept nogil:
    cdef Py_ssize_t i, k, nf = u_all.shape[0]
    cdef double T = (1.0 - duty) * period            # TrotGait.swing_time
    cdef double half_stance = 0.5 * (duty * period)  # 0.5 * TrotGait.stance_time
    cdef double u, left, s, ds, dds, d
    cdef double target[3]
    for i in range(nf):
        u = u_all[i]
        stance[i] = prev_stance[i] = u < 0.0
        if u < 0.0:
            continue
        left = (1.0 - u) * T
        for k in range(3):
            target[k] = ((base_position[k] + vel[k] * left)
                         + (base_rotation[k, 0] * offset[i, 0] + base_rotation[k, 1] * offset[i, 1]
                            + base_rotation[k, 2] * offset[i, 2])) + vel[k] * half_stance
        target[2] = ground_z
        # gait.swing_plane: the minimum-jerk quintic (a soft touchdown in the plane too)
        s = u * u * u * (10.0 + u * (-15.0 + u * 6.0))
        ds = 30.0 * u * u * (1.0 - u) * (1.0 - u) / T
        dds = 60.0 * u * (1.0 - u) * (1.0 - 2.0 * u) / (T * T)
        for k in range(3):
            d = target[k] - liftoff[i, k]
            swing_position[i, k] = liftoff[i, k] + s * d
            swing_velocity[i, k] = ds * d
            swing_acceleration[i, k] = dds * d
        _height(u, step_height, T, land_depth, land_fraction, lift_mix, &swing_position[i, 2],
                &swing_velocity[i, 2], &swing_acceleration[i, 2])
        swing_position[i, 2] += ground_z


cdef class TrotKernel:
    """The trot's swing progress and swing references, on buffers bound once.

    Parameters
    ----------
    touchdown : (feet,) landing phases; offset, liftoff : (feet, 3) the planner's arrays
    prev_stance : (feet,) bool, the planner's last stance flags (updated in place)
    targets : the planner's :class:`Targets`; re-bound when one of its arrays is replaced
    """

    cdef readonly object u, vel
    cdef double[::1] u_v, vel_v, touchdown
    cdef const double[:, ::1] offset
    cdef const double[:, ::1] liftoff
    cdef unsigned char[::1] prev
    cdef object _tg, _bound
    cdef const double[::1] bp
    cdef const double[:, :] rot
    cdef unsigned char[::1] stance
    cdef double[:, ::1] sp, sv, sa
    cdef double land_depth, land_fraction, lift_mix

    def __init__(self, touchdown, offset, liftoff, prev_stance, targets):
        from servoloop.controller.wholebody import gait

        self.touchdown = np.ascontiguousarray(touchdown, dtype=float)
        self.land_depth = gait.LAND_DEPTH
        self.land_fraction = gait.LAND_FRACTION
        self.lift_mix = gait.LIFT_MIX
        nf = self.touchdown.shape[0]
        self.u = np.zeros(nf)
        self.u_v = self.u
        self.vel = np.zeros(3)
        self.vel_v = self.vel
        self.offset = offset
        self.liftoff = liftoff
        self.prev = prev_stance.view(np.uint8)
        self._bind(targets)

    def _bind(self, tg):
        self._tg = tg
        self._bound = (tg.base_position, tg.base_rotation, tg.stance, tg.swing_position,
                       tg.swing_velocity, tg.swing_acceleration)
        self.bp = tg.base_position
        self.rot = tg.base_rotation
        self.stance = tg.stance.view(np.uint8)
        self.sp = tg.swing_position
        self.sv = tg.swing_velocity
        self.sa = tg.swing_acceleration
        nf = self.touchdown.shape[0]
        if (self.offset.shape[0] != nf or self.liftoff.shape[0] != nf or self.prev.shape[0] != nf
                or self.stance.shape[0] != nf or self.sp.shape[0] != nf or self.sv.shape[0] != nf
                or self.sa.shape[0] != nf or self.bp.shape[0] != 3 or self.rot.shape[0] != 3
                or self.rot.shape[1] != 3 or self.sp.shape[1] != 3 or self.sv.shape[1] != 3
                or self.sa.shape[1] != 3):
            raise ValueError(f"TrotKernel: the targets and the planner's arrays must hold {nf} "
                             "feet (swing arrays (feet, 3), base 3-vector and (3, 3) rotation)")

    def progress(self, double t, double period, double duty):
        """Per foot: swing progress u in [0, 1), or -1 in stance, at gait time ``t`` [s]
        (``TrotGait.swing_progress``), into :attr:`u`; returns how many feet lift off now
        (swinging, and in stance last tick)."""
        cdef Py_ssize_t i, nf = self.touchdown.shape[0]
        cdef double phase, u
        cdef int lifting = 0
        with nogil:
            phase = _mod1(t / period)
            for i in range(nf):
                u = _mod1(phase - (self.touchdown[i] - (1.0 - duty))) / (1.0 - duty)
                self.u_v[i] = u if u < 1.0 else -1.0
                if self.u_v[i] >= 0.0 and self.prev[i]:
                    lifting += 1
        return lifting

    def swing(self, double period, double duty, double step_height, double ground_z):
        """Stance flags and swing references of every foot at :attr:`u` into the targets.

        A foot with ``u < 0`` is in stance; a swinging one follows the spline from its
        lift-off point to a touchdown point ahead of its hip: the base reference moved on
        at :attr:`vel` [m/s] to touchdown, plus the foot's offset turned by the base
        rotation, plus half the stance travel, on the ground ``ground_z`` [m].  Writes the
        targets' ``stance``, ``swing_position`` / ``velocity`` / ``acceleration`` (feet, 3)
        [m, m/s, m/s^2] of swing feet, and the planner's last stance flags.
        """
        tg = self._tg
        b = self._bound
        if (tg.base_position is not b[0] or tg.base_rotation is not b[1] or tg.stance is not b[2]
                or tg.swing_position is not b[3] or tg.swing_velocity is not b[4]
                or tg.swing_acceleration is not b[5]):
            self._bind(tg)
        with nogil:
            _swing(self.u_v, period, duty, step_height, ground_z, self.land_depth,
                   self.land_fraction, self.lift_mix, self.bp, self.vel_v, self.rot,
                   self.offset, self.liftoff, self.stance, self.prev, self.sp, self.sv, self.sa)
