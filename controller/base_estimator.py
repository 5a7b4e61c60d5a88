"""The floating base's state from the IMU and the legs: the estimate stage's second half.

Per tick, from this tick's joint readings and IMU board registers:

1. **orientation** and angular velocity: :class:`~controller.attitude.AttitudeFilter`
   (the board's roll/pitch/yaw registers fused with its gyro, mounting rotation applied);
2. **leg kinematics** (compiled FK with body velocities, core_cy.dynamics, base at
   the origin): each foot's position r_i, the height of its sole (lowest contact point,
   sphere radius included) below the base, and its velocity relative to the base: a
   ball foot's at the sphere's bottom (it rolls as the leg sweeps, its centre moving
   ~0.02 m/s in a 0.1 m/s trot while the contact point holds), a flat sole's at the
   foot point;
3. **contacts**: the robot's lowest point (feet, and the other contact geometry:
   a trunk it lies on) is on the ground; a foot whose sole is within
   ``contact_height`` of it and not moving up or down faster than ``contact_speed``
   is in stance (height hysteresis: it leaves at 1.5x), nor horizontally faster than
   ``slide_speed`` (estimated, world: a trot's swing foot skims the ground at ~1 m/s
   a few mm up, and lifting off or touching down a foot sweeps at up to 0.3 m/s),
   unless that leaves no foot down (the velocity estimate may be what is off then,
   and only the feet correct it).  Sharper, against the height
   the foot itself stood at (its estimated world z, filtered over 0.2 s while it
   stands, so a static attitude or kinematic error cancels): it lifts off when it
   rises ``contact_lift`` (2 mm) above it, and having left stance it lands within
   half of that, or within half of it above the robot's lowest point (a trot's swing
   foot skims the ground by a few mm: the 10 mm band alone kept it in stance).
   **Lying**: while the other geometry's lowest point is within ``contact_lift`` of the
   robot's lowest point (the trunk rests on the ground, as at power-up and through the
   stand-up's first 0.4 s), a foot is down only within ``contact_lift`` of it (the same
   ground, the same kinematics: the quadruped's front feet hang 9 mm up as it starts);
4. **position and linear velocity**: a linear Kalman filter per world axis on
   [position, velocity], driven by the accelerometer (specific force rotated to the
   world, plus gravity) and corrected by the stance feet, as the MIT Cheetah 3
   estimator does with Bloesch et al.'s leg kinematics: a stance foot does not
   move (velocity -R (J_i v)), keeps the horizontal place it touched down at (moved
   with a rolling ball: the foot point rel. the contact point),
   and stands on flat ground at z = 0 (so the height is absolute, x, y are odometry
   from where the estimate started, (0, 0)).  Lying on the trunk, the trunk is the
   anchor instead: its lowest point holds its world x, y (kept where it came to rest,
   again when another of its points becomes the lowest) and does not move, and rests at
   z = 0; the feet, even down, are not used (pushing the trunk up they slide: the
   quadruped's front feet at up to 0.08 m/s, 5 mm of odometry before the trunk lifts) and
   re-anchor each tick, so they stand where they are when the trunk lifts off.  The trunk
   lowest in the kinematics is an anchor only once physics agrees it rests: ~1 g specific
   force and a still gyro for ``REST_WINDOW_S`` (a collapsed robot's folded legs make the
   trunk lowest while it still falls, and it bounces off it); touching before that, it
   corrects the height and the velocity but holds no place, and its touch-down restarts the
   covariance (the impacts clip the accelerometer: the integrated velocity is off).  With
   no foot down and not lying, only the height is corrected, from the lowest point; under
   ``FREE_FALL_G`` nothing is (the robot is in the air).

The three world axes share one 2x2 covariance (same model, same noise), so the
filter is scalar arithmetic: no matrix inverse.

All of that runs compiled, with the GIL released (:mod:`controller._base_estimator`,
the FK through the dynamics kernel's C API): a tick allocates nothing and makes no
NumPy call.  This module builds the kernel's geometry and arrays from the config.
"""

from __future__ import annotations

import numpy as np

from servoloop.controller.attitude import AttitudeFilter, quat_rpy
from servoloop.controller.controllers import BaseState
from servoloop.controller.errors import ConfigError
from servoloop.controller.telemetry import BASE_COLUMNS

