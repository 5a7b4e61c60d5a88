"""Test oracle: the base estimator as NumPy and Python floats (before it was compiled).

This is ``controller/base_estimator.py`` as it stood before its per-tick work moved into
``controller/_base_estimator.pyx``; the oracle test feeds both the same inputs and
requires the same outputs to rounding.  Config handling and the default feet come from
the production module (they are not what is compared).  The contact test has the
sharper lift-off / landing rule added with the compilation, and since issue 11 the horizontal
speed test and the soles' contact points (rolling ball feet), the same rules in NumPy.
"""

from __future__ import annotations

import math

import numpy as np

from servoloop.controller.attitude import AttitudeFilter, quat_rpy
from servoloop.controller.base_estimator import (
    FREE_FALL_G,
    REST_ACCEL_G,
    REST_GYRO,
    REST_SPEED,
    REST_WINDOW_S,
    STANCE_TAU_S,
    _contact_points,
    _link_names,
    default_feet,
)
from servoloop.controller.controllers import BaseState
from servoloop.controller.errors import ConfigError
from servoloop.controller.telemetry import BASE_COLUMNS

__all__ = ["ReferenceEstimator"]

GRAVITY_Z = -9.81


class _Foot:
    """One foot's precomputed geometry and per-tick buffers."""

    def __init__(self, link, model, pts):
        self.link = link
        self.body, R, p = model.frame_placement(link)
        self.R_frame, self.p_frame = R, p
        mine = [k for k in range(len(pts)) if pts.body[k] == self.body and pts.names[k].split(":")[0] == link]
        if not mine:
            mine = [k for k in range(len(pts)) if pts.body[k] == self.body]
        self.points = np.ascontiguousarray(pts.position[mine]) if mine else p[None].copy()
        self.radius = np.ascontiguousarray(pts.radius[mine]) if mine else np.zeros(1)
        self.r = np.zeros(3)          # foot point rel. base, base axes
        self.vrel = np.zeros(3)       # its velocity rel. base, base axes
        self.anchor = np.zeros(2)     # world x, y where it touched down
        self.roll = np.zeros(2)       # m/s, world x, y: the foot point's motion as its sole rolls
        self._z = np.zeros(len(self.radius))
        self.one_point = len(self.radius) == 1   # a ball foot: its sole is its one point (no reduction)
        self._w = np.zeros(3)


