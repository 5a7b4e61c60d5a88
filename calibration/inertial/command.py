"""``servoloop calibrate inertial``: the subcommand's arguments and body.

calibration/cli.py (owned by the actuator-calibration work) registers it::

    from servoloop.calibration.inertial import command as inertial_command
    p = calibrate_sub.add_parser("inertial", help=inertial_command.HELP)
    inertial_command.add_arguments(p)
    p.set_defaults(func=inertial_command.run)
"""

from __future__ import annotations

import json
import sys

from servoloop.calibration.errors import CalibrationError, RecordingError

__all__ = ["HELP", "add_arguments", "run"]

HELP = "identify inertial, friction and armature parameters from a joint log"


def add_arguments(parser) -> None:
    """Options of ``servoloop calibrate inertial``."""
    from servoloop.calibration.inertial.identify import METHODS
    from servoloop.calibration.inertial.signals import FilterSettings

    d = FilterSettings()
    parser.add_argument("--log", required=True, help="joint log: the daemon's telemetry (.sltl: position, velocity, "
                        "current as torque) or .npz (t, q, tau [, v, joint_names]; SI)")
    parser.add_argument("--urdf", required=True, help="robot URDF (fixed base)")
    parser.add_argument("--method", choices=METHODS, default="sdp",
                        help="sdp: physically consistent (default); ols: unconstrained; "
                             "friction: inertia from the URDF, friction/armature fitted")
    parser.add_argument("--no-irls", action="store_true", help="plain least squares, no reweighting")
    parser.add_argument("--decimation", type=int, default=d.decimation)
    parser.add_argument("--velocity-hz", type=float, default=d.velocity_hz)
    parser.add_argument("--acceleration-hz", type=float, default=d.acceleration_hz)
    parser.add_argument("--torque-hz", type=float, default=d.torque_hz)
    parser.add_argument("--out", default=None, help="write the report here (YAML)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args) -> int:
    """Exit codes: 0 fitted (and physically consistent, for sdp/friction), 1 fit failed
    or inconsistent, 2 bad input (unreadable log or URDF)."""
    from servoloop.calibration.inertial.identify import identify_from_log, write_report
    from servoloop.calibration.inertial.signals import FilterSettings
    from servoloop.core_cy.errors import CoreError

    settings = FilterSettings(velocity_hz=args.velocity_hz, acceleration_hz=args.acceleration_hz,
                              torque_hz=args.torque_hz, decimation=args.decimation)
    try:
        result = identify_from_log(args.log, args.urdf, method=args.method,
                                   use_irls=not args.no_irls, settings=settings)
    except (RecordingError, CoreError, FileNotFoundError) as exc:
        print(f"calibrate inertial: {exc}", file=sys.stderr)
        return 2
    except CalibrationError as exc:
        print(f"calibrate inertial: {exc}", file=sys.stderr)
        return 1
    if args.out:
        write_report(result, args.out)
    report = result.to_dict()
    if args.json:
        print(json.dumps(report))
    else:
        for joint, rms in report["rms_torque_per_joint"].items():
            print(f"{joint:>24s}  torque RMS {rms:.4g} N m")
        print(f"condition number {result.condition_number:.3g}; physically consistent: "
              f"{result.consistency.ok}")
        for problem in result.consistency.problems:
            print(f"  {problem}")
    # OLS makes no promise of consistency (theta_d = 0 is one arbitrary point).
    return 0 if result.consistency.ok or args.method == "ols" else 1
