"""Built-in robot descriptions, located by name.

Each robot NAME has ``robots/NAME/NAME.urdf`` (the model) and
``robots/NAME/NAME.yaml`` (the daemon config: bus, servo map, controller).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["NAMES", "robot_dir", "urdf_path", "config_path"]

NAMES = ("bench", "arm", "quadruped", "humanoid")
_HERE = Path(__file__).resolve().parent


def robot_dir(name: str) -> Path:
    """Folder of the built-in robot ``name``; ValueError naming the choices if unknown."""
    if name not in NAMES:
        raise ValueError(f"unknown built-in robot {name!r}; choose one of {', '.join(NAMES)}")
    return _HERE / name


def urdf_path(name: str) -> Path:
    """Path of the built-in robot's URDF."""
    return robot_dir(name) / f"{name}.urdf"


def config_path(name: str) -> Path:
    """Path of the built-in robot's daemon config YAML."""
    return robot_dir(name) / f"{name}.yaml"
