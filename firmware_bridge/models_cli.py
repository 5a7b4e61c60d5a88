"""``servoloop models``: every servo model with a control table.

Prints a table, or with ``--json`` a JSON list
``[{"name": str, "model_number": int, "protocol": [1|2, ...], "aliases": [str], "emulated": bool}]``
(``name``, ``model_number`` and ``protocol`` are the stable keys).
"""

from __future__ import annotations

import json
import sys

__all__ = ["register", "run"]


def register(sub) -> None:
    p = sub.add_parser("models", help="list every supported servo model (name, model number, protocol)")
    p.add_argument("--json", action="store_true", help="print a JSON list")
    p.set_defaults(func=run)


def run(args) -> int:
    from servoloop.firmware_bridge.control_table import list_models

    models = list_models()
    if args.json:
        json.dump(models, sys.stdout)
        sys.stdout.write("\n")
        return 0
    w = max(len(m["name"]) for m in models)
    print(f"{'model':<{w}}  number  protocol  virtual-bus  aliases")
    for m in models:
        proto = ",".join(f"{p}.0" for p in m["protocol"])
        print(f"{m['name']:<{w}}  {m['model_number']:>6}  {proto:<8}  {'yes' if m['emulated'] else 'no':<11}  "
              + ", ".join(m["aliases"]))
    print(f"{len(models)} models; names match in any case, with or without the -T/-R suffix")
    return 0
