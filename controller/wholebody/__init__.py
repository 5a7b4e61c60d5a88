"""Whole-body control of a floating-base robot through contact (seed 003), for ``wbc`` and ``trot``.

- :mod:`.robot`: the model, the feet (links with contact geometry) and the joint maps;
- :mod:`.balance`: task-space PD -> desired accelerations -> contact inverse dynamics -> torques;
- :mod:`.gait`: seed 003's trot schedule and swing splines;
- :mod:`.trot_planner`: base and foot references of a trot at a desired speed;
- :mod:`.base_source`: the base state a controller uses (the estimator's, or a kinematic
  stand-in while none runs).
"""
