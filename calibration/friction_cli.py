"""``servoloop calibrate friction``: velocity sweeps -> Coulomb/viscous/Stribeck curve."""

from __future__ import annotations

import json
import sys
from pathlib import Path

__all__ = ["run_friction_command"]


def run_friction_command(args) -> int:
    from servoloop.calibration.errors import ExperimentError, FitError

    try:
        return _run(args)
    except (ValueError, OSError) as exc:
        print(f"servoloop calibrate friction: {exc}", file=sys.stderr)
        return 2
    except FitError as exc:
        print(f"servoloop calibrate friction: fit failed: {exc}", file=sys.stderr)
        return 1
    except ExperimentError as exc:
        print(f"servoloop calibrate friction: {exc}", file=sys.stderr)
        return 3
    except Exception as exc:
        if type(exc).__module__.startswith("firmware_bridge"):
            print(f"servoloop calibrate friction: bus error: {exc}", file=sys.stderr)
            return 3
        raise


def _run(args) -> int:
    from servoloop.calibration.friction import fit_friction_curve, sweep_velocity
    from servoloop.calibration.report import atomic_write_bytes, write_yaml

    if args.log:
        data = json.loads(Path(args.log).read_text())
        for key in ("velocity", "torque"):
            if key not in data:
                raise ValueError(f"{args.log}: missing key {key!r}")
        sweep = data
    else:
        if not args.port or args.id is None:
            raise ValueError("--port and --id are required (or --log SWEEP.json)")
        from servoloop.firmware_bridge.bus import Bus, ServoSpec

        velocities = _velocities(args.velocities)
        model = args.model
        if not model:
            raise ValueError("--model is required for a hardware sweep")
        with Bus(args.port, args.baud, args.protocol, [ServoSpec(id=args.id, model=model)]) as bus:
            bus.connect()
            raw = sweep_velocity(bus, args.id, velocities, args.settle, args.hold)
        sweep = {k: v.tolist() if hasattr(v, "tolist") else v for k, v in raw.items()}
        if args.out:
            # raw sweep first: nothing lost if the fit fails
            out = Path(args.out)
            atomic_write_bytes(out.with_name(out.stem + "_sweep.json"), json.dumps(sweep).encode())
    # the Present Load / PWM path (sweeps with "duty") resolves no Stribeck term
    curve = fit_friction_curve(sweep["velocity"], sweep["torque"], stribeck="duty" not in sweep)
    result = {"params": curve.params(), "stderr": curve.stderr, "fit": {"rms_torque": curve.rms,
                                                                         "points": len(sweep["velocity"])}}
    if "duty" in sweep:
        result["fit"]["source"] = sweep.get("source", "duty")
        result["fit"]["note"] = ("PWM-duty path: back-EMF removed with the datasheet no-load speed; "
                                 "viscous is the excess over the datasheet motor line (indicative)")
    if args.out:
        # the servo model it was made on: ``servoloop run --calibration`` applies the friction to
        # the servos of that model only (without it, to every servo)
        servo = {"model": args.model} if args.model else {}
        if not args.log:
            servo.update(port=args.port, id=args.id, protocol=args.protocol)
        write_yaml(args.out, dict(result, data=dict(sweep, **({"servo": servo} if servo else {}))))
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in curve.params().items():
            print(f"{k:18s} {v:.5g} +- {curve.stderr.get(k, float('nan')):.2g}")
    return 0


def _velocities(text: str) -> list[float]:
    """``--velocities`` "0.1,0.2,..." -> speeds [rad/s] (> 0; each runs both ways)."""
    try:
        out = [float(v) for v in text.split(",")]
    except ValueError:
        raise ValueError(f"--velocities {text!r}: expected a comma list of speeds in rad/s") from None
    if not out or not all(0 < v < float("inf") for v in out):
        raise ValueError(f"--velocities {text!r}: every speed must be a finite number > 0 rad/s "
                         "(each runs in both directions)")
    return out
