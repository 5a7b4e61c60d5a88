"""Seed 000's actuator identification, exactly as the paper describes it.

Tan et al. (seed 000, "Physical Simulation" / "Actuator Model"): smooth the
measured q(t) with a 4th-order polynomial per segment, differentiate the
polynomial analytically for qd and qdd, then least squares for the actuator
gains in

    I qdd = -kp (q - q_goal) - kd qd - kc sgn(qd)   (+ gravity of a known load)

with kc >= 0.  Segments are the intervals between goal steps (the paper's
square wave), cut further into windows of ``max_segment_s``.  The paper
notes this is a first guess only; on a ~50 ms step transient the
polynomial cannot follow the motion unless the windows are short, which
is why the output-error fit (calibration.output_error) is the tool's answer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import lsq_linear

from servoloop.calibration.errors import FitError
from servoloop.calibration.recording import Recording

__all__ = ["Seed000Result", "segments", "smooth_derivatives", "fit_seed000"]


@dataclass
class Seed000Result:
    """Gains identified by seed 000's regression.

    Attributes
    ----------
    kp : float
        N*m/rad.
    kd : float
        N*m*s/rad.
    kc : float
        N*m (>= 0).
    stderr : dict
        Standard errors of kp, kd, kc (ordinary least squares).
    rms_torque : float
        RMS torque residual [N*m].
    samples : int
        Rows used in the regression.
    """

    kp: float
    kd: float
    kc: float
    stderr: dict
    rms_torque: float
    samples: int

    def params(self) -> dict:
        return {"kp": self.kp, "kd": self.kd, "kc": self.kc}


def segments(rec: Recording, max_segment_s: float = 0.67, min_samples: int = 8) -> list[tuple[int, int]]:
    """Index ranges [start, stop) with the torque on and no goal step inside.

    A goal step is a change of the goal between two samples larger than
    1e-6 rad while the goal is otherwise constant (square wave), or any
    change at all when the goal is piecewise constant.
    """
    on = rec.torque_enable
    dg = np.abs(np.diff(rec.goal))
    step = dg > max(1e-6, 10.0 * float(np.median(dg)))
    cuts = set(np.flatnonzero(step) + 1) | {0, rec.n}
    cuts |= set(np.flatnonzero(np.diff(on.astype(int)) != 0) + 1)
    cuts = sorted(cuts)
    out = []
    for a, b in zip(cuts[:-1], cuts[1:], strict=True):
        if not on[a]:
            continue
        t0 = rec.t[a]
        while a < b:
            stop = int(np.searchsorted(rec.t, t0 + max_segment_s, side="left"))
            stop = min(max(stop, a + 1), b)
            if stop - a >= min_samples:
                out.append((a, stop))
            a, t0 = stop, rec.t[stop] if stop < rec.n else t0
    return out


def smooth_derivatives(t: np.ndarray, q: np.ndarray):
    """4th-order polynomial fit of q(t) and its analytic derivatives.

    Parameters
    ----------
    t, q : ndarray (m,)
        Time [s] and position [rad] of one segment.

    Returns
    -------
    q_s, qd, qdd : ndarray (m,)
        Smoothed position, velocity and acceleration.
    """
    tc = t - t.mean()  # centred for conditioning
    c = np.polyfit(tc, q, 4)
    return np.polyval(c, tc), np.polyval(np.polyder(c, 1), tc), np.polyval(np.polyder(c, 2), tc)


def fit_seed000(recs: list[Recording], max_segment_s: float = 0.67, armature: float = 0.0) -> Seed000Result:
    """Least squares for kp, kd, kc (kc >= 0) over the segments of ``recs``.

    Parameters
    ----------
    recs : list of Recording
        Recordings at one firmware gain (the gains are per-gain quantities).
    max_segment_s : float
        Longest smoothing window [s] (the paper: one half period, 0.67 s).
    armature : float
        Inertia added to each recording's load [kg*m^2] (0 in the paper).

    Returns
    -------
    Seed000Result
    """
    rows, rhs = [], []
    for rec in recs:
        inertia = rec.load_inertia() + armature
        mgl = rec.load_mgl()
        for a, b in segments(rec, max_segment_s):
            q_s, qd, qdd = smooth_derivatives(rec.t[a:b], rec.position[a:b])
            # I qdd + mgl sin(q) = -kp (q - goal) - kd qd - kc sgn(qd)
            rows.append(np.column_stack([-(q_s - rec.goal[a:b]), -qd, -np.sign(qd)]))
            rhs.append(inertia * qdd + mgl * np.sin(q_s))
    if not rows:
        raise FitError("no usable segment (torque on, at least 8 samples) in "
                       + ", ".join(r.path for r in recs))
    A, y = np.vstack(rows), np.concatenate(rhs)
    if np.linalg.matrix_rank(A) < 3:
        raise FitError("the motion does not excite kp, kd and kc separately (rank-deficient regression) in "
                       + ", ".join(r.path for r in recs))
    sol = lsq_linear(A, y, bounds=([-np.inf, -np.inf, 0.0], [np.inf, np.inf, np.inf]))
    res = y - A @ sol.x
    dof = max(A.shape[0] - 3, 1)
    cov = np.linalg.pinv(A.T @ A) * float(res @ res) / dof
    se = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    kp, kd, kc = (float(v) for v in sol.x)
    return Seed000Result(kp, kd, kc, {"kp": float(se[0]), "kd": float(se[1]), "kc": float(se[2])},
                         float(np.sqrt(np.mean(res**2))), int(A.shape[0]))
