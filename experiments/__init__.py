"""Reproductions of the papers' tables and figures, and the MuJoCo twins.

Nothing in the library packages imports from here; benchmarks and tests do.

- :mod:`experiments.mujoco_twin`: the quadruped as an MJCF model with the same
  mass matrix, for the seed-002 comparison.
- :mod:`experiments.seed002_compare`: the seed-002 trot, ours vs MuJoCo.
- :mod:`experiments.gaits`: the open-loop stand and trot goal generators.
"""

__all__: list[str] = []
