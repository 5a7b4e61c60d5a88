"""The package's public names all resolve (lazy ones included); its layering holds."""

import re
from pathlib import Path

from servoloop import core_cy


def test_every_public_name_resolves():
    for name in core_cy.__all__:
        assert getattr(core_cy, name) is not None, name


def test_unknown_name_is_an_attribute_error():
    import pytest

    with pytest.raises(AttributeError, match="no_such_kernel"):
        core_cy.no_such_kernel  # noqa: B018


CORE = Path(core_cy.__file__).resolve().parent
FORBIDDEN = ("controller", "calibration", "firmware_bridge", "virtual_bus")


def _sources(*suffixes):
    return [p for p in sorted(CORE.rglob("*")) if p.suffix in suffixes]


def test_core_cy_imports_none_of_the_upper_layers():
    # core_cy is the bottom layer (ARCHITECTURE.md): the daemon, the bus and
    # calibration import it, never the other way round
    names = "|".join(FORBIDDEN)
    # "from servoloop.controller... import", "import servoloop.controller",
    # "from servoloop import ..., controller"
    pattern = re.compile(rf"^\s*(?:(?:from|c?import)\s+servoloop\.(?:{names})\b"
                         rf"|from\s+servoloop\s+c?import\s+[^#\n]*\b(?:{names})\b)", re.M)
    found = [f"{p.relative_to(CORE)}: {m.group(0).strip()}"
             for p in _sources(".py", ".pyx", ".pxd", ".pxi")
             for m in pattern.finditer(p.read_text())]
    assert not found, found
    assert len(_sources(".py")) > 10   # the scan saw the package


def test_dense_kernels_have_one_home():
    # Cholesky, triangular solves, LDL^T and the cross product are defined in
    # core_cy/linalg/_dense.pxd only; every other kernel cimports them
    pattern = re.compile(r"^cdef\b.*\b_?(cholesky\w*|chol_\w*|\w*_solve|ldlt\w*|cross3?)\(", re.M)
    found = {str(p.relative_to(CORE)): pattern.findall(p.read_text())
             for p in _sources(".pyx", ".pxd", ".pxi")}
    found = {k: v for k, v in found.items() if v and k != "linalg/_dense.pxd"}
    # the contact LCP solver and the 6x6 instance of ldlt_solve are not copies
    assert found == {"contact/_kernels.pyx": ["pgs_solve"], "contact/_kernels.pxd": ["pgs_solve"],
                     "dynamics/_dynamics.pyx": ["ldlt6"]}, found
