"""``wbc``: whole-body balance through contact (seed 003), on any floating-base robot.

Each tick: the base state (the estimator's ``state.base``, or level leg
odometry while none runs: :mod:`controller.wholebody.base_source`) ->
task-space PD on the base pose, the feet and the posture -> desired
accelerations -> contact inverse dynamics (``variant``) -> joint torques in
``command.effort``.  The daemon turns the effort into what each servo takes
(:mod:`controller.joint_map`): a current for a current-mode servo (host
``kp = kd = 0`` here: the torque is the whole command), a goal offset
``tau / k_p`` for a position servo, whose goal is set to the measured
position advanced by ``(k_d / k_p) dq`` (seed 000's law ``tau = k_p (goal -
q) - k_d dq`` inverted, so the servo's own damping does not add to the
torque asked for; ``k_d`` the calibrated one (``servoloop run --calibration``),
else ``servos[].position_damping``, else the servo model's:
:mod:`controller.servo_friction`, as the rotor ``armature`` the contact ID uses).

During startup (the ramp calls ``update`` with ``t = 0``) it commands the
posture and no torque; when the run begins it takes the base pose it finds
as its goal (standing height = base height at the end of startup).

params (all optional; defaults work on the built-in quadruped):

- ``variant``: ``lcp_coulomb`` (default; the best measured, see
  BENCHMARKS.md), ``qp`` or ``lcp_noslip``;
- ``mu``: friction coefficient the ID assumes (default 0.8; ``inf`` or a
  number; ``inf`` with ``lcp_noslip`` or ``qp`` only: Lemke's tableau of
  ``lcp_coulomb`` takes a finite one).  ``lcp_noslip``'s forces are shared
  among the stance feet (:mod:`controller.wholebody.force_split`), and on point
  feet ``lcp_coulomb``'s sticking ones, inside the cone ``mu``;
- ``feet``: link names (default: the links with contact geometry lowest at
  the posture, one per rigid body);
- ``height``: base height [m] (default: at the end of startup);
- ``posture``: ``{joint: rad}`` (default: the last ``startup.via`` pose, else
  the measured pose at the start, inside the limits);
- ``torque_filter_hz``: low-pass cutoff of the torques sent (default 40 at loops of
  500 Hz and faster, else 0: none);
- ``position_servo``: how a position servo is given its torque: ``torque``
  (the goal is the measured position plus ``tau / k_p`` and the
  damping advance, so the servo's own stiffness is cancelled and it
  delivers ``tau``) or ``impedance`` (the goal is the posture plus
  ``tau / k_p``: the servo keeps its own stiffness and damping about the
  posture and the torque is a feed-forward on top).  Default per servo:
  ``impedance`` for the position-only ones (no current control: AX, MX on
  Protocol 1.0, XL-320), ``torque`` for the others (:meth:`_impedance_joints`
  has the measurement: an AX-12A hexapod lay down under ``torque``); the status
  says which (``position_servo``).  ``impedance`` suits coarse servos: with
  ``torque`` every count of the position reading (AX-18A: 5.1 mrad, ~0.05 N m
  at its k_p) reaches the joint as torque noise, which tips the 200 Hz
  humanoid over on compliant ground;
- ``coulomb_compensation``: add each servo's gearbox Coulomb friction ``k_c`` to the
  torque sent, in the direction of the measured joint velocity, its sign ramped over
  ``COULOMB_BAND`` (0.1 rad/s), and cancel a position servo's viscous friction ``b`` with
  the damping advance (``(k_d + b) / k_p``; a current servo's ``b`` is not compensated)
  (default false for ``wbc``, true for ``trot``).  ``k_c`` and ``b`` are the calibrated
  ones (``servoloop run --calibration``), else the config's ``servos[].coulomb_friction``
  / ``viscous_friction``, else the servo model's (0.134 N m and 0 on the XM430-W350;
  :mod:`controller.servo_friction`).  The servo law the goal offset
  inverts (seed 000's ``k_p (goal - q) - k_d dq``, less ``k_c sgn(dq) + b dq``) loses them
  otherwise: at the end of a trot's swing, where a leg's torques are a few tenths of
  a N m, the knee kept ~15 % of what the contact ID asked and the front feet stalled
  2 mm above their reference (issue 11, BENCHMARKS.md "daemon trot");
- ``load_split``: share the ``lcp_coulomb`` answer's sticking contact forces among
  the stance feet, inside the friction cone (default false for ``wbc``, true for
  ``trot``): the contact ID alone loads as few feet as it can, and a trot whose loaded
  foot lifts then drops onto the others (on a grippy floor it fell: 57 deg).  Costs
  ~100 us a tick (NumPy); ``lcp_noslip`` always shares;
- gains ``base_kp``, ``base_kd``, ``rot_kp``, ``rot_kd``, ``swing_kp``,
  ``swing_kd``, ``posture_kp``, ``posture_kd`` (1/s^2, 1/s).

A contact inverse dynamics that finds no torques keeps the last ones for at
most ``MAX_FAILED_S`` (0.05 s) in a row; past that the run faults (kind
``control``, naming the variant and the solver's last error) and the
daemon's fault path turns torque off or holds, as configured: old torques
are not a command for a robot whose contacts have changed.

The run summary's ``warnings`` (:attr:`warnings`) say when a joint was asked more than its
servo's stall torque on over 1 % of the ticks, when the base tilted past 0.8 rad (fallen; on a
robot with an IMU the loop's fall detector says it and reacts, ``safety.on_fall``), when the
base sank under half the height the run began at for 0.5 s without tipping (collapsed; with an
IMU the loop says it, controller/fall.py), and when a robot on fewer than 3 feet has no IMU (its
tilt is not observed).

Goal (``set_goal``): the base pose, ``{"x", "y", "z", "roll", "pitch",
"yaw"}`` in the world [m, rad]; keys left out keep their value.
"""

