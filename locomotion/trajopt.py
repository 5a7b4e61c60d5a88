"""One half-gait step of the five-link biped as an NLP (seed 004, M1 and M2).

Pinned stance-leg model (the digest's alternative to DIRCON: no contact
force variables; the ground force is m (a_COM + g) and must lie in the
friction cone), Hermite-Simpson collocation with implicit dynamics
(accelerations are variables at the knots and at the interval midpoints),
fixed duration, trapezoidal cost 10 |v|^2 + |u|^2 (+ |tau|^2 with a ROM),
touchdown on the slope, inelastic impact and leg relabelling folded into
the periodicity constraint.

With a ROM (``spec``), the embedding and ROM dynamics are imposed at the
interval midpoints through the Hermite cubic of (r(q_i), dr/dq v_i)
(eq. 7).  The ROM parameters theta, the stride and the slope are the NLP's
parameters p, so one compiled solver serves every task and every theta,
and IPOPT's ``lam_p`` is the envelope gradient dJ*/dp (section 3.2).

Why casadi + IPOPT and not Drake: casadi installs from PyPI with IPOPT
bundled on every platform we run (Drake's wheels are Linux/macOS x86-64
and >100 MB), gives exact AD of the symbolic Lagrangian, and exposes the
parameter multipliers that make the outer gradient one line.  The paper's
SNOPT is not free; IPOPT plays its part.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import casadi as ca
import numpy as np

from servoloop.locomotion.collocation import midpoint
from servoloop.locomotion.features import ROM_SPECS, RomSpec, phi_d, phi_e
from servoloop.locomotion.five_link import (
    HIP_LIMITS,
    KNEE_LIMITS,
    SWAP,
    TOTAL_MASS,
    U_MAX,
    G,
    five_link,
)
from servoloop.locomotion.task import DURATION, Task

__all__ = ["N_KNOTS", "MU", "W_V", "W_TAU", "StepProblem", "Solution", "problem", "initial_guess"]

#: knots per step (20 intervals of 37 ms).  The digest's A4 asks a re-integration defect below
#: 1e-3 rad on every task of the grid; Hermite-Simpson's defect here falls as ~h^3.7: 13 knots
#: gave 5.5e-3 rad at 0.54 m/s, 17 gave 1.9e-3, 19 gave 1.24e-3, 21 gives 8.4e-4 (the authors
#: use 20 stance knots)
N_KNOTS = 21
MU = 1.0                     #: friction coefficient
W_V, W_TAU = 10.0, 1.0       #: cost weights of |v|^2 and |tau|^2 (|u|^2 has 1)
IMPULSE_TOL = 1e-3           #: slack of the touchdown impulse's friction cone [N s]
HIP_Z = 0.92                 #: hip height of the initial guess [m]


@dataclass
class Solution:
    """One solved step.  ``w`` is the NLP's primal vector, ``grad`` dJ/dtheta (ROM only)."""

    task: Task
    success: bool
    cost: float
    cost_no_tau: float
    w: np.ndarray
    lam_g: np.ndarray
    lam_x: np.ndarray
    grad: np.ndarray | None
    status: str
    time_s: float
    violation: float
    extra: dict = field(default_factory=dict)


