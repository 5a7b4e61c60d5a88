"""The on-robot control daemon.

Modules: ``config`` (robot config schema), ``clock`` / ``_clock`` (absolute
deadlines), ``realtime`` (SCHED_FIFO, mlockall, affinity), ``lifecycle``
(state machine), ``daemon`` (the tick, faults, stop paths), ``safety``,
``controllers`` (registry: hold, trajectory, gravity_comp), ``telemetry`` /
``telemetry_format`` / ``log_export`` / ``log_plot``, ``command_socket``,
``runtime`` (bus, virtual bus process, lockstep), ``commands`` (CLI).
Nothing is imported here, so ``servoloop --help`` stays fast.
"""

__all__: list[str] = []
