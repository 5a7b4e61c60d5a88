"""``servoloop rom learn | evaluate | plan``: reduced-order walking models (seed 004).

Nothing heavy is imported at registration (casadi, Ray): only when a
``rom`` command runs.  Bad input (a model file, a speed list) ends with one
line naming it and exit code 2; a learning run that cannot go on, exit 1.
"""

from __future__ import annotations

import json
import re
import sys

__all__ = ["register"]

EXIT_FAILURE, EXIT_USAGE = 1, 2


def register(sub) -> None:
    p = sub.add_parser("rom", help="reduced-order walking models: learn, evaluate, plan")
    rsub = p.add_subparsers(dest="rom_command", metavar="ACTION", required=True)
    lp = rsub.add_parser("learn", help="learn a ROM by bilevel optimisation on a 3x3 task grid")
    lp.add_argument("--model", choices=("2d", "4d"), required=True, help="2d: LIP; 4d: LIP + swing foot")
    lp.add_argument("--iterations", type=int, default=10, help="outer iterations (default 10)")
    lp.add_argument("--out", required=True, help="model file to write (JSON)")
    lp.add_argument("--ray", default=None, metavar="local|ADDRESS",
                    help="run the inner problems on Ray (local: a 2-CPU cluster in this process)")
    lp.add_argument("--workers", type=int, default=None, help="worker processes without Ray")
    lp.add_argument("--seed", type=int, default=0, help="task sampling seed (default 0)")
    lp.add_argument("--step", type=float, default=1e-2,
                    help="length of the first Theta_d step (Theta_e: 1 %% of it; default 0.01)")
    lp.add_argument("--embedding-ratio", type=float, default=1e-2,
                    help="the embedding's step as a fraction of the dynamics' step (default 0.01)")
    lp.add_argument("--plot", default=None, metavar="PNG", help="plot the learning curve")
    lp.add_argument("--json", action="store_true", help="end with one JSON object")
    lp.set_defaults(func=_guard(_learn))
    ep = rsub.add_parser("evaluate", help="J/J_full of a model against the LIP on a task grid")
    ep.add_argument("--model", required=True, help="file from 'rom learn' or builtin:five_link_2d|4d")
    ep.add_argument("--speeds", default="0.3,0.4,0.5", help="m/s, comma-separated")
    ep.add_argument("--inclines", default="-0.06,0,0.06", help="rad, comma-separated")
    ep.add_argument("--ray", default=None, metavar="local|ADDRESS")
    ep.add_argument("--workers", type=int, default=None)
    ep.add_argument("--json", action="store_true", help="print the benchmark JSON form")
    ep.set_defaults(func=_guard(_evaluate))
    # "--inclines -0.08,0,0.08": argparse takes a word starting with "-" for an option unless
    # it looks like one negative number; let it see a comma-separated list of numbers too
    ep._negative_number_matcher = re.compile(r"^-\d*\.?\d+(e[-+]?\d+)?(,[-+]?\d*\.?\d+(e[-+]?\d+)?)*$")
    kp = rsub.add_parser("check", help="collocation accuracy and LIP feasibility on the 3x3 task grid")
    kp.add_argument("--roms", default="2d,4d",
                    help="ROMs checked at the LIP, comma-separated, or 'none' (default 2d,4d)")
    kp.add_argument("--json", action="store_true", help="print the benchmark JSON form")
    kp.set_defaults(func=_guard(_check))
    cp = rsub.add_parser("curve", help="plot the learning curves stored in model files")
    cp.add_argument("--models", default="builtin:five_link_2d,builtin:five_link_4d",
                    help="model files or builtin: names, comma-separated (default both built-ins)")
    cp.add_argument("--plot", required=True, metavar="PNG", help="image to write")
    cp.set_defaults(func=_guard(_curve))
    pp = rsub.add_parser("plan", help="plan a walk of DISTANCE metres in STRIDES strides")
    pp.add_argument("--model", default="builtin:five_link_4d")
    pp.add_argument("--distance", type=float, default=2.0, help="metres (default 2)")
    pp.add_argument("--strides", type=int, default=4, help="1-10 (default 4)")
    pp.add_argument("--plot", default=None, metavar="PNG", help="plot the planned gait")
    pp.add_argument("--json", action="store_true")
    pp.set_defaults(func=_guard(_plan))


