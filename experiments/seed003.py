"""Seed 003's closed-loop experiment: the quadruped trotting under seven controllers (Tables 3-5).

The built-in quadruped trots (seed 003's gait: cycle 0.3 s, duty 75 %, step
height 1.5 cm, 20 cm/s forward) on the contact simulator, rigid or compliant
ground, friction 0.1 or infinite, its joints ideal torque sources by default
(:class:`experiments.closed_loop.TorquePlant`, :func:`_sim_config`), with the
simulator's true base state (the paper's controllers shared the simulator's
state too).  Rigid ground is the paper's simulator model: the Anitescu-Potra
LCP with a 4-direction friction pyramid solved by Lemke
(``RigidSettings(solver="lemke")``), at a true mu = inf; compliant ground at
mu = inf has the tangential spring-damper anchored at touchdown (``COMPLIANT_INF``,
``TANGENT_SPRING``), at a finite mu the stick-slip law.

Controllers (the paper's seven):

==========  ==============================================================
qp_mu       contact ID, the two-stage QP with the friction pyramid (compiled: Stage I
            keeps normal complementarity, see core_cy.inverse_dynamics)
qp_inf      the same QP without the friction bound
lcp_mu      contact ID, Coulomb LCP (Lemke)
lcp_inf     contact ID, no-slip LCP (the paper's LCP,inf)
pid         the paper's: joint PID with the IDs' gains, operational-space PD on the
            swing feet, VIIP normal-force balance (:mod:`experiments.seed003_pid`)
id_lag1     rigid-body ID with the simulator's exact contact forces 1 tick old (the
            base's acceleration from them, ``LAG_BASE``; on compliant ground the forces
            it applied over the step, ``LAG_FORCES``)
id_lag2     the same, 2 ticks old
==========  ==============================================================

``pid_servo`` (not one of the seven) is the joint PID with the XM430's stiffness.
As in the paper, every ID controller feeds the same joint error feedback into
``qdd_des`` (``KP_ID``, ``KD_ID``, plus the reference acceleration) and PID tracks
the same reference: the
configuration that puts the base at its reference pose (the trot planner of
:mod:`controller.wholebody.trot_planner`) and each foot at its reference
point (stance feet where they landed, swing feet on their splines; the swing legs
from the measured base pose), solved by a few damped Gauss-Newton steps per tick.

Metrics per run (means over the ticks and joints): ``pos_err_rad``
E|q - q_ref|, ``vel_err_rad_s`` E|dq - dq_ref|, ``dtau_mean`` E|dtau/dt|
[N m/s], ``tau_mean`` E|tau| [N m], ``force_err_pct`` the l1 normal-force
prediction error sum|f_pred - f_sim| / sum f_sim per foot [%] (no row for
pid, which predicts none), ``fell`` 1 when the trunk fell (height below half
the standing height or tilted past 45 deg; the run stops there),
``id_fallbacks``, ticks whose ID solve failed and the §4.5 nearest feasible solve
answered (``FAILED_TICK``), and ``id_failures``, ticks nothing answered (the previous
torque kept).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from servoloop.controller.wholebody.balance import BalanceCore
from servoloop.controller.wholebody.robot import WholeBodyRobot
from servoloop.controller.wholebody.trot_planner import TrotPlanner
from servoloop.experiments.closed_loop import TorquePlant, builtin_urdf
from servoloop.experiments.seed003_distribute import NoSlipSplit
from servoloop.experiments.seed003_fallback import ContactFallback
from servoloop.experiments.seed003_lag_loop import applied_forces, lagged_id_torques
from servoloop.experiments.seed003_pid import PaperPID

__all__ = ["CONTROLLERS", "EXTRA_CONTROLLERS", "GROUNDS", "MUS", "PAPER", "Case", "run_case", "run", "case_name"]

CONTROLLERS = ("qp_mu", "qp_inf", "lcp_mu", "lcp_inf", "pid", "id_lag1", "id_lag2")
#: controllers beyond the paper's seven: the servo-stiff joint PID (pid before it was the paper's)
EXTRA_CONTROLLERS = ("pid_servo",)
GROUNDS = ("rigid", "compliant")
MUS = (0.1, math.inf)
#: "infinite" friction where a finite coefficient is needed: the compliant law (its
#: regularised Coulomb force is mu f_n) and the Coulomb-model IDs (lcp_mu, qp_mu: Lemke's
#: tableau needs finite entries).  2 is never reached by a foot here (|f_t| / f_n stays
#: below 1).  The rigid simulator takes mu = inf as it is (no tangential bound).
MU_INF = 2.0
#: the compliant ground's "infinite" friction with COMPLIANT_INF = "mu" (the stick-slip law
#: and the IDs on it; not the default): at 2 the
#: regularised Coulomb law's stick stiffness (mu f_n / v_static, its normal-velocity
#: coupling left explicit by the linearly implicit step) shakes even a still stand (pid,
#: 3 s: 0.030 rad, 144 N m/s) and every controller fell within 10 s of trot; at 1 pid
#: and lcp_mu trot (3 s: 0.011 rad).  No foot asks for |f_t| / f_n > 1 here
MU_INF_COMPLIANT = 1.0
#: compliant "inf": "spring" (a true mu = inf, the tangential spring-damper anchored at
#: touchdown, ContactLaw.tangent_stiffness) or "mu" (the stick-slip law at MU_INF_COMPLIANT)
COMPLIANT_INF = "spring"
#: that spring's k_t [N/m] and c_t [N s/m]: the normal law's stiffness at the stand's 1 mm
#: sink (1.5 K sqrt(1 mm) = 9.5e3 N/m) and its full damping
TANGENT_SPRING = (1.0e4, 150.0)
SPEED_MPS = 0.2
#: the rigid ground's LCP solver: the paper's simulator (Moby) solves the Stewart-Trinkle /
#: Anitescu-Potra LCP with a friction pyramid by pivoting, as RigidSettings(solver="lemke")
RIGID_SOLVER = "lemke"
#: take a swing foot the simulator reports loaded in the second half of its swing as landed
#: (its reference where it is, and in the ID's contacts).  On since the reference acceleration
#: is fed forward and the swing legs are solved from the measured base (10 s, lcp_mu: rigid
#: mu 0.1 1.99 -> 1.57 %, rigid mu = inf 4.9 -> 2.2 %, no fall; compliant unchanged); before
#: those, it made lcp_mu fall at mu = inf
EARLY_TOUCHDOWN = True
#: add to the ID's contacts the swing feet the simulator reported loaded last tick: "none",
#: "liftoff" (first half of the swing), "touchdown" (second half) or "both".  Off: on rigid
#: mu = inf "both" gave 2.2 % force error (none: 12.3 %) and "liftoff" 9.3 %, but both made
#: lcp_mu fall within 10 s; at mu 0.1 "liftoff" gave 1.3 % (none: 1.5 %)
SENSED_CONTACTS = "none"
#: plan swing touchdowns at the terrain's surface (z = 0, known from the simulator as the
#: true state is) instead of the standing feet's height, which compliant ground sinks 1 mm
SURFACE_TOUCHDOWN = True
#: the plant's joints (see _sim_config)
ACTUATORS = ("ideal", "xm430")
#: joint error feedback of every ID controller, 1/s^2 and 1/s (critically damped)
KP_ID, KD_ID = 2500.0, 100.0
#: feed the reference joint acceleration forward into qdd_des (ddq_ref + feedback)
FEEDFORWARD = True
#: solve the swing legs' reference joints from the measured base pose (see run_case)
SWING_FROM_BASE = True
#: a tick whose contact ID fails: "fallback" (the paper's §4.5 nearest feasible solve, the
#: Coulomb LCP at mu 5 if that fails: :class:`experiments.seed003_fallback.ContactFallback`),
#: "coulomb" (that Coulomb LCP straight away) or "hold" (the previous torques, as before:
#: lcp_inf at rigid mu = inf held them on 22 ticks and fell at 0.02 m).  Measured in
#: BENCHMARKS.md's seed 003 section
FAILED_TICK = "fallback"
#: lcp_inf on rigid mu = inf (:mod:`experiments.seed003_distribute`; all off: the paper's
#: LCP,inf, which fell at 0.08 m).  Alg. 2 loads one or two feet and the others float off
#: by tenths of a millimetre; the load cannot go to them when a loaded foot lifts.
#: CONSISTENT_QDD: first move qdd_des to the nearest joint acceleration with which the base's
#: dynamics keeps every stance foot stuck and on the ground with pushing-only forces
CONSISTENT_QDD = True
#: DISTRIBUTE: of the no-slip ID's equally valid contact forces take the split of least
#: weighted norm, a foot's weight rising over the last LIFTOFF_HORIZON_S of its stance
DISTRIBUTE = True
#: a tick whose no-slip set does not settle takes that stance QP's own answer (before
#: FAILED_TICK's fallback)
QP_ANSWERS_FAILED = True
#: the controllers CONSISTENT_QDD applies to (DISTRIBUTE and QP_ANSWERS_FAILED: lcp_inf
#: only).  qp_inf, rigid mu = inf, 10 s: without it falls at 1.0 m, with it trots (0.28 %)
STANCE_QP_FOR = ("lcp_inf", "qp_inf")
#: id_lag1/2's base acceleration (:func:`experiments.seed003_lag_loop.lagged_id_torques`):
#: "dynamics", the paper's reduced form (digest §2: the base rows give the base's
#: acceleration from the contact forces, here the fed-back ones, and the joint rows carry its
#: coupling B^T a_b), or "zero" (the base taken as not accelerating, as before issue 11's lag
#: round: the loop is unstable on a sticking contact, even fed the current step's forces)
LAG_BASE = "dynamics"
#: the forces id_lag1/2 are fed on compliant ground: "applied" (what the simulator applied over
#: the step: its step is linearly implicit in the contact's damper and tangential spring,
#: :func:`experiments.seed003_lag_loop.applied_forces`) or "recorded" (its ``contact_forces``,
#: the law at the step's start: the loop then feeds back the damper's force at the old
#: velocity, and compliant mu = inf fell).  Rigid ground: the same either way
LAG_FORCES = "applied"
#: the simulator's step, which is also the control tick [s]: the paper's Moby step (its
#: experiment scripts, PositronicsLab/idyn-experiments Experiments/Quad/*/RUN.sh, run
#: ``moby-driver -s=0.001``), so ID(t-2)'s lag is 2 ms there too.  Other steps: ``run_case``'s
#: ``step_s`` (``--step-ms``); the lagged IDs' loop depends on the lag in time, not in ticks
#: (BENCHMARKS.md, seed 003, the 2-tick lag round)
STEP_S = 1e-3

# The paper's Tables 3 (pos / vel), 4 (dtau / tau, terrain not stated) and 5 (force %).
_T3 = {
    "qp_mu": [(0.0310, 1.9425), (0.0486, 2.2596), (0.0217, 2.0365), (0.0342, 2.9360)],
    "qp_inf": [(0.0483, 2.6295), (0.0654, 2.5737), None, (0.0446, 3.9779)],
    "lcp_mu": [(0.0239, 1.8386), (0.0259, 1.8784), (0.0219, 2.0786), (0.0226, 2.1243)],
    "lcp_inf": [None, (0.0260, 1.8950), None, None],
    "pid": [(0.0895, 1.5569), (0.0916, 1.4653), (0.0850, 1.5845), (0.0850, 1.5845)],
    "id_lag1": [(0.0325, 1.7952), (0.1317, 2.5585), (0.0265, 1.8858), (0.1270, 4.4377)],
    "id_lag2": [(0.0328, 1.7830), (0.1316, 2.5608), (0.0267, 1.8742), (0.1270, 4.2061)],
}
_T4 = {"qp_mu": (52.5718, 0.2016), "qp_inf": (245.5117, 0.4239), "lcp_mu": (677.9693, 0.8351),
       "lcp_inf": (351.1803, 0.4055), "id_lag1": (974.3312, 0.9918), "id_lag2": (17528.0, 2.7416),
       "pid": (100.1571, 0.3413)}
_T5 = {"qp_mu": [12.53, 27.48, 17.12, 30.86], "qp_inf": [22.26, 25.26, None, 30.66],
       "lcp_mu": [1.94, 1.55, 6.37, 24.00], "lcp_inf": [None, 1.16, None, None]}
_COLUMN = {("rigid", 0.1): 0, ("rigid", math.inf): 1, ("compliant", 0.1): 2, ("compliant", math.inf): 3}


def _paper() -> dict:
    """(ground, mu, controller) -> {metric: paper value}; fell = 1 where the paper's robot fell."""
    out = {}
    for (ground, mu), col in _COLUMN.items():
        for c in CONTROLLERS:
            d = {}
            t3 = _T3[c][col]
            if t3 is None:
                d["fell"] = 1.0
            else:
                d["pos_err_rad"], d["vel_err_rad_s"] = t3
                d["fell"] = 0.0
                d["dtau_mean"], d["tau_mean"] = _T4[c]
            if c in _T5 and _T5[c][col] is not None:
                d["force_err_pct"] = _T5[c][col]
            out[(ground, mu, c)] = d
    return out


