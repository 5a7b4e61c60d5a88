# cython: language_level=3
"""The trot's per-tick references, compiled (issue 11: trot at 1 kHz).

:class:`TrotKernel` computes what :meth:`gait.TrotGait.swing_progress` and
:meth:`gait.TrotGait.swing_reference` give :meth:`trot_planner.TrotPlanner.update`,
for every foot on buffers bound once (before: ~25 NumPy calls on 3-vectors per
swinging foot per tick).  The arithmetic is
the NumPy code's, operation for operation (``np.mod``'s sign rule, ``pow``
where it had ``**``), so the numbers agree to rounding.

:meth:`TrotKernel.tick` is the whole of ``TrotPlanner.update`` in one call
without the GIL: the speed slew, the base reference and its lead limit, the
swing progress, the lift-off points (forward kinematics of the compiled
dynamics at C level, on the lift-off ticks only) and the splines, and the
force split's lift-off weights (``force_split.liftoff_weights``).  Issue 11:
in the lockstep daemon those Python steps cost ~10-15 us of ``trot``'s tick
at p50 and ~50 us on a lift-off tick (cold caches between ticks make every
Python call and NumPy dispatch several times dearer than in a warm loop).
"""

import numpy as np

from libc.math cimport pow, sqrt

from servoloop.core_cy.dynamics._dynamics cimport Data, DataC, Model, ModelC, fk_c
from servoloop.controller.wholebody._liftoff cimport liftoff_weights_c, mod1


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
                 bint own_ground, double ground_z, double land_depth, double land_fraction,
                 double lift_mix,
                 const double[::1] base_position, const double[::1] vel,
                 const double[:, :] base_rotation, const double[:, ::1] offset,
                 const double[:, ::1] liftoff, unsigned char[::1] stance,
                 unsigned char[::1] prev_stance, double[:, ::1] swing_position,
                 double[:, ::1] swing_velocity, double[:, ::1] swing_acceleration) noexcept nogil:
    cdef Py_ssize_t i, k, nf = u_all.shape[0]
    cdef double T = (1.0 - duty) * period            # TrotGait.swing_time
    cdef double half_stance = 0.5 * (duty * period)  # 0.5 * TrotGait.stance_time
    cdef double u, left, s, ds, dds, d, gz
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
        # the ground this foot lands on: its own lift-off height (the planner's default), or
        # one height for every foot (seed 003's known surface)
        gz = liftoff[i, 2] if own_ground else ground_z
        target[2] = gz
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
        swing_position[i, 2] += gz


