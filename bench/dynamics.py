"""``servoloop bench dynamics``: core_cy kernels vs Pinocchio, same process.

Per-call time from Python of rnea, crba and aba on ur5, solo12 and talos
(example-robot-data), ours and Pinocchio's interleaved on the same model and
the same state; and the batch forms (rnea_batch, aba_batch, regressor_batch
over N states, GIL released) against a Python loop over Pinocchio.
Rows: case "ROBOT/KERNEL", ratio = ours / pinocchio (below 1 is faster).

Clock: by default the CPU time of the calling thread (``time.thread_time``),
not the wall clock.  The kernels are single-threaded, so on an idle machine
both are the same; on a shared one (2 cores, several jobs) the thread clock
does not charge either side for time spent descheduled.  ``--clock wall``
gives ``time.perf_counter``.

Threaded batch rows (``--threads 1,2`` by default; case
"ROBOT/KERNEL_threadsT[N=..]", unit "us (wall clock)"): the batch form with
``threads=T`` against the same Python loop over Pinocchio, both timed by the
wall clock (``perf_counter``) whatever ``--clock`` says, because the thread
clock does not see the work of the other threads.  The threads1 rows are the
same-clock baseline: the gain of T threads is threads1 / threadsT, and it
only shows when T cores are free (read the load average next to them).
"""

from __future__ import annotations

import os
import sysconfig
import time
from pathlib import Path

import numpy as np

from servoloop.bench.common import Row, interleaved_times, report

__all__ = ["add_arguments", "run", "ROBOTS"]

# name -> (file below example-robot-data's robots folder, floating_base)
ROBOTS = {
    "ur5": ("ur_description/urdf/ur5_robot.urdf", False),
    "solo12": ("solo_description/robots/solo12.urdf", True),
    "talos": ("talos_data/robots/talos_reduced.urdf", True),
}


def add_arguments(parser) -> None:
    parser.add_argument("--robots", default=",".join(ROBOTS),
                        help="comma-separated subset of " + ",".join(ROBOTS))
    parser.add_argument("--number", type=int, default=500,
                        help="calls per timed block (single-call rows)")
    parser.add_argument("--repeats", type=int, default=15,
                        help="timed blocks, best kept (many short blocks resist a busy machine)")
    parser.add_argument("--batch", type=int, default=1000, help="states per batch call (N)")
    parser.add_argument("--no-batch", action="store_true", help="skip the batch rows")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="thread",
                        help="thread: CPU time of this thread (default); wall: perf_counter")
    parser.add_argument("--threads", default="1,2",
                        help="comma-separated thread counts of the wall-clock batch rows, "
                             "0 = all cores, '' = none [default: 1,2]")


CLOCKS = {"thread": time.thread_time, "wall": time.perf_counter}


def _clock(args):
    return CLOCKS[getattr(args, "clock", "thread")]


def _erd_root() -> Path:
    return (Path(sysconfig.get_paths()["purelib"])
            / "cmeel.prefix/share/example-robot-data/robots")


def _states(model, n, seed=0):
    rng = np.random.default_rng(seed)
    Q = rng.uniform(-1.0, 1.0, (n, model.nq))
    if model.floating_base:
        Q[:, 3:7] /= np.linalg.norm(Q[:, 3:7], axis=1, keepdims=True)
    return Q, rng.normal(size=(n, model.nv)), rng.normal(size=(n, model.nv))


def _single_rows(name, model, data, pm, pd, args, core_cy, pin):
    Q, V, A = _states(model, 1)
    q, v, a = Q[0].copy(), V[0].copy(), A[0].copy()
    cases = {
        "rnea": (lambda: core_cy.rnea(model, data, q, v, a), lambda: pin.rnea(pm, pd, q, v, a)),
        "crba": (lambda: core_cy.crba(model, data, q), lambda: pin.crba(pm, pd, q)),
        "aba": (lambda: core_cy.aba(model, data, q, v, a), lambda: pin.aba(pm, pd, q, v, a)),
    }
    rows = []
    for kernel, (ours, anchor) in cases.items():
        t_o, t_a = interleaved_times(ours, anchor, args.number, args.repeats, clock=_clock(args))
        rows.append(Row(f"{name}/{kernel}", "time_per_call_us", "us", t_o * 1e6,
                        "pinocchio", t_a * 1e6))
    return rows