class ReferenceEstimator:
    """Fills a :class:`~controller.controllers.BaseState` in place each tick.

    Parameters
    ----------
    cfg : RobotConfig with ``imu`` and a floating-base ``model``
    base : BaseState, the loop's (``JointState.base``)
    position, velocity : (n,) joint readings (rad, rad/s), config order, filled by the joint map
    dt : tick period, s
    feet : link names (default :func:`default_feet`)
    contact_height : m, sole height above the robot's lowest point that still counts as stance
    contact_speed : m/s, vertical foot speed (estimated, world) above which a foot is not in stance
    slide_speed : m/s, horizontal foot speed (estimated, world) above which a foot is not in
        stance (a swing foot skimming the ground, one touching down or lifting off); the test
        gives way when it would leave no foot down
    accel_noise, position_noise, velocity_noise : filter noise (m/s^2 per axis; m and m/s per
        stance foot)

    Raises
    ------
    ConfigError
        No URDF, an unknown foot link, an IMU on another link than the base.
    """

    def __init__(self, cfg, base: BaseState, position: np.ndarray, velocity: np.ndarray, dt: float,
                 feet=None, contact_height: float = 0.01, contact_speed: float = 0.3, contact_lift: float = 0.002,
                 slide_speed: float = 0.05,
                 accel_noise: float = 0.5, position_noise: float = 0.005, velocity_noise: float = 0.05) -> None:
        from servoloop.core_cy.dynamics import Data, Model, forward_kinematics

        self._fk = forward_kinematics

        urdf = cfg.urdf_path()
        if urdf is None:
            raise ConfigError("imu: the base estimator needs the robot's URDF (model.urdf or model.name)",
                              cfg.source, "model")
        links = _link_names(urdf)
        imu = cfg.imu
        if imu.link is not None and imu.link != links[0]:
            raise ConfigError(f"imu.link {imu.link!r}: only the base link {links[0]!r} is supported",
                              cfg.source, "imu.link")
        self.model = model = Model.from_urdf(str(urdf), floating_base=True, mimic=cfg.model.mimic)
        self.data = Data(model)
        names = list(model.joint_names)[1:]             # q order after the free-flyer
        missing = [j for j in cfg.joint_names if j not in names]
        if missing:
            raise ConfigError(f"joints {missing} are not in {urdf}", cfg.source, "servos")
        self._jidx = np.array([7 + names.index(j) for j in cfg.joint_names], dtype=np.intp)
        self._vidx = self._jidx - 1
        feet = tuple(feet) if feet else default_feet(cfg, model, self.data)
        unknown = [f for f in feet if f not in links]
        if unknown or not feet:
            raise ConfigError(f"base estimator feet {list(unknown) or 'none found'}: not links of {urdf.name} "
                              "(feet are links with collision spheres/boxes or simulation.contacts)",
                              cfg.source, "simulation.contacts")
        pts = _contact_points(urdf, cfg, set(feet))
        self.feet = [_Foot(f, model, pts) for f in feet]
        # the rest of the robot's contact geometry (a trunk, shins, arms): what it lies on
        # when no foot is down; per body, points (k, 3) in the body frame and radii (k,)
        allpts = _contact_points(urdf, cfg, None)
        foot_bodies = {f.body for f in self.feet}
        self._others = []
        self._o_start = []      # each body's first point in the kernel's flat list
        for b in sorted(set(int(x) for x in allpts.body) - foot_bodies):
            k = allpts.body == b
            self._o_start.append(sum(len(x[2]) for x in self._others))
            self._others.append((b, np.ascontiguousarray(allpts.position[k]), allpts.radius[k].copy(),
                                 np.zeros(int(k.sum()))))
        self.base = base
        base.feet = tuple(feet)
        base.contact = np.zeros(len(feet), dtype=bool)
        self.position, self.velocity = position, velocity
        self.dt = self._dt0 = float(dt)
        self.contact_height = float(contact_height)
        self.contact_speed = float(contact_speed)
        self.slide_speed = float(slide_speed)
        self.contact_lift = float(contact_lift)
        self._alpha = min(1.0, self.dt / STANCE_TAU_S)
        self.ground = np.zeros(len(feet))
        self.lifted = np.zeros(len(feet), dtype=bool)
        self.attitude = AttitudeFilter(imu.rotation_rpy)
        self._q = model.neutral()
        self._v = np.zeros(model.nv)
        self.R = np.eye(3)
        self.p = np.zeros(3)           # world position, m
        self.v = np.zeros(3)           # world velocity, m/s
        self.P = [1.0, 0.0, 1.0]       # shared covariance [pp, pv, vv]
        self._acc = accel_noise ** 2
        self._rp, self._rv = position_noise ** 2, velocity_noise ** 2
        self._stance = np.zeros(len(feet), dtype=bool)
        self._sole = np.zeros(len(feet))
        self._lowest = 0.0
        # the other geometry's lowest point: height, which point (body, index), place and
        # velocity rel. base; resting on it, and where it came to rest (world x, y)
        self._low_other = 0.0
        self._o_k = self._o_k_prev = -1
        self._oc = np.zeros(3)
        self._ovrel = np.zeros(3)
        self._o_anchor = np.zeros(2)
        self.resting = self._touch = False
        # the physics gate of resting: calm ticks in a row (the start counts as at rest)
        self._rest_n = max(1, int(REST_WINDOW_S / self.dt + 0.5))
        self._calm = self._rest_n
        self.airborne = False
        self._tmp = np.zeros(3)
        self.started = False
        self.ticks = 0
        self.gyro = self.accel = self.rpy = None
        #: this tick's telemetry columns (:meth:`telemetry_columns`), filled by :meth:`run`
        self.telemetry = np.full(len(BASE_COLUMNS) + len(feet), np.nan)

    def telemetry_columns(self) -> list[str]:
        """Names of :attr:`telemetry`: ``base.*`` then ``contact.FOOT``."""
        return list(BASE_COLUMNS) + [f"contact.{f.link}" for f in self.feet]

    def bind(self, gyro: np.ndarray, accel: np.ndarray, rpy: np.ndarray) -> None:
        """The IMU reader's (3,) arrays, board axes (filled by the read stage each tick)."""
        self.gyro, self.accel, self.rpy = gyro, accel, rpy

    # ------------------------------------------------------------------
    def _rotation(self) -> None:
        x, y, z, w = self.attitude.q
        R = self.R
        R[0, 0], R[0, 1], R[0, 2] = 1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)
        R[1, 0], R[1, 1], R[1, 2] = 2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)
        R[2, 0], R[2, 1], R[2, 2] = 2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)

    def _legs(self) -> None:
        """Foot positions / velocities rel. base and sole heights (world z rel. base)."""
        model, data, q, v = self.model, self.data, self._q, self._v
        q[self._jidx] = self.position
        v[3], v[4], v[5] = self.attitude.omega
        v[self._vidx] = self.velocity
        # one compiled pass: placements and spatial velocities of every body, base at the origin
        # (so "world" is the base frame) moving with the gyro's rate and the joints' velocities
        self._fk(model, data, q, v)
        oR, op, vw = data.rotation_body_to_world, data.position_body_in_world, data.velocity_body_world
        Rz = self.R[2]
        for i, f in enumerate(self.feet):
            b = f.body
            r = f.r
            np.dot(oR[b], f.p_frame, out=r)
            r += op[b]
            np.dot(Rz, oR[b], out=f._w)
            np.dot(f.points, f._w, out=f._z)
            f._z -= f.radius
            self._sole[i] = (f._z[0] if f.one_point else f._z.min()) + Rz @ op[b]
            # a ball foot's contact point (its sphere's bottom): what holds in stance; a foot of
            # several points (a flat sole) keeps its foot point
            c = oR[b] @ f.points[0] + op[b] - f.radius[0] * Rz if f.one_point else r.copy()
            # its velocity: spatial velocity (at the origin) moved to the point
            # (Python floats: the same IEEE arithmetic as NumPy scalars, a fraction of the cost)
            s0, s1, s2, s3, s4, s5 = vw[b].tolist()
            c0, c1, c2 = c.tolist()
            vr = f.vrel
            vr[0], vr[1], vr[2] = s0 + s4 * c2 - s5 * c1, s1 + s5 * c0 - s3 * c2, s2 + s3 * c1 - s4 * c0
            # the foot point's velocity rel. the contact point, world x, y (a rolling sole)
            d0, d1, d2 = (x - y for x, y in zip(r.tolist(), (c0, c1, c2), strict=True))
            e = np.array([s4 * d2 - s5 * d1, s5 * d0 - s3 * d2, s3 * d1 - s4 * d0])
            f.roll[:] = (self.R @ e)[:2]
        low = self._sole.min()
        w = self._tmp
        best = None
        for j, (b, pts, rad, z) in enumerate(self._others):
            np.dot(Rz, oR[b], out=w)
            np.dot(pts, w, out=z)
            z -= rad
            k = int(np.argmin(z))
            zb = z[k] + Rz @ op[b]
            if j == 0 or zb < self._low_other:
                self._low_other, best = zb, (b, pts[k], rad[k], self._o_start[j] + k)
            low = min(low, zb)
        self._lowest = low
        if best is not None:
            # the other geometry's lowest point and its velocity rel. base (it holds while lying)
            b, pt, rad, self._o_k = best
            c = oR[b] @ pt + op[b] - rad * Rz
            s0, s1, s2, s3, s4, s5 = vw[b].tolist()
            c0, c1, c2 = c.tolist()
            self._oc[:] = c
            self._ovrel[:] = (s0 + s4 * c2 - s5 * c1, s1 + s5 * c0 - s3 * c2, s2 + s3 * c1 - s4 * c0)

    def _contacts(self) -> None:
        low = self._lowest          # the lowest point of the robot is on the ground
        h = self.contact_height
        st = self._stance
        R, v_max = self.R, self.contact_speed
        sole = self._sole.tolist()
        v0, v1, v2 = (float(x) for x in self.v)
        lift = self.contact_lift
        land = 0.5 * lift
        nf = len(st)
        # the trunk lowest in the kinematics is the anchor only once it feels ~1 g and is
        # still for the window, and not in the air (~0 g)
        low_trunk = bool(self._others) and self._low_other - low < lift
        a, g = self.accel, self.gyro
        f = math.sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2])
        w = math.sqrt(g[0] * g[0] + g[1] * g[1] + g[2] * g[2])
        v = self.v
        if (abs(f + GRAVITY_Z) < REST_ACCEL_G * -GRAVITY_Z and w < REST_GYRO
                and v[0] * v[0] + v[1] * v[1] + v[2] * v[2] < REST_SPEED * REST_SPEED):
            self._calm = min(self._calm + 1, self._rest_n)
        else:
            self._calm = 0
        self.airborne = f < FREE_FALL_G * -GRAVITY_Z
        touch = low_trunk and not self.airborne
        rest = touch and (self.resting or self._calm >= self._rest_n)
        # lying on the other geometry: a foot is down within ``lift`` of it
        if low_trunk:
            h = lift
        now, fast = [False] * nf, [0] * nf
        for i in range(nf):
            above = sole[i] - low
            zw = float(self.p[2]) + sole[i]
            rel = zw - self.ground[i]
            # stance: near the ground, and not rising or falling fast (a foot lifting off or
            # about to land passes through the height band)
            u = R @ self.feet[i].vrel
            vx, vy, vz = v0 + u[0], v1 + u[1], v2 + u[2]
            ok = above < (1.5 * h if st[i] else h) and abs(vz) < v_max
            # the sharper rule (the compiled estimator's): lift-off and landing against the
            # foot's own stance height
            if st[i]:
                ok = ok and rel < lift
            elif self.lifted[i]:
                ok = ok and (rel < land or above < land)
            now[i] = ok
            sp = math.hypot(vx, vy)
            fast[i] = 0 if sp < self.slide_speed else (1 if sp < v_max else 2)
        # nor moving horizontally (a skimming swing foot, one touching down or lifting off):
        # only the slowest class of speed there is (under slide_speed, else under
        # contact_speed, else all: the velocity estimate itself may be off then)
        slowest = min((fast[i] for i in range(nf) if now[i]), default=3)
        now = [now[i] and fast[i] <= slowest for i in range(nf)]
        for i in range(nf):
            zw = float(self.p[2]) + sole[i]
            if now[i] and st[i] and touch:
                # the trunk holds x, y while it lies: a foot pushing it up slides
                self.ground[i] += self._alpha * (zw - self.ground[i])
                f = self.feet[i]
                np.dot(self.R, f.r, out=self._tmp)
                f.anchor[0], f.anchor[1] = self.p[0] + self._tmp[0], self.p[1] + self._tmp[1]
            elif now[i] and st[i]:
                self.ground[i] += self._alpha * (zw - self.ground[i])
                f = self.feet[i]
                f.anchor[0] += self.dt * f.roll[0]
                f.anchor[1] += self.dt * f.roll[1]
            elif now[i]:              # touch-down: remember where (world x, y) and how high
                f = self.feet[i]
                np.dot(self.R, f.r, out=self._tmp)
                f.anchor[0], f.anchor[1] = self.p[0] + self._tmp[0], self.p[1] + self._tmp[1]
                self.ground[i] = zw
            elif st[i]:
                self.lifted[i] = True
            st[i] = now[i]
        if touch and not self._touch:
            self.P = [1e-4, 0.0, 1e-2]      # the trunk comes down: start afresh from it
        # where it came to rest (again when another point is the lowest); touching, not at
        # rest (an impact, a bounce): no place yet, the anchor follows the estimate
        if touch and not (self.resting and rest and self._o_k == self._o_k_prev):
            u = self.R @ self._oc
            self._o_anchor[0], self._o_anchor[1] = self.p[0] + u[0], self.p[1] + u[1]
        self.resting, self._touch = rest, touch
        self._o_k_prev = self._o_k

    def _predict(self, dt: float) -> None:
        a = self._tmp
        np.dot(self.R, self.attitude._to_base(self.accel), out=a)
        a0, a1, a2 = a.tolist()
        a2 += GRAVITY_Z
        # per axis in Python floats (no temporary arrays), the same operations in the same order
        h = 0.5 * dt * dt
        p, v = self.p, self.v
        p0, p1, p2 = p.tolist()
        v0, v1, v2 = v.tolist()
        p[0], p[1], p[2] = p0 + (v0 * dt + h * a0), p1 + (v1 * dt + h * a1), p2 + (v2 * dt + h * a2)
        v[0], v[1], v[2] = v0 + a0 * dt, v1 + a1 * dt, v2 + a2 * dt
        pp, pv, vv = self.P
        q = self._acc
        pp, pv, vv = (pp + 2 * dt * pv + dt * dt * vv + q * dt ** 4 / 4,
                      pv + dt * vv + q * dt ** 3 / 2, vv + q * dt * dt)
        self.P = [pp, pv, vv]

    def _correct(self) -> None:
        R, t = self.R, self._tmp
        px = py = pz = vx = vy = vz = 0.0
        stance, sole = self._stance.tolist(), self._sole.tolist()
        if self._touch:
            # lying on the trunk: it holds still, its lowest point on the ground
            R0, R1, R2 = R.tolist()
            oc, ov = self._oc.tolist(), self._ovrel.tolist()
            px = self._o_anchor[0] - (R0[0] * oc[0] + R0[1] * oc[1] + R0[2] * oc[2])
            py = self._o_anchor[1] - (R1[0] * oc[0] + R1[1] * oc[1] + R1[2] * oc[2])
            pz = -float(self._lowest)
            vx = -(R0[0] * ov[0] + R0[1] * ov[1] + R0[2] * ov[2])
            vy = -(R1[0] * ov[0] + R1[1] * ov[1] + R1[2] * ov[2])
            vz = -(R2[0] * ov[0] + R2[1] * ov[1] + R2[2] * ov[2])
            n = 1
            stance = [False] * len(stance)
        elif self.airborne:
            return          # in the air: no contact to correct from
        else:
            n = int(self._stance.sum())
        if n == 0:
            # no foot down, not lying: only the height is known (its lowest point on the ground)
            self._correct_height()
            return
        for i, f in enumerate(self.feet):
            if not stance[i]:
                continue
            np.dot(R, f.r, out=t)
            t0, t1, _ = t.tolist()
            a0, a1 = f.anchor.tolist()
            px += a0 - t0
            py += a1 - t1
            pz -= sole[i]
            np.dot(R, f.vrel, out=t)
            t0, t1, t2 = t.tolist()
            vx -= t0
            vy -= t1
            vz -= t2
        # 2x2 Kalman update, H = I: K = P (P + Rm)^-1, shared by the three axes
        pp, pv, vv = self.P
        rp, rv = self._rp / n, self._rv / n
        a, b, d = pp + rp, pv, vv + rv
        det = a * d - b * b
        ia, ib, idd = d / det, -b / det, a / det
        k11, k12 = pp * ia + pv * ib, pp * ib + pv * idd
        k21, k22 = pv * ia + vv * ib, pv * ib + vv * idd
        p, v = self.p, self.v
        pl, vl = p.tolist(), v.tolist()
        for ax, (zp, zv) in enumerate(((px / n, vx / n), (py / n, vy / n), (pz / n, vz / n))):
            ep, ev = zp - pl[ax], zv - vl[ax]
            p[ax] = pl[ax] + (k11 * ep + k12 * ev)
            v[ax] = vl[ax] + (k21 * ep + k22 * ev)
        # P = (I - K) P
        self.P = [(1 - k11) * pp - k12 * pv, (1 - k11) * pv - k12 * vv, -k21 * pv + (1 - k22) * vv]

    def _correct_height(self) -> None:
        """Scalar Kalman update of z alone from the robot's lowest point resting on z = 0."""
        pp, pv, vv = self.P
        k1, k2 = pp / (pp + self._rp), pv / (pp + self._rp)
        e = -self._lowest - self.p[2]
        self.p[2] += k1 * e
        self.v[2] += k2 * e     # P stays: it is shared with x and y, which saw nothing

    def _start(self) -> None:
        """First good tick: the robot rests with its lowest point on the ground, x = y = 0."""
        self.p[:] = 0.0
        self.p[2] = -float(self._lowest)
        self.v[:] = 0.0
        self.P = [1e-4, 0.0, 1e-2]
        for i, f in enumerate(self.feet):
            np.dot(self.R, f.r, out=self._tmp)
            f.anchor[0], f.anchor[1] = self._tmp[0], self._tmp[1]
            self.ground[i] = self.p[2] + self._sole[i]
        self.started = True

    def run(self, elapsed: float = 0.0) -> bool:
        """One tick; False (``base.valid`` False, the last estimate kept) when an input is NaN.
        ``elapsed``: s since the last estimate (0: the tick period)."""
        self.dt = elapsed if elapsed > 0 else self._dt0
        self._alpha = min(1.0, self.dt / STANCE_TAU_S)
        base = self.base
        g, a, r = self.gyro, self.accel, self.rpy
        # a NaN anywhere makes the sums NaN: one check per array, no temporary arrays
        if g is None or not (math.isfinite(g[0] + g[1] + g[2] + a[0] + a[1] + a[2] + r[0] + r[1] + r[2])
                             and math.isfinite(self.position.sum() + self.velocity.sum())):
            base.valid = False
            self.telemetry[12] = 0.0
            return False
        self.attitude.update(g, r, self.dt)
        self._rotation()
        self._legs()
        self._contacts()
        if not self.started:
            self._start()
        else:
            self._predict(self.dt)
            self._correct()
        self.ticks += 1
        base.position[:] = self.p
        base.quaternion[:] = self.attitude.q
        np.dot(self.R.T, self.v, out=base.linear_velocity)
        w = self.attitude.omega
        base.angular_velocity[0], base.angular_velocity[1], base.angular_velocity[2] = w
        base.contact[:] = self._stance
        base.valid = True
        t = self.telemetry
        t[0:3] = self.p
        t[3], t[4], t[5] = quat_rpy(self.attitude.q)
        t[6:9] = self.v
        t[9], t[10], t[11] = w
        t[12] = 1.0
        t[13:] = self._stance
        return True

    def summary(self) -> dict:
        """``base_position_in_world`` [m] and ``base_rpy`` [rad] of the last estimate (JSON-able)."""
        q = self.attitude.q or (0.0, 0.0, 0.0, 1.0)
        return {"base_position_in_world": [float(x) for x in self.p],
                "base_rpy": [float(x) for x in quat_rpy(q)],
                "base_velocity_in_world": [float(x) for x in self.v],
                "contact": {f.link: bool(c) for f, c in zip(self.feet, self._stance, strict=True)},
                "valid": bool(self.base.valid)}