from __future__ import annotations

import math

import numpy as np

from servoloop.controller.controllers.base import (
    Command,
    Controller,
    JointState,
    _number,
    joint_vector,
)
from servoloop.controller.errors import ControllerParamError
from servoloop.controller.faults import Fault, FaultKind, FaultRaised

__all__ = ["WbcController"]

GAIN_KEYS = ("base_kp", "base_kd", "rot_kp", "rot_kd", "swing_kp", "swing_kd", "posture_kp", "posture_kd")
POSE_KEYS = ("x", "y", "z", "roll", "pitch", "yaw")
#: how far a base goal may move from the standing pose (m for x, y, z; rad for angles)
#: how a position servo is given the torque (param ``position_servo``)
POSITION_SERVO = ("torque", "impedance")
GOAL_RANGE = {"x": 0.5, "y": 0.5, "z": 0.1, "roll": 0.5, "pitch": 0.5, "yaw": math.pi}
#: longest run of failed contact-ID solves on the last torques before the run faults [s]
MAX_FAILED_S = 0.05
#: share of the running ticks a joint's torque may exceed its servo's stall torque before
#: the run summary warns (a touchdown's few-tick spike does not count)
OVER_STALL_SHARE = 0.01
#: [rad/s] the Coulomb compensation's sign ramps linearly over |dq| < COULOMB_BAND (param
#: ``coulomb_compensation``): ~4 counts of an XM430's velocity register (0.024 rad/s), so a
#: standing joint's reading noise moves it by a quarter of k_c at most.  Measured on the trot
#: (BENCHMARKS.md): 0.05 and 0.1 rad/s gave the same swings
COULOMB_BAND = 0.1
#: base tilt (angle of its z axis from the vertical) past which the robot counts as fallen
#: [rad]: the torques after it are not the robot's needs (not counted against stall); without
#: an IMU (no fall detector in the loop) the run summary says it fell
FALLEN_TILT = 0.8


