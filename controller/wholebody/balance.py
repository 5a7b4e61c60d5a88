"""Task-space PD -> desired accelerations -> contact inverse dynamics -> joint torques.

One tick of whole-body control (seed 003's controller structure):

1. Task accelerations from PD laws: the base pose (world position and
   orientation), swing feet (world points), posture (joints), and stance
   feet held still (``a = -kd_contact * v``, the foot's velocity damped out).
2. The full desired acceleration ``qdd`` (nv,) is the weighted least-squares
   solution of the stacked task rows ``J_i qdd = a_i`` (stance feet weigh
   most, posture least, so posture acts in what the others leave free).
3. The contact inverse dynamics (:func:`core_cy.inverse_dynamics.solve`,
   variant ``qp`` / ``lcp_coulomb`` / ``lcp_noslip``) on the stance feet
   gives the joint torques that realise the joint part of ``qdd`` with the
   contact forces it predicts.

4. ``lcp_noslip`` only (``noslip_split``): the forces are shared among the stance
   feet (:mod:`.force_split`).  With the feet stuck the forces that give the ID's base
   wrench form a family (four coplanar feet: a twist across the diagonals and
   squeezes) and Alg. 2 returns an end of it, a stance foot at zero force; the split
   takes the member of least weighted norm (pushing only), the torques changing by
   ``-J_j^T delta``, the accelerations not at all.  :attr:`BalanceCore.liftoff_weights`
   (``trot`` sets them) unloads a foot over the last 30 ms before its planned
   lift-off.  Measured in the daemon (quadruped, lockstep through the virtual bus, 5 s):
   without it a stance foot carried < 2 % of the predicted load on every four-foot
   tick, and ``trot`` fell on rigid mu = inf ground (tilt 53 deg); with it the least
   loaded foot carries ~20 % on average and the trot stays up (2.3 deg).  Only on the
   stance plane; compiled (:mod:`._force_split`, NumPy oracle :mod:`.force_split`).
   ``lcp_coulomb`` (``coulomb_split``, point feet): the same on its answer's sticking
   contacts (tangential force strictly inside the cone, or unloaded; a sliding one keeps
   its force), every shared force kept inside the ID's cone ``mu``.  Measured the same way
   (``trot`` 0.1 m/s, default mu 0.8, 5 s): on rigid mu = inf ground it fell without it
   (57 deg, base at 0.12 m) and stays up with it (3.9 deg, 0.24 m); on the default ground
   tilt max 3.9 -> 3.1 deg, a lifting foot's share 38 % -> 20 % on average.

Velocity-product terms (``Jdot v``) are left out: at the speeds of a stand
or a trot they are small next to the PD terms, and the feedback absorbs them.

At 1 kHz this runs in the loop's tick, so its arithmetic is compiled
(:mod:`._balance`, issue 11): the task rows, the least squares of step 2
through its normal equations (``sum w_i^2 J_i^T J_i`` is positive definite,
the base and posture rows pin every column) and the inputs of step 3 (the
stance plane, the velocity that keeps the stance feet still) run in C on
preallocated arrays; the contact inverse dynamics runs in a workspace per
stance set, in place (``solve_into``).  The NumPy implementation it replaced
is the test oracle (``tests/unit/controller/_balance_reference.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from servoloop.controller.wholebody._balance import BalanceKernel
from servoloop.controller.wholebody._force_split import ForceSplitKernel
from servoloop.controller.wholebody.robot import WholeBodyRobot, quat_to_matrix, rotation_log
from servoloop.core_cy.inverse_dynamics import ContactInverseDynamics, WarmStart, solve
from servoloop.core_cy.sim.model import Ground

__all__ = ["Gains", "Targets", "BalanceCore", "ID_VARIANTS"]

#: controller variant name -> (inverse-dynamics variant, friction used in the model)
ID_VARIANTS = ("lcp_coulomb", "qp", "lcp_noslip")

#: [m] at the standing posture (:meth:`BalanceCore.set_soles`) a foot's points within this of
#: its lowest are its sole, and the stance plane passes through the stance feet's highest sole
#: point (their lower ones penetrate it: closed contacts, no Baumgarte term).  Through each
#: foot's lowest point only (before, issue 11), a flat foot tilted by a millimetre over its
#: length (compliant ground, the estimate's tilt error) stood on one corner in the ID: the
#: ROBOTIS OP3's 12 cm soles, toes 0.2-1.8 mm above their heels, had one heel corner loaded
#: per tick, the ID predicted the robot pitching forward at 5 rad/s^2 with zero velocity and
#: zero desired acceleration, and its torques pushed the CoM forward while the base task asked
#: backward: it fell 0.7 s into every run.  Marked once at the posture, where a sole is level,
#: so a sole box's top corners (3 mm above on the built-in humanoid) stay out; a point foot is
#: its point (unchanged).
SOLE_TOL = 1e-3


@dataclass
class Gains:
    """PD gains of the tasks, in acceleration units (1/s^2 and 1/s), and task weights.

    Defaults: the base and swing feet critically damped (``kd = 2 sqrt(kp)``).

    ``swing_posture``: the posture row of a joint in a swing leg (one that moves a swing foot
    and no stance foot) weighs ``w_posture * min(1, |J_c|)``, ``|J_c|`` [m/rad] the norm of
    the swing foot's Jacobian column: that joint's posture is counted in metres of the foot's
    travel, the swing task's unit, so the swing wins where they conflict (``w_swing^2 /
    w_posture^2`` = 400 : 1 at the defaults).  Without it (the seed 003 experiment's
    weights) a quadruped leg's J ~ 0.08 m/rad gives the swing row ``w_swing^2 J^2`` ~ 0.006
    in joint space against the posture's 0.0025, and the posture took a third of the swing's
    acceleration (issue 11).  The posture keeps regularising the leg (``H`` stays positive
    definite); stance legs and joints shared with a stance chain keep ``w_posture``.
    For legs the swing foot's point sets (the quadruped's three joints a leg): ``trot``
    turns it on.  A six-joint humanoid leg needs its posture for the foot's orientation,
    which the point task leaves free (``walk`` with it on let an ankle roll past its limit).
    """

    base_kp: float = 150.0
    base_kd: float = 24.0
    rot_kp: float = 150.0
    rot_kd: float = 24.0
    swing_kp: float = 900.0
    swing_kd: float = 60.0
    posture_kp: float = 100.0
    posture_kd: float = 20.0
    contact_kd: float = 30.0
    w_contact: float = 30.0
    w_base: float = 10.0
    w_swing: float = 1.0
    w_posture: float = 0.05
    swing_posture: bool = False


@dataclass
class Targets:
    """What the tasks track (world frame, SI).

    base_position (3,) m, base_velocity (3,) m/s, base_rotation (3, 3), posture (n,) rad
    in the controller's joint order, stance (feet,) bool, swing_position / swing_velocity /
    swing_acceleration (feet, 3) m, m/s, m/s^2 (read only where not in stance).
    """

    base_position: np.ndarray
    base_velocity: np.ndarray
    base_rotation: np.ndarray
    posture: np.ndarray
    stance: np.ndarray
    swing_position: np.ndarray
    swing_velocity: np.ndarray
    swing_acceleration: np.ndarray

    @classmethod
    def standing(cls, robot: WholeBodyRobot, q: np.ndarray, posture: np.ndarray) -> Targets:
        """Hold the base where it is at ``q`` (nq,), all feet in stance."""
        nf = len(robot.feet)
        return cls(np.array(q[:3], dtype=float), np.zeros(3), quat_to_matrix(q[3:7]),
                   np.array(posture, dtype=float), np.ones(nf, dtype=bool),
                   np.zeros((nf, 3)), np.zeros((nf, 3)), np.zeros((nf, 3)))


class BalanceCore:
    """The whole-body tick on one robot: targets -> ``qdd`` -> contact ID -> ``tau``.

    Parameters
    ----------
    robot : WholeBodyRobot
    dt : float, control period [s] (the ID spreads impulses over it)
    variant : "lcp_coulomb" | "qp" | "lcp_noslip"
    mu : float, friction coefficient the ID assumes (``inf``: no friction limit)
    gains : Gains
    plane : "stance" (default) or "world".  The ID's stabilised contact rows ask an open
        gap ``phi`` to close within the step (``n^T v+ >= -phi / dt``): 0.1 mm of base
        height error would ask for 0.1 m/s of approach and a huge acceleration.  With
        "stance" the ground plane passes through the highest stance foot, the
        Baumgarte term is off and the base twist given to the ID is the one that keeps
        the stance feet still, so the declared stance feet are in contact, at rest,
        whatever the estimate's error or the ground's compliance; "world" is the plane z = 0 with the simulator's
        stabilisation (the true state, as in the seed 003 experiment).
    noslip_fallback : bool
        A failed ``lcp_noslip`` solve is answered by the Coulomb LCP at ``MU_FALLBACK``
        (default); False: no answer (the previous torques; the seed 003 experiment, which
        reproduces the paper's own answer to that tick).
    noslip_split : bool or None
        Share the ``lcp_noslip`` answer's forces among the stance feet (step 4 above);
        None (default): as ``noslip_fallback`` (the daemon's on; the seed 003
        experiment reproduces the paper's answer, and splits on its own).
    """

    def __init__(self, robot: WholeBodyRobot, dt: float, variant: str = "lcp_coulomb",
                 mu: float = 0.8, gains: Gains | None = None, plane: str = "stance",
                 noslip_fallback: bool = True, noslip_split: bool | None = None) -> None:
        self.robot = robot
        self.dt = float(dt)
        self.variant = variant
        self.mu = float(mu)
        self.gains = gains or Gains()
        nv = robot.model.nv
        self.q = robot.model.neutral().copy()
        self.v = np.zeros(nv)
        self.qdd = np.zeros(nv)
        self.tau = np.zeros(robot.n)          # controller joint order
        self.forces = np.zeros((0, 3))
        self.failures = 0
        self.fallbacks = 0                    # failed no-slip solves the Coulomb LCP answered
        self.failed_streak = 0                # ticks in a row with no torques (0 after a good one)
        self._fallback_ws: dict = {}
        self.noslip_fallback = bool(noslip_fallback)
        self.noslip_split = self.noslip_fallback if noslip_split is None else bool(noslip_split)
        #: share the ``lcp_coulomb`` answer's sticking forces too (step 4; as ``noslip_split``,
        #: on point feet only: measured on the quadruped; a flat foot's several points share
        #: its load among themselves, and the humanoid's Lemke solves were not re-measured)
        self.coulomb_split = self.noslip_split and all(len(f.points) == 1 for f in robot.feet)
        #: (feet,) normal-force weights of the split (``trot``: rising before a lift-off)
        self.liftoff_weights = np.ones(len(robot.feet))
        self.splits = 0                       # no-slip ticks whose forces were shared
        self._tau_m = np.zeros(nv - 6)        # the no-slip answer's torques, model order
        self.last_error = ""
        if plane not in ("stance", "world"):
            raise ValueError(f"BalanceCore.plane: {plane!r}; choose stance or world")
        self.plane = plane
        self._warm = WarmStart()
        self._warm_key = None
        # step 2 by its normal equations H qdd = g (the same minimiser as the stacked least
        # squares): the base and posture rows give H's constant part and make it positive
        # definite when the controller's joints are all of the model's (else: lstsq)
        n = robot.n
        self._normal = n == nv - 6 and len(set(np.asarray(robot.idx).tolist())) == n
        self._H = np.zeros((nv, nv))
        self._g = np.zeros(nv)
        npts = sum(len(f.points) for f in robot.feet) + len(robot.feet)
        self._J = np.zeros((npts * 3, nv))      # weighted foot rows of one tick
        self._Js = np.zeros((npts * 3, nv))     # stance points' Jacobians of that tick
        self._Js_for = (None, 0, b"")           # (the q they were made at, rows, stance)
        self._a = np.zeros(npts * 3)
        self._pose_cols = 6 + np.asarray(robot.idx, dtype=np.intp)
        self._vp = np.zeros(nv)                 # the velocity given to the contact ID
        feet = robot.feet
        counts = [len(f.points) for f in feet]
        # the compiled tick (step 2 when self._normal; the stance plane and velocity always)
        self._kernel = BalanceKernel(
            robot.model, robot.data, [f.body for f in feet], np.cumsum([0] + counts[:-1]), counts,
            np.vstack([f.points for f in feet]), [f.center for f in feet], [f.radius for f in feet],
            self._pose_cols, self._H, self._g, self._J, self._a, self._Js, self.qdd, self._vp)
        #: (p,) bool, the feet's points on their sole (:meth:`set_soles`; none: each stance
        #: foot's lowest point makes the stance plane)
        self.sole = np.zeros(sum(counts), dtype=bool)
        # step 4, compiled: its workspace sized for every foot's points in stance
        self._splitter = ForceSplitKernel(max(sum(counts), 1), nv, counts, SPLIT_OPEN_N,
                                          STICK_MARGIN)
        # the contact ID: one workspace per stance set, solved in place
        self._ws: dict = {}
        self._tau_a = np.zeros(nv - 6)
        # the controller joints' torques in the ID's (model order): a slice when in that order
        # (np.take(out=) buffers its output: 5 us a tick)
        self._tau_from = slice(0, robot.n) if isinstance(robot.v_joints, slice) else robot.idx

    def set_soles(self, q, tol: float = SOLE_TOL) -> np.ndarray:
        """Mark each foot's sole: its points within ``tol`` [m] of its lowest at ``q`` (nq,), a
        standing configuration (feet flat).  The stance plane then passes through the stance
        feet's highest sole point (see :data:`SOLE_TOL`).  Returns :attr:`sole` (p,) bool."""
        r = self.robot
        r.kinematics(q)
        marks = []
        for f in r.feet:
            z = np.array([r.point_world(f.body, p)[2] for p in f.points])
            marks.append(z <= z.min() + tol)
        self.sole[:] = np.concatenate(marks)
        self._kernel.set_sole(self.sole)
        return self.sole

    # -- step 1-2: accelerations ------------------------------------------
    def accelerations(self, q, v, tg: Targets) -> np.ndarray:
        """Desired ``qdd`` (nv,) of the tasks at state ``q`` (nq,), ``v`` (nv,)."""
        if not self._normal:
            return self._accelerations_lstsq(q, v, tg)
        stance = np.asarray(tg.stance, dtype=bool)
        info = self._kernel.accelerations(q, v, stance.view(np.uint8), tg.base_position,
                                          tg.base_velocity, tg.base_rotation, tg.posture,
                                          tg.swing_position, tg.swing_velocity,
                                          tg.swing_acceleration, self.gains)
        self._Js_for = (q, self._kernel.ms, stance.tobytes())   # torques() reuses the rows
        if info != 0:       # H not positive definite (a NaN state): the least squares
            self.qdd[:] = np.linalg.lstsq(self._H, self._g, rcond=None)[0]
        return self.qdd

    def _accelerations_lstsq(self, q, v, tg) -> np.ndarray:
        """Step 2 as a stacked least squares (controller joints fewer than the model's)."""
        r, g = self.robot, self.gains
        nv = r.model.nv
        r.kinematics(q)
        R = quat_to_matrix(q[3:7])
        w_b = v[3:6]
        a_lin_w = g.base_kp * (tg.base_position - q[:3]) + g.base_kd * (tg.base_velocity - R @ v[:3])
        a_ang_w = g.rot_kp * rotation_log(tg.base_rotation @ R.T) - g.rot_kd * (R @ w_b)
        rows, rhs = [], []
        # base: body-frame free-flyer acceleration (classical accel minus w x v)
        Jb = np.zeros((6, nv))
        Jb[:, :6] = np.eye(6)
        rows.append(g.w_base * Jb)
        rhs.append(g.w_base * np.concatenate([R.T @ a_lin_w - np.cross(w_b, v[:3]), R.T @ a_ang_w]))
        for i, foot in enumerate(r.feet):
            if tg.stance[i]:
                for p in foot.points:
                    J = r.point_jacobian(q, foot.body, p, foot.radius)
                    rows.append(g.w_contact * J)
                    rhs.append(g.w_contact * (-g.contact_kd * (J @ v)))
            else:
                J = r.point_jacobian(q, foot.body, foot.center, foot.radius)
                x = r.foot_position(foot)
                a = (tg.swing_acceleration[i] + g.swing_kp * (tg.swing_position[i] - x)
                     + g.swing_kd * (tg.swing_velocity[i] - J @ v))
                rows.append(g.w_swing * J)
                rhs.append(g.w_swing * a)
        Jp = np.zeros((r.n, nv))
        Jp[np.arange(r.n), 6 + r.idx] = 1.0
        qj, vj = q[7 + r.idx], v[6 + r.idx]
        w = g.w_posture * posture_scale(r, q, tg.stance, g.swing_posture)
        rows.append(w[:, None] * Jp)
        rhs.append(w * (g.posture_kp * (tg.posture - qj) - g.posture_kd * vj))
        A = np.vstack(rows)
        b = np.concatenate(rhs)
        self.qdd[:] = np.linalg.lstsq(A, b, rcond=None)[0]
        return self.qdd

    # -- step 3: torques --------------------------------------------------
    def torques(self, q, v, qdd, stance) -> np.ndarray:
        """Joint torques (n,) [N m] realising the joint part of ``qdd`` with the stance feet.

        A failed solve is counted in :attr:`failures`.  A failed no-slip solve (its set of
        sticking contacts did not settle) is answered by the Coulomb LCP at ``MU_FALLBACK``
        instead (:attr:`fallbacks`; the experiment's last resort too).  With no answer the
        previous torques are kept (:attr:`failed_streak`; the ``wbc`` controller faults after
        ``MAX_FAILED_S`` of them in a row).
        """
        r = self.robot
        st = np.asarray(stance, dtype=bool)
        key = st.tobytes()              # the stance set, as a dict key without a tuple per tick
        if key != self._warm_key:       # the warm start is per contact list
            self._warm.active = []
            self._warm_key = key
        entry = self._ws.get(key)
        if entry is None:
            # the stance set's contact points, once (a trot cycles through a few sets)
            contacts = r.contact_subset(st)
            entry = self._ws[key] = [contacts, None, np.zeros((len(contacts.names), 3)), self.mu]
        contacts = entry[0]
        ground = None
        if self.plane == "stance" and b"\x01" in key:      # any foot in stance
            q_js, ms, st_js = self._Js_for
            # the stance rows accelerations() made this tick, at the same q and stance
            reuse = q_js is q and ms > 0 and st_js == key
            self._Js_for = (None, 0, b"")
            # the plane through the highest sole point of the stance feet (set_soles), and
            # the nearest velocity that keeps the stance feet still: a foot sinking into soft
            # ground, legs splaying or an estimate's velocity error must not read as an impact
            # the contacts stop within one tick
            top, status = self._kernel.stance_velocity(q, v, st.view(np.uint8), reuse)
            if status:      # dependent rows (several points of one flat foot): SVD
                J = self._Js[:self._kernel.ms]
                v = v - np.linalg.lstsq(J, J @ v, rcond=None)[0]
            else:
                v = self._vp
            ground = Ground(point=(0.0, 0.0, top))
        try:
            if self.variant == "lcp_noslip":
                # its warm start (Alg. 2's active set) goes through the Result-making call
                res = solve(r.model, r.data, q, v, qdd, contacts, self.mu, self.variant, dt=self.dt,
                            armature=r.armature, warm=self._warm, **_plane_args(ground))
                self.tau[:] = res.tau[r.idx]
                self.forces = res.contact_forces
                self.failed_streak = 0
                if self.noslip_split and ground is not None:
                    self._tau_m[:] = res.tau
                    self._split(q, st)
                return self.tau
            ws = entry[1]
            if ws is None:
                # this core's own workspace for the stance set (mu and the plane set on it)
                ws = entry[1] = ContactInverseDynamics(r.model, contacts, self.mu, self.variant,
                                                       dt=self.dt, armature=r.armature,
                                                       **_plane_args(ground))
                entry[3] = self.mu
            if entry[3] != self.mu:
                ws.mu = entry[3] = self.mu
            if ground is not None:      # the stance plane: moved, not made anew (its tilt is fixed)
                ws.move_ground(0.0, 0.0, top)
            ws.solve_into(q, v, qdd, self._tau_a, entry[2])
        except Exception as exc:  # noqa: BLE001 - a failed solve must not stop the loop
            self.failures += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            if self.variant == "lcp_noslip" and self.noslip_fallback:
                try:
                    self.forces = coulomb_fallback(self._fallback_ws, key, r, contacts, self.dt,
                                                   _plane_args(ground), q, v, qdd, self._tau_a)
                    self.tau[:] = self._tau_a[self._tau_from]
                    self.fallbacks += 1
                    self.failed_streak = 0
                    if self.noslip_split and ground is not None:
                        # its sticking feet are a no-slip answer too: shared the same way
                        self._tau_m[:] = self._tau_a
                        self._split(q, st)
                    return self.tau
                except Exception as exc2:  # noqa: BLE001 - as above
                    self.last_error += f"; Coulomb fallback: {type(exc2).__name__}: {exc2}"
            self.failed_streak += 1
            return self.tau
        self.tau[:] = self._tau_a[self._tau_from]
        self.forces = entry[2]
        self.failed_streak = 0
        if self.coulomb_split and ground is not None and self.variant == "lcp_coulomb":
            # its sticking feet are shared the same way, inside the ID's friction cone
            self._tau_m[:] = self._tau_a
            self._split(q, st, self.mu)
        return self.tau

    def _split(self, q, stance, mu: float | None = None) -> None:
        """Step 4: :attr:`forces` and :attr:`tau` of the answer in :attr:`_tau_m`
        (model order) shared among the ``stance`` feet.

        ``mu`` None: the no-slip answer, every contact shared.  A finite ``mu``: the Coulomb
        LCP's answer; only its sticking contacts (tangential force strictly inside the cone,
        or unloaded) are shared, a sliding one keeps its force, and every shared force stays
        inside the cone ``mu``.

        Compiled (:class:`._force_split.ForceSplitKernel`, issue 11: in NumPy the split
        was ~90 us of the trot's tick); :func:`.force_split.split_forces` is its oracle.
        """
        ms = self._kernel.ms
        if ms == 0:
            return
        # the stance points' rows the stance plane's step made at this q (foot order, the
        # ID's contacts), each point with its foot's weight.  No contact is held unloaded:
        # on the stance plane a declared stance foot is on the ground, and one the answer
        # lets separate by microns (its row open) is the one left floating when the loaded
        # foot lifts (seed 003, BENCHMARKS.md); measured in the daemon's trot, keeping open
        # rows unloaded left a foot at < 2 % on 99 % of the four-foot ticks, loading them:
        # 10 %.  With ``mu``: a sliding contact (on the cone's edge with a load, rounding
        # aside) keeps its force; an unloaded one (the stance foot the answer left at zero)
        # is shared like the no-slip one.  In place: :attr:`forces` and ``_tau_m``
        forces = self.forces
        if not (forces.flags.c_contiguous and forces.dtype == np.float64):
            forces = self.forces = np.ascontiguousarray(forces, dtype=np.float64)
        if not self._splitter.split_stance(self._Js, ms, forces, self.liftoff_weights,
                                           stance.view(np.uint8), mu is not None,
                                           np.inf if mu is None else mu, self._tau_m):
            return
        self.tau[:] = self._tau_m[self._tau_from]
        self.splits += 1

    def step(self, q, v, tg: Targets) -> np.ndarray:
        """One tick: joint torques (n,) [N m] for the targets (also in :attr:`tau`)."""
        qdd = self.accelerations(q, v, tg)
        return self.torques(q, v, qdd, tg.stance)



#: a Coulomb contact sticks while its tangential force is under this fraction of ``mu f_n``
STICK_MARGIN = 1.0 - 1e-6
#: [N] a Coulomb contact's normal force at or under which it counts as unloaded (shared)
SPLIT_OPEN_N = 1e-9

#: friction coefficient of the Coulomb LCP that answers a failed no-slip solve: large enough
#: that a loaded foot sticks as under no-slip, finite for Lemke's tableau
MU_FALLBACK = 5.0


def coulomb_fallback(cache: dict, key, robot, contacts, dt: float, plane_args: dict, q, v, qdd,
                     tau_a) -> np.ndarray:
    """Torques into ``tau_a`` (nv - 6,) from the Coulomb LCP at ``MU_FALLBACK`` for the contacts a
    no-slip solve could not answer; returns the contact forces (k, 3).  ``cache`` keeps one
    workspace per stance set ``key``.

    Raises
    ------
    Exception
        The Coulomb LCP found no answer either.
    """
    entry = cache.get(key)
    if entry is None:
        ws = ContactInverseDynamics(robot.model, contacts, MU_FALLBACK, "lcp_coulomb", dt=dt,
                                    armature=robot.armature, **plane_args)
        entry = cache[key] = (ws, np.zeros((len(contacts.names), 3)))
    ws, forces = entry
    if "ground" in plane_args:
        ws.ground = plane_args["ground"]
    ws.solve_into(q, v, qdd, tau_a, forces)
    return forces


def posture_scale(robot: WholeBodyRobot, q, stance, on: bool = True) -> np.ndarray:
    """Per controller joint (n,): the factor on ``w_posture`` (:attr:`Gains.swing_posture`).

    ``min(1, |J_c|)`` for a joint that moves a swing foot's point (``|J_c|`` [m/rad], the
    largest over the swing feet) and no stance foot's; 1 elsewhere, and everywhere when not
    ``on``.  Kinematics at ``q`` must be current.
    """
    cols = 6 + np.asarray(robot.idx)
    out = np.ones(len(cols))
    if not on:
        return out
    swing = np.zeros(robot.model.nv)
    touched = np.zeros(robot.model.nv, dtype=bool)
    for i, foot in enumerate(robot.feet):
        if stance[i]:
            for p in foot.points:
                touched |= np.any(robot.point_jacobian(q, foot.body, p, foot.radius) != 0.0, axis=0)
        else:
            J = robot.point_jacobian(q, foot.body, foot.center, foot.radius)
            swing = np.maximum(swing, (J * J).sum(axis=0))
    leg = (swing[cols] > 0.0) & ~touched[cols]
    out[leg] = np.sqrt(np.minimum(1.0, swing[cols][leg]))
    return out


def _plane_args(ground) -> dict:
    """The contact ID's plane arguments: the stance plane (``ground``) or the world's (None).

    On the stance plane the Baumgarte term is off, and the margin is 1 mm: the stance feet's
    soles are on the plane (or through it: closed); points of a foot higher than that (a
    box's top corners, the heel of a foot rolled onto its toes) take no force.
    """
    if ground is None:
        return {}
    return {"ground": ground, "baumgarte": 0.0, "margin": 1e-3}

