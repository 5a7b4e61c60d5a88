"""Bench calibration of Dynamixel servos: experiments (through firmware_bridge), identification, reports.

Modules: ``recording`` (logs: BAM JSON and ours, checks, resampling),
``models`` (actuator models seed000, pd, BAM m1-m6, ours v3/v6),
``simulation`` (BAM's simulation MAE), ``seed000`` (the paper's regression),
``output_error`` (CMA-ES + least-squares fits), ``offline`` (fit/score/
cross-validate recordings), ``experiment`` / ``bench_fit`` (the square-wave
bench run and its identification), ``friction`` (velocity sweeps),
``report`` (YAML + PNG, atomic), ``cli`` (``servoloop calibrate``);
``inertial`` (robot inertial parameters, its own helper).
"""

__all__ = ["errors", "recording", "models", "simulation", "seed000", "output_error", "offline",
           "experiment", "bench_fit", "simulated_bench", "friction", "report", "cli", "inertial"]
