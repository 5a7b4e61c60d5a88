"""Reduced-order models for walking (seed 004, Chen & Posa): learn them, plan with them.

One module per concept: :mod:`.five_link` (the planar biped, M0),
:mod:`.features` (the ROM class and its bases), :mod:`.collocation`
(Hermite-Simpson midpoints), :mod:`.trajopt` (full-order and
ROM-constrained trajectory optimisation, M1-M2), :mod:`.learning` (the
bilevel outer loop, M3), :mod:`.runner` (plain processes or Ray),
:mod:`.model_file` (saved and built-in models), :mod:`.evaluate`,
:mod:`.checks` and :mod:`.grid_check` (A4/A5 on a solved step and on the
task grid), :mod:`.sensitivity` (the paper's KKT gradient, checked against
the envelope gradient), :mod:`.planner` (M4), :mod:`.plots` and :mod:`.cli`
(``servoloop rom``).  Nothing is
imported here: casadi is heavy and only the ``rom`` commands need it.
"""

__all__: list[str] = []
