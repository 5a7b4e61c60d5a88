"""The on-robot control daemon.

Modules: ``config`` (robot config schema), ``clock`` / ``_clock`` (absolute
deadlines), ``realtime`` (SCHED_FIFO, mlockall, affinity, the paused
collector), ``lifecycle`` (state machine), ``daemon`` (the lifecycle of a
run: connect, startup, run, shutdown, fault), ``loop`` (the tick: the
deadline and the stages in order), the stages ``bus_stages`` (read, write,
monitor), ``estimator``, ``control_stage``, ``safety``, ``joint_map``
(servo <-> joint), ``telemetry`` (record); ``startup_ramp`` (goal :=
present, the ramp through ``via`` poses), ``servo_faults`` (hardware error
-> fault or reboot and restore), ``faults`` (typed faults), ``bringup``
(connect), ``outputs`` (telemetry file and command socket),
``controllers`` (registry: hold, trajectory, gravity_comp),
``telemetry_format`` / ``log_export`` / ``log_plot``, ``command_socket``,
``runtime`` (bus, virtual bus process, lockstep), ``commands`` (CLI).
Nothing is imported here, so ``servoloop --help`` stays fast.
"""

__all__: list[str] = []
