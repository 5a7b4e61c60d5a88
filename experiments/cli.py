"""``servoloop experiment NAME [--seconds S] [--json]``: the papers' reproductions.

One entry per experiment in :data:`EXPERIMENTS` (its module defines
``add_arguments(parser)`` and ``main(args) -> dict``, the benchmark JSON
form); the module is imported only when that experiment is asked for.
"""

from __future__ import annotations

import functools
import importlib

__all__ = ["register", "EXPERIMENTS"]

EXPERIMENTS = {
    "seed003": ("servoloop.experiments.seed003_cli",
                "quadruped trot under 7 controllers, rigid/compliant ground, mu 0.1/inf (Tables 3-5)"),
    "manipulator": ("servoloop.experiments.manipulator_cli",
                    "an arm holding a free box under 5 controllers, box mu 1/inf, on MuJoCo"),
    "walk_a9": ("servoloop.experiments.walk_a9_cli",
                "humanoid walk: torque cost per metre, learned reduced-order model vs LIP"),
}


def register(sub) -> None:
    p = sub.add_parser("experiment", help="reproduce a paper's experiment (tables as JSON)")
    esub = p.add_subparsers(dest="experiment_name", metavar="NAME", required=True)
    from servoloop.cli import lazy_arguments

    for name, (module, helptext) in EXPERIMENTS.items():
        ep = esub.add_parser(name, help=helptext)
        ep.add_argument("--json", action="store_true", help="print one JSON object")
        ep.set_defaults(func=_run, experiment_name=name)
        lazy_arguments(ep, functools.partial(_module_arguments, module))


def _module_arguments(module: str, parser) -> None:
    mod = importlib.import_module(module)
    if hasattr(mod, "add_arguments"):
        mod.add_arguments(parser)


def _run(args) -> int:
    import json

    mod = importlib.import_module(EXPERIMENTS[args.experiment_name][0])
    rep = mod.main(args)
    if args.json:
        print(json.dumps(rep))
    else:
        mod.print_table(rep)
    return 0
