"""The seed 004 planner (section 5.1): ROM strides joined by full-order impacts, then IK.

Decision variables: per stride the ROM knots (y, yd, tau) and its duration,
and the full-order pre-impact state (q-, v-) at its end.  The ROM dynamics
hold at the interval midpoints (eq. 7); y at the end of stride j is r(q-_j)
and y at the start of stride j+1 is r(q+_j) with (q+, v+) the impact map
*with* leg relabelling (the embedding is stance-relative, so the next stride
sees the mirrored state, digest section 6 item 9).  The first stride starts
from a periodic full-order gait; the strides' touchdown steps add up to
the distance.  Cost: the integral of |yd|^2 + |tau|^2 plus a
weight on uneven steps.  A plan is not
guaranteed full-order feasible within a stride: IK recovers q at every knot
afterwards and reports its error and the joint limits (A8).
"""

from __future__ import annotations

import time

import casadi as ca
import numpy as np

from servoloop.locomotion.collocation import midpoint
from servoloop.locomotion.errors import RomInputError
from servoloop.locomotion.features import ROM_SPECS, phi_d, phi_e, theta0
from servoloop.locomotion.five_link import HIP_LIMITS, KNEE_LIMITS, five_link
from servoloop.locomotion.task import DURATION, Task

__all__ = ["plan", "inverse_kinematics", "KNOTS_PER_STRIDE", "CONTINUATION_STEPS"]

KNOTS_PER_STRIDE = 9
CONTINUATION_STEPS = 4  #: steps from the LIP to the learned model when a direct solve fails
IMPULSE = True       # the touchdown impulse in the friction cone
STEP_WEIGHT = 100.0  #: weight of the steps' deviation from distance / strides [1/m^2]
_LO = np.array([-1.0, HIP_LIMITS[0], HIP_LIMITS[0], KNEE_LIMITS[0], KNEE_LIMITS[0]])
_HI = np.array([1.0, HIP_LIMITS[1], HIP_LIMITS[1], KNEE_LIMITS[1], KNEE_LIMITS[1]])


def _embedding(spec, theta):
    """(r(q, v) -> (y, yd), Theta_d) for ``theta`` numeric or symbolic (an Opti parameter)."""
    q, v = ca.SX.sym("q", 5), ca.SX.sym("v", 5)
    th = ca.SX.sym("th", spec.n_theta)
    te, _ = spec.split(th)
    pe = phi_e(q)
    fn = ca.Function("r", [q, v, th], [te @ pe, te @ ca.jacobian(pe, q) @ v])
    _, td = spec.split(theta)

    def r(qq, vv):
        return fn(qq, vv, theta)
    return r, td


def _start_state(distance: float, strides: int):
    """A periodic full-order step near the plan's mean speed (the state the plan starts from)."""
    from servoloop.locomotion.trajopt import problem

    speed = float(np.clip(distance / strides / 0.746, 0.1, 0.8))
    full = problem("full")
    sol = full.solve(Task(speed, 0.0))
    parts = full.unpack(sol.w)
    return parts["q"], parts["v"]


