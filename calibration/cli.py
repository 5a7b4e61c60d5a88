"""``servoloop calibrate {actuator,fit,friction,inertial}``: bench calibration from the command line.

Exit codes: 0 ok, 1 reported failure (the fit failed), 2 bad input or usage
(a bad recording names the file and sample), 3 bus or hardware error.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

__all__ = ["register", "main"]


def register(sub) -> None:
    """Add ``calibrate`` and its subcommands to the ``servoloop`` subparsers."""
    p = sub.add_parser("calibrate", help="identify servo actuator gains and friction on the bench")
    csub = p.add_subparsers(dest="calibrate_command", metavar="{actuator,fit,friction,inertial}")
    csub.required = True
    _add_fit(csub)
    _add_actuator(csub)
    _add_friction(csub)
    _add_inertial(csub)


#: calibration.inertial.command.HELP, repeated so that ``servoloop --help`` need not import the package
_INERTIAL_HELP = "identify inertial, friction and armature parameters from a joint log"


def _add_inertial(csub):
    # the inertial package loads SciPy and the kernels: build its options only when it is used
    from servoloop.cli import lazy_arguments

    lazy_arguments(csub.add_parser("inertial", help=_INERTIAL_HELP), _inertial_arguments)


def _inertial_arguments(p) -> None:
    from servoloop.calibration.inertial import command

    command.add_arguments(p)
    p.set_defaults(func=command.run)


# ---------------------------------------------------------------- fit

def _add_fit(csub):
    p = csub.add_parser("fit", help="fit an actuator model offline from recordings (ours or BAM's JSON)")
    p.add_argument("--log", nargs="+", required=True, metavar="FILE", help="training recordings")
    p.add_argument("--holdout", nargs="*", default=[], metavar="FILE", help="recordings only scored")
    p.add_argument("--model", default="v3",
                   help="model name, or a comma list with --cross-validate "
                        "(seed000 = the square-wave regression of Tan et al. 2018, pd, m1..m6 = BAM's, "
                        "v3, v6 = ours); default v3")
    p.add_argument("--cross-validate", action="store_true",
                   help="cross-validate by firmware gain: fit on the other gains' logs, predict each gain's")
    p.add_argument("--evaluate", metavar="PARAMS",
                   help="no fit: score parameters from a YAML/JSON file, or bam:m1|bam:m3|bam:m6 "
                        "(BAM's published XL330 parameters)")
    p.add_argument("--method", default="cmaes+lsq", choices=("cmaes+lsq", "cmaes", "lsq"))
    p.add_argument("--evals", type=int, default=4000, help="CMA-ES evaluations (default 4000)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--dt", type=float, default=0.005, help="resampling step, s (BAM: 0.005)")
    p.add_argument("--out", metavar="PARAMS.yaml", help="write parameters, uncertainties, data, metrics")
    p.add_argument("--report", metavar="REPORT.png", help="plot measured vs simulated position")
    p.add_argument("--json", action="store_true", help="print JSON on stdout")
    p.set_defaults(func=run_fit)


def _load_params(spec: str) -> dict:
    from servoloop.calibration.models import BAM_XL330_PUBLISHED

    if spec.startswith("bam:"):
        key = spec[4:]
        if key not in BAM_XL330_PUBLISHED:
            raise ValueError(f"--evaluate {spec}: known: " + ", ".join("bam:" + k for k in BAM_XL330_PUBLISHED))
        return dict(BAM_XL330_PUBLISHED[key])
    path = Path(spec)
    if not path.exists():
        raise ValueError(f"--evaluate {spec}: no such file")
    import yaml

    data = yaml.safe_load(path.read_text())
    if isinstance(data, dict) and "params" in data:
        data = data["params"]
    if not isinstance(data, dict):
        raise ValueError(f"{spec}: expected a mapping of parameter names to values")
    out = {k: float(v) for k, v in data.items() if isinstance(v, (int, float))}
    bad = [k for k, v in out.items() if not math.isfinite(v)]
    if bad:
        raise ValueError(f"--evaluate {spec}: parameter {bad[0]} is {out[bad[0]]}, not a finite number")
    return out


def run_fit(args) -> int:
    from servoloop.calibration.errors import FitError, RecordingError

    try:
        return _run_fit(args)
    except RecordingError as exc:
        print(f"servoloop calibrate fit: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"servoloop calibrate fit: {exc}", file=sys.stderr)
        return 2
    except FitError as exc:
        print(f"servoloop calibrate fit: fit failed: {exc}", file=sys.stderr)
        return 1


def _run_fit(args) -> int:
    from servoloop.calibration.errors import FitError
    from servoloop.calibration.models import get_model
    from servoloop.calibration.offline import (
        OfflineFit,
        fit_logs,
        load_resampled,
        score_logs,
        simulated_runs,
    )

    names = [m for m in args.model.split(",") if m]
    for m in names:
        get_model(m)
    if not (math.isfinite(args.dt) and args.dt > 0):
        raise ValueError(f"--dt {args.dt}: the resampling step must be a finite number of seconds > 0")
    if len(names) > 1 and not args.cross_validate:
        raise ValueError("several models need --cross-validate")
    train = load_resampled(args.log, args.dt)
    holdout = load_resampled(args.holdout, args.dt)
    progress = not args.json or sys.stderr.isatty()

    if args.cross_validate:
        return _cross_validate(args, names, train + holdout, progress)

    name = names[0]
    if args.evaluate:
        spec = get_model(name)
        params = spec.values(_load_params(args.evaluate))
        logs = score_logs(name, params, train, "train") + score_logs(name, params, holdout, "holdout")
        fit = OfflineFit(name, params, {}, logs, 0)
    else:
        fit = fit_logs(name, train, holdout, method=args.method, evals=args.evals, progress=progress,
                       seed=args.seed)
    bad = [k for k, v in fit.params.items() if not math.isfinite(float(v))]
    if bad:
        # never hand a NaN model to the daemon or the next fit
        raise FitError(f"model {name}: parameter {bad[0]} came out {fit.params[bad[0]]}; nothing written")
    if args.out:
        _write_fit_yaml(args.out, fit, args)
    if args.report:
        from servoloop.calibration.report import plot_fit

        runs = simulated_runs(name, fit.params, train, "train") + simulated_runs(name, fit.params, holdout, "holdout")
        plot_fit(args.report, runs, f"model {name}")
    if args.json:
        out = fit.to_json()
        print(json.dumps(out, allow_nan=False, default=_nan_to_none))
    else:
        _print_fit(fit)
    return 0


def _nan_to_none(x):
    return None


def _print_fit(fit) -> None:
    print(f"model {fit.model}")
    for k, v in fit.params.items():
        se = fit.stderr.get(k)
        se_txt = f" +- {se:.3g}" if se is not None and math.isfinite(se) else ""
        print(f"  {k:34s} {v:.6g}{se_txt}")
    print(f"  {'log':44s} {'role':8s} {'MAE mrad':>9s} {'MAE deg':>8s}")
    for r in fit.logs:
        print(f"  {Path(r['file']).name:44s} {r['role']:8s} {r['mae_rad'] * 1e3:9.2f} {r['mae_deg']:8.3f}")
    for role in ("train", "holdout"):
        m = fit.mean_mae(role)
        if math.isfinite(m):
            print(f"  mean {role}: {m * 1e3:.2f} mrad ({math.degrees(m):.3f} deg)")


def _write_fit_yaml(path, fit, args) -> None:
    from servoloop.calibration.report import write_yaml

    write_yaml(path, {
        "model": fit.model,
        "params": fit.params,
        "stderr": fit.stderr,
        "data": {"train": list(args.log), "holdout": list(args.holdout), "resample_dt_s": args.dt},
        "fit": {"method": "evaluate" if args.evaluate else args.method, "evaluations": fit.nfev,
                "mean_mae_rad": {"train": fit.mean_mae("train"), "holdout": fit.mean_mae("holdout")},
                "logs": fit.logs},
    })


def _cross_validate(args, names, recs, progress) -> int:
    from servoloop.calibration.offline import cross_validate_by_gain

    table = {}
    for name in names:
        if progress:
            print(f"cross-validating {name} ...", file=sys.stderr)
        folds = cross_validate_by_gain(name, recs, method=args.method, evals=args.evals,
                                       progress=False, seed=args.seed)
        rows = [r for f in folds for r in f.logs if r["role"] == "holdout"]
        table[name] = {
            "folds": [{"test_kp": f.logs[-1]["kp_fw"], "params": f.params,
                       "train_mae_rad": f.mean_mae("train"), "holdout_mae_rad": f.mean_mae("holdout")}
                      for f in folds],
            "logs": [{k: r[k] for k in ("file", "kp_fw", "trajectory", "mae_rad", "mae_deg")} for r in rows],
            "mean_mae_rad": sum(r["mae_rad"] for r in rows) / len(rows),
        }
    if args.out:
        from servoloop.calibration.report import write_yaml

        write_yaml(args.out, {"cross_validation_by_gain": table,
                              "data": [r.path for r in recs], "resample_dt_s": args.dt})
    if args.json:
        print(json.dumps({"cross_validation": table}, default=_nan_to_none))
        return 0
    files = table[names[0]]["logs"]
    print("simulation MAE on held-out firmware gains [mrad] (fit on the other gain)")
    print(f"  {'log':40s} " + " ".join(f"{n:>9s}" for n in names))
    for i, r in enumerate(files):
        print(f"  {Path(r['file']).name:40s} " + " ".join(f"{table[n]['logs'][i]['mae_rad'] * 1e3:9.1f}" for n in names))
    print(f"  {'mean':40s} " + " ".join(f"{table[n]['mean_mae_rad'] * 1e3:9.1f}" for n in names))
    return 0


# ---------------------------------------------------------------- actuator (hardware)

def _add_actuator(csub):
    p = csub.add_parser("actuator", help="step one servo through a square wave at one or more firmware gains and "
                        "identify its kp, kd, kc")
    p.add_argument("--port", help="serial port (or virtual bus pty)")
    p.add_argument("--baud", type=int, default=1_000_000)
    p.add_argument("--protocol", type=int, choices=(1, 2), default=None,
                   help="default: 1 for AX/MX(1.0) models, else 2")
    p.add_argument("--id", type=int, required=True, help="servo id")
    p.add_argument("--model", default=None, help="servo model name (default: read from the servo)")
    load = p.add_mutually_exclusive_group(required=True)
    load.add_argument("--load", help="pendulum:MASS:LENGTH (kg, m)")
    load.add_argument("--inertia", type=float, help="load inertia about the axis, kg*m^2 (no gravity)")
    p.add_argument("--half-period", type=float, default=0.67, help="half period of the square wave, s (default 0.67)")
    p.add_argument("--amplitude", type=float, default=None, help="rad (default: from a pilot step)")
    p.add_argument("--cycles", type=int, default=8, help="square-wave periods per gain (default 8)")
    p.add_argument("--armature", type=float, default=None, metavar="KG_M2",
                   help="the rotor's reflected inertia, kg*m^2, if known (e.g. from a run that separated "
                        "it); on a pendulum it is otherwise fitted, and kp comes with a 95 %% interval")
    p.add_argument("--gains", default=None, help="firmware position gains, comma list (AX: compliance slopes)")
    p.add_argument("--out", required=True, metavar="PARAMS.yaml")
    p.add_argument("--report", metavar="REPORT.png")
    p.add_argument("--raw", metavar="DIR", help="where raw recordings go (default: next to --out)")
    p.add_argument("--simulate", metavar="KP,KD,KC",
                   help="no hardware: run the experiment in-process on the compiled actuator model "
                        "with these true gains (N*m/rad, N*m*s/rad, N*m)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run_actuator)


def run_actuator(args) -> int:
    from servoloop.calibration.experiment_cli import run_actuator_command

    return run_actuator_command(args)


# ---------------------------------------------------------------- friction

def _add_friction(csub):
    p = csub.add_parser("friction", help="constant-velocity sweeps (velocity / wheel mode; current, Present Load or PWM) -> Coulomb/viscous/Stribeck")
    p.add_argument("--port", required=False)
    p.add_argument("--baud", type=int, default=1_000_000)
    p.add_argument("--protocol", type=int, choices=(1, 2), default=2)
    p.add_argument("--id", type=int, required=False)
    p.add_argument("--model", default=None)
    p.add_argument("--velocities", default="0.1,0.2,0.4,0.8,1.6,3.2", help="rad/s, comma list (both signs run)")
    p.add_argument("--settle", type=float, default=0.5, help="s to reach each velocity before averaging")
    p.add_argument("--hold", type=float, default=1.0, help="s averaged per velocity")
    p.add_argument("--log", metavar="FILE", help="no hardware: fit a saved sweep (JSON from a previous run)")
    p.add_argument("--out", metavar="FRICTION.yaml")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run_friction)


def run_friction(args) -> int:
    from servoloop.calibration.friction_cli import run_friction_command

    return run_friction_command(args)


def main(argv=None) -> int:
    """Stand-alone entry (``python -m calibration.cli``) for when the daemon CLI is absent."""
    parser = argparse.ArgumentParser(prog="servoloop")
    sub = parser.add_subparsers(dest="command")
    register(sub)
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help()
        return 2
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
