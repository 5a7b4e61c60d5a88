"""Build the Cython extensions and map the folders under ``servoloop.*``.

Everything else (dependencies, extras, tools) lives in pyproject.toml.

The design card keeps ``firmware_bridge/``, ``controller/``, ``core_cy/``,
``calibration/``... at the repository root, yet the installed names must
not be generic top-level modules (a user's own ``controller.py`` would
shadow ours).  setuptools' ``package_dir`` maps each root folder to
``servoloop.<folder>``: the wheel installs ``servoloop/firmware_bridge/...``
and an editable install resolves ``servoloop.firmware_bridge`` to the root
folder.  The mapping is computed here because the extension names need the
same prefix, so one list drives both.

Every ``*.pyx`` under the compiled packages becomes an extension named after
its path (``core_cy/dynamics/_dynamics.pyx`` ->
``servoloop.core_cy.dynamics._dynamics``).  Cython resolves ``cimport
servoloop.X`` by file path, and no ``servoloop/core_cy`` folder exists on
disk, so the build mirrors the ``.pxd`` files into ``build/cython_include/
servoloop/...`` first.  Set ``SERVOLOOP_ONLY=core_cy.dynamics,firmware_bridge``
to build a subset while developing (a prefix match on the dotted name
without ``servoloop.``).

Build time (CI builds everything from a fresh clone): the extensions compile
in parallel on every core (``build_ext -j N`` still overrides), Cython
translates the .pyx files in parallel, and without debug information (``-g0``
after Python's own ``-g``: gcc's code is the same, the objects are smaller
and faster to write).  ``SERVOLOOP_NO_EXT=1`` declares no extension at all:
the Makefile's ``pip install -e`` uses it because its next line,
``build_ext --inplace``, compiles them; before, a fresh clone compiled every
extension twice (pip's editable build in a temporary directory, then again
for ``build/``).
"""

import os
import shutil
from pathlib import Path

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).parent.resolve()
NAMESPACE = "servoloop"
#: root folders installed as ``servoloop.<folder>`` (``servoloop/`` itself holds
#: the namespace's ``__init__`` and the CLI)
FOLDERS = ("firmware_bridge", "virtual_bus", "core_cy", "controller", "calibration",
           "robots", "bench", "experiments", "locomotion")
COMPILED_PACKAGES = ("core_cy", "firmware_bridge", "controller", "virtual_bus")
# -O3 but never -ffast-math: the oracle tests compare to 1e-9 and the
# contact solvers rely on IEEE semantics for sign(0) and NaN checks.
# -g0: no debug information (Python's CFLAGS carry -g); it changes no instruction.
CFLAGS = ["-O3", "-fno-fast-math", "-Wno-unused-function", "-Wno-unreachable-code", "-g0"]
#: processes for the .pyx -> .c translation and threads for the C compiles
JOBS = os.cpu_count() or 1
INCLUDE = HERE / "build" / "cython_include"


def _packages():
    """Every folder with an ``__init__.py``, as (dotted name, relative dir)."""
    pkgs = {NAMESPACE: NAMESPACE}
    for top in FOLDERS:
        for init in sorted((HERE / top).rglob("__init__.py")):
            rel = init.parent.relative_to(HERE)
            pkgs[".".join((NAMESPACE, *rel.parts))] = rel.as_posix()
    return pkgs


def _mirror_pxd() -> None:
    """Copy the .pxd files under build/cython_include/servoloop/ (only if changed)."""
    for top in COMPILED_PACKAGES:
        for src in (HERE / top).rglob("*.pxd"):
            dst = INCLUDE / NAMESPACE / src.relative_to(HERE)
            dst.parent.mkdir(parents=True, exist_ok=True)
            if not dst.exists() or dst.read_bytes() != src.read_bytes():
                shutil.copy2(src, dst)
            d = dst.parent
            while d != INCLUDE:                       # Cython needs package markers
                (d / "__init__.pxd").touch(exist_ok=True)
                d = d.parent


class ParallelBuildExt(build_ext):
    """build_ext that compiles the extensions on every core unless ``-j N`` says otherwise."""

    def finalize_options(self):
        super().finalize_options()
        if not self.parallel:
            self.parallel = JOBS


def _extensions():
    if os.environ.get("SERVOLOOP_NO_EXT"):
        return []
    only = [s for s in os.environ.get("SERVOLOOP_ONLY", "").split(",") if s]
    exts = []
    for pkg in COMPILED_PACKAGES:
        for pyx in sorted((HERE / pkg).rglob("*.pyx")):
            rel = pyx.relative_to(HERE).with_suffix("")
            name = ".".join(rel.parts)
            if only and not any(name.startswith(o) for o in only):
                continue
            exts.append(
                Extension(
                    f"{NAMESPACE}.{name}",
                    [str(rel) + ".pyx"],
                    include_dirs=[np.get_include()],
                    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
                    extra_compile_args=CFLAGS,
                    libraries=["m"],
                )
            )
    return exts


_mirror_pxd()
PACKAGES = _packages()
setup(
    packages=sorted(PACKAGES),
    package_dir=PACKAGES,
    cmdclass={"build_ext": ParallelBuildExt},
    ext_modules=cythonize(
        _extensions(),
        include_path=[str(INCLUDE)],
        compiler_directives={
            "language_level": "3",
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
        quiet=True,
        nthreads=JOBS,
    ),
)