def _batch_rows(name, model, data, pm, pd, args, core_cy, pin):
    n = args.batch
    Q, V, A = _states(model, n, seed=1)
    T = np.empty((n, model.nv))
    Y = np.empty((n, model.nv, 10 * model.nbodies + 4 * model.n_actuated))

    def loop(fn):
        def run_loop():
            for k in range(n):
                fn(pm, pd, Q[k], V[k], A[k])
        return run_loop

    cases = {
        "rnea_batch": (lambda: core_cy.rnea_batch(model, Q, V, A, out=T, data=data),
                       loop(pin.rnea)),
        "aba_batch": (lambda: core_cy.aba_batch(model, Q, V, A, out=T, data=data),
                      loop(pin.aba)),
        "regressor_batch": (lambda: core_cy.regressor_batch(model, Q, V, A, out=Y, data=data),
                            loop(pin.computeJointTorqueRegressor)),
    }
    rows = []
    number = max(1, args.number // n)
    for kernel, (ours, anchor) in cases.items():
        t_o, t_a = interleaved_times(ours, anchor, number, args.repeats, clock=_clock(args))
        rows.append(Row(f"{name}/{kernel}[N={n}]", "time_per_batch_us", "us", t_o * 1e6,
                        "pinocchio_python_loop", t_a * 1e6))
    batch_fns = {"rnea_batch": (core_cy.rnea_batch, T), "aba_batch": (core_cy.aba_batch, T),
                 "regressor_batch": (core_cy.regressor_batch, Y)}
    for threads in _thread_counts(args):
        for kernel, (_, anchor) in cases.items():
            fn, out = batch_fns[kernel]

            def ours(fn=fn, out=out, threads=threads):
                fn(model, Q, V, A, out=out, data=data, threads=threads)

            ours()  # the first call makes the per-thread workspaces (cached on data)
            t_o, t_a = interleaved_times(ours, anchor, number, args.repeats,
                                         clock=time.perf_counter)
            rows.append(Row(f"{name}/{kernel}_threads{threads}[N={n}]",
                            "wall_time_per_batch_us", "us (wall clock)", t_o * 1e6,
                            "pinocchio_python_loop", t_a * 1e6))
    return rows


def _thread_counts(args) -> list[int]:
    counts = []
    for s in str(getattr(args, "threads", "1,2")).split(","):
        if s.strip():
            t = int(s)
            counts.append(t if t > 0 else (os.cpu_count() or 1))
    return counts


def run(args) -> dict:
    import pinocchio as pin

    from servoloop import core_cy

    rows = []
    root = _erd_root()
    for name in [s for s in getattr(args, "robots", ",".join(ROBOTS)).split(",") if s]:
        if name not in ROBOTS:
            raise SystemExit(f"bench dynamics: unknown robot {name!r}; choose from {list(ROBOTS)}")
        rel, floating = ROBOTS[name]
        path = root / rel
        if not path.is_file():
            raise SystemExit(f"bench dynamics: {path} not found (install example-robot-data)")
        model = core_cy.Model.from_urdf(path, floating_base=floating)
        data = core_cy.Data(model)
        pm = (pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer()) if floating
              else pin.buildModelFromUrdf(str(path)))
        pd = pm.createData()
        rows += _single_rows(name, model, data, pm, pd, args, core_cy, pin)
        if not getattr(args, "no_batch", False):
            rows += _batch_rows(name, model, data, pm, pd, args, core_cy, pin)
    return report("dynamics", rows)