__all__ = ["BaseEstimator", "default_feet", "STANCE_TAU_S", "REST_WINDOW_S", "REST_ACCEL_G",
           "REST_GYRO", "REST_SPEED", "FREE_FALL_G", "MAX_STEP_S"]

#: s, time constant of each foot's filtered stance height (the contact test's reference for
#: lift-off): slow enough that a foot rising at a few cm/s lifts off, fast enough for drift
STANCE_TAU_S = 0.2

# The physics gate of the trunk anchor (issue 11).  A collapsed quadruped's folded legs make
# the trunk the lowest point while it still falls, and its impacts (several g, past the
# accelerometer's +-2 g) bounce it: taken as resting at the first touch, the estimate was
# pinned to a place and a zero velocity it had not reached (45 mm low after a collapse from a
# tall stance).  A trunk at rest on the ground feels 1 g and does not turn; in the air ~0 g.
#: s the trunk must feel ~1 g and be still, in a row, before it is the anchor (20 ticks at 1 kHz:
#: the quadruped's impacts ring for 30-60 ms, see BENCHMARKS.md)
REST_WINDOW_S = 0.02
#: band of that ~1 g, fraction of g (a trunk lying on the ground reads 0.96-1.01 g)
REST_ACCEL_G = 0.15
#: rad/s, gyro norm under which the trunk counts as still
REST_GYRO = 0.5
#: m/s, and the estimated velocity under this (the touching trunk has corrected it by then)
REST_SPEED = 0.1
#: specific force under which nothing holds the robot (in the air): no contact correction, fraction of g
FREE_FALL_G = 0.3
#: s, the longest step one estimate integrates over (a longer gap, a comm hold, is taken as this:
#: the readings before it say nothing of the motion in it, and the legs correct the rest)
MAX_STEP_S = 0.05

def _contact_points(urdf, cfg, links):
    from servoloop.core_cy.sim.model import (
        ContactPoints,
        contact_points_from_spec,
        contact_points_from_urdf,
    )

    parts = []
    try:
        parts.append(contact_points_from_urdf(urdf, floating_base=True, links=links))
    except ValueError:
        pass
    spec = [c for c in cfg.simulation.contacts if links is None or c.link in links]
    if spec:
        parts.append(contact_points_from_spec(urdf, spec, floating_base=True))
    return ContactPoints.concat(parts)


def _link_names(urdf) -> list[str]:
    import xml.etree.ElementTree as ET

    return [lk.get("name") for lk in ET.parse(str(urdf)).getroot().findall("link")]


def default_feet(cfg, model, data) -> tuple[str, ...]:
    """The links that carry contact geometry and are lowest in the config's pose (within 2 cm).

    The pose is the config's standing pose (:func:`controller.simulation_config.standing_pose`:
    the controller's ``pose`` or ``posture``, else the last ``startup.via``; zeros for joints
    it leaves out), where the feet are the lowest links.
    """
    from servoloop.core_cy.dynamics import forward_kinematics

    urdf = cfg.urdf_path()
    root = _link_names(urdf)[0]
    pts = _contact_points(urdf, cfg, None)
    q = model.neutral()
    from servoloop.controller.simulation_config import standing_pose

    pose = standing_pose(cfg)
    names = list(model.joint_names)
    for j, val in (pose.items() if isinstance(pose, dict) else ()):
        if j in names:
            q[7 + names.index(j) - 1] = float(val)
    forward_kinematics(model, data, q)
    lowest = {}
    for link in _link_names(urdf):
        if link == root:
            continue
        body = model.body_index(link)
        mine = [k for k in range(len(pts)) if pts.body[k] == body and pts.names[k].split(":")[0] == link]
        if not mine:
            continue
        z = [(data.rotation_body_to_world[body] @ pts.position[k] + data.position_body_in_world[body])[2]
             - pts.radius[k] for k in mine]
        lowest[link] = min(z)
    if not lowest:
        return ()
    floor = min(lowest.values())
    # of the links on one rigid body only the lowest (a calf box ending in its foot ball)
    body = {link: model.body_index(link) for link in lowest}
    return tuple(link for link, z in lowest.items() if z < floor + 0.02
                 and z == min(lowest[k] for k in lowest if body[k] == body[link]))


