"""Learned ROM files (JSON) and the built-in ones shipped as package data.

A file holds ``{"format": "servoloop-rom/1", "model": "2d"|"4d", "theta": [...],
"costs": [...], "command": "...", ...}``; ``builtin:five_link_2d`` and
``builtin:five_link_4d`` name the files in ``locomotion/models/``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from servoloop.locomotion.errors import RomInputError
from servoloop.locomotion.features import ROM_SPECS

__all__ = ["FORMAT", "BUILTINS", "load_model", "save_model"]

FORMAT = "servoloop-rom/1"
BUILTINS = {"five_link_2d": "five_link_2d.json", "five_link_4d": "five_link_4d.json"}


def _path(name: str) -> Path:
    if name.startswith("builtin:"):
        key = name.split(":", 1)[1]
        if key not in BUILTINS:
            raise RomInputError(f"model {name!r}: no such built-in model "
                                f"(known: {', '.join('builtin:' + k for k in BUILTINS)})")
        return Path(__file__).parent / "models" / BUILTINS[key]
    return Path(name)


def load_model(name: str) -> dict:
    """The model dict of a file written by ``rom learn`` or a ``builtin:`` name.

    ``theta`` comes back as a numpy array of the size the model kind needs.
    Raises :class:`RomInputError` naming the file for anything unusable.
    """
    path = _path(name)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise RomInputError(f"model file {str(path)!r}: not found (give a file written by "
                            "'servoloop rom learn --out', or builtin:five_link_2d / "
                            "builtin:five_link_4d)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RomInputError(f"model file {str(path)!r}: not a ROM model file ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise RomInputError(f"model file {str(path)!r}: 'format' is not {FORMAT!r}")
    kind = data.get("model")
    if kind not in ROM_SPECS:
        raise RomInputError(f"model file {str(path)!r}: 'model' must be one of {sorted(ROM_SPECS)}, "
                            f"got {kind!r}")
    theta = np.asarray(data.get("theta", []), dtype=float)
    if theta.shape != (ROM_SPECS[kind].n_theta,) or not np.all(np.isfinite(theta)):
        raise RomInputError(f"model file {str(path)!r}: 'theta' must hold "
                            f"{ROM_SPECS[kind].n_theta} finite numbers for a {kind} model")
    data["theta"] = theta
    return data


def save_model(path: str | Path, kind: str, theta: np.ndarray, **info) -> None:
    """Write a model file (``info``: costs, seed, command... kept as given)."""
    data = {"format": FORMAT, "model": kind, "theta": [float(x) for x in theta], **info}
    Path(path).write_text(json.dumps(data, indent=1) + "\n")