cdef class TrotKernel:
    """The trot planner's tick (:meth:`tick`), on buffers bound once.

    Parameters
    ----------
    touchdown : (feet,) landing phases; offset, liftoff : (feet, 3) the planner's arrays
        (``liftoff`` written by :meth:`tick` at a lift-off)
    prev_stance : (feet,) bool, the planner's last stance flags (updated in place)
    targets : the planner's :class:`Targets`; re-bound when one of its arrays is replaced
    robot : the planner's ``WholeBodyRobot`` (model, data, feet), for :meth:`tick`'s
        lift-off points; None: :meth:`tick` is not available
    heading : (3,) unit vector the base reference moves along (world) [-]
    """

    cdef readonly object u, vel
    cdef double[::1] u_v, vel_v, touchdown
    cdef const double[:, ::1] offset
    cdef double[:, ::1] liftoff
    cdef unsigned char[::1] prev
    cdef object _tg, _bound
    cdef double[::1] bp, bv
    cdef const double[:, :] rot
    cdef unsigned char[::1] stance
    cdef double[:, ::1] sp, sv, sa
    cdef double land_depth, land_fraction, lift_mix, horizon, wmax
    # tick(): the robot's compiled model and data, the feet's bodies and reference points
    cdef object _model, _data
    cdef ModelC* m
    cdef DataC* d
    cdef int[::1] bodies
    cdef double[:, ::1] centers
    cdef double[::1] radii
    cdef double hx, hy, hz
    # tick()'s q and weights buffers, bound while the same arrays come back
    cdef object _q, _w
    cdef const double[::1] q_v
    cdef double[::1] w_v

    def __init__(self, touchdown, offset, liftoff, prev_stance, targets, robot=None,
                 heading=(1.0, 0.0, 0.0)):
        from servoloop.controller.wholebody import force_split, gait

        self.touchdown = np.ascontiguousarray(touchdown, dtype=float)
        self.land_depth = gait.LAND_DEPTH
        self.land_fraction = gait.LAND_FRACTION
        self.lift_mix = gait.LIFT_MIX
        self.horizon = force_split.LIFTOFF_HORIZON_S
        self.wmax = force_split.LIFTOFF_WEIGHT_MAX
        nf = self.touchdown.shape[0]
        self.u = np.zeros(nf)
        self.u_v = self.u
        self.vel = np.zeros(3)
        self.vel_v = self.vel
        self.offset = offset
        self.liftoff = liftoff
        self.prev = prev_stance.view(np.uint8)
        self.hx, self.hy, self.hz = (float(h) for h in heading)
        if robot is not None:
            self._robot(robot)
        self._bind(targets)

    def _robot(self, robot):
        cdef Model model = robot.model
        cdef Data data = robot.data
        nf = self.touchdown.shape[0]
        if len(robot.feet) != nf:
            raise ValueError(f"TrotKernel: the robot has {len(robot.feet)} feet, the gait {nf}")
        self._model, self._data = model, data
        self.m, self.d = &model.c, &data.c
        self.bodies = np.array([f.body for f in robot.feet], dtype=np.intc)
        self.centers = np.array([f.center for f in robot.feet], dtype=float).reshape(nf, 3)
        self.radii = np.array([f.radius for f in robot.feet], dtype=float)

    def _bind(self, tg):
        self._tg = tg
        self._bound = (tg.base_position, tg.base_rotation, tg.stance, tg.swing_position,
                       tg.swing_velocity, tg.swing_acceleration, tg.base_velocity)
        self.bp = tg.base_position
        self.bv = tg.base_velocity
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
                or self.sa.shape[1] != 3 or self.bv.shape[0] != 3):
            raise ValueError(f"TrotKernel: the targets and the planner's arrays must hold {nf} "
                             "feet (swing arrays (feet, 3), base 3-vectors and (3, 3) rotation)")

    cdef bint _stale(self):
        # a Targets array replaced since _bind (a controller assigning a new one)
        tg = self._tg
        b = self._bound
        return (tg.base_position is not b[0] or tg.base_rotation is not b[1]
                or tg.stance is not b[2] or tg.swing_position is not b[3]
                or tg.swing_velocity is not b[4] or tg.swing_acceleration is not b[5]
                or tg.base_velocity is not b[6])

    cdef int _progress(self, double t, double period, double duty) noexcept nogil:
        cdef Py_ssize_t i, nf = self.touchdown.shape[0]
        cdef double phase, u
        cdef int lifting = 0
        phase = mod1(t / period)
        for i in range(nf):
            u = mod1(phase - (self.touchdown[i] - (1.0 - duty))) / (1.0 - duty)
            self.u_v[i] = u if u < 1.0 else -1.0
            if self.u_v[i] >= 0.0 and self.prev[i]:
                lifting += 1
        return lifting

    cdef void _liftoff_points(self) noexcept nogil:
        # robot.foot_position of every foot lifting off now (after fk_c): its centre in the
        # world, ``radius`` lower (where a ball touches)
        cdef Py_ssize_t i, k, nf = self.touchdown.shape[0]
        cdef const double* R
        cdef const double* p
        cdef const double* c
        for i in range(nf):
            if not (self.prev[i] and self.u_v[i] >= 0.0):
                continue
            R = &self.d.oR[9 * self.bodies[i]]
            p = &self.d.op[3 * self.bodies[i]]
            c = &self.centers[i, 0]
            for k in range(3):
                self.liftoff[i, k] = R[3 * k] * c[0] + R[3 * k + 1] * c[1] + R[3 * k + 2] * c[2] + p[k]
            self.liftoff[i, 2] -= self.radii[i]

    def tick(self, double t, t_prev, q, double speed, double speed_goal, double accel,
             double max_lead, double stand_time, double period, double duty, double step_height,
             ground_z, weights=None, double dt=0.0):
        """One tick of ``TrotPlanner.update`` into the targets; returns the new speed [m/s].

        Parameters
        ----------
        t : s since the trot began; t_prev : the last tick's ``t`` or None (first tick)
        q : (nq,) the state's configuration (a lift-off point is its foot's position)
        speed, speed_goal : m/s, the base reference's speed now and the one it slews to
        accel : m/s^2, the slew; max_lead : m, how far the reference may lead the base
        stand_time : s standing (all feet down) before the first step
        period, duty, step_height : the gait [s, -, m]
        ground_z : float [m] or None; the height every swing starts and lands at, or None:
            each foot's own lift-off height (``TrotPlanner.ground_z``)
        weights : (feet,) float64 or None; given: the force split's lift-off weights at gait
            time ``t - stand_time`` (``force_split.liftoff_weights``, tick ``dt`` [s]) into it

        Writes the targets' base position and velocity, stance and swing references, the
        planner's last stance flags and, at a lift-off, the planner's lift-off points.  A
        foot with swing progress ``u < 0`` (:attr:`u`, ``TrotGait.swing_progress``) is in
        stance; a swinging one follows the spline from its lift-off point to a touchdown
        point ahead of its hip: the base reference moved on at :attr:`vel` [m/s] to
        touchdown, plus the foot's offset turned by the base rotation, plus half the stance
        travel, on the ground: ``ground_z`` or the foot's lift-off height.
        """
        cdef double dtp, step, c, vx, vy, x, y, lx, ly, n, tgait
        cdef bint weigh = weights is not None
        cdef bint own_ground = ground_z is None
        cdef double gz = 0.0 if own_ground else <double>ground_z
        cdef Py_ssize_t i, nf = self.touchdown.shape[0]
        if self.m == NULL:
            raise ValueError("TrotKernel.tick: the kernel was made without a robot")
        if self._stale():
            self._bind(self._tg)
        if q is not self._q:
            self.q_v = q            # a buffer acquired once while the same array comes back
            if self.q_v.shape[0] < self.m.nq:
                self._q = None
                raise ValueError(f"TrotKernel.tick: expected q ({self.m.nq},), got "
                                 f"({self.q_v.shape[0]},)")
            self._q = q
        if weigh and weights is not self._w:
            self.w_v = weights
            if self.w_v.shape[0] != nf:
                self._w = None
                raise ValueError(f"TrotKernel.tick: expected weights ({nf},), got "
                                 f"({self.w_v.shape[0]},)")
            self._w = weights
        dtp = 0.0
        if t_prev is not None:
            dtp = t - <double>t_prev
            if not dtp > 0.0:       # max(0.0, t - t_prev): a clock step back (or NaN) is 0
                dtp = 0.0
        with nogil:
            # the speed slewed by accel: min(max(goal - speed, -step), step)
            step = accel * dtp
            c = speed_goal - speed
            if -step > c:
                c = -step
            if step < c:
                c = step
            speed += c
            vx = speed * self.hx
            vy = speed * self.hy
            self.vel_v[0] = vx
            self.vel_v[1] = vy
            self.vel_v[2] = speed * self.hz
            self.bv[0] = vx
            self.bv[1] = vy
            self.bv[2] = speed * self.hz
            # the reference moves on, at most max_lead ahead of the measured base
            x = self.bp[0] + vx * dtp
            y = self.bp[1] + vy * dtp
            lx = x - self.q_v[0]
            ly = y - self.q_v[1]
            n = sqrt(lx * lx + ly * ly)
            if n > max_lead:
                x = self.q_v[0] + lx * (max_lead / n)
                y = self.q_v[1] + ly * (max_lead / n)
            self.bp[0] = x
            self.bp[1] = y
            tgait = t - stand_time
            if tgait < 0.0:
                for i in range(nf):
                    self.stance[i] = True
            else:
                if self._progress(tgait, period, duty):
                    # a foot lifts off: its spline starts where it stands
                    fk_c(self.m, self.d, &self.q_v[0], NULL)
                    self._liftoff_points()
                _swing(self.u_v, period, duty, step_height, own_ground, gz, self.land_depth,
                       self.land_fraction, self.lift_mix, self.bp, self.vel_v, self.rot,
                       self.offset, self.liftoff, self.stance, self.prev, self.sp, self.sv,
                       self.sa)
            if weigh:
                liftoff_weights_c(self.touchdown, self.stance, tgait, period, duty, dt,
                                  self.horizon, self.wmax, self.w_v)
        return speed