def _guard(fn):
    def run(args) -> int:
        from servoloop.locomotion.errors import RomInputError, RomSolveError

        try:
            return fn(args)
        except RomInputError as exc:
            print(f"servoloop rom {args.rom_command}: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except RomSolveError as exc:
            print(f"servoloop rom {args.rom_command}: {exc}", file=sys.stderr)
            return EXIT_FAILURE
    return run


def _runner(args):
    from servoloop.locomotion.runner import make_runner

    return make_runner(args.ray, args.workers)


def _learn(args) -> int:
    import time

    from servoloop.locomotion.errors import RomInputError
    from servoloop.locomotion.learning import learn
    from servoloop.locomotion.model_file import save_model
    from servoloop.progress import Progress

    if args.iterations < 0:
        raise RomInputError(f"--iterations {args.iterations}: must be >= 0")
    if not 0 < args.step < 1:
        raise RomInputError(f"--step {args.step}: must lie in (0, 1)")
    if not 0 <= args.embedding_ratio <= 1:
        raise RomInputError(f"--embedding-ratio {args.embedding_ratio}: must lie in [0, 1]")
    runner = _runner(args)
    t0 = time.perf_counter()

    def save(res, theta, done: int) -> None:
        # a checkpoint after iteration k is what "--iterations k" writes (learn's on_iteration)
        command = _learn_command(args, done)
        info = {"costs": res.costs, "costs_no_tau": res.costs_no_tau, "seed": args.seed,
                "iterations": done, "step": args.step, "embedding_ratio": args.embedding_ratio,
                "command": command,
                "iteration_times_s": res.times_s, "failures": res.failures, "steps": res.steps}
        save_model(args.out, args.model, theta, **info)

    try:
        with Progress(args.iterations, desc=f"rom learn {args.model}", unit="iterations") as prog:
            res = learn(args.model, args.iterations, runner, seed=args.seed, step=args.step,
                        progress=prog, on_iteration=save, embedding_ratio=args.embedding_ratio)
    finally:
        runner.close()
    save(res, res.theta, args.iterations)
    if args.plot:
        from servoloop.locomotion.plots import plot_learning_curve

        plot_learning_curve(res.costs, res.costs_no_tau, args.plot, title=f"{args.model} ROM")
    summary = {"model": args.model, "out": args.out, "costs": res.costs,
               "costs_no_tau": res.costs_no_tau, "iteration_times_s": res.times_s,
               "mean_task_time_s": sum(res.task_times_s) / max(len(res.task_times_s), 1),
               "wall_time_s": time.perf_counter() - t0, "workers": runner.workers,
               "ray": args.ray}
    if args.json:
        print(json.dumps(summary))
    else:
        for i, c in enumerate(res.costs):
            print(f"iteration {i}: mean J/J_full {c:.4f}")
        print(f"wrote {args.out}")
    return 0


def _learn_command(args, iterations: int) -> str:
    """The ``rom learn`` command line that gives this run's result after ``iterations``."""
    words = ["servoloop rom learn", f"--model {args.model}", f"--iterations {iterations}",
             f"--out {args.out}", f"--seed {args.seed}"]
    if args.step != 1e-2:
        words.append(f"--step {args.step:g}")
    if args.embedding_ratio != 1e-2:
        words.append(f"--embedding-ratio {args.embedding_ratio:g}")
    return " ".join(words)


def _evaluate(args) -> int:
    from servoloop.locomotion.evaluate import evaluate
    from servoloop.locomotion.model_file import load_model
    from servoloop.locomotion.task import Task, parse_floats
    from servoloop.progress import Progress

    model = load_model(args.model)
    speeds = parse_floats(args.speeds, "--speeds")
    inclines = parse_floats(args.inclines, "--inclines")
    tasks = [Task(s, i) for s in speeds for i in inclines]
    runner = _runner(args)
    try:
        with Progress(len(tasks), desc="rom evaluate", unit="tasks") as prog:
            rows = evaluate(model["model"], model["theta"], tasks, runner, progress=prog)
    finally:
        runner.close()
    if args.json:
        print(json.dumps({"benchmark": "rom_evaluate", "model": args.model, "rows": rows}))
        return 0
    print(f"{'case':<28}{'J/J_full':>10}{'lip':>10}{'ratio':>8}")
    for r in rows:
        ours = "infeasible" if r["ours"] is None else f"{r['ours']:.4f}"
        lip = "-" if r["anchor"] is None else f"{r['anchor']:.4f}"
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}"
        print(f"{r['case']:<28}{ours:>10}{lip:>10}{ratio:>8}")
    return 0


def _check(args) -> int:
    from servoloop.locomotion.grid_check import grid_check, parse_roms
    from servoloop.progress import Progress

    roms = parse_roms(args.roms)
    with Progress(9, desc="rom check", unit="tasks") as prog:
        rep = grid_check(roms, progress=prog)
    if args.json:
        print(json.dumps(rep))
        return 0
    print(f"{'case':<24}{'metric':<24}{'ours':>12}{'anchor':>10}")
    for r in rep["rows"]:
        ours = "infeasible" if r["ours"] is None else f"{r['ours']:.3g}"
        print(f"{r['case']:<24}{r['metric']:<24}{ours:>12}{r['anchor']:>10.3g}")
    return 0


def _curve(args) -> int:
    from servoloop.locomotion.model_file import load_model
    from servoloop.locomotion.plots import plot_learning_curves

    names = [n.strip() for n in args.models.split(",") if n.strip()]
    plot_learning_curves({n: load_model(n) for n in names}, args.plot)
    print(f"wrote {args.plot}")
    return 0


def _plan(args) -> int:
    from servoloop.locomotion.model_file import load_model
    from servoloop.locomotion.planner import plan

    model = load_model(args.model)
    result = plan(model, args.distance, args.strides)
    if args.plot:
        from servoloop.locomotion.plots import plot_gait

        plot_gait(result, args.plot)
    summary = {k: result[k] for k in ("success", "distance", "strides", "solve_time_s",
                                      "time_per_step_s", "ik_error", "within_limits")}
    if args.json:
        print(json.dumps(summary))
    else:
        for k, v in summary.items():
            print(f"{k}: {v}")
    return 0 if result["success"] else EXIT_FAILURE
