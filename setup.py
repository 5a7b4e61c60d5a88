"""Build the Cython extensions; everything else lives in pyproject.toml.

Every ``*.pyx`` under the compiled packages becomes an extension named after
its path (``core_cy/_dynamics.pyx`` -> ``core_cy._dynamics``).  Set
``SERVOLOOP_ONLY=core_cy._dynamics,firmware_bridge`` to build a subset while
developing (a prefix match on the dotted module name).
"""

import os
from pathlib import Path

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).parent
COMPILED_PACKAGES = ("core_cy", "firmware_bridge", "controller")
# -O3 but never -ffast-math: the oracle tests compare to 1e-9 and the
# contact solvers rely on IEEE semantics for sign(0) and NaN checks.
CFLAGS = ["-O3", "-fno-fast-math", "-Wno-unused-function", "-Wno-unreachable-code"]


def _extensions():
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
                    name,
                    [str(rel) + ".pyx"],
                    include_dirs=[np.get_include()],
                    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
                    extra_compile_args=CFLAGS,
                    libraries=["m"],
                )
            )
    return exts


setup(
    ext_modules=cythonize(
        _extensions(),
        compiler_directives={
            "language_level": "3",
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
        quiet=True,
    )
)