def plan(model: dict, distance: float, strides: int) -> dict:
    """Plan ``strides`` strides covering ``distance`` [m] on flat ground with a learned ROM.

    Returns a dict: ``success``, ``solve_time_s``, ``time_per_step_s``, ``y`` (strides, K, n_y),
    ``q`` (strides, K, 5) from IK, ``ik_error`` (max |r(q) - y|), ``within_limits``, ``steps`` [m].
    """
    if not (1 <= strides <= 10):
        raise RomInputError(f"--strides {strides}: must lie in 1..10")
    if not (0.1 <= distance / strides <= 0.8):
        raise RomInputError(f"--distance {distance} m in {strides} strides: each step must be "
                            "0.1-0.8 m long")
    spec = ROM_SPECS[model["model"]]
    if spec.n_tau == 0:
        raise RomInputError("rom plan: needs a 4d model (the swing foot is part of the plan)")
    m = five_link()
    theta = np.asarray(model["theta"], dtype=float)
    r_num, _ = _embedding(spec, theta)
    opti = ca.Opti()
    TH = opti.parameter(spec.n_theta)
    r, td = _embedding(spec, TH)
    qs_guess, vs_guess = _start_state(distance, strides)
    q0, v0 = qs_guess[0], vs_guess[0]
    idx = np.linspace(0, len(qs_guess) - 1, KNOTS_PER_STRIDE).round().astype(int)
    y_guess = np.array([np.array(r_num(qs_guess[i], vs_guess[i])[0]).ravel() for i in idx])
    yd_guess = np.array([np.array(r_num(qs_guess[i], vs_guess[i])[1]).ravel() for i in idx])
    K, ny = KNOTS_PER_STRIDE, spec.n_y
    Y = [opti.variable(K, ny) for _ in range(strides)]
    YD = [opti.variable(K, ny) for _ in range(strides)]
    TAU = [opti.variable(K, spec.n_tau) for _ in range(strides)]
    T = [DURATION] * strides            # the duration the model was learned at
    QM = [opti.variable(5) for _ in range(strides)]
    VM = [opti.variable(5) for _ in range(strides)]
    cost, steps = 0, []
    # the first stride starts from a free full-order state with both feet on the ground (the
    # LIP's COM motion is fixed by its initial state: a fixed start over-determines the plan)
    Q0, V0 = opti.variable(5), opti.variable(5)
    opti.subject_to(opti.bounded(_LO, Q0, _HI))
    opti.subject_to(m.swing_foot(Q0)[1] == 0)
    opti.subject_to(m.swing_foot(Q0)[0] <= 0)
    opti.set_initial(Q0, q0)
    opti.set_initial(V0, v0)
    y_start, yd_start = r(Q0, V0)
    for j in range(strides):
        dt = T[j] / (K - 1)
        opti.subject_to(Y[j][0, :].T == y_start)
        opti.subject_to(YD[j][0, :].T == yd_start)
        Bt = ca.DM(spec.B)
        for k in range(K - 1):
            # y, yd are free here (unlike the inner problem, where they come from q): the
            # standard Hermite-Simpson scheme on x = (y, yd) ties the knots together
            y0, yd0, y1, yd1 = Y[j][k, :].T, YD[j][k, :].T, Y[j][k + 1, :].T, YD[j][k + 1, :].T
            t0_, t1_ = TAU[j][k, :].T, TAU[j][k + 1, :].T
            a0 = td @ phi_d(y0, yd0) + Bt @ t0_
            a1 = td @ phi_d(y1, yd1) + Bt @ t1_
            yc, ydc, _ = midpoint(y0, yd0, y1, yd1, dt)
            ydc = 0.5 * (yd0 + yd1) + dt / 8.0 * (a0 - a1)
            ac = td @ phi_d(yc, ydc) + Bt @ (0.5 * (t0_ + t1_))
            opti.subject_to(y1 - y0 == dt / 6.0 * (yd0 + 4 * ydc + yd1))
            opti.subject_to(yd1 - yd0 == dt / 6.0 * (a0 + 4 * ac + a1))
            cost += 0.5 * dt * (ca.sumsqr(YD[j][k, :]) + ca.sumsqr(YD[j][k + 1, :])
                                + ca.sumsqr(TAU[j][k, :]) + ca.sumsqr(TAU[j][k + 1, :]))
        y_end, yd_end = r(QM[j], VM[j])
        opti.subject_to(Y[j][K - 1, :].T == y_end)
        opti.subject_to(YD[j][K - 1, :].T == yd_end)
        foot = m.swing_foot(QM[j])
        opti.subject_to(foot[1] == 0)                     # touchdown on flat ground
        opti.subject_to(opti.bounded(0.1, foot[0], 0.8))
        steps.append(foot[0])
        opti.subject_to(opti.bounded(_LO, QM[j], _HI))
        v_plus, impulse = m.impact(QM[j], VM[j])
        opti.subject_to(impulse[1] >= 0) if IMPULSE else None
        opti.subject_to(opti.bounded(-impulse[1], impulse[0], impulse[1])) if IMPULSE else None
        y_start, yd_start = r(QM[j][list(range(5))][[0, 2, 1, 4, 3]], v_plus)
        opti.set_initial(QM[j], qs_guess[-1])
        opti.set_initial(VM[j], vs_guess[-1])
        opti.set_initial(Y[j], y_guess)
        opti.set_initial(YD[j], yd_guess)
    opti.subject_to(sum(steps) == distance)
    # even steps: without it the cost in yd and tau alone lets the steps run to their bounds
    opti.minimize(cost + STEP_WEIGHT * sum((s_ - distance / strides) ** 2 for s_ in steps))
    opti.solver("ipopt", {"expand": True, "print_time": False},
                {"print_level": 0, "sb": "yes", "max_iter": 3000, "tol": 1e-8})
    t0 = time.perf_counter()
    sol, ok, status = _solve_with_continuation(opti, TH, theta0(spec), theta)
    elapsed = time.perf_counter() - t0
    y = np.array([sol.value(Y[j]) for j in range(strides)]).reshape(strides, K, ny)
    qm = np.array([sol.value(QM[j]) for j in range(strides)])
    q_start = np.array(sol.value(Q0)).ravel()
    q, err = inverse_kinematics(spec, model["theta"], y, np.vstack([q_start, qm]))
    within = bool(np.all(q >= _LO - 1e-9) and np.all(q <= _HI + 1e-9))
    return {"success": bool(ok and err < 1e-6 and within), "status": status, "distance": distance, "strides": strides,
            "solve_time_s": elapsed, "time_per_step_s": elapsed / strides, "y": y, "q": q,
            "ik_error": float(err), "within_limits": within,
            "steps": [float(sol.value(s)) for s in steps],
            "durations": list(T)}


