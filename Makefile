# servoloop: the two commands a new user runs.
#   make run   set up .venv, then run the daemon on the built-in simulated robot
#   make test  set up .venv, then run the whole test suite
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.servoloop-installed
PYX    := $(shell find core_cy firmware_bridge controller virtual_bus -name '*.pyx' -o -name '*.pxd' 2>/dev/null)

.PHONY: setup run test bench lint clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# Reinstall only when the dependency list or the build changes.  The editable
# install declares no extension (SERVOLOOP_NO_EXT): `setup` compiles them next,
# once, in parallel (before, a fresh clone compiled each one twice).
$(STAMP): pyproject.toml setup.py | $(PY)
	$(PIP) install -q -U pip setuptools wheel "Cython>=3.0" "numpy>=1.26" "scipy>=1.11"
	SERVOLOOP_NO_EXT=1 $(PIP) install -q --no-build-isolation -e ".[all,test]"
	touch $(STAMP)

# Incremental: recompiles only the .pyx files that changed (on every core: setup.py).
setup: $(STAMP)
	$(PY) setup.py -q build_ext --inplace

run: setup
	$(VENV)/bin/servoloop run --duration 5

# One BLAS thread: the suite's least-squares solves are small, and threaded
# BLAS on a 2-core machine made them 40x slower under load.
test: setup
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) -m pytest -q

bench: setup
	$(VENV)/bin/servoloop bench all

lint: setup
	$(VENV)/bin/ruff check .

clean:
	rm -rf build $(VENV) *.egg-info
	find core_cy firmware_bridge controller virtual_bus -name '*.so' -delete -o -name '*.c' -delete
