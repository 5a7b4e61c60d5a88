# cython: language_level=3
"""The base estimator's per-tick work, compiled (:class:`controller.base_estimator.BaseEstimator`).

One call of :meth:`BaseKernel.run` is one tick of the estimate stage's floating-base
half, in C with the GIL released: the attitude filter (the arithmetic of
:class:`controller.attitude.AttitudeFilter`), the compiled forward kinematics through
the dynamics kernel's C API (``fk_c``), the feet's positions, velocities and sole
heights, the contact test, the per-axis Kalman filter, and the outputs (the loop's
``BaseState`` arrays and the telemetry row).  Nothing is allocated per tick: every
array is made by the Python side once and handed over as a typed memoryview.

The operations run in the order of the NumPy implementation kept as the test oracle
(``tests/unit/controller/_base_estimator_reference.py``), so the results agree to
rounding (a 3-vector dot product may sum in another order than BLAS).

Layout of the geometry (all rows C-contiguous, base-frame metres):

- ``foot_body`` (nf,) body index of each foot, ``foot_p`` (nf, 3) its frame's origin
  on that body; ``foot_start`` (nf + 1,) ranges into ``pts`` (k, 3) / ``rad`` (k,),
  the foot's contact points (body frame) and sphere radii;
- ``other_body`` (no,) and ``other_start`` (no + 1,) the same for the rest of the
  robot's contact geometry (what it lies on: resting on it, its lowest point is the
  x, y anchor).
"""

from libc.math cimport asin, atan2, cos, fabs, isfinite, pow, sin, sqrt

from servoloop.core_cy.dynamics._dynamics cimport Data, DataC, Model, ModelC, fk_c

__all__ = ["BaseKernel"]

cdef double GRAVITY_Z = -9.81


cdef inline void qmul(const double* a, const double* b, double* out) noexcept nogil:
    """Hamilton product a * b of (x, y, z, w) quaternions (out may not alias a or b)."""
    out[0] = a[3] * b[0] + a[0] * b[3] + a[1] * b[2] - a[2] * b[1]
    out[1] = a[3] * b[1] - a[0] * b[2] + a[1] * b[3] + a[2] * b[0]
    out[2] = a[3] * b[2] + a[0] * b[1] - a[1] * b[0] + a[2] * b[3]
    out[3] = a[3] * b[3] - a[0] * b[0] - a[1] * b[1] - a[2] * b[2]


cdef inline void qexp(double wx, double wy, double wz, double* out) noexcept nogil:
    """Quaternion of the rotation vector (wx, wy, wz) [rad]."""
    cdef double a = sqrt(wx * wx + wy * wy + wz * wz)
    cdef double s
    if a < 1e-12:
        out[0], out[1], out[2], out[3] = 0.5 * wx, 0.5 * wy, 0.5 * wz, 1.0
        return
    s = sin(a / 2) / a
    out[0], out[1], out[2], out[3] = wx * s, wy * s, wz * s, cos(a / 2)


cdef inline void qrpy(double roll, double pitch, double yaw, double* out) noexcept nogil:
    """(x, y, z, w) of Rz(yaw) Ry(pitch) Rx(roll)."""
    cdef double cr = cos(roll / 2), sr = sin(roll / 2)
    cdef double cp = cos(pitch / 2), sp = sin(pitch / 2)
    cdef double cy = cos(yaw / 2), sy = sin(yaw / 2)
    out[0] = sr * cp * cy - cr * sp * sy
    out[1] = cr * sp * cy + sr * cp * sy
    out[2] = cr * cp * sy - sr * sp * cy
    out[3] = cr * cp * cy + sr * sp * sy


cdef inline double dot3(const double* a, const double* b) noexcept nogil:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