class StepProblem:
    """The NLP of one step, full-order (``spec=None``) or ROM-constrained."""

    def __init__(self, spec: RomSpec | None = None, n_knots: int = N_KNOTS) -> None:
        self.spec = spec
        self.n_knots = int(n_knots)
        self.model = five_link()
        self.n_tau = spec.n_tau if spec else 0
        self.n_theta = spec.n_theta if spec else 0
        self._build()

    # -- layout -----------------------------------------------------------------------------
    def _layout(self):
        n = self.n_knots
        sizes = [("q", 5 * n), ("v", 5 * n), ("a", 5 * n), ("u", 4 * n), ("tau", self.n_tau * n),
                 ("ac", 5 * (n - 1))]
        self.slices, start = {}, 0
        for name, size in sizes:
            self.slices[name] = slice(start, start + size)
            start += size
        self.n_w = start

    def unpack(self, w) -> dict:
        """Knot arrays of a primal vector: q, v, a (n, 5), u (n, 4), tau (n, n_tau), ac (n-1, 5)."""
        cols = {"q": 5, "v": 5, "a": 5, "u": 4, "tau": self.n_tau, "ac": 5}
        w = np.asarray(w, dtype=float).ravel()
        return {k: w[s].reshape(-1, cols[k]) if cols[k] else np.zeros((self.n_knots, 0))
                for k, s in self.slices.items()}

    def pack(self, parts: dict) -> np.ndarray:
        w = np.zeros(self.n_w)
        for k, s in self.slices.items():
            if k in parts and s.stop > s.start and np.size(parts[k]) == s.stop - s.start:
                w[s] = np.asarray(parts[k], dtype=float).ravel()
        return w

    # -- NLP ------------------------------------------------------------------------------------
    def _build(self) -> None:
        self._layout()
        m, n = self.model, self.n_knots
        dt = DURATION / (n - 1)
        w = ca.MX.sym("w", self.n_w)
        p = ca.MX.sym("p", self.n_theta + 2)
        stride, slope = p[self.n_theta], p[self.n_theta + 1]
        X = {k: ca.reshape(w[s], -1, n if k != "ac" else n - 1).T if s.stop > s.start else None
             for k, s in self.slices.items()}
        q, v, a, u, ac = X["q"], X["v"], X["a"], X["u"], X["ac"]
        tau = X["tau"]
        B = ca.DM(m.B)
        normal = ca.vertcat(-ca.sin(slope), ca.cos(slope))
        tangent = ca.vertcat(ca.cos(slope), ca.sin(slope))
        eq, ineq = [], []                        # equalities = 0, inequalities >= 0
        cost, cost_tau = 0, 0
        hk = []
        for i in range(n):
            qi, vi, ai, ui = q[i, :].T, v[i, :].T, a[i, :].T, u[i, :].T
            eq.append(m.M(qi) @ ai + m.h(qi, vi) - B @ ui)
            grf = TOTAL_MASS * (m.com_acc(qi, vi, ai) + ca.vertcat(0, G))
            fn, ft = ca.dot(grf, normal), ca.dot(grf, tangent)
            ineq += [fn, MU * fn - ft, MU * fn + ft]
            if 0 < i < n - 1:                     # the swing foot stays above the slope
                ineq.append(ca.dot(m.swing_foot(qi), normal))
            v7 = m.v7(qi, vi)
            hk.append((W_V * ca.sumsqr(v7) + ca.sumsqr(ui),
                       W_TAU * ca.sumsqr(tau[i, :]) if self.n_tau else 0))
        for i in range(n - 1):
            cost += 0.5 * dt * (hk[i][0] + hk[i + 1][0])
            cost_tau += 0.5 * dt * (hk[i][1] + hk[i + 1][1])
            q0, v0, a0, q1, v1, a1 = (X[k][j, :].T for j in (i, i + 1) for k in ("q", "v", "a"))
            qc, vc, _ = midpoint(q0, v0, q1, v1, dt)
            vc = 0.5 * (v0 + v1) + dt / 8.0 * (a0 - a1)
            uc = 0.5 * (u[i, :] + u[i + 1, :]).T
            aci = ac[i, :].T
            eq.append(m.M(qc) @ aci + m.h(qc, vc) - B @ uc)
            eq.append(q1 - q0 - dt / 6.0 * (v0 + 4 * vc + v1))
            eq.append(v1 - v0 - dt / 6.0 * (a0 + 4 * aci + a1))
        # touchdown on the slope one stride ahead, impact, relabelling, periodicity
        qN, vN = q[n - 1, :].T, v[n - 1, :].T
        eq.append(m.swing_foot(qN) - stride * tangent)
        v_plus, impulse = m.impact(qN, vN)
        eq.append(q[0, :].T - qN[list(SWAP)])
        eq.append(v[0, :].T - v_plus)
        i_n, i_t = ca.dot(impulse, normal), ca.dot(impulse, tangent)
        # The LIP's ydd2 = 0 forces an impulse-free touchdown (the COM velocity cannot jump), so a
        # hard cone would be active at its apex with degenerate multipliers and a useless
        # gradient; a 1 mN s tolerance keeps it inactive there (impulses are ~10 N s).
        ineq += [MU * i_n - i_t + IMPULSE_TOL, MU * i_n + i_t + IMPULSE_TOL]
        # the trailing foot lifts off (or stays: without an impulse its velocity is 0, the same
        # apex degeneracy as above, hence the 1 mm/s tolerance)
        ineq.append(ca.dot(m.swing_foot_vel(q[0, :].T, v[0, :].T), normal) + 1e-3)
        if self.spec is not None:
            eq += self._rom_constraints(q, v, tau, p[: self.n_theta], dt)
        g_eq, g_in = ca.vertcat(*eq), ca.vertcat(*ineq)
        self.n_eq, self.n_in = g_eq.shape[0], g_in.shape[0]
        total = cost + cost_tau
        nlp = {"x": w, "p": p, "f": total, "g": ca.vertcat(g_eq, g_in)}
        opts = {"expand": True, "print_time": False,
                "ipopt": {"print_level": 0, "sb": "yes", "tol": 1e-9, "constr_viol_tol": 1e-9,
                          "max_iter": 1500, "mu_strategy": "adaptive"}}
        self.solver = ca.nlpsol("step", "ipopt", nlp, opts)
        self._nlp, self._opts, self._warm = nlp, opts, None
        self.costs = ca.Function("costs", [w, p], [cost, cost_tau]).expand()
        self.constraints = ca.Function("g", [w, p], [g_eq, g_in]).expand()
        self.lbg = np.r_[np.zeros(self.n_eq), np.zeros(self.n_in)]
        self.ubg = np.r_[np.zeros(self.n_eq), np.full(self.n_in, np.inf)]
        self.lbw, self.ubw = self._bounds()
        if self.spec is not None:
            qs, vs = ca.SX.sym("q", 5), ca.SX.sym("v", 5)
            th = ca.SX.sym("th", self.n_theta)
            te, _ = self.spec.split(th)
            pe = phi_e(qs)
            self.embedding = ca.Function("r", [qs, vs, th], [te @ pe, te @ ca.jacobian(pe, qs) @ vs])

    def _rom_constraints(self, q, v, tau, theta, dt) -> list:
        spec = self.spec
        qs, vs = ca.SX.sym("q", 5), ca.SX.sym("v", 5)
        pe = phi_e(qs)
        feat = ca.Function("phi_e", [qs, vs], [pe, ca.jacobian(pe, qs) @ vs])
        te, td = spec.split(theta)
        Bt = ca.DM(spec.B)
        ys = [te @ ca.horzcat(*feat(q[i, :].T, v[i, :].T)) for i in range(self.n_knots)]
        out = []
        for i in range(self.n_knots - 1):
            (y0, yd0), (y1, yd1) = (ys[i][:, 0], ys[i][:, 1]), (ys[i + 1][:, 0], ys[i + 1][:, 1])
            yc, ydc, yddc = midpoint(y0, yd0, y1, yd1, dt)
            g = td @ phi_d(yc, ydc)
            if spec.n_tau:
                g = g + Bt @ (0.5 * (tau[i, :] + tau[i + 1, :]).T)
            out.append(yddc - g)
        return out

    def _bounds(self):
        lo, hi = np.full(self.n_w, -np.inf), np.full(self.n_w, np.inf)
        qlo = np.array([-1.0, HIP_LIMITS[0], HIP_LIMITS[0], KNEE_LIMITS[0], KNEE_LIMITS[0]])
        qhi = np.array([1.0, HIP_LIMITS[1], HIP_LIMITS[1], KNEE_LIMITS[1], KNEE_LIMITS[1]])
        lo[self.slices["q"]], hi[self.slices["q"]] = np.tile(qlo, self.n_knots), np.tile(qhi, self.n_knots)
        lo[self.slices["u"]], hi[self.slices["u"]] = -U_MAX, U_MAX
        return lo, hi

    # -- solve ----------------------------------------------------------------------------------
    def params(self, task: Task, theta=None) -> np.ndarray:
        th = np.zeros(0) if self.spec is None else np.asarray(theta, dtype=float)
        return np.r_[th, task.stride, task.incline]

    def solve(self, task: Task, theta=None, w0=None, lam=None, tol_violation: float = 1e-6) -> Solution:
        """Solve the step of ``task`` (ROM: at ``theta``), from ``w0`` (default: a heuristic gait).

        ``lam``: (lam_g, lam_x) of a previous solution, for a warm start of the multipliers.
        """
        p = self.params(task, theta)
        if w0 is None:
            w0 = initial_guess(self, task)
        solver, kw = self.solver, {}
        if lam is not None:
            solver, kw = self.warm_solver(), {"lam_g0": lam[0], "lam_x0": lam[1]}
        t0 = time.perf_counter()
        r = solver(x0=w0, p=p, lbx=self.lbw, ubx=self.ubw, lbg=self.lbg, ubg=self.ubg, **kw)
        elapsed = time.perf_counter() - t0
        status = solver.stats()["return_status"]
        w = np.array(r["x"]).ravel()
        viol = self.violation(w, p)
        c, ct = (float(x) for x in self.costs(w, p))
        grad = None
        if self.spec is not None:
            grad = -np.array(r["lam_p"]).ravel()[: self.n_theta]   # dJ*/dp = -lam_p (envelope)
        ok = status in ("Solve_Succeeded", "Solved_To_Acceptable_Level") and viol < tol_violation
        return Solution(task, ok, c + ct, c, w, np.array(r["lam_g"]).ravel(),
                        np.array(r["lam_x"]).ravel(), grad, status, elapsed, viol)

    def warm_solver(self):
        """IPOPT started at the given primal-dual point (small barrier, no bound push).

        The ROM-constrained steps have many nearby local optima; a cold
        interior start from a neighbour's solution often lands in another
        one, which would break both the warm starts of the outer loop and
        the finite-difference check of the gradient.
        """
        if self._warm is None:
            opts = {**self._opts, "ipopt": {**self._opts["ipopt"], "warm_start_init_point": "yes",
                                             "warm_start_bound_push": 1e-9,
                                             "warm_start_slack_bound_push": 1e-9,
                                             "warm_start_mult_bound_push": 1e-9, "mu_init": 1e-6}}
            self._warm = ca.nlpsol("step_warm", "ipopt", self._nlp, opts)
        return self._warm

    def violation(self, w, p) -> float:
        """Largest constraint violation (equalities, inequalities, bounds) of ``w``."""
        ge, gi = (np.array(x).ravel() for x in self.constraints(w, p))
        bound = np.maximum(np.maximum(self.lbw - w, w - self.ubw), 0)
        return float(max(np.abs(ge).max(), max(0.0, -gi.min()), bound.max()))


