"""Whole-body control of a floating-base robot through contact (seed 003), for ``wbc`` and ``trot``.

- :mod:`.robot`: the model, the feet (links with contact geometry) and the joint maps;
- :mod:`.balance`: task-space PD -> desired accelerations -> contact inverse dynamics -> torques;
- :mod:`._balance`: the balance tick's arithmetic, compiled (task rows, normal equations, the
  stance plane and velocity; ``wbc``'s servo command);
- :mod:`.gait`: seed 003's trot schedule and swing splines;
- :mod:`.trot_planner`: base and foot references of a trot at a desired speed;
- :mod:`._gait`: the trot's swing progress and splines of every foot, compiled;
- :mod:`.base_source`: the base state a controller uses (the estimator's, or a kinematic
  stand-in while none runs).
"""