class WbcController(Controller):
    name = "wbc"
    param_keys = ("variant", "mu", "feet", "height", "posture", "torque_filter_hz",
                  "position_servo", "load_split", "coulomb_compensation") + GAIN_KEYS
    #: ``load_split`` when the config does not say (``trot``: on, its lift-offs need it)
    LOAD_SPLIT = False
    #: mark the ``torque``-mode position servos' goals as torque-carrying for the safety stage
    #: (:attr:`torque_goals`, ``controller.slew``).  ``trot`` does: the goal ramp clipped its
    #: swing legs' torque.  ``wbc`` and ``walk`` keep the ramp: measured through the virtual
    #: bus, without it the humanoid's learned-model walk fell (its AX-18A goals carry a
    #: count's 0.05 N m of noise) and the pushed quadruped ended 5.0 cm from where it stood
    #: (4.4 with the ramp; both with the simulator's old one-step push, before the estimator's
    #: slide gate; with the ramp and the 50 ms push the IMU feels: 1.2 cm)
    TORQUE_GOALS = False
    #: ``coulomb_compensation`` when the config does not say (``trot``: on; ``wbc`` and ``walk``
    #: were not re-measured with it)
    COULOMB_COMPENSATION = False

    def __init__(self, ctx, params=None, robot=None):
        super().__init__(ctx, params)
        from servoloop.controller.wholebody.balance import BalanceCore, Gains
        from servoloop.controller.wholebody.base_source import BaseSource

        self.robot = robot if robot is not None else self._load_robot()
        gains = Gains()
        for k in GAIN_KEYS:
            if k in self.params:
                setattr(gains, k, float(self.params[k]))
        self.core = BalanceCore(self.robot, ctx.dt, self.params.get("variant", "lcp_coulomb"),
                                self._mu(self.params.get("mu", 0.8)), gains)
        # the lcp_coulomb answer's sticking forces shared among the stance feet (balance.py
        # step 4; NumPy, ~100 us a tick): a stand does not need it, a trot on a grippy floor does
        self.core.coulomb_split = self.core.coulomb_split and bool(self.params.get("load_split", self.LOAD_SPLIT))
        # each foot's sole, from the standing posture (a level sole): the stance plane's height
        q_stand = self.robot.model.neutral().copy()
        q_stand[7 + self.robot.idx] = self._default_posture()
        self.core.set_soles(q_stand)
        self._max_failed = max(1, round(MAX_FAILED_S / ctx.dt))
        self.source = BaseSource(self.robot, ctx.dt)
        self.posture = np.clip(np.zeros(ctx.n), ctx.lower, ctx.upper)
        self.targets = None
        self._pose = np.zeros(6)              # x y z roll pitch yaw of the base goal
        self._standing = np.zeros(6)          # the pose found when the run began
        self.running = False
        self._tau = np.zeros(ctx.n)
        self._buf = np.zeros(ctx.n)
        # default on at fast loops only (measured at 1 kHz on the quadruped; at the humanoid's
        # 200 Hz a 40 Hz filter's lag tips it over)
        cutoff = float(self.params.get("torque_filter_hz", 40.0 if ctx.dt <= 2e-3 else 0.0))
        self._alpha = 1.0 if cutoff <= 0 else 1.0 - math.exp(-2.0 * math.pi * cutoff * ctx.dt)
        self._compensate_friction = bool(self.params.get("coulomb_compensation", self.COULOMB_COMPENSATION))
        self._friction = None
        if ctx.config is not None:
            from servoloop.controller.servo_friction import servo_friction

            self._friction = servo_friction(ctx.config)
        self._servo_setup()
        #: said once in the run summary's ``warnings`` (the daemon reads them at the end)
        self._warnings: list[str] = []
        # the torques sent against what each servo gives at stall: the run summary says when
        # the robot asks more than its servos have (a 13 kg quadruped on XM540-W270 trotting:
        # 25 N m asked of a hind knee, 10.6 given; it sagged 7 cm instead of failing loudly)
        self._stall = self._servo_models("stall_torque_at_supply_nm")
        self._peak = np.zeros(ctx.n)
        self._over = np.zeros(ctx.n, dtype=np.int64)
        self._over_now = np.zeros(ctx.n, dtype=bool)
        self._run_ticks = 0
        self._fell = None                     # (t [s], tilt [rad]) when the base tilted past FALLEN_TILT
        from servoloop.controller.fall import CollapseWatch

        # a collapse where the loop does not watch for one (no IMU): its rule on leg odometry
        self._collapse = CollapseWatch(1.0 / ctx.dt)
        self._fallen_cos = math.cos(FALLEN_TILT)
        cfg = ctx.config
        self._loop_sees_falls = (cfg is not None and getattr(cfg, "imu", None) is not None
                                 and cfg.safety.fall_tilt_rad is not None)
        if cfg is not None and getattr(cfg, "imu", None) is None and len(self.robot.feet) < 3:
            # base_source levels the base over the stance feet: it needs three (a plane)
            self._warnings.append(
                f"{self.name}: no imu and {len(self.robot.feet)} feet: the base's tilt is not "
                "observed (leg odometry takes it level), so a biped's lean goes uncorrected; "
                "give the robot an IMU (imu: in the config)")
        # the servos' gearbox Coulomb friction, added to the torque sent (coulomb_compensation;
        # calibrated, configured or the model's: controller.servo_friction), and their viscous
        # friction, cancelled with the damping advance (_servo_setup)
        self._coulomb = np.zeros(ctx.n)
        if self._compensate_friction and cfg is not None:
            # a velocity-mode joint's effort is not sent
            modes = np.array([s.mode for s in cfg.servos])
            self._coulomb[:] = np.where(modes == "velocity", 0.0, self._friction.coulomb_nm)
        # impedance: position servos take the posture (not the measured position) as the base
        # of their goal; without the param, the position-only ones (POSITION_ONLY_DEFAULT)
        self._impedance = self._impedance_joints(self.params.get("position_servo"))
        self._impedance_u8 = self._impedance.view(np.uint8)
        if self.torque_goals is not None:
            # impedance: the goal's reference is the posture, which may jump (a walk's IK, a
            # posture param): those goals keep the safety stage's ramp
            self.torque_goals &= ~self._impedance
        from servoloop.controller.wholebody._balance import servo_command

        self._servo_command = servo_command

    # -- setup ------------------------------------------------------------
    def _load_robot(self):
        from servoloop.controller.wholebody.robot import WholeBodyRobot

        cfg = self.ctx.config
        urdf = cfg.urdf_path() if cfg is not None else None
        if urdf is None:
            raise ControllerParamError(f"{self.name}: the config has no model (model.urdf or model.name)")
        if not cfg.model.floating_base:
            raise ControllerParamError(f"{self.name}: {cfg.source or cfg.robot} has a fixed base "
                                       "(model.floating_base: false); wbc balances a floating base")
        from servoloop import core_cy
        from servoloop.core_cy.sim.model import (
            ContactPoints,
            contact_points_from_spec,
            contact_points_from_urdf,
        )

        model = core_cy.Model.from_urdf(str(urdf), floating_base=True, mimic=cfg.model.mimic)
        parts = []
        try:
            parts.append(contact_points_from_urdf(urdf, floating_base=True))
        except ValueError:
            pass
        if cfg.simulation.contacts:
            parts.append(contact_points_from_spec(urdf, cfg.simulation.contacts, floating_base=True))
        points = ContactPoints.concat(parts)
        feet = self.params.get("feet")
        # the rotors' inertia at the output: calibrated, configured or the model's
        # (controller.servo_friction)
        from servoloop.controller.servo_friction import servo_friction

        armature = servo_friction(cfg).armature_kg_m2
        robot = WholeBodyRobot(model, points, self.ctx.joint_names, feet=feet,
                               armature=armature, what=self.name)
        if feet is None:
            robot = WholeBodyRobot(model, points, self.ctx.joint_names,
                                   feet=self._lowest_links(robot), armature=armature, what=self.name)
        return robot

    def _lowest_links(self, robot) -> list[str]:
        """Links with contact geometry within 1 cm of the lowest point, at the posture; of the
        links on one rigid body (joined by fixed joints) only the lowest: a shank's box that
        ends in its foot ball is not a second foot."""
        q = robot.model.neutral().copy()
        q[7 + robot.idx] = self._default_posture()
        robot.kinematics(q)
        low = {f.link: min(robot.point_world(f.body, p)[2] for p in f.points) - f.radius
               for f in robot.feet}
        body = {f.link: f.body for f in robot.feet}
        z0 = min(low.values())
        return [link for link, z in low.items() if z < z0 + 0.01
                and z == min(low[k] for k in low if body[k] == body[link])]

    def _servo_models(self, attr: str) -> np.ndarray | None:
        cfg = self.ctx.config
        if cfg is None:
            return None
        from servoloop.core_cy.sim.model import simulator_servo_model
        from servoloop.firmware_bridge.control_table import get_table

        out = []
        for s in cfg.servos:
            table = get_table(s.model)
            out.append(getattr(simulator_servo_model(table.datasheet, table.name), attr))
        return np.array(out, dtype=float)

    def _servo_setup(self) -> None:
        """Per joint: current-mode or position servo, and the damping advance k_d / k_p [s]."""
        cfg = self.ctx.config
        n = self.ctx.n
        self._current = np.zeros(n, dtype=bool)
        self._advance = np.zeros(n)
        self._own_offset = np.zeros(n)
        #: (n,) bool, joints whose goal carries torque (the daemon's loop reads it), or None
        self.torque_goals = None
        if cfg is None:
            return
        self._current[:] = [s.mode == "current" for s in cfg.servos]
        # position servos take their torque in the goal about the measured position: the
        # safety stage bounds its offset from it instead of its speed (controller.slew, issue 11)
        if self.TORQUE_GOALS:
            self.torque_goals = np.array([s.mode not in ("current", "velocity") for s in cfg.servos])
        # k_d: the servo's damping, calibrated, configured or the model's
        # (controller.servo_friction): a servo damped more than the advance says eats the
        # torque asked of a moving joint
        kp, kd = self._servo_models("kp_nm_per_rad"), self._friction.kd_nm_s_per_rad
        if self._compensate_friction:
            kd = kd + self._friction.viscous_nm_s_per_rad   # the gearbox's viscous friction too
        calibrated = np.array([bool(s.position_stiffness) for s in cfg.servos])
        stiffness = np.where(calibrated, [s.position_stiffness or 0.0 for s in cfg.servos], kp)
        self._advance[:] = np.where(self._current, 0.0, kd / np.where(stiffness > 0, stiffness, np.inf))
        # A position servo without a calibrated position_stiffness gets no offset from the
        # daemon (joint_map: 1/k_p = 0): the controller offsets its goal by tau / k_p of the
        # servo's default model itself.
        self._own_offset = np.where(self._current | calibrated, 0.0,
                                    1.0 / np.where(kp > 0, kp, np.inf))

    def _impedance_joints(self, mode: str | None) -> np.ndarray:
        """(n,) bool: the position servos whose goal rides on the posture (``impedance``): every
        one when ``position_servo`` says so; unset, those without current control
        (:func:`~controller.joint_map.position_only`): under ``torque`` the ID's ~1 N m
        tick-to-tick steps clipped at an AX-12A's 1.5 N m laid a hexapod on its belly
        (BENCHMARKS.md, "Robots we did not ship"); under ``impedance`` it stands."""
        if mode == "impedance":
            return ~self._current
        if mode == "torque" or self.ctx.config is None:
            return np.zeros(self.ctx.n, dtype=bool)
        from servoloop.controller.joint_map import position_only

        return position_only(self.ctx.config.servos) & ~self._current

    def _default_posture(self, measured=None) -> np.ndarray:
        """The posture param, else the last ``startup.via`` pose, else ``measured`` (n,) rad
        (where finite; zero before any reading), inside the joint limits.  Never plain zeros on
        a robot found standing: a held humanoid straightening its crouched legs would push its
        knees through their stops (the limit fault of a straight-legged default)."""
        cfg, ctx = self.ctx.config, self.ctx
        out = np.zeros(ctx.n)
        if measured is not None:
            out = np.where(np.isfinite(measured), measured, 0.0)
        out = np.clip(out, ctx.lower, ctx.upper)
        if cfg is not None:
            for pose in cfg.startup.via:
                out = joint_vector(ctx, pose, "startup.via", default=out)
        if self.params.get("posture") is not None:
            out = joint_vector(ctx, self.params["posture"], f"{self.name}.posture", default=out)
        return out

    @staticmethod
    def _mu(value) -> float:
        if isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
            return math.inf
        mu = _number(value, "wbc.mu") if not (isinstance(value, float) and math.isinf(value)) else value
        if not mu > 0:
            raise ControllerParamError(f"wbc.mu must be > 0 (or 'inf'), got {mu}")
        return float(mu)

    # -- parameters -------------------------------------------------------
    def check_params(self, params: dict, initial: bool = False) -> dict:
        params = super().check_params(params, initial)
        from servoloop.controller.wholebody.balance import ID_VARIANTS

        if "variant" in params and params["variant"] not in ID_VARIANTS:
            raise ControllerParamError(f"{self.name}.variant: {params['variant']!r}; choose one of "
                                       f"{', '.join(ID_VARIANTS)}")
        if "mu" in params:
            self._mu(params["mu"])
        if "mu" in params or "variant" in params:
            # the combination, with what is set now: Lemke's tableau takes no infinite friction
            # (before: accepted, then every solve failed and the run faulted 50 ms in)
            core = getattr(self, "core", None)
            variant = params.get("variant", core.variant if core is not None
                                 else getattr(self, "params", {}).get("variant", "lcp_coulomb"))
            mu = self._mu(params["mu"]) if "mu" in params else (
                core.mu if core is not None else self._mu(getattr(self, "params", {}).get("mu", 0.8)))
            if variant == "lcp_coulomb" and math.isinf(mu):
                raise ControllerParamError(
                    f"{self.name}: mu = inf with variant lcp_coulomb (the Coulomb LCP needs a finite "
                    "mu); use variant lcp_noslip (the mu = inf model) or qp, or a finite mu")
        for k in GAIN_KEYS:
            if k in params and not _number(params[k], f"{self.name}.{k}") >= 0:
                raise ControllerParamError(f"{self.name}.{k} must be >= 0, got {params[k]}")
        if "position_servo" in params:
            if params["position_servo"] not in POSITION_SERVO:
                raise ControllerParamError(f"{self.name}.position_servo: {params['position_servo']!r}; "
                                           f"choose one of {', '.join(POSITION_SERVO)}")
            if not initial:
                raise ControllerParamError(f"{self.name}.position_servo can only be set in the config")
        if "coulomb_compensation" in params:
            if not isinstance(params["coulomb_compensation"], bool):
                raise ControllerParamError(f"{self.name}.coulomb_compensation: expected true or "
                                           f"false, got {params['coulomb_compensation']!r}")
            if not initial:
                raise ControllerParamError(f"{self.name}.coulomb_compensation can only be set in "
                                           "the config")
        if "load_split" in params:
            if not isinstance(params["load_split"], bool):
                raise ControllerParamError(f"{self.name}.load_split: expected true or false, "
                                           f"got {params['load_split']!r}")
            if not initial:
                raise ControllerParamError(f"{self.name}.load_split can only be set in the config")
        if "torque_filter_hz" in params:
            f = _number(params["torque_filter_hz"], f"{self.name}.torque_filter_hz")
            if not 0.0 <= f <= 0.5 / self.ctx.dt:
                raise ControllerParamError(f"{self.name}.torque_filter_hz must be in [0, "
                                           f"{0.5 / self.ctx.dt:g}] Hz (Nyquist), got {f}")
            if not initial:
                raise ControllerParamError(f"{self.name}.torque_filter_hz can only be set in the config")
        if "height" in params and params["height"] is not None:
            h = _number(params["height"], f"{self.name}.height")
            if not 0.0 < h < 5.0:
                raise ControllerParamError(f"{self.name}.height must be in (0, 5) m, got {h}")
        if "feet" in params and params["feet"] is not None:
            f = params["feet"]
            if isinstance(f, str) or not all(isinstance(x, str) for x in f) or not f:
                raise ControllerParamError(f"{self.name}.feet: expected a list of link names, got {f!r}")
            if not initial:
                raise ControllerParamError(f"{self.name}.feet can only be set in the config")
        if params.get("posture") is not None:
            joint_vector(self.ctx, params["posture"], f"{self.name}.posture",
                         default=np.clip(np.zeros(self.ctx.n), self.ctx.lower, self.ctx.upper))
        return params

    def apply_params(self, params: dict) -> None:
        super().apply_params(params)
        if "variant" in params:
            self.core.variant = params["variant"]
        if "mu" in params:
            self.core.mu = self._mu(params["mu"])
        for k in GAIN_KEYS:
            if k in params:
                setattr(self.core.gains, k, float(params[k]))
        if params.get("posture") is not None:
            self.posture[:] = joint_vector(self.ctx, params["posture"], f"{self.name}.posture",
                                           default=self.posture)
            if self.targets is not None:
                self.targets.posture[:] = self.posture
        if params.get("height") is not None:
            self._pose[2] = float(params["height"])
            self._set_base_targets()

    def check_goal(self, goal) -> dict:
        if not isinstance(goal, dict):
            raise ControllerParamError(f"{self.name} goal: expected a base pose "
                                       f"{{{', '.join(POSE_KEYS)}}} in m and rad, got {goal!r}")
        out = {}
        for k, v in goal.items():
            if k not in POSE_KEYS:
                raise ControllerParamError(f"{self.name} goal: unknown key {k!r}; the base pose "
                                           f"takes {', '.join(POSE_KEYS)} (m, rad)")
            out[k] = _number(v, f"{self.name} goal {k}")
        if self.running:        # the range is around the pose found when the run began
            self._check_range(out)
        return out

    def apply_goal(self, goal: dict) -> None:
        self._check_range(goal)
        for k, v in goal.items():
            self._pose[POSE_KEYS.index(k)] = v
        self._set_base_targets()

    def _check_range(self, goal: dict) -> None:
        for k, v in goal.items():
            i = POSE_KEYS.index(k)
            lo, hi = self._standing[i] - GOAL_RANGE[k], self._standing[i] + GOAL_RANGE[k]
            if not lo <= v <= hi:
                raise ControllerParamError(f"{self.name} goal {k} = {v:.4f} is outside "
                                           f"[{lo:.4f}, {hi:.4f}] (the standing pose +- {GOAL_RANGE[k]})")

    def _set_base_targets(self) -> None:
        from servoloop.controller.wholebody.robot import rpy_to_matrix

        if self.targets is not None:
            self.targets.base_position[:] = self._pose[:3]
            self.targets.base_rotation[:] = rpy_to_matrix(self._pose[3:])

    # -- the loop ---------------------------------------------------------
    def start(self, state: JointState) -> None:
        self.posture[:] = self._default_posture(state.position)
        self.running = False

    def begin_run(self, q, v) -> None:
        """The run begins: the base goal is the pose found now (height: the param if set)."""
        from servoloop.controller.wholebody.balance import Targets
        from servoloop.controller.wholebody.robot import matrix_to_rpy, quat_to_matrix

        self.targets = Targets.standing(self.robot, q, self.posture)
        self._standing[:3] = q[:3]
        self._standing[3:] = matrix_to_rpy(quat_to_matrix(q[3:7]))
        self._standing[3:5] = 0.0                       # level
        self._pose[:] = self._standing
        if self.params.get("height") is not None:
            self._pose[2] = float(self.params["height"])
        self._set_base_targets()
        self.running = True

    def targets_for(self, t: float, q, v):
        """The task targets of this tick (``trot`` overrides it)."""
        return self.targets

    def update(self, t: float, state: JointState, command: Command) -> None:
        if t <= 0.0 and not self.running:
            # startup ramp: hold the posture, no torque (current servos get a host PD)
            command.position[:] = self.posture
            command.effort[:] = 0.0
            command.kp[:] = np.where(self._current, 5.0, 0.0)
            command.kd[:] = np.where(self._current, 0.1, 0.0)
            return
        stance = self.targets.stance if self.targets is not None else None
        q, v = self.source.update(state, stance)
        if not self.running:
            self.begin_run(q, v)
        tg = self.targets_for(t, q, v)
        tau = self.core.step(q, v, tg)
        if self.core.failed_streak >= self._max_failed:
            self._failed_too_long()
        # first-order low-pass: the state is a tick old on a bus, and the ID's torques
        # alternate tick to tick on it; a position servo's goal (slew-limited) cannot follow.
        # The goal: the measured position advanced by the damping (the posture where
        # impedance), plus tau / k_p where the controller offsets the servo itself; in place
        # and compiled (eleven NumPy calls of ~0.5 us each before)
        self._servo_command(tau, self._tau, self._alpha, state.position, state.velocity,
                            self._advance, self.posture, self._impedance_u8, self._own_offset,
                            self._coulomb, COULOMB_BAND, command.effort, command.position, command.kp, command.kd)
        if self._fell is None and 1.0 - 2.0 * (q[3] * q[3] + q[4] * q[4]) < self._fallen_cos:
            # the base's z axis from the vertical (quaternion x, y, z, w): the robot is down
            self._fell = (t, math.acos(max(-1.0, 1.0 - 2.0 * (q[3] * q[3] + q[4] * q[4]))))
        if self._fell is None and not self._loop_sees_falls:
            self._collapse.update(t, float(q[2]))
        if self._stall is not None and self._fell is None:
            np.abs(self._tau, out=self._buf)
            np.maximum(self._peak, self._buf, out=self._peak)
            np.greater(self._buf, self._stall, out=self._over_now)
            self._over += self._over_now
            self._run_ticks += 1

    @property
    def warnings(self) -> list[str]:
        """What the run summary should say about this controller (the daemon collects it)."""
        # with an IMU the loop's fall detector (controller/fall.py) reports and reacts to it
        fell = [] if self._fell is None or self._loop_sees_falls else [
            f"{self.name}: the robot fell: its base tilted {self._fell[1]:.2f} rad from upright "
            f"{self._fell[0]:.2f} s into the run (estimated; past {FALLEN_TILT} rad counts as fallen)"]
        c = self._collapse
        collapsed = [] if c.at is None else [
            f"{self.name}: the robot collapsed: its base sank to {c.at[1]:.3f} m from "
            f"{c.standing:.3f} m {c.at[0]:.2f} s into the run, not tipped (leg "
            "odometry; without an IMU the loop does not watch for it): the servos could not carry "
            "the robot"]
        return self._warnings + self._torque_warning() + fell + collapsed

    def _torque_warning(self) -> list[str]:
        """One warning when some joint was asked more than its servo's stall torque on more
        than ``OVER_STALL_SHARE`` of the running ticks (a touchdown's spike is not one)."""
        if self._stall is None or not self._run_ticks:       # ticks counted until a fall
            return []
        share = self._over / self._run_ticks
        worst = [i for i in np.argsort(-self._peak / self._stall) if share[i] > OVER_STALL_SHARE]
        if not worst:
            return []
        models = [s.model for s in self.ctx.config.servos]
        joints = ", ".join(f"{self.ctx.joint_names[i]} up to {self._peak[i]:.1f} N m on "
                           f"{100 * share[i]:.0f} % of the ticks ({models[i]}: {self._stall[i]:.1f})"
                           for i in worst[:3])
        more = f" and {len(worst) - 3} more" if len(worst) > 3 else ""
        return [f"{self.name}: the torques asked exceed the servos' stall torque: {joints}{more}; "
                "the robot sags or falls where they fall short: stronger servos (servoloop "
                "models) or a lighter robot"]

    def _failed_too_long(self):
        core = self.core
        raise FaultRaised(Fault(FaultKind.CONTROL, (
            f"{self.name}: the contact inverse dynamics ({core.variant}) found no torques on "
            f"{core.failed_streak} ticks in a row ({core.failed_streak * self.ctx.dt:.3f} s, the "
            f"limit is {MAX_FAILED_S} s); last error: {core.last_error}")))

    def status(self) -> dict:
        return {"name": self.name, "variant": self.core.variant, "running": self.running,
                "base_goal": dict(zip(POSE_KEYS, self._pose.tolist(), strict=True)),
                "estimated_base": self.source.estimated,
                "feet": [f.link for f in self.robot.feet], "id_failures": self.core.failures,
                "position_servo": self._position_servo_status(),
                "id_fallbacks": self.core.fallbacks, "last_id_error": self.core.last_error}

    def _position_servo_status(self) -> str | None:
        """``torque``, ``impedance``, ``mixed`` (both kinds of servo) or None (no position servo)."""
        cfg, pos = self.ctx.config, ~self._current
        if cfg is not None:
            pos &= np.array([s.mode != "velocity" for s in cfg.servos])
        imp = self._impedance[pos]
        return None if not imp.size else "impedance" if imp.all() else "torque" if not imp.any() else "mixed"