PAPER = _paper()


def case_name(ground: str, mu: float, controller: str) -> str:
    return f"{ground} mu={'inf' if math.isinf(mu) else f'{mu:g}'} {controller}"


@dataclass(frozen=True)
class Case:
    ground: str
    mu: float
    controller: str


def _sim_config(ground: str, mu: float, actuators: str = "ideal", step_s: float = STEP_S):
    """The plant.  ``actuators="ideal"`` (default, the paper's simulator): the joints are
    ideal torque sources (no gearbox friction, no torque limit, no motor line).
    ``"xm430"``: the simulator's XM430-W350 in current mode as it is (Coulomb friction
    0.134 N m, torque clipped at its 4.1 N m stall torque and by its motor line).

    Why ideal: at the trot's touchdowns the rigid ground stops a foot within a tick, and
    the IDs ask for up to ~35 N m for that tick; clipped at 4.1 N m the simulator's forces
    differ from the predicted ones (lcp_mu, rigid mu 0.1, 2 s: 12 % force error, 10 points
    of it on the 3 % of ticks that clip; ideal: 0.7 %).  The XM430's Coulomb friction (a
    quarter of the mean joint torque) is a torque no controller here models (with it, 20 %)."""
    from dataclasses import replace

    from servoloop.core_cy.contact.laws import ContactLaw
    from servoloop.core_cy.sim.model import RigidSettings, simulator_servo_model
    from servoloop.core_cy.sim.simulator import SimConfig

    if actuators not in ACTUATORS:
        raise ValueError(f"seed003 actuators: {actuators!r}; choose one of {', '.join(ACTUATORS)}")
    if not (isinstance(step_s, (int, float)) and math.isfinite(step_s) and 0.0 < step_s <= 0.01):
        raise ValueError(f"seed003 step: {step_s!r} s; expected a step in (0, 0.01] s")
    servo = simulator_servo_model()
    if actuators == "ideal":
        # 1 kN m stall and 1e5 rad/s no-load speed: no limit and a motor line of 0.01 N m s
        servo = replace(servo, coulomb_nm=0.0, viscous_nm_s_per_rad=0.0, stall_torque_nm=1e3,
                        no_load_speed_rad_s=1e5)
    if ground == "rigid":
        return SimConfig(mode="rigid", dt=float(step_s), servo=servo,
                         rigid=RigidSettings(mu=mu, solver=RIGID_SOLVER))
    if math.isinf(mu) and COMPLIANT_INF == "spring":
        # a true mu = inf: the tangential spring-damper anchored where a foot touched down
        k_t, c_t = TANGENT_SPRING
        return SimConfig(mode="compliant", dt=float(step_s), servo=servo,
                         law=ContactLaw(mu_static=mu, mu_dynamic=mu, tangent_stiffness=k_t,
                                        tangent_damping=c_t))
    m = MU_INF_COMPLIANT if math.isinf(mu) else mu
    return SimConfig(mode="compliant", dt=float(step_s), servo=servo,
                     law=ContactLaw(mu_static=m, mu_dynamic=m))


