"""Robots and random states shared by the core_cy dynamics tests.

Built-in robots come from ``robots/NAME/NAME.urdf`` (floating base as their
YAML says); the example-robot-data files are found under
``<site-packages>/cmeel.prefix/share/example-robot-data/robots`` through
``sysconfig`` (the PyPI package ships only the files).  A missing file skips
the test with the path in the reason.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

import numpy as np
import pytest

from servoloop import core_cy

__all__ = ["BUILTIN", "ERD", "ALL", "erd_root", "case_path", "load", "random_state",
           "assert_close", "RTOL"]

RTOL = 1e-9
BUILTIN = ("bench", "arm", "quadruped", "humanoid")
# name -> (path below the example-robot-data robots folder, floating_base, mimic)
_ERD_FILES = {
    "ur5": ("ur_description/urdf/ur5_robot.urdf", False, "error"),
    # panda's second finger mimics the first: kept independent, as Pinocchio
    "panda": ("panda_description/urdf/panda.urdf", False, "independent"),
    "solo12": ("solo_description/robots/solo12.urdf", True, "error"),
    "talos": ("talos_data/robots/talos_reduced.urdf", True, "error"),
}
ERD = tuple(_ERD_FILES)
ALL = BUILTIN + ERD


def erd_root() -> Path:
    for key in ("purelib", "platlib"):
        root = Path(sysconfig.get_paths()[key]) / "cmeel.prefix/share/example-robot-data/robots"
        if root.is_dir():
            return root
    return Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix/share/example-robot-data/robots"


def _builtin_floating(name: str) -> bool:
    import yaml

    from servoloop import robots

    cfg = robots.config_path(name)
    if cfg.is_file():
        with open(cfg) as fh:
            return bool(yaml.safe_load(fh).get("model", {}).get("floating_base", False))
    return name in ("quadruped", "humanoid")


def case_path(name: str):
    """(path, floating_base, mimic) of a test robot; skips if the file is missing."""
    if name in _ERD_FILES:
        rel, fb, mimic = _ERD_FILES[name]
        path = erd_root() / rel
    else:
        from servoloop import robots

        path = robots.urdf_path(name)
        fb, mimic = None, "error"
    if not path.is_file():
        pytest.skip(f"robot file not there (yet): {path}")
    if fb is None:
        fb = _builtin_floating(name)
    return path, fb, mimic


_CACHE: dict = {}


def load(name: str, **kw) -> core_cy.Model:
    """core_cy.Model of a test robot (cached; the model is immutable)."""
    key = (name, tuple(sorted(kw.items())))
    if key not in _CACHE:
        path, fb, mimic = case_path(name)
        _CACHE[key] = core_cy.Model.from_urdf(path, floating_base=fb, mimic=mimic, **kw)
    return _CACHE[key]


def random_state(model, rng):
    """Random (q, v, a): joints in [-1, 1] rad, unit quaternion, v and a ~ N(0, 1)."""
    q = rng.uniform(-1.0, 1.0, model.nq)
    if model.floating_base:
        q[3:7] /= np.linalg.norm(q[3:7])
    return q, rng.normal(size=model.nv), rng.normal(size=model.nv)


def assert_close(actual, expected, rtol=RTOL, what=""):
    """|actual - expected| <= rtol * max(1, max|expected|), elementwise max."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    scale = max(1.0, float(np.abs(expected).max(initial=0.0)))
    err = float(np.abs(actual - expected).max(initial=0.0))
    assert err <= rtol * scale, f"{what}: max error {err:.3e} > {rtol:.0e} * {scale:.3e}"