cdef class BaseKernel:
    """The estimator's state and per-tick arithmetic (see the module docstring).

    Parameters
    ----------
    model, data : core_cy.dynamics Model (floating base) and its Data (the FK workspace)
    jidx, vidx : (n,) intp, q / v index of each configured joint
    foot_body, foot_p, foot_start, pts, rad : the feet's geometry (module docstring)
    other_body, other_start, other_pts, other_rad : the rest of the contact geometry
    mount_M : (9,) board -> base rotation, row-major; mount_inv : (4,) base -> board quaternion
    gain : attitude filter gain (0, 1]
    dt : tick period, s
    contact_height : m; contact_speed : m/s; contact_lift : m; accel_noise, position_noise,
        velocity_noise : as :class:`~controller.base_estimator.BaseEstimator`
    stance_tau : s, time constant of each foot's stance height (tracked while it stands)
    q, v : (nq,), (nv,) FK inputs (q neutral); R : (3, 3) base -> world;
    p, vel : (3,) world position, velocity; quat : (4,) x, y, z, w; omega : (3,) rad/s base frame
    r, vrel : (nf, 3) foot points, and their soles' contact point velocities, rel. base, base axes;
        anchor : (nf, 2) touch-down x, y (moved with a rolling sole)
    stance : (nf,) uint8 (a view of the bool array); sole : (nf,) sole heights rel. base, world z
    ground : (nf,) m, each foot's sole world height while it stood (filtered)
    lifted : (nf,) uint8, the foot has left stance since the start (it then lands by ``ground``)
    rest_window : s, the physics gate's window: the trunk becomes the anchor only after this long
        of specific force within ``rest_accel`` g of 1 g and gyro under ``rest_gyro`` rad/s
    rest_speed : m/s, and the estimated velocity under this
    slide_speed : m/s, a foot horizontally faster (estimated, world) is not in stance, unless
        that leaves no foot down
    free_fall : g, specific force under which the robot is airborne (no contact correction,
        no trunk anchor)
    """

    cdef Model model
    cdef Data data
    cdef Py_ssize_t n, nf, no
    cdef Py_ssize_t[::1] jidx, vidx
    cdef int[::1] foot_body, foot_start, other_body, other_start
    cdef double[:, ::1] foot_p, pts, other_pts
    cdef double[::1] rad, other_rad
    cdef double M[9]
    cdef double mount_inv[4]
    cdef double gain, dt, h, vz_max, acc, rp, rv
    cdef double dt0, tau      # the tick period and STANCE_TAU_S (dt: this tick's step, see run)
    cdef double[::1] q, v, p, vel, quat, omega, sole
    cdef double[:, ::1] R, r, vrel, anchor, roll
    cdef unsigned char[::1] stance, lifted, cand, fast
    cdef double[::1] ground
    cdef double lift, land, alpha
    cdef double P[3]
    cdef double lowest
    # the lowest point of the other contact geometry (a trunk): its height, which body / point,
    # its place and velocity rel. base (base axes); resting: it is (within ``lift``) the
    # robot's lowest point, the robot lies on it; o_anchor: world x, y where it came to rest
    cdef double low_other
    cdef int o_body, o_k, o_k_prev
    cdef double oc[3]
    cdef double ovrel[3]
    cdef double o_anchor[2]
    cdef bint rest, touch
    # touch: the trunk, lowest in the kinematics, touches the ground (the robot is not in the
    # air): it holds the velocity (friction) and the height, a place only once at rest.
    # the physics gate of ``rest`` (a trunk lowest in the kinematics may still be in the air or
    # in its impact): ticks of ~1 g specific force and a still trunk in a row (capped at
    # rest_n, the window), the band (m/s^2) and gyro limit (rad/s) of that, and the specific
    # force (m/s^2) below which nothing holds the robot up (airborne: no contact correction)
    cdef long calm, rest_n
    cdef double calm_band, gyro_max, free_fall, speed_max
    # m/s, a foot's estimated horizontal speed at which it is not in stance (a sliding or
    # swinging foot, one touching down or lifting off)
    cdef double slide_max
    cdef bint in_air
    cdef bint has_quat, bound, outputs
    cdef const double[:] gyro, accel, rpy, position, velocity
    cdef double[::1] out_p, out_quat, out_v, out_w, telemetry
    cdef unsigned char[::1] out_contact
    #: ticks estimated (the first one starts the filter)
    cdef readonly long ticks
    #: True after the first good tick
    cdef readonly bint started

    def __init__(self, Model model, Data data, jidx, vidx, foot_body, foot_p, foot_start, pts, rad,
                 other_body, other_start, other_pts, other_rad, mount_M, mount_inv, double gain,
                 double dt, double contact_height, double contact_speed, double contact_lift,
                 double stance_tau, double accel_noise, double position_noise, double velocity_noise,
                 q, v, R, p, vel, quat, omega, r, vrel, anchor, stance, sole, ground, lifted,
                 double rest_window=0.02, double rest_accel=0.15, double rest_gyro=0.5,
                 double free_fall=0.3, double rest_speed=0.1, double slide_speed=0.05):
        cdef int k
        self.model, self.data = model, data
        self.jidx, self.vidx = jidx, vidx
        self.n = len(jidx)
        self.foot_body, self.foot_p, self.foot_start, self.pts, self.rad = foot_body, foot_p, foot_start, pts, rad
        self.nf = len(foot_body)
        self.other_body, self.other_start = other_body, other_start
        self.other_pts, self.other_rad = other_pts, other_rad
        self.no = len(other_body)
        for k in range(9):
            self.M[k] = mount_M[k]
        for k in range(4):
            self.mount_inv[k] = mount_inv[k]
        self.gain, self.dt = gain, dt
        self.h, self.vz_max = contact_height, contact_speed
        self.lift, self.land = contact_lift, 0.5 * contact_lift
        self.dt0, self.tau = dt, stance_tau
        self.alpha = min(1.0, dt / stance_tau) if stance_tau > 0 else 1.0
        self.acc = accel_noise ** 2
        self.rp, self.rv = position_noise ** 2, velocity_noise ** 2
        self.q, self.v, self.R, self.p, self.vel, self.quat, self.omega = q, v, R, p, vel, quat, omega
        self.r, self.vrel, self.anchor, self.stance, self.sole = r, vrel, anchor, stance, sole
        self.ground, self.lifted = ground, lifted
        # the contact test's per-foot scratch (made once: a tick allocates nothing)
        self.cand, self.fast = bytearray(self.nf), bytearray(self.nf)
        import numpy as np
        self.roll = np.zeros((self.nf, 2))
        self.P[0], self.P[1], self.P[2] = 1.0, 0.0, 1.0
        self.lowest = 0.0
        self.low_other = 0.0
        self.o_body = self.o_k = self.o_k_prev = -1
        self.rest = self.touch = False
        # the estimate starts from the robot at rest: the window counts as seen
        self.rest_n = max(1, <long>(rest_window / dt + 0.5))
        self.calm = self.rest_n
        self.calm_band = rest_accel * -GRAVITY_Z
        self.gyro_max = rest_gyro
        self.speed_max = rest_speed
        self.slide_max = slide_speed
        self.free_fall = free_fall * -GRAVITY_Z
        self.in_air = False
        for k in range(3):
            self.oc[k] = self.ovrel[k] = 0.0
        self.o_anchor[0] = self.o_anchor[1] = 0.0
        self.has_quat = self.bound = self.outputs = False
        self.ticks = 0
        self.started = False

    def bind(self, gyro, accel, rpy, position, velocity) -> None:
        """The inputs read each tick: (3,) gyro [rad/s], accel [m/s^2], rpy [rad] in board
        axes, (n,) joint positions [rad] and velocities [rad/s] in config order."""
        self.gyro, self.accel, self.rpy = gyro, accel, rpy
        self.position, self.velocity = position, velocity
        self.bound = True

    def bind_outputs(self, position, quaternion, linear_velocity, angular_velocity, contact,
                     telemetry) -> None:
        """The outputs written each good tick: BaseState's arrays ((3,), (4,), (3,), (3,),
        (nf,) uint8 view of its bool contact) and the telemetry row (13 + nf,)."""
        self.out_p, self.out_quat, self.out_v, self.out_w = position, quaternion, linear_velocity, angular_velocity
        self.out_contact, self.telemetry = contact, telemetry
        self.outputs = True

    @property
    def covariance(self):
        """The shared [pp, pv, vv] covariance (m^2, m^2/s, m^2/s^2)."""
        return [self.P[0], self.P[1], self.P[2]]

    @property
    def resting(self):
        """True while the robot rests on its other contact geometry (a trunk): that is
        (within ``contact_lift``) its lowest point, and the estimate's x, y anchor."""
        return bool(self.rest)

    @property
    def lowest(self):
        """m, world z of the robot's lowest point rel. the base (this tick)."""
        return self.lowest

    @property
    def airborne(self):
        """True while the specific force says nothing holds the robot (free fall, this tick)."""
        return bool(self.in_air)

    @property
    def has_orientation(self):
        """False until the attitude filter has seen its first reading."""
        return bool(self.has_quat)

    def run(self, double elapsed=0.0) -> bool:
        """One tick; False (nothing but telemetry's ``base.valid`` changed) when an input is NaN.

        ``elapsed``: s since the last estimate (0: the tick period).  After a skipped or
        stale tick the readings are two or more periods apart; integrated over one period,
        each such tick lost that share of the motion (the quadruped's stand-up under load)."""
        cdef bint ok
        if not (self.bound and self.outputs):
            return False
        self.dt = elapsed if elapsed > 0 else self.dt0
        self.alpha = min(1.0, self.dt / self.tau) if self.tau > 0 else 1.0
        with nogil:
            ok = self._tick()
        return ok

    # ------------------------------------------------------------------
    cdef bint _finite(self) noexcept nogil:
        # a NaN anywhere makes the sum NaN: one check, as the NumPy version
        cdef double s = 0.0
        cdef Py_ssize_t i
        for i in range(3):
            s += self.gyro[i] + self.accel[i] + self.rpy[i]
        for i in range(self.n):
            s += self.position[i] + self.velocity[i]
        return isfinite(s)

    cdef bint _tick(self) noexcept nogil:
        if not self._finite():
            self.telemetry[12] = 0.0
            return False
        self._attitude()
        self._rotation()
        self._legs()
        self._contacts()
        if not self.started:
            self._start()
        else:
            self._predict()
            self._correct()
        self.ticks += 1
        self._outputs()
        return True

    cdef inline void _to_base(self, double a, double b, double c, double* out) noexcept nogil:
        cdef double* m = self.M
        out[0] = m[0] * a + m[1] * b + m[2] * c
        out[1] = m[3] * a + m[4] * b + m[5] * c
        out[2] = m[6] * a + m[7] * b + m[8] * c

    cdef void _attitude(self) noexcept nogil:
        """AttitudeFilter.update: gyro propagation pulled towards the board's registers."""
        cdef double w[3]
        cdef double rq[4]
        cdef double meas[4]
        cdef double d[4]
        cdef double q[4]
        cdef double c[4]
        cdef double e[4]
        cdef double k, nrm, dt = self.dt
        self._to_base(self.gyro[0], self.gyro[1], self.gyro[2], w)
        self.omega[0], self.omega[1], self.omega[2] = w[0], w[1], w[2]
        qrpy(self.rpy[0], self.rpy[1], self.rpy[2], rq)
        qmul(rq, self.mount_inv, meas)
        if not self.has_quat:
            self.quat[0], self.quat[1], self.quat[2], self.quat[3] = meas[0], meas[1], meas[2], meas[3]
            self.has_quat = True
            return
        c[0], c[1], c[2], c[3] = self.quat[0], self.quat[1], self.quat[2], self.quat[3]
        qexp(w[0] * dt, w[1] * dt, w[2] * dt, d)
        qmul(c, d, q)
        # error rotation (base frame) from the prediction to the registers' orientation
        c[0], c[1], c[2], c[3] = -q[0], -q[1], -q[2], q[3]
        qmul(c, meas, e)
        if e[3] < 0:
            e[0], e[1], e[2], e[3] = -e[0], -e[1], -e[2], -e[3]
        k = 2.0 * self.gain
        qexp(k * e[0], k * e[1], k * e[2], d)
        qmul(q, d, c)
        nrm = sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2] + c[3] * c[3])
        self.quat[0], self.quat[1], self.quat[2], self.quat[3] = c[0] / nrm, c[1] / nrm, c[2] / nrm, c[3] / nrm

    cdef void _rotation(self) noexcept nogil:
        cdef double x = self.quat[0], y = self.quat[1], z = self.quat[2], w = self.quat[3]
        self.R[0, 0], self.R[0, 1], self.R[0, 2] = 1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)
        self.R[1, 0], self.R[1, 1], self.R[1, 2] = 2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)
        self.R[2, 0], self.R[2, 1], self.R[2, 2] = 2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)

    cdef double _lowest_point(self, int body, const double* Rz, const double* pts,
                              const double* rad, int k0, int k1, int* kmin) noexcept nogil:
        """Lowest sole (min over points of height - radius) of one body, world z rel. base;
        ``kmin``: which point (the first of equals)."""
        cdef const DataC* d = &self.data.c
        cdef const double* oR = d.oR + 9 * body
        cdef double w[3]
        cdef double z, low = 0.0
        cdef int j, k
        for j in range(3):          # Rz @ oR: the body axes' world z components
            w[j] = Rz[0] * oR[j] + Rz[1] * oR[3 + j] + Rz[2] * oR[6 + j]
        for k in range(k0, k1):
            z = pts[3 * k] * w[0] + pts[3 * k + 1] * w[1] + pts[3 * k + 2] * w[2] - rad[k]
            if k == k0 or z < low:
                low = z
                kmin[0] = k
        return low + dot3(Rz, d.op + 3 * body)

    cdef void _legs(self) noexcept nogil:
        """Foot positions, their soles' velocities rel. base, sole heights (world z rel. base)."""
        cdef const ModelC* m = &self.model.c
        cdef DataC* d = &self.data.c
        cdef Py_ssize_t i
        cdef int b, kl, ko
        cdef double Rz[3]
        cdef double c[3]
        cdef double e[3]
        cdef const double* oR
        cdef const double* op
        cdef const double* s
        cdef double r0, r1, r2, low, z
        for i in range(self.n):
            self.q[self.jidx[i]] = self.position[i]
            self.v[self.vidx[i]] = self.velocity[i]
        self.v[3], self.v[4], self.v[5] = self.omega[0], self.omega[1], self.omega[2]
        # one pass: placements and spatial velocities of every body, base at the origin
        # (so "world" is the base frame) moving with the gyro's rate and the joints' velocities
        fk_c(m, d, &self.q[0], &self.v[0])
        Rz[0], Rz[1], Rz[2] = self.R[2, 0], self.R[2, 1], self.R[2, 2]
        for i in range(self.nf):
            b = self.foot_body[i]
            oR, op = d.oR + 9 * b, d.op + 3 * b
            r0 = dot3(oR, &self.foot_p[i, 0]) + op[0]
            r1 = dot3(oR + 3, &self.foot_p[i, 0]) + op[1]
            r2 = dot3(oR + 6, &self.foot_p[i, 0]) + op[2]
            self.r[i, 0], self.r[i, 1], self.r[i, 2] = r0, r1, r2
            self.sole[i] = self._lowest_point(b, Rz, &self.pts[0, 0], &self.rad[0], self.foot_start[i],
                                              self.foot_start[i + 1], &kl)
            # a ball foot's contact point (the bottom of its sphere): what stands still in
            # stance.  The ball rolls as the leg sweeps: its centre moves by radius x angle
            # (~0.02 m/s in a 0.1 m/s trot) while the contact point holds.  A foot of several
            # points (a flat sole's corners) keeps its foot point: which corner is lowest
            # flickers on a flat sole (and the humanoid's walk fell with it)
            if self.foot_start[i + 1] - self.foot_start[i] == 1:
                kl = self.foot_start[i]
                c[0] = dot3(oR, &self.pts[kl, 0]) + op[0] - self.rad[kl] * Rz[0]
                c[1] = dot3(oR + 3, &self.pts[kl, 0]) + op[1] - self.rad[kl] * Rz[1]
                c[2] = dot3(oR + 6, &self.pts[kl, 0]) + op[2] - self.rad[kl] * Rz[2]
            else:
                c[0], c[1], c[2] = r0, r1, r2
            # its velocity: spatial velocity (at the origin) moved to the point
            s = d.vw + 6 * b
            self.vrel[i, 0] = s[0] + s[4] * c[2] - s[5] * c[1]
            self.vrel[i, 1] = s[1] + s[5] * c[0] - s[3] * c[2]
            self.vrel[i, 2] = s[2] + s[3] * c[1] - s[4] * c[0]
            # the foot point's velocity relative to the contact point (world x, y): where the
            # foot point goes while the sole rolls on a held contact
            e[0] = s[4] * (r2 - c[2]) - s[5] * (r1 - c[1])
            e[1] = s[5] * (r0 - c[0]) - s[3] * (r2 - c[2])
            e[2] = s[3] * (r1 - c[1]) - s[4] * (r0 - c[0])
            self.roll[i, 0] = self.R[0, 0] * e[0] + self.R[0, 1] * e[1] + self.R[0, 2] * e[2]
            self.roll[i, 1] = self.R[1, 0] * e[0] + self.R[1, 1] * e[1] + self.R[1, 2] * e[2]
        low = self.sole[0]
        for i in range(1, self.nf):
            if self.sole[i] < low:
                low = self.sole[i]
        for i in range(self.no):
            z = self._lowest_point(self.other_body[i], Rz, &self.other_pts[0, 0], &self.other_rad[0],
                                   self.other_start[i], self.other_start[i + 1], &ko)
            if i == 0 or z < self.low_other:
                self.low_other, self.o_body, self.o_k = z, self.other_body[i], ko
            if z < low:
                low = z
        self.lowest = low
        if self.no > 0:
            # the other geometry's lowest point (a box corner, a sphere's bottom) and its velocity
            # rel. base: what holds still while the robot lies on it
            b, kl = self.o_body, self.o_k
            oR, op = d.oR + 9 * b, d.op + 3 * b
            c[0] = dot3(oR, &self.other_pts[kl, 0]) + op[0] - self.other_rad[kl] * Rz[0]
            c[1] = dot3(oR + 3, &self.other_pts[kl, 0]) + op[1] - self.other_rad[kl] * Rz[1]
            c[2] = dot3(oR + 6, &self.other_pts[kl, 0]) + op[2] - self.other_rad[kl] * Rz[2]
            s = d.vw + 6 * b
            self.oc[0], self.oc[1], self.oc[2] = c[0], c[1], c[2]
            self.ovrel[0] = s[0] + s[4] * c[2] - s[5] * c[1]
            self.ovrel[1] = s[1] + s[5] * c[0] - s[3] * c[2]
            self.ovrel[2] = s[2] + s[3] * c[1] - s[4] * c[0]

    cdef inline void _world_xy(self, Py_ssize_t i, double* out) noexcept nogil:
        """R @ r_i, x and y: foot i's horizontal offset from the base in world axes."""
        out[0] = self.R[0, 0] * self.r[i, 0] + self.R[0, 1] * self.r[i, 1] + self.R[0, 2] * self.r[i, 2]
        out[1] = self.R[1, 0] * self.r[i, 0] + self.R[1, 1] * self.r[i, 1] + self.R[1, 2] * self.r[i, 2]

    cdef void _contacts(self) noexcept nogil:
        cdef double low = self.lowest     # the lowest point of the robot is on the ground
        cdef double h = self.h, vmax = self.vz_max, above, vx, vy, vz, rel, zw
        cdef double t[2]
        cdef bint st, now
        cdef double sp2
        # the slowest class of horizontal speed a candidate foot is in: 0 under slide_speed,
        # 1 under contact_speed, 2 faster (3: no candidate)
        cdef unsigned char slowest = 3
        # the other geometry (a trunk) is, in the kinematics, the robot's lowest point
        cdef bint low_trunk = self.no > 0 and self.low_other - low < self.lift
        cdef bint rest, touch
        cdef double f = sqrt(self.accel[0] * self.accel[0] + self.accel[1] * self.accel[1]
                             + self.accel[2] * self.accel[2])
        cdef double w = sqrt(self.gyro[0] * self.gyro[0] + self.gyro[1] * self.gyro[1]
                             + self.gyro[2] * self.gyro[2])
        cdef Py_ssize_t i
        # what physics says of the trunk: at rest on the ground it feels ~1 g and does not
        # turn; falling or bouncing (legs folded, the trunk already the lowest point) it feels
        # ~0 g, in its impacts several g; and the estimate has it still.  Only after
        # ``rest_n`` calm ticks in a row is it at rest (taken so at the first touch, the
        # anchor held a zero velocity and the ground's height mid-bounce)
        if (fabs(f + GRAVITY_Z) < self.calm_band and w < self.gyro_max
                and self.vel[0] * self.vel[0] + self.vel[1] * self.vel[1] + self.vel[2] * self.vel[2]
                < self.speed_max * self.speed_max):
            if self.calm < self.rest_n:
                self.calm += 1
        else:
            self.calm = 0
        self.in_air = f < self.free_fall
        touch = low_trunk and not self.in_air
        rest = touch and (self.rest or self.calm >= self.rest_n)
        # lying on the other geometry (a trunk), the feet are measured against the same
        # ground with the same kinematics: a foot is down within ``lift`` of it, not within
        # the 10 mm band (the quadruped's front feet hang 9 mm above the floor as the
        # stand-up starts; taken as stance they pulled the height 8 mm down)
        if low_trunk:
            h = self.lift
        for i in range(self.nf):
            st = self.stance[i] != 0
            above = self.sole[i] - low
            zw = self.p[2] + self.sole[i]     # the sole's estimated world height
            rel = zw - self.ground[i]
            # stance: near the ground, and not rising or falling fast (a foot lifting off or
            # about to land passes through the height band)
            vx = self.vel[0] + (self.R[0, 0] * self.vrel[i, 0] + self.R[0, 1] * self.vrel[i, 1]
                                + self.R[0, 2] * self.vrel[i, 2])
            vy = self.vel[1] + (self.R[1, 0] * self.vrel[i, 0] + self.R[1, 1] * self.vrel[i, 1]
                                + self.R[1, 2] * self.vrel[i, 2])
            vz = self.vel[2] + (self.R[2, 0] * self.vrel[i, 0] + self.R[2, 1] * self.vrel[i, 1]
                                + self.R[2, 2] * self.vrel[i, 2])
            now = above < (1.5 * h if st else h) and fabs(vz) < vmax
            # sharper, against the foot's own stance height (its estimated world z, filtered
            # while it stands: a static attitude or kinematic error cancels, and it does not
            # jump when another foot becomes the lowest point): it lifts off when it rises
            # ``lift`` above it; once it has left stance it lands within ``land`` of it (or
            # of the robot's lowest point)
            if st:
                now = now and rel < self.lift
            elif self.lifted[i]:
                now = now and (rel < self.land or above < self.land)
            sp2 = vx * vx + vy * vy
            self.fast[i] = 0 if sp2 < self.slide_max * self.slide_max else (1 if sp2 < vmax * vmax else 2)
            self.cand[i] = now
            if now and self.fast[i] < slowest:
                slowest = self.fast[i]
        for i in range(self.nf):
            st = self.stance[i] != 0
            # nor moving horizontally (a trot's swing foot skims the ground at ~1 m/s
            # within the height band; a foot lifting off or touching down sweeps at up to
            # 0.3 m/s through its first and last 10-20 ms of the band, and each such tick
            # took its speed off the legs' velocity: 6 mm/s short in a 0.1 m/s trot).  Only
            # the slowest class there is: under ``slide_speed``, else under
            # ``contact_speed``, else every candidate (rather than no foot down: the velocity
            # estimate itself may be off then, and only the feet correct it)
            now = self.cand[i] != 0 and self.fast[i] <= slowest
            zw = self.p[2] + self.sole[i]
            if now and st and touch:
                self.ground[i] += self.alpha * (zw - self.ground[i])
                # the trunk holds the robot (and x, y) while it lies: a foot pushing it up
                # slides (the quadruped's front feet at 0.05 m/s); it stands where it is
                # when the trunk lifts off
                self._world_xy(i, t)
                self.anchor[i, 0], self.anchor[i, 1] = self.p[0] + t[0], self.p[1] + t[1]
            elif now and st:
                self.ground[i] += self.alpha * (zw - self.ground[i])
                # the touch-down place moves with the rolling sole (the contact point holds)
                self.anchor[i, 0] += self.dt * self.roll[i, 0]
                self.anchor[i, 1] += self.dt * self.roll[i, 1]
            elif now:              # touch-down: remember where (world x, y) and how high
                self._world_xy(i, t)
                self.anchor[i, 0], self.anchor[i, 1] = self.p[0] + t[0], self.p[1] + t[1]
                self.ground[i] = zw
            elif st:
                self.lifted[i] = 1
            self.stance[i] = now
        if touch and not self.touch:
            # the trunk comes down: its impacts clip the accelerometer (+-2 g), what the filter
            # integrates through them is no guide, the trunk is; start afresh
            self.P[0], self.P[1], self.P[2] = 1e-4, 0.0, 1e-2
        # the other geometry's resting point: where (world x, y) it came to rest, again when
        # another of its points becomes the lowest (a flat trunk's corners take turns).  Only
        # touching (an impact, a bounce), it holds no place yet: the anchor follows the
        # estimate, the trunk corrects the height and the velocity (friction holds it)
        if touch and not (self.rest and rest and self.o_k == self.o_k_prev):
            self.o_anchor[0] = self.p[0] + (self.R[0, 0] * self.oc[0] + self.R[0, 1] * self.oc[1]
                                            + self.R[0, 2] * self.oc[2])
            self.o_anchor[1] = self.p[1] + (self.R[1, 0] * self.oc[0] + self.R[1, 1] * self.oc[1]
                                            + self.R[1, 2] * self.oc[2])
        self.rest, self.touch = rest, touch
        self.o_k_prev = self.o_k

    cdef void _predict(self) noexcept nogil:
        cdef double b[3]
        cdef double dt = self.dt, a0, a1, a2, hh, p0, p1, p2, v0, v1, v2, pp, pv, vv, q
        self._to_base(self.accel[0], self.accel[1], self.accel[2], b)
        a0 = self.R[0, 0] * b[0] + self.R[0, 1] * b[1] + self.R[0, 2] * b[2]
        a1 = self.R[1, 0] * b[0] + self.R[1, 1] * b[1] + self.R[1, 2] * b[2]
        a2 = self.R[2, 0] * b[0] + self.R[2, 1] * b[1] + self.R[2, 2] * b[2]
        a2 += GRAVITY_Z
        hh = 0.5 * dt * dt
        p0, p1, p2 = self.p[0], self.p[1], self.p[2]
        v0, v1, v2 = self.vel[0], self.vel[1], self.vel[2]
        self.p[0], self.p[1], self.p[2] = p0 + (v0 * dt + hh * a0), p1 + (v1 * dt + hh * a1), p2 + (v2 * dt + hh * a2)
        self.vel[0], self.vel[1], self.vel[2] = v0 + a0 * dt, v1 + a1 * dt, v2 + a2 * dt
        pp, pv, vv = self.P[0], self.P[1], self.P[2]
        q = self.acc
        self.P[0] = pp + 2 * dt * pv + dt * dt * vv + q * pow(dt, 4) / 4
        self.P[1] = pv + dt * vv + q * pow(dt, 3) / 2
        self.P[2] = vv + q * dt * dt

    cdef void _correct(self) noexcept nogil:
        cdef Py_ssize_t i, ax
        cdef int n = 0
        cdef double px = 0.0, py = 0.0, pz = 0.0, vx = 0.0, vy = 0.0, vz = 0.0
        cdef double t[2]
        cdef double t2, pp, pv, vv, rp, rv, a, b, dd, det, ia, ib, idd, k11, k12, k21, k22
        cdef double zp, zv, ep, ev, pl, vl
        cdef double z[6]
        if self.touch:
            # lying on the trunk: it holds still (x, y where it came to rest, no velocity)
            # and its lowest point is on the ground; the feet, if down, may slide.  Touching,
            # not yet at rest: the anchor is where the estimate is (no x, y information)
            px = self.o_anchor[0] - (self.R[0, 0] * self.oc[0] + self.R[0, 1] * self.oc[1]
                                     + self.R[0, 2] * self.oc[2])
            py = self.o_anchor[1] - (self.R[1, 0] * self.oc[0] + self.R[1, 1] * self.oc[1]
                                     + self.R[1, 2] * self.oc[2])
            pz = -self.lowest
            vx = -(self.R[0, 0] * self.ovrel[0] + self.R[0, 1] * self.ovrel[1] + self.R[0, 2] * self.ovrel[2])
            vy = -(self.R[1, 0] * self.ovrel[0] + self.R[1, 1] * self.ovrel[1] + self.R[1, 2] * self.ovrel[2])
            vz = -(self.R[2, 0] * self.ovrel[0] + self.R[2, 1] * self.ovrel[1] + self.R[2, 2] * self.ovrel[2])
            n = 1
        elif self.in_air:
            return          # nothing touches the ground: no contact to correct from
        else:
            for i in range(self.nf):
                n += self.stance[i] != 0
            if n == 0:
                # no foot down, not lying: only the height is known (the lowest point on the ground)
                self._correct_height()
                return
            for i in range(self.nf):
                if not self.stance[i]:
                    continue
                self._world_xy(i, t)
                px += self.anchor[i, 0] - t[0]
                py += self.anchor[i, 1] - t[1]
                pz -= self.sole[i]
                vx -= self.R[0, 0] * self.vrel[i, 0] + self.R[0, 1] * self.vrel[i, 1] + self.R[0, 2] * self.vrel[i, 2]
                vy -= self.R[1, 0] * self.vrel[i, 0] + self.R[1, 1] * self.vrel[i, 1] + self.R[1, 2] * self.vrel[i, 2]
                t2 = self.R[2, 0] * self.vrel[i, 0] + self.R[2, 1] * self.vrel[i, 1] + self.R[2, 2] * self.vrel[i, 2]
                vz -= t2
        # 2x2 Kalman update, H = I: K = P (P + Rm)^-1, shared by the three axes
        pp, pv, vv = self.P[0], self.P[1], self.P[2]
        rp, rv = self.rp / n, self.rv / n
        a, b, dd = pp + rp, pv, vv + rv
        det = a * dd - b * b
        ia, ib, idd = dd / det, -b / det, a / det
        k11, k12 = pp * ia + pv * ib, pp * ib + pv * idd
        k21, k22 = pv * ia + vv * ib, pv * ib + vv * idd
        z[0], z[1], z[2], z[3], z[4], z[5] = px / n, vx / n, py / n, vy / n, pz / n, vz / n
        for ax in range(3):
            zp, zv = z[2 * ax], z[2 * ax + 1]
            pl, vl = self.p[ax], self.vel[ax]
            ep, ev = zp - pl, zv - vl
            self.p[ax] = pl + (k11 * ep + k12 * ev)
            self.vel[ax] = vl + (k21 * ep + k22 * ev)
        # P = (I - K) P
        self.P[0] = (1 - k11) * pp - k12 * pv
        self.P[1] = (1 - k11) * pv - k12 * vv
        self.P[2] = -k21 * pv + (1 - k22) * vv

    cdef void _correct_height(self) noexcept nogil:
        """Scalar Kalman update of z alone from the robot's lowest point resting on z = 0."""
        cdef double pp = self.P[0], pv = self.P[1]
        cdef double k1 = pp / (pp + self.rp), k2 = pv / (pp + self.rp)
        cdef double e = -self.lowest - self.p[2]
        self.p[2] += k1 * e
        self.vel[2] += k2 * e     # P stays: it is shared with x and y, which saw nothing

    cdef void _start(self) noexcept nogil:
        """First good tick: the robot rests with its lowest point on the ground, x = y = 0."""
        cdef Py_ssize_t i
        cdef double t[2]
        self.p[0], self.p[1], self.p[2] = 0.0, 0.0, -self.lowest
        self.vel[0], self.vel[1], self.vel[2] = 0.0, 0.0, 0.0
        self.P[0], self.P[1], self.P[2] = 1e-4, 0.0, 1e-2
        for i in range(self.nf):
            self._world_xy(i, t)
            self.anchor[i, 0], self.anchor[i, 1] = t[0], t[1]
            self.ground[i] = self.p[2] + self.sole[i]      # where the contact test found it
        self.started = True

    cdef void _outputs(self) noexcept nogil:
        cdef Py_ssize_t i
        cdef double x = self.quat[0], y = self.quat[1], z = self.quat[2], w = self.quat[3], s
        for i in range(3):
            self.out_p[i] = self.p[i]
            # R^T v: the velocity in base axes (BaseState's layout)
            self.out_v[i] = self.R[0, i] * self.vel[0] + self.R[1, i] * self.vel[1] + self.R[2, i] * self.vel[2]
            self.out_w[i] = self.omega[i]
            self.telemetry[i] = self.p[i]
            self.telemetry[6 + i] = self.vel[i]
            self.telemetry[9 + i] = self.omega[i]
        for i in range(4):
            self.out_quat[i] = self.quat[i]
        for i in range(self.nf):
            self.out_contact[i] = self.stance[i]
            self.telemetry[13 + i] = 1.0 if self.stance[i] else 0.0
        # roll, pitch, yaw (ZYX), as attitude.quat_rpy
        self.telemetry[3] = atan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
        s = 2 * (w * y - z * x)
        self.telemetry[4] = asin(-1.0 if s < -1.0 else (1.0 if s > 1.0 else s))
        self.telemetry[5] = atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
        self.telemetry[12] = 1.0