class _Reference:
    """Reference joint positions (n,) by Gauss-Newton IK of the base and foot references."""

    def __init__(self, robot: WholeBodyRobot, q0) -> None:
        self.robot = robot
        self.q = np.array(q0, dtype=float)
        self.lower = np.asarray(robot.model.lower_limits, dtype=float)[7:]
        self.upper = np.asarray(robot.model.upper_limits, dtype=float)[7:]
        # each foot's leg: the joint columns its point Jacobian touches
        robot.kinematics(self.q)
        self.cols = []
        for f in robot.feet:
            J = robot.point_jacobian(self.q, f.body, f.center, f.radius)
            self.cols.append(np.flatnonzero(np.abs(J[:, 6:]).sum(axis=0) > 1e-12) + 6)

    def solve(self, base_pos, base_rot, feet_pos, iters: int = 3) -> np.ndarray:
        from servoloop.controller.wholebody.base_source import _quat

        r, q = self.robot, self.q
        q[:3] = base_pos
        # base_rot: (3, 3) rotation, or (4,) the plant's own quaternion
        q[3:7] = base_rot if np.shape(base_rot) == (4,) else _quat(base_rot)
        for _ in range(iters):
            r.kinematics(q)
            for f, cols, target in zip(r.feet, self.cols, feet_pos, strict=True):
                e = target - r.foot_position(f)
                J = r.point_jacobian(q, f.body, f.center, f.radius)[:, cols]
                # damped least squares: an out-of-reach target stretches the leg, no blow-up
                step = J.T @ np.linalg.solve(J @ J.T + 1e-4 * np.eye(3), e)
                q[cols + 1] += np.clip(step, -0.2, 0.2)
            np.clip(q[7:], self.lower, self.upper, out=q[7:])
        return q[7:]