def _leg(dx: float, dz: float) -> tuple[float, float]:
    """Absolute thigh angle and knee angle putting a foot at (dx, dz) from the hip [rad]."""
    length = min(np.hypot(dx, dz), 0.995)
    knee = 2.0 * np.arccos(length)
    return float(np.arctan2(-dx, -dz) - knee / 2.0), float(knee)


def initial_guess(prob: StepProblem, task: Task) -> np.ndarray:
    """A heuristic walking motion: hip moving at constant speed, swing foot on a low arc."""
    L, s, n = task.stride, task.incline, prob.n_knots
    t = np.linspace(0.0, 1.0, n)
    q = np.zeros((n, 5))
    for i, ti in enumerate(t):
        hip = np.array([(ti - 0.5) * L * np.cos(s), HIP_Z + (ti - 0.5) * L * np.sin(s)])
        swing = np.array([(2 * ti - 1) * L * np.cos(s), (2 * ti - 1) * L * np.sin(s)
                          + 0.05 * np.sin(np.pi * ti)])
        a1, k1 = _leg(-hip[0], -hip[1])
        a2, k2 = _leg(swing[0] - hip[0], swing[1] - hip[1])
        q[i] = [0.0, a1, a2, k1, k2]
    q[:, 3:] = np.clip(q[:, 3:], KNEE_LIMITS[0] + 1e-3, KNEE_LIMITS[1] - 1e-3)
    dt = DURATION / (n - 1)
    v = np.gradient(q, dt, axis=0)
    a = np.gradient(v, dt, axis=0)
    ac = 0.5 * (a[:-1] + a[1:])
    return prob.pack({"q": q, "v": v, "a": a, "ac": ac})


_PROBLEMS: dict[str, StepProblem] = {}


def problem(kind: str) -> StepProblem:
    """The (per-process cached) problem ``"full"``, ``"2d"`` or ``"4d"``."""
    if kind not in _PROBLEMS:
        _PROBLEMS[kind] = StepProblem(None if kind == "full" else ROM_SPECS[kind])
    return _PROBLEMS[kind]
