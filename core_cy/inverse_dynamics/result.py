"""What a contact inverse-dynamics solve returns."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Diagnostics", "Result"]


@dataclass
class Diagnostics:
    """How the solve went.

    iterations: Lemke pivots (LCP variants), -1 where the QP backend does not
        report them; residual [N]: max |M qdd + h - S^T tau - J^T f|;
    complementarity: max |f_n w_n| (and friction pairs for lcp_coulomb)
        [N m/s^2]; cone_violation [N]: max of (sum |f_t| - mu f_n, -f_n);
    penetration [m/s^2]: max of -(n^T qdd + bias) (w_n < 0);
    solve_time [s] wall time of the whole call; stage_times [s] per stage;
    regularization: Tikhonov term Lemke needed (0 = none);
    fallback: the §4.5 consistency QP changed the joint acceleration;
    stage2: Stage II ran (nullspace of Stage I's Hessian not empty);
    nullity: that nullspace's dimension (>= 5k - 6, erratum E5);
    tau_stage1, qdd_stage1: Stage I's own answer (qp only), for §9.16;
    active: (k,) normal force above 1e-9 of the weight.
    """

    iterations: int = 0
    residual: float = 0.0
    complementarity: float = 0.0
    cone_violation: float = 0.0
    penetration: float = 0.0
    solve_time: float = 0.0
    stage_times: dict = field(default_factory=dict)
    regularization: float = 0.0
    fallback: bool = False
    stage2: bool = False
    nullity: int = 0
    tau_stage1: np.ndarray | None = None
    qdd_stage1: np.ndarray | None = None
    active: np.ndarray | None = None


@dataclass
class Result:
    """tau (n_joints,) [N m]; contact_forces (k, 3) world [N] on the robot;
    qdd (nv,) achieved acceleration; v_next (nv,) = v + dt qdd; variant."""

    tau: np.ndarray
    contact_forces: np.ndarray
    qdd: np.ndarray
    v_next: np.ndarray
    variant: str
    diagnostics: Diagnostics