def run_case(case: Case, seconds: float = 3.0, speed: float = SPEED_MPS, trace=None,
             actuators: str = "ideal", step_s: float = STEP_S) -> dict:
    """Trot ``seconds`` of simulated time with ``case``'s ground and controller; the metrics.

    actuators : "ideal" (the paper's simulator) or "xm430" (see :func:`_sim_config`)
    step_s : the simulator's step and control tick [s] (default ``STEP_S``, 1 ms); the lagged
        IDs' lag is 1 or 2 of these
    trace : list or None; when given, one dict per tick is appended (``stance`` (feet,)
        bool of the planner, ``pred`` / ``actual`` (feet,) normal forces [N] or None,
        ``tau`` (n,) N m) for diagnosing where a prediction misses.
    """
    from servoloop import core_cy
    from servoloop.experiments.gaits import stand_goals

    urdf = builtin_urdf("quadruped")
    robot = WholeBodyRobot.from_urdf(urdf)
    names = list(robot.model.actuated_joint_names)
    q_stand = stand_goals(urdf, joint_names=names)
    plant = TorquePlant(urdf, _sim_config(case.ground, case.mu, actuators, step_s), q_stand)
    robot.armature[:] = plant.armature
    dt = plant.dt
    c = case.controller
    variant = {"qp_mu": "qp", "qp_inf": "qp", "lcp_mu": "lcp_coulomb", "lcp_inf": "lcp_noslip"}.get(c)
    # the *_inf controllers assume no friction limit; the others the terrain's (the simulator's)
    mu_fin = MU_INF if case.ground == "rigid" or COMPLIANT_INF == "spring" else MU_INF_COMPLIANT
    mu_id = math.inf if c in ("qp_inf", "lcp_inf") else (mu_fin if math.isinf(case.mu) else case.mu)
    # rigid ground: the ID's contact model is the simulator's (true gaps, same stabilisation);
    # compliant ground sinks ~1 mm: the stance-plane form (see BalanceCore)
    core = BalanceCore(robot, dt, variant or "lcp_coulomb", mu_id,
                       plane="world" if case.ground == "rigid" else "stance",
                       noslip_fallback=False)      # a failed tick: FAILED_TICK decides
    if FAILED_TICK not in ("fallback", "coulomb", "hold"):
        raise ValueError(f"seed003 FAILED_TICK: {FAILED_TICK!r}; choose fallback, coulomb or hold")
    fallback = None if FAILED_TICK == "hold" else ContactFallback(
        robot, dt, core.variant, mu_id, plane=core.plane,
        first="coulomb" if FAILED_TICK == "coulomb" else "nearest")
    if LAG_FORCES not in ("applied", "recorded"):
        raise ValueError(f"seed003 LAG_FORCES: {LAG_FORCES!r}; choose applied or recorded")
    held = 0
    dist = None
    # the feet stuck is the no-slip assumption: rigid ground at mu = inf only (at mu 0.1 the
    # feet slip and both *_inf controllers fall either way, as the paper's LCP,inf did)
    if c in STANCE_QP_FOR and (DISTRIBUTE or CONSISTENT_QDD) and case.ground == "rigid" \
            and math.isinf(case.mu):
        dist = NoSlipSplit(robot, dt)
    # settle on the ground under a joint PD to the standing posture before the trot
    for _ in range(int(0.2 / dt)):
        plant.step(20.0 * (q_stand - plant.q[7:]) - 0.15 * plant.v[6:])
    planner = TrotPlanner(robot, plant.q.copy(), q_stand, stand_time=0.3)
    if SURFACE_TOUCHDOWN:
        planner.ground_z = 0.0
    planner.speed_goal = speed
    ref = _Reference(robot, plant.q.copy())
    ref_sw = _Reference(robot, plant.q.copy())      # swing legs from the measured base
    swing_cols = [cols - 6 for cols in ref.cols]      # each foot's joints in q[7:]

    def reference(base_pos, base_rot, feet, base_now, stance_now):
        # stance legs: IK from the reference base (their joint errors move the base back);
        # swing legs: IK from the measured base, so a base below its reference does not
        # put the swing foot into the ground before its touchdown (SWING_FROM_BASE)
        q_r = ref.solve(base_pos, base_rot, feet).copy()
        if SWING_FROM_BASE and not stance_now.all():
            q_m = ref_sw.solve(base_now[:3], base_now[3:7], feet)
            for j, on in enumerate(stance_now):
                if not on:
                    q_r[swing_cols[j]] = q_m[swing_cols[j]]
        return q_r
    z0 = float(plant.q[2])
    n_steps = int(round(seconds / dt))
    model, data = robot.model, core_cy.Data(robot.model)
    pts = plant.sim.points
    lag = {"id_lag1": 1, "id_lag2": 2}.get(c, 0)
    f_hist = [np.zeros((len(pts), 3)) for _ in range(3)]
    f_fed = [np.zeros((len(pts), 3)) for _ in range(3)]     # what id_lag1/2 are fed (LAG_FORCES)
    integ = np.zeros(robot.n)
    # pid_servo: the servo's stiffness and integral gain (20 N m/rad, 5 N m/(rad s): a position-mode
    # XM430 holds the stand with them), damped as the ID controllers' feedback is (critically,
    # at each joint's inertia in the standing pose: 0.37-0.60 N m s/rad).  It is 2-5x stiffer
    # per joint than the IDs' feedback (KP_ID times the joint's inertia: 4-11 N m/rad); a PID
    # with the IDs' gains fell within 2 s (no model holds the weight; the paper's PID also had
    # task-space and inverted-pendulum balance terms), and one with the servo's own damping
    # (0.15, damping ratio ~0.25) fell on 3 of the 4 terrains with ideal joints
    kp_pid, ki_pid = 20.0, 5.0
    M0 = np.array(core_cy.crba(robot.model, core_cy.Data(robot.model), plant.q), dtype=float)
    kd_pid = 2.0 * np.sqrt(kp_pid * (np.diag(M0)[6:] + robot.armature))
    pid = PaperPID(robot, np.diag(M0)[6:] + robot.armature, KP_ID, KD_ID, dt) if c == "pid" else None
    qdd_buf = np.zeros(robot.model.nv)

    def joint_qdd(q_ref, dq_ref, qj, vj):
        # the paper's ID controllers: the same joint error feedback into qdd_des (the base
        # part is what the contacts then give)
        qdd_buf[6:] = KP_ID * (q_ref - qj) + KD_ID * (dq_ref - vj) + ddq_ref
        return qdd_buf

    tau_prev = None
    acc = {"pos": 0.0, "vel": 0.0, "dtau": 0.0, "tau": 0.0, "ferr": 0.0, "fsum": 0.0}
    n_used = 0
    fell = 0
    q_ref_prev = None
    dq_ref_prev = None
    ddq_ref = np.zeros(robot.n)
    prev_targets = None
    foot_rows = np.cumsum([0] + [len(f.points) for f in robot.feet])
    robot.kinematics(plant.q)
    anchor = np.array([robot.foot_position(f) for f in robot.feet])
    was_stance = np.ones(len(robot.feet), dtype=bool)
    landed = np.zeros(len(robot.feet), dtype=bool)
    tau_max = np.array([s.stall_torque_at_supply_nm for s in plant.sim.config.servos(robot.na)])
    for k in range(n_steps):
        q, v = plant.q.copy(), plant.v.copy()
        tg = planner.update(k * dt, q, v)
        robot.kinematics(q)
        stance = tg.stance.copy()
        u_sw = planner.gait.swing_progress(k * dt - planner.stand_time) if k * dt >= \
            planner.stand_time else np.full(len(robot.feet), -1.0)
        sensed = np.array([f_hist[-1][foot_rows[j]:foot_rows[j + 1], 2].sum() > 0.0
                           for j in range(len(robot.feet))])
        if EARLY_TOUCHDOWN:
            # a foot in the second half of its swing that the simulator reported loaded last
            # tick has landed early: in stance from now on (its reference where it is, and in
            # the ID's contacts), instead of being driven on along its spline into the ground
            u = planner.gait.swing_progress(k * dt - planner.stand_time) if k * dt >= \
                planner.stand_time else np.full(len(robot.feet), -1.0)
            sensed = np.array([f_hist[-1][foot_rows[j]:foot_rows[j + 1], 2].sum() > 0.0
                               for j in range(len(robot.feet))])
            landed |= ~stance & (u > 0.5) & sensed
            landed &= ~stance
            stance |= landed
        feet_now = np.array([robot.foot_position(f) for f in robot.feet])
        for i, f in enumerate(robot.feet):     # a stance foot's reference: where it landed
            if stance[i] and not was_stance[i]:
                anchor[i] = robot.foot_position(f)
        switched = stance != was_stance
        was_stance[:] = stance
        feet_ref = np.where(stance[:, None], anchor, tg.swing_position)
        if switched.any() and prev_targets is not None:
            # a foot that lands or lifts off changes its reference point (spline end ->
            # where it landed, or back): a step, not a velocity.  The previous tick's reference
            # is re-solved with those feet's new points, so dq_ref holds only the base's and
            # the swing feet's motion (the raw difference read the step as ~1 rad/s, and
            # KD_ID * that saturated the actuators at every touchdown)
            p_pos, p_rot, p_feet, p_base = prev_targets
            q_ref_prev = reference(p_pos, p_rot, np.where(switched[:, None], feet_ref, p_feet), p_base,
                                   stance)
        q_ref = reference(tg.base_position, tg.base_rotation, feet_ref, q[:7], stance)
        prev_targets = (tg.base_position.copy(), tg.base_rotation.copy(), feet_ref.copy(), q[:7].copy())
        dq_ref = np.zeros(robot.n) if q_ref_prev is None else (q_ref - q_ref_prev) / dt
        q_ref_prev = q_ref
        if FEEDFORWARD and dq_ref_prev is not None and not switched.any():
            ddq_ref[:] = (dq_ref - dq_ref_prev) / dt
        else:
            ddq_ref[:] = 0.0
        dq_ref_prev = dq_ref
        qj, vj = q[7:], v[6:]
        pred = None
        if c == "pid":
            M = np.array(core_cy.crba(model, data, q), dtype=float)
            tau = pid.torques(q, v, q_ref, dq_ref, stance, feet_ref, tg.swing_velocity * ~stance[:, None],
                              tg.base_position, tg.base_velocity, M)
        elif c == "pid_servo":
            e = q_ref - qj
            integ += e * dt
            tau = kp_pid * e + kd_pid * (dq_ref - vj) + ki_pid * integ
        elif lag:
            # ID(t_{i-lag}): f_hist[-1] is the previous step's force (the last one the
            # simulator reported); it read f_hist[-1 - lag], one tick older than named
            f_lag = f_fed[-lag]
            tau = lagged_id_torques(robot, data, q, v, joint_qdd(q_ref, dq_ref, qj, vj), f_lag, pts,
                                    LAG_BASE)
            pred = np.array([f_lag[foot_rows[j]:foot_rows[j + 1], 2].sum() for j in range(len(robot.feet))])
        else:
            # the ID's contacts: the planner's stance feet.  Adding the feet the simulator takes as
            # candidates (gap below its margin) was tried: 12 % -> 20 % force error (rigid mu 0.1,
            # 2 s), as the joint feedback then drives a landing foot into the ground (S4.5)
            in_id = stance.copy()
            if SENSED_CONTACTS in ("liftoff", "both"):
                in_id |= sensed & (u_sw >= 0.0) & (u_sw <= 0.5)
            if SENSED_CONTACTS in ("touchdown", "both"):
                in_id |= sensed & (u_sw > 0.5)
            failed = core.failures
            qdd = joint_qdd(q_ref, dq_ref, qj, vj)
            if dist is not None and CONSISTENT_QDD:
                qdd = dist.consistent(q, v, qdd, in_id)
            with np.errstate(invalid="ignore"):   # mu = inf in the ID's diagnostics
                tau = core.torques(q, v, qdd, in_id).copy()
            f_n = core.forces[:, 2]
            if core.failures != failed:
                # the ID found no answer: the §4.5 nearest feasible one, not stale torques
                held += 1
                if dist is not None and dist.answer is not None and QP_ANSWERS_FAILED and c == "lcp_inf":
                    tau, f_n = dist.answer      # the stance QP's own no-slip answer
                    dist.answered += 1
                    held -= 1
                elif fallback is not None:
                    M = np.array(core_cy.crba(model, data, q), dtype=float)
                    h = np.array(core_cy.nonlinear_effects(model, data, q, v), dtype=float)
                    try:
                        tau, f_n = fallback.torques(M, h, q, v, qdd, in_id)
                        held -= 1
                    except Exception:  # noqa: BLE001 - nothing answered: the held torques
                        pass
            if dist is not None and DISTRIBUTE and c == "lcp_inf" and core.failures == failed:
                tau, f_n = dist.split(q, v, tau, core.forces, in_id, planner.gait, k * dt - planner.stand_time)
            pred = np.zeros(len(robot.feet))
            rows = 0
            for j, f in enumerate(robot.feet):
                if in_id[j]:
                    pred[j] = f_n[rows:rows + len(f.points)].sum()
                    rows += len(f.points)
        # what an actuator can give (the simulator clips there too)
        tau_cmd = tau
        tau = np.clip(tau, -tau_max, tau_max)
        plant.step(tau)
        f_now = plant.contact_forces.copy()
        f_hist = f_hist[1:] + [f_now]
        if lag:
            f_fed = f_fed[1:] + [applied_forces(robot, plant.sim.config, pts, q, v, plant.v, f_now)
                                 if LAG_FORCES == "applied" else f_now]
        if pred is not None:
            actual = np.array([f_now[foot_rows[j]:foot_rows[j + 1], 2].sum() for j in range(len(robot.feet))])
            acc["ferr"] += float(np.abs(pred - actual).sum())
            acc["fsum"] += float(actual.sum())
        if trace is not None:
            trace.append({"stance": stance.copy(), "tau": tau.copy(), "tau_cmd": tau_cmd.copy(),
                          "feet_ref": feet_ref.copy(), "feet": feet_now,
                          "q_err": q_ref - qj, "v_err": dq_ref - vj,
                          "pred": None if pred is None else pred.copy(),
                          "actual": None if pred is None else actual.copy()})
        acc["pos"] += float(np.abs(qj - q_ref).mean())
        acc["vel"] += float(np.abs(vj - dq_ref).mean())
        acc["tau"] += float(np.abs(tau).mean())
        if tau_prev is not None:
            acc["dtau"] += float(np.abs(tau - tau_prev).mean()) / dt
        tau_prev = tau
        n_used += 1
        R = plant.q[3:7]
        tilt = 2.0 * math.asin(min(1.0, math.hypot(R[0], R[1])))
        if plant.q[2] < 0.5 * z0 or tilt > math.radians(45.0) or not np.isfinite(plant.q).all():
            fell = 1
            break
    n = max(n_used, 1)
    pred_any = c not in ("pid", "pid_servo")
    out = {"pos_err_rad": acc["pos"] / n, "vel_err_rad_s": acc["vel"] / n,
           "dtau_mean": acc["dtau"] / max(n - 1, 1), "tau_mean": acc["tau"] / n, "fell": float(fell)}
    if pred_any:
        out["force_err_pct"] = 100.0 * acc["ferr"] / acc["fsum"] if acc["fsum"] > 0 else float("nan")
        out["id_failures"] = float(held)
        out["id_fallbacks"] = float((0 if fallback is None else fallback.answered)
                                    + (0 if dist is None else dist.answered))
    out["distance_m"] = float(plant.q[0])
    return out