class _Foot:
    """One foot's precomputed geometry (its per-tick values live in the kernel's arrays)."""

    def __init__(self, link, model, pts):
        self.link = link
        self.body, R, p = model.frame_placement(link)
        self.R_frame, self.p_frame = R, p
        mine = [k for k in range(len(pts)) if pts.body[k] == self.body and pts.names[k].split(":")[0] == link]
        if not mine:
            mine = [k for k in range(len(pts)) if pts.body[k] == self.body]
        self.points = np.ascontiguousarray(pts.position[mine]) if mine else p[None].copy()
        self.radius = np.ascontiguousarray(pts.radius[mine]) if mine else np.zeros(1)


def _ranges(groups) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-group (k_i, 3) points and (k_i,) radii as one (k, 3), one (k,) and starts (g + 1,)."""
    start = np.zeros(len(groups) + 1, dtype=np.int32)
    start[1:] = np.cumsum([len(r) for _, r in groups])
    pts = np.ascontiguousarray(np.concatenate([p for p, _ in groups]) if groups else np.zeros((0, 3)))
    rad = np.ascontiguousarray(np.concatenate([r for _, r in groups]) if groups else np.zeros(0))
    return pts.reshape(-1, 3), rad, start


class BaseEstimator:
    """Fills a :class:`~controller.controllers.BaseState` in place each tick.

    The per-tick arithmetic runs compiled (:class:`controller._base_estimator.BaseKernel`);
    this class builds its geometry and arrays from the config once.

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
    contact_lift : m, rise above the sole height a foot stood at (tracked over ``STANCE_TAU_S``)
        that lifts it off; having left stance, it lands again within half of it
        (also the band, above the robot's lowest point, of a trunk it rests on and of a foot
        down while it does)
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
        from servoloop.controller._base_estimator import BaseKernel
        from servoloop.core_cy.dynamics import Data, Model

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
        others = sorted(set(int(x) for x in allpts.body) - foot_bodies)
        other_groups = [(allpts.position[allpts.body == b], allpts.radius[allpts.body == b]) for b in others]
        self.base = base
        base.feet = tuple(feet)
        base.contact = np.zeros(len(feet), dtype=bool)
        self.position, self.velocity = position, velocity
        self.dt = float(dt)
        self.contact_height = float(contact_height)
        self.contact_speed = float(contact_speed)
        self.slide_speed = float(slide_speed)
        self.contact_lift = float(contact_lift)
        att = AttitudeFilter(imu.rotation_rpy)    # its mount rotation and gain: the kernel runs the filter
        nf = len(feet)
        self.R = np.eye(3)
        self.p = np.zeros(3)           # world position, m
        self.v = np.zeros(3)           # world velocity, m/s
        self.quaternion = np.array([0.0, 0.0, 0.0, 1.0])    # x, y, z, w base -> world
        self.omega = np.zeros(3)       # rad/s, base frame
        self.r = np.zeros((nf, 3))     # foot points rel. base, base axes
        self.vrel = np.zeros((nf, 3))  # their soles' velocities rel. base, base axes (a ball: its bottom)
        self.anchor = np.zeros((nf, 2))  # world x, y where each foot touched down
        self._stance = np.zeros(nf, dtype=bool)
        self._sole = np.zeros(nf)
        self.ground = np.zeros(nf)     # each foot's sole world height while it stood (filtered), m
        self.lifted = np.zeros(nf, dtype=bool)   # it has left stance since the start
        #: this tick's telemetry columns (:meth:`telemetry_columns`), filled by :meth:`run`
        self.telemetry = np.full(len(BASE_COLUMNS) + nf, np.nan)
        fpts, frad, fstart = _ranges([(f.points, f.radius) for f in self.feet])
        opts, orad, ostart = _ranges(other_groups)
        self._kernel = BaseKernel(
            model, self.data, self._jidx, self._vidx,
            np.array([f.body for f in self.feet], dtype=np.int32),
            np.ascontiguousarray([f.p_frame for f in self.feet], dtype=np.float64), fstart, fpts, frad,
            np.array(others, dtype=np.int32), ostart, opts, orad,
            np.array(att._M, dtype=np.float64), np.array(att._mount_inv, dtype=np.float64), att.gain,
            self.dt, self.contact_height, self.contact_speed, self.contact_lift, STANCE_TAU_S,
            float(accel_noise), float(position_noise), float(velocity_noise), model.neutral(),
            np.zeros(model.nv), self.R, self.p, self.v, self.quaternion, self.omega, self.r, self.vrel,
            self.anchor, self._stance.view(np.uint8), self._sole, self.ground, self.lifted.view(np.uint8),
            REST_WINDOW_S, REST_ACCEL_G, REST_GYRO, FREE_FALL_G, REST_SPEED, self.slide_speed)
        self._kernel.bind_outputs(base.position, base.quaternion, base.linear_velocity, base.angular_velocity,
                                  base.contact.view(np.uint8), self.telemetry)
        self.gyro = self.accel = self.rpy = None
        self._run_start = None     # the estimate when the run state began (:meth:`mark_run_start`)

    @property
    def started(self) -> bool:
        """True after the first good tick (the filter started from the robot at rest)."""
        return self._kernel.started

    @property
    def ticks(self) -> int:
        """Good ticks estimated."""
        return self._kernel.ticks

    @property
    def resting(self) -> bool:
        """True while the robot lies on its other contact geometry (a trunk): the x, y anchor.

        The trunk lowest in the kinematics is not enough: it must also have felt ~1 g
        (:data:`REST_ACCEL_G`), been still (:data:`REST_GYRO`) and estimated still
        (:data:`REST_SPEED`) for :data:`REST_WINDOW_S`, and it is not while the robot is
        :attr:`airborne`."""
        return self._kernel.resting

    @property
    def airborne(self) -> bool:
        """True this tick if the specific force is under :data:`FREE_FALL_G` g: nothing holds
        the robot, the contacts correct nothing."""
        return self._kernel.airborne

    @property
    def P(self) -> list[float]:
        """The three axes' shared covariance [pp, pv, vv] (m^2, m^2/s, m^2/s^2)."""
        return self._kernel.covariance

    def telemetry_columns(self) -> list[str]:
        """Names of :attr:`telemetry`: ``base.*`` then ``contact.FOOT``."""
        return list(BASE_COLUMNS) + [f"contact.{f.link}" for f in self.feet]

    def bind(self, gyro: np.ndarray, accel: np.ndarray, rpy: np.ndarray) -> None:
        """The IMU reader's (3,) arrays, board axes (filled by the read stage each tick)."""
        self.gyro, self.accel, self.rpy = gyro, accel, rpy
        self._kernel.bind(gyro, accel, rpy, self.position, self.velocity)

    def run(self, elapsed_s: float = 0.0) -> bool:
        """One tick; False (``base.valid`` False, the last estimate kept) when an input is NaN.

        ``elapsed_s``: s since the last estimate (0: the tick period), at most
        :data:`MAX_STEP_S`.  A skipped or stale tick leaves two or more periods between the
        readings: integrated as one, the quadruped's stand-up (~0.1 m) came out 14-34 mm
        short in pty runs that skipped 14-38 % of its ticks (3 mm in lockstep)."""
        ok = self._kernel.run(elapsed_s if elapsed_s < MAX_STEP_S else MAX_STEP_S)
        if not ok:
            self.telemetry[12] = 0.0
        self.base.valid = ok
        return ok

    def _pose(self) -> dict:
        q = self.quaternion if self._kernel.has_orientation else (0.0, 0.0, 0.0, 1.0)
        return {"base_position_in_world": [float(x) for x in self.p],
                "base_rpy": [float(x) for x in quat_rpy(q)]}

    def mark_run_start(self) -> None:
        """Keep the estimate as the run state begins (after the startup ramp), for :meth:`summary`.

        x, y count from where the base lay at power-up, and a robot that stands up from lying
        moves its trunk there: the built-in quadruped's ~0.10 m forward (its legs unfold from
        under the trunk and its feet slide), so a standing run's summary ends at x ~ 0.09-0.10 m
        without any drift.  Its move since this mark is the run's own."""
        self._run_start = self._pose() if self.started else None

    def summary(self) -> dict:
        """``base_position_in_world`` [m], ``base_rpy`` [rad] (and velocity, contacts) of the last
        estimate, and ``at_run_start``: its position and rpy as the run state began (None before
        it, or if the estimate had not started); JSON-able."""
        return {**self._pose(),
                "base_velocity_in_world": [float(x) for x in self.v],
                "contact": {f.link: bool(c) for f, c in zip(self.feet, self._stance, strict=True)},
                "valid": bool(self.base.valid),
                "at_run_start": self._run_start}
