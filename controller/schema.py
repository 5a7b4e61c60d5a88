"""A JSON Schema of the robot config, generated from the config dataclasses.

Editors that understand JSON Schema (VS Code's YAML extension, PyCharm,
Neovim with yaml-language-server) validate and complete a config against
it: ``servoloop config schema --out servoloop.schema.json``, then put
``# yaml-language-server: $schema=servoloop.schema.json`` on the config's
first line.  The schema is made from the same frozen dataclasses the
loader checks against, so the two cannot drift: a key the schema lacks is
one the loader refuses.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

from servoloop.controller import config as C
from servoloop.controller.fall import FALL_REACTIONS

__all__ = ["config_schema"]

#: enumerations the loader checks by value (field path -> allowed values)
_ENUMS = {
    ("ServoConfig", "mode"): C.SERVO_MODES,
    ("ShutdownConfig", "mode"): C.SHUTDOWN_MODES,
    ("SafetyConfig", "on_fall"): FALL_REACTIONS,
    ("BusConfig", "protocol"): (1, 2, "mixed"),
    ("GroundConfig", "contact"): C.GROUND_CONTACTS,
    ("GroundConfig", "solver"): C.GROUND_SOLVERS,
}


def _type_schema(tp: Any) -> dict:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = [_type_schema(a) for a in typing.get_args(tp)]
        return {"anyOf": options}
    if tp is type(None):
        return {"type": "null"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is str:
        return {"type": "string"}
    if origin in (tuple, list):
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        return {"type": "array", "items": _type_schema(args[0]) if args else {}}
    if origin is dict or tp is dict:
        return {"type": "object"}
    if dataclasses.is_dataclass(tp):
        return _dataclass_schema(tp)
    return {}


def _dataclass_schema(cls) -> dict:
    hints = typing.get_type_hints(cls)
    props, required = {}, []
    for f in dataclasses.fields(cls):
        if f.name == "source" or f.metadata.get("internal"):   # set by the loader, not keys
            continue
        sch = _type_schema(hints[f.name])
        if (cls.__name__, f.name) in _ENUMS:
            sch = {"enum": list(_ENUMS[(cls.__name__, f.name)])}
        if f.default is not dataclasses.MISSING and isinstance(f.default, (int, float, str, bool)):
            sch["default"] = f.default
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required.append(f.name)
        if f.metadata.get("doc"):        # a key documented where it is declared
            sch["description"] = f.metadata["doc"]
        props[f.name] = sch
    out = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        out["required"] = required
    if cls.__doc__:
        out["description"] = cls.__doc__.strip().split("\n\n")[0].replace("\n", " ")
    return out


def config_schema(models: list[str] | None = None) -> dict:
    """The JSON Schema (draft 2020-12) of a robot config.

    Parameters
    ----------
    models : list of str, optional
        Servo model names offered for ``servos[].model`` (editors complete
        them); any string is still accepted by the schema, the loader checks.
    """
    root = _dataclass_schema(C.RobotConfig)
    root["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    root["title"] = "servoloop robot config"
    if models:
        servo = root["properties"]["servos"]["items"]
        servo["properties"]["model"] = {"type": "string", "examples": sorted(models),
                                        "description": "servo model (servoloop models lists them)"}
    return root