UNITS = {"pos_err_rad": "rad", "vel_err_rad_s": "rad/s", "dtau_mean": "N m/s", "tau_mean": "N m",
         "force_err_pct": "%", "fell": "0/1", "id_failures": "ticks", "id_fallbacks": "ticks", "distance_m": "m"}


def run(seconds: float = 3.0, grounds=GROUNDS, mus=MUS, controllers=CONTROLLERS, progress=None,
        actuators: str = "ideal", step_s: float = STEP_S) -> dict:
    """Every case; the benchmark JSON form (:func:`bench.common.report`), anchors from the paper.

    A row without a paper value has ``anchor`` and ``ratio`` null.
    """
    rows = []
    for ground in grounds:
        for mu in mus:
            for c in controllers:
                name = case_name(ground, mu, c)
                if progress:
                    progress(name)
                metrics = run_case(Case(ground, mu, c), seconds, actuators=actuators, step_s=step_s)
                paper = PAPER.get((ground, mu, c), {})
                for m, val in metrics.items():
                    a = paper.get(m)
                    ours = None if val is None or not math.isfinite(val) else float(val)
                    rows.append({"case": name, "metric": m, "unit": UNITS[m], "ours": ours,
                                 "anchor_name": "Zapolsky & Drumwright 2016" if a is not None else None,
                                 "anchor": a,
                                 "ratio": (ours / a if (a and ours is not None) else None)})
    return {"benchmark": "seed003", "seconds": seconds, "actuators": actuators, "step_s": step_s,
            "rows": rows}