def _try(opti):
    try:
        sol, ok = opti.solve(), True
    except RuntimeError:
        sol, ok = opti.debug, False
    return sol, ok, opti.stats()["return_status"]


def _solve_with_continuation(opti, param, th0, theta):
    """Solve at ``theta``; failing that, at the LIP ``th0`` and then along th0 -> theta.

    A learned model far from the LIP can leave the heuristic start outside
    IPOPT's reach; the LIP plan always is within it, and each of
    ``CONTINUATION_STEPS`` steps starts from the previous plan.
    """
    opti.set_value(param, theta)
    sol, ok, status = _try(opti)
    for k in range(CONTINUATION_STEPS + 1) if not ok else ():
        if k:
            opti.set_initial(sol.value_variables())
        opti.set_value(param, th0 + (theta - th0) * k / CONTINUATION_STEPS)
        sol, ok, status = _try(opti)
        if not ok:
            break
    return sol, ok, status


def inverse_kinematics(spec, theta, y: np.ndarray, q_end: np.ndarray):
    """q (strides, K, 5) with r(q) = y at every knot, within the joint limits.

    Each knot minimises |q - q_previous|^2 subject to r(q) = y (4 equations, 5
    angles); the previous knot's q is the start.  ``q_end`` (strides + 1, 5): the start
    state, then each stride's pre-impact state.  Returns (q, max |r(q) - y|).
    """
    qs, ys = ca.SX.sym("q", 5), ca.SX.sym("y", spec.n_y)
    qref = ca.SX.sym("qref", 5)
    te, _ = spec.split(np.asarray(theta))
    res = te @ phi_e(qs) - ys
    nlp = {"x": qs, "p": ca.vertcat(ys, qref), "f": ca.sumsqr(qs - qref), "g": res}
    solver = ca.nlpsol("ik", "ipopt", nlp, {"print_time": False, "ipopt": {
        "print_level": 0, "sb": "yes", "tol": 1e-12, "constr_viol_tol": 1e-12}})
    resid = ca.Function("res", [qs, ys], [res])
    strides, K, _ = y.shape
    q = np.zeros((strides, K, 5))
    err = 0.0
    for j in range(strides):
        prev = q_end[j][[0, 2, 1, 4, 3]] if j else q_end[0]
        for k in range(K):
            out = solver(x0=prev, p=np.r_[y[j, k], prev], lbx=_LO, ubx=_HI, lbg=0, ubg=0)
            prev = np.array(out["x"]).ravel()
            q[j, k] = prev
            err = max(err, float(np.abs(np.array(resid(prev, y[j, k]))).max()))
    return q, err
