"""The layout rules of ARCHITECTURE.md, checked on the source (imports, sizes, the namespace).

Each rule reads the files as they are committed, so a change that breaks
one fails here with the file and line that broke it.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ("firmware_bridge", "virtual_bus", "core_cy", "controller", "calibration", "robots")
PACKAGES = (*LIBRARY, "bench", "experiments", "locomotion")

#: package -> the servoloop packages it must not import (ARCHITECTURE.md "Layout")
FORBIDDEN = {
    "firmware_bridge": ("robots", "core_cy", "controller", "calibration", "virtual_bus", "experiments"),
    "core_cy": ("controller", "calibration", "firmware_bridge", "virtual_bus", "experiments"),
    "virtual_bus": ("calibration", "experiments"),
    "controller": ("calibration", "experiments"),
    "calibration": ("experiments",),
    "robots": ("firmware_bridge", "virtual_bus", "core_cy", "controller", "calibration", "experiments"),
    # reduced-order walking models: the kernels and numpy/scipy/casadi only (and the CLI's progress bar)
    "locomotion": ("firmware_bridge", "virtual_bus", "controller", "calibration", "robots", "bench",
                   "experiments"),
}

_CIMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+c?import|c?import\s+([\w.]+))", re.M)


def _sources(package: str):
    for path in sorted((ROOT / package).rglob("*")):
        if path.suffix in (".py", ".pyx", ".pxd", ".pxi") and "__pycache__" not in path.parts:
            yield path


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, dotted module) of every import in a file, ``from servoloop import X`` as servoloop.X."""
    text = path.read_text()
    if path.suffix != ".py":
        return [(text.count("\n", 0, m.start()) + 1, m.group(1) or m.group(2))
                for m in _CIMPORT.finditer(text)]
    out = []
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.append((node.lineno, node.module))
            if node.module == "servoloop":
                out += [(node.lineno, f"servoloop.{a.name}") for a in node.names]
    return out


def _violations(package: str, banned) -> list[str]:
    bad = []
    for path in _sources(package):
        for line, mod in _imports(path):
            parts = mod.split(".")
            if parts[0] == "servoloop" and len(parts) > 1 and parts[1] in banned:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {mod}")
    return bad


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_layer_rules(package):
    assert _violations(package, FORBIDDEN[package]) == []


def test_only_the_cli_imports_locomotion():
    """locomotion (casadi, Ray) is a leaf: no package imports it; servoloop/cli.py names it.

    One exception: ``walk`` with a learned model (``model: builtin:five_link_4d``) plans with
    it, importing it only then (inside functions), so casadi stays an optional extra."""
    allowed = ("controller/controllers/walk.py",)
    bad = [v for package in PACKAGES if package != "locomotion"
           for v in _violations(package, ("locomotion",)) if not v.startswith(allowed)]
    assert bad == []


def test_layer_rule_detects_a_violation(tmp_path, monkeypatch):
    # the checker itself: a planted import must be found, in .py and in .pyx
    pkg = tmp_path / "firmware_bridge"
    pkg.mkdir()
    (pkg / "a.py").write_text("def f():\n    from servoloop import core_cy\n")
    (pkg / "b.pyx").write_text("from servoloop.controller.config cimport X\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert _violations("firmware_bridge", ("core_cy", "controller")) == [
        "firmware_bridge/a.py:2 imports servoloop.core_cy",
        "firmware_bridge/b.pyx:1 imports servoloop.controller.config",
    ]


def test_only_the_wire_talks_to_serial_and_the_sdk():
    bad = []
    for package in PACKAGES:
        if package == "firmware_bridge":
            continue
        for path in _sources(package):
            for line, mod in _imports(path):
                if mod.split(".")[0] in ("serial", "dynamixel_sdk"):
                    bad.append(f"{path.relative_to(ROOT)}:{line} imports {mod}")
    assert bad == []


def test_every_import_is_namespaced():
    """No module imports a root folder by its bare name (it would not exist once installed)."""
    bad = []
    for package in PACKAGES:
        for path in _sources(package):
            for line, mod in _imports(path):
                if mod.split(".")[0] in PACKAGES:
                    bad.append(f"{path.relative_to(ROOT)}:{line} imports {mod}")
    assert bad == []


def _run_outside(code: str, tmp_path) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter whose cwd is not the checkout."""
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, env={"PATH": "/usr/bin:/bin"})


def test_import_servoloop_gives_the_version_and_the_packages(tmp_path):
    r = _run_outside("import servoloop, json; print(json.dumps([servoloop.__version__, "
                     "servoloop.core_cy.Model.__module__, servoloop.firmware_bridge.__name__]))", tmp_path)
    assert r.returncode == 0, r.stderr
    version, model_module, fb = __import__("json").loads(r.stdout)
    assert version == importlib.metadata.version("servoloop")
    assert model_module == "servoloop.core_cy.dynamics._dynamics"
    assert fb == "servoloop.firmware_bridge"


def test_no_generic_top_level_names_are_installed(tmp_path):
    code = ("import importlib.util, json; print(json.dumps({n: importlib.util.find_spec(n) is not None "
            f"for n in {list(PACKAGES)!r}}}))")
    r = _run_outside(code, tmp_path)
    assert r.returncode == 0, r.stderr
    found = __import__("json").loads(r.stdout)
    assert not any(found.values()), f"importable outside the checkout: {found}"


MAX_MODULE_LINES, MAX_CLASS_LINES = 600, 500


def test_modules_and_classes_stay_small():
    """No module over 600 lines, no class over 500 (compiled .pyx kernels aside)."""
    bad = []
    for package in PACKAGES:
        for path in _sources(package):
            if path.suffix != ".py":
                continue
            text = path.read_text()
            if text.count("\n") > MAX_MODULE_LINES:
                bad.append(f"{path.relative_to(ROOT)}: {text.count(chr(10))} lines")
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno >= MAX_CLASS_LINES:
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno} class {node.name}: "
                               f"{node.end_lineno - node.lineno + 1} lines")
    assert bad == []
