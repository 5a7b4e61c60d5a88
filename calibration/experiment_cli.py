"""``servoloop calibrate actuator``: the bench experiment, its raw data, the fit, the report."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

__all__ = ["run_actuator_command"]


def run_actuator_command(args) -> int:
    from servoloop.calibration.errors import (
        CalibrationError,
        ExperimentError,
        FitError,
        RecordingError,
    )

    try:
        return _run(args)
    except (ValueError, RecordingError) as exc:
        print(f"servoloop calibrate actuator: {exc}", file=sys.stderr)
        return 2
    except FitError as exc:
        print(f"servoloop calibrate actuator: fit failed (raw data kept): {exc}", file=sys.stderr)
        return 1
    except ExperimentError as exc:
        print(f"servoloop calibrate actuator: {exc} (raw data kept)", file=sys.stderr)
        return 3
    except CalibrationError as exc:
        print(f"servoloop calibrate actuator: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        if type(exc).__module__.startswith("firmware_bridge"):
            print(f"servoloop calibrate actuator: bus error: {exc}", file=sys.stderr)
            return 3
        raise


def _raw_dir(args) -> Path:
    out = Path(args.out)
    return Path(args.raw) if args.raw else out.with_name(out.stem + "_raw")


def _run(args) -> int:
    from servoloop.calibration.bench_fit import identify_bench
    from servoloop.calibration.experiment import parse_load
    from servoloop.calibration.recording import save_recording

    load = parse_load(args.load, args.inertia)
    if args.armature is not None and not (math.isfinite(args.armature) and args.armature >= 0.0):
        raise ValueError(f"--armature must be a finite number >= 0 kg*m^2, got {args.armature}")
    gains = [int(g) for g in args.gains.split(",")] if args.gains else None
    raw_dir = _raw_dir(args)
    raw_files: list[str] = []

    def keep(rec):
        # raw data first: nothing is lost if the fit (or the bus) fails later
        path = save_recording(rec, raw_dir / f"{Path(rec.path).name}.npz")
        raw_files.append(str(path))

    torque_limit = None
    if args.simulate:
        recs = _simulated(args, load, gains)
        for r in recs:
            keep(r)
        servo = {"simulated": args.simulate}
    else:
        recs, torque_limit, servo = _hardware(args, load, gains, keep)
    result = identify_bench(recs, half_period=args.half_period, torque_limit=torque_limit, armature=args.armature)
    result["data"] = {"raw": raw_files, "load": load.describe(), "servo": servo,
                      "half_period_s": args.half_period, "cycles": args.cycles}
    from servoloop.calibration.report import write_yaml

    write_yaml(args.out, result)
    if args.report:
        _plot(args.report, recs, result)
    if args.json:
        out = {k: result[k] for k in ("params", "stderr", "fit", "paper", "warnings")}
        print(json.dumps(out, default=_plain))
    else:
        p, se = result["params"], result["stderr"]
        print(f"kp = {p['kp']:.4g} +- {se.get('kp', math.nan):.2g} N*m/rad   (regression on the steps: {result['paper']['kp']:.4g})")
        for g in result["fit"]["per_gain"]:
            if "kp_interval_95" in g:
                lo, hi = g["kp_interval_95"]
                more = " or more" if g["kp_profile"]["open_high"] else ""
                print(f"  gain {g['gain']:g}: kp = {g['params']['kp']:.4g} N*m/rad, 95 % interval "
                      f"{lo:.4g} to {hi:.4g}{more} (armature {g['params']['armature']:.2g} kg*m^2 free)")
        print(f"kd = {p['kd']:.4g} +- {se.get('kd', math.nan):.2g} N*m*s/rad (regression on the steps: {result['paper']['kd']:.4g})")
        print(f"kc = {p['kc']:.4g} +- {se.get('kc', math.nan):.2g} N*m       (regression on the steps: {result['paper']['kc']:.4g})")
        print(f"simulation MAE {result['fit']['mae_rad'] * 1e3:.2f} mrad; written {args.out}")
    for w in result["warnings"]:
        print(f"servoloop calibrate actuator: warning: {w}", file=sys.stderr)
    return 0


def _plain(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return str(x)


def _simulated(args, load, gains):
    from servoloop.calibration.simulated_bench import simulate_square_wave

    try:
        kp, kd, kc = (float(v) for v in args.simulate.split(","))
    except ValueError:
        raise ValueError(f"--simulate must be KP,KD,KC, got {args.simulate!r}") from None
    amp = args.amplitude or 0.08
    return [simulate_square_wave(kp, kd, kc, load, args.half_period, amp, args.cycles, gain=g)
            for g in (gains or [32])]


def _hardware(args, load, gains, keep):
    from servoloop.calibration.experiment import known_torque_limit, run_experiment
    from servoloop.firmware_bridge.bus import Bus, ServoSpec
    from servoloop.firmware_bridge.control_table import get_table

    if not args.port:
        raise ValueError("--port is required (or --simulate KP,KD,KC for an in-process run)")
    model = args.model or _detect_model(args)
    table = get_table(model)
    protocol = args.protocol or table.protocol
    bus = Bus(args.port, args.baud, protocol, [ServoSpec(id=args.id, model=model)])
    with bus:
        bus.connect()
        limit = known_torque_limit(bus, args.id)
        recs = run_experiment(bus, args.id, load, gains, args.half_period, args.amplitude, args.cycles,
                              progress=True, on_recording=keep)
    return recs, limit, {"port": args.port, "id": args.id, "model": model, "protocol": protocol}


def _detect_model(args) -> str:
    from servoloop.firmware_bridge.bus import Bus
    from servoloop.firmware_bridge.control_table import model_name

    last = None
    for protocol in ([args.protocol] if args.protocol else [2, 1]):
        try:
            with Bus(args.port, args.baud, protocol, []) as bus:
                return model_name(bus.ping(args.id))
        except Exception as exc:  # try the other protocol
            last = exc
    raise ValueError(f"servo {args.id} on {args.port}: no answer to ping ({last}); give --model")


def _plot(path, recs, result):
    import dataclasses

    from servoloop.calibration.bench_fit import BENCH_DT_S, _bench_spec
    from servoloop.calibration.recording import resample
    from servoloop.calibration.report import plot_fit
    from servoloop.calibration.simulation import simulate_recording

    runs = []
    for rec, g in zip(recs, result["fit"]["per_gain"], strict=True):
        r = resample(rec, BENCH_DT_S)
        spec = _bench_spec(r, BENCH_DT_S, g["params"].get("torque_limit"), g["substep_s"], g.get("armature_fixed"))
        spec = dataclasses.replace(spec, free=tuple(k for k in spec.free if k in g["params"]))
        q, _, _ = simulate_recording(spec, g["params"], r)
        runs.append({"name": Path(rec.path).name, "t": r.t, "goal": r.goal, "measured": r.position,
                     "simulated": q, "role": f"gain {int(rec.kp_fw)}"})
    plot_fit(path, runs, "square-wave experiment: measured vs identified model")
