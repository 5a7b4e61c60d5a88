"""Robot config: frozen dataclasses with typed defaults, a YAML file on top.

The schema (every key optional except ``servos``)::

    robot: quadruped
    model: {urdf: quadruped.urdf, floating_base: true}   # or {name: quadruped}
    bus: {port: null, baud: 4000000, protocol: 2}        # port null: built-in virtual bus
    servos:
      - {id: 1, model: XM430-W350, joint: lf_hip_abad, offset: 0.0, direction: 1,
         min: -0.8, max: 0.8, registers: {profile_velocity: 0}}
    loop: {rate_hz: 1000}
    controller: {name: hold, params: {}}
    startup: {ramp_s: 1.0}
    shutdown: {mode: torque_off, stop_cycles: 5}
    safety: {max_temperature_c: 70, max_velocity: null, comm_timeout_s: 0.5, bus_watchdog_s: 0.1, ...}
    logging: {telemetry: auto}
    socket: {path: auto}
    simulation: {plant: "servoloop.virtual_bus.robot_plant:make_plant"}    # physics behind the virtual bus
    register_defaults: {XM430-W350: {position_p_gain: 800}}  # written at connect (servos[].registers wins)
    imu: {id: 200, model: OpenCR, rotation_rpy: [0, 0, 3.14159]}  # IMU board on the bus -> base estimator

A key the schema does not have is an error naming the key, its section and
the file, so a typo (``rate_hz`` spelled ``rate``) never silently falls
back to a default.  Joint angles relate to servo angles by
``q_servo = direction * q_joint + offset`` (rad), so ``offset`` is the servo
reading at joint zero.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import yaml

from servoloop.controller.config_checks import (
    check_logging,
    check_loop,
    check_model,
    check_protocols,
    check_read_ahead,
    check_registers,
    check_safety,
    line_of,
    load_yaml,
    validate_model,
)
from servoloop.controller.errors import ConfigError
from servoloop.controller.imu_config import check_imu
from servoloop.controller.simulation_config import (  # noqa: F401 - re-exported
    GROUND_CONTACTS,
    GROUND_SOLVERS,
    ContactConfig,
    GroundConfig,
    PushConfig,
    SimulationConfig,
    check_ground,
    check_pushes,
)

__all__ = [
    "BusConfig",
    "ServoConfig",
    "ModelConfig",
    "LoopConfig",
    "ControllerConfig",
    "StartupConfig",
    "ShutdownConfig",
    "SafetyConfig",
    "LoggingConfig",
    "SocketConfig",
    "SimulationConfig",
    "ContactConfig",
    "PushConfig",
    "GroundConfig",
    "ImuConfig",
    "RobotConfig",
    "load_config",
    "config_from_dict",
    "builtin_config",
    "SERVO_MODES",
    "SHUTDOWN_MODES",
]

SERVO_MODES = ("position", "extended_position", "current_position", "current", "velocity")
# velocity: wheel mode; extended_position: multi-turn (X Operating Mode 4), joint limits in min/max
SHUTDOWN_MODES = ("hold", "torque_off")
#: default busy-wait tail before each deadline of a SCHED_FIFO loop, s (LoopConfig.spin_tail_s):
#: measured to take the p99 wake-up lateness from ~60 us to ~9 us (BENCHMARKS.md, "Loop timing")
DEFAULT_SPIN_S = 50e-6
HARDWARE_ERROR_REACTIONS = ("fault", "reboot", "disable_servo")
#: keys of older configs, and what replaced them (a clear error, not a silent default)
REMOVED_KEYS = {
    "safety.comm_error_window": "safety.comm_window_s (seconds) and safety.comm_warn_rate",
    "safety.comm_error_rate": "safety.comm_warn_rate (warns only) and safety.comm_timeout_s",
    "safety.max_consecutive_comm_errors": "safety.comm_hold_s and safety.comm_timeout_s (seconds)",
}


@dataclass(frozen=True)
class BusConfig:
    """Serial bus: ``port`` None means the built-in virtual servo bus."""

    port: str | None = None
    baud: int = 1_000_000
    protocol: int | str = 2   # 1, 2 or "mixed" (1.0 and 2.0 servos on one port)
    fix_latency_timer: bool = True  # FTDI default is 16 ms per reply (field notes a1)
    fix_return_delay: bool = True  # default RDT 500 us per servo per read (a2)


@dataclass(frozen=True)
class ServoConfig:
    """One servo and the joint it drives.

    ``min``/``max`` are joint limits (rad).  ``torque_constant`` (N*m/A) converts torque to
    current for current-mode servos; ``position_stiffness`` (N*m/rad, from calibration) to a goal
    offset for position-only servos; ``coulomb_friction`` (N*m) and ``viscous_friction``
    (N*m*s/rad) are the gearbox's, ``position_damping`` (N*m*s/rad) the servo's velocity
    damping k_d and ``armature`` (kg*m^2) its rotor inertia at the output (None: the servo
    model's; :mod:`controller.servo_friction`).
    """

    id: int
    model: str
    joint: str
    offset: float = 0.0
    direction: int = 1
    min: float = -3.14159
    max: float = 3.14159
    mode: str = "position"
    torque_constant: float | None = None
    position_stiffness: float | None = None
    coulomb_friction: float | None = None
    viscous_friction: float | None = None
    position_damping: float | None = None
    armature: float | None = None
    friction_from: tuple = field(default=(), metadata={"internal": True})  # not a key: --calibration's
    max_velocity: float | None = None  # rad/s goal slew limit; None: safety.max_velocity
    #: control-table registers written at connect ({name: value}, SI or raw as the table's
    #: unit says; see controller/config_checks.py), over the model's register_defaults
    registers: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ModelConfig:
    """Dynamics model: a built-in robot ``name`` or a ``urdf`` path (relative to the config)."""

    name: str | None = None
    urdf: str | None = None
    floating_base: bool = False
    #: ``<mimic>`` joints: ``error`` (refused, naming the joint) or ``independent``
    #: (kept as ordinary joints, each driven by its own servo; Pinocchio's default)
    mimic: str = "error"


@dataclass(frozen=True)
class LoopConfig:
    """Loop rate and real-time settings (each refused setting is a warning, not an error)."""

    rate_hz: float = field(default=1000.0, metadata={"doc": "tick rate, Hz"})
    spin_s: float | None = field(default=None, metadata={"doc": (
        "busy-wait tail, s: sleep until this long before each deadline, then spin (one core "
        "busy that long each tick) so the wake-up is not the kernel's timer latency; null: "
        "50 us capped at 5 % of the period when the loop got SCHED_FIFO, else 0 "
        "(LoopConfig.spin_tail_s); 0: never spin")})
    sched_fifo: bool = field(default=False, metadata={"doc": (
        "SCHED_FIFO for the loop thread at `priority`, its helper threads and the built-in "
        "virtual bus just below (a warning when the system refuses)")})
    priority: int = field(default=80, metadata={"doc": "SCHED_FIFO priority, 1-99"})
    lock_memory: bool = field(default=False, metadata={"doc": "mlockall: no page faults in the loop"})
    cpu_latency_us: int | None = field(default=None, metadata={"doc": (
        "the CPUs' wake-up latency the daemon asks for while it runs (Linux PM QoS, "
        "/dev/cpu_dma_latency), us: 0 keeps idle CPUs polling instead of sleeping, so a reply "
        "or a deadline is not held up by a CPU waking from an idle state (on a virtual machine, "
        "by the host rescheduling an idle virtual CPU); idle cores then spin (power). null: "
        "leave it to the system")})
    cpus: tuple[int, ...] | None = field(default=None, metadata={"doc": (
        "CPUs the daemon's threads may run on (affinity of the whole daemon)")})
    cpu: int | None = field(default=None, metadata={"doc": (
        "the CPU the loop thread runs on alone: its helper threads and the built-in virtual bus "
        "are moved to the other CPUs (of `cpus` when given)")})
    read_ahead: bool = field(default=False, metadata={"doc": (
        "send each tick's read instruction at the end of the previous tick and collect the "
        "replies when the tick begins: no bus round trip in the tick, state one period older; "
        "needs the read to be one transaction (Protocol 2.0)")})
    late_read: bool = field(default=True, metadata={"doc": (
        "with read_ahead: a tick waits for its replies only until its budget (the next "
        "deadline less the tick's own work, its recent peak up to half a period, and 5 % of the period); replies "
        "not in by then leave the tick stale: it runs on the last reading and writes its goals "
        "on time, and the next tick takes the late replies before it requests anew. Stale "
        "ticks are counted (`stale_reads`) and climb the comm ladder (safety.comm_hold_s, "
        "comm_timeout_s) as a silent bus does. false: wait for the replies up to the reply "
        "timeout, as without read-ahead")})

    def spin_tail_s(self, sched_fifo: bool = True) -> float:
        """The busy-wait tail in use, s: ``spin_s``; by default 50 us capped at 5 % of the period
        for a SCHED_FIFO loop, none otherwise (a spinning SCHED_OTHER thread on a loaded machine
        is preempted more: measured twice the misses, BENCHMARKS.md "Loop timing")."""
        if self.spin_s is not None:
            return self.spin_s
        return min(DEFAULT_SPIN_S, 0.05 / self.rate_hz) if sched_fifo else 0.0


@dataclass(frozen=True)
class ControllerConfig:
    """Controller by registry name (or ``package.module:Class``) and its parameters."""

    name: str = "hold"
    params: dict = field(default_factory=dict)


@dataclass(frozen=True)
class StartupConfig:
    """Ramp from the present pose to the controller's first command over ``ramp_s`` s.

    ``via``: poses ({joint: rad}; joints left out keep the previous pose) the
    ramp passes through on the way, each segment minimum-jerk and an equal
    share of ``ramp_s``.  A legged robot found lying down stands up through
    a crouch with its feet under its hips; straight from folded to standing
    it would push itself over.
    """

    ramp_s: float = 1.0
    via: tuple[dict, ...] = ()


@dataclass(frozen=True)
class ShutdownConfig:
    """``hold``: keep torque on at the last pose; ``torque_off``: release every servo.

    Either way ``stop_cycles`` ticks of goal := present are sent first.
    """

    mode: str = "torque_off"
    stop_cycles: int = 5


@dataclass(frozen=True)
class SafetyConfig:
    """Fault thresholds.  ``None`` disables a check."""

    position_margin: float = 0.1  # rad past a joint limit (measured) before a fault
    # rad a joint may rest outside its limits at startup (on its mechanical stop); the
    # startup ramp brings it inside. Further out the reading is suspect: no torque.
    startup_margin: float = 0.3
    max_temperature_c: float | None = 70.0
    min_voltage_v: float | None = None
    max_voltage_v: float | None = None
    # goal slew limit, rad/s per joint (None: each servo model's datasheet no-load speed)
    # and rad/s^2 (None: no acceleration limit); see controller/slew.py
    max_velocity: float | None = None
    max_acceleration: float | None = None
    # comm-fault ladder, in seconds (controller/comm_policy.py): warn -> hold -> timeout
    comm_timeout_s: float = 0.5  # as ROBOTIS ros2_control error_timeout_ms = 500
    comm_timeout_action: str = "torque_off"  # or "hold": leave the servos torqued at the last goal
    comm_hold_s: float = 0.05  # no complete read this long: hold (event), recover by itself
    comm_window_s: float = 1.0  # window of the warn rate
    comm_warn_rate: float = 0.01  # fraction of ticks with a failed read that warns
    bus_watchdog_s: float | None = 0.1  # X-series Bus Watchdog (armed before the first tick); None: off
    max_consecutive_missed: int | None = 100
    monitor_every: int = 10  # ticks between temperature / voltage / error-bit checks
    # "fault" | "reboot" (reboot the servo, restore it, ramp back, go on) |
    # "disable_servo" (torque off that servo, keep the others running)
    on_hardware_error: str = "fault"
    max_reboots: int = 1
    # a fall (controller/fall.py), on a floating base with an IMU: the estimated base tilt past
    # fall_tilt_rad (None: no detection), or past half of it while tipping faster than
    # fall_rate_rad_s (None: tilt only), for fall_dwell_s in a row; then on_fall
    # "damp" (soft servos for fall_damp_s, then torque off) | "torque_off" | "warn"
    fall_tilt_rad: float | None = 0.8
    fall_rate_rad_s: float | None = 2.0
    fall_dwell_s: float = 0.02
    on_fall: str = "damp"
    fall_damp_s: float = 1.0


@dataclass(frozen=True)
class LoggingConfig:
    """Telemetry file: ``auto`` = runs/ROBOT-TIME.sltl, ``null`` = no file."""

    telemetry: str | None = "auto"
    flush_s: float = 0.25
    ring_s: float = 4.0
    level: str = "info"
    # size cap of one telemetry file, MB: past it the writer starts the next part
    # (NAME.partK.sltl, each with its header) and keeps the last max_files parts
    max_mb: float | None = 1024.0
    max_files: int = 4


@dataclass(frozen=True)
class SocketConfig:
    """Command socket path: ``auto`` = $XDG_RUNTIME_DIR or /tmp, ``null`` = none."""

    path: str | None = "auto"


@dataclass(frozen=True)
class ImuConfig:
    """An IMU board on the servo bus, read every tick for the base estimator.

    ``model``: a board with a control table (``firmware_bridge/devices``: OpenCR, as on
    the ROBOTIS OP3 at ``id`` 200, Protocol 2.0); ``link``: the link it is fixed to (None:
    the base link; only the base link is supported); ``rotation_rpy``: its axes in that
    link's frame (roll, pitch, yaw, rad; the OP3 mounts its OpenCR at [0, 0, 3.14159]).
    The bias and noise figures are what the virtual bus emulates (a real board ignores
    them): gyro [rad/s], accelerometer [m/s^2], orientation registers [rad].
    """

    id: int = 200
    model: str = "OpenCR"
    link: str | None = None
    rotation_rpy: tuple[float, ...] = (0.0, 0.0, 0.0)
    gyro_bias: tuple[float, ...] = (0.0, 0.0, 0.0)
    gyro_noise: float = 0.0
    accel_bias: tuple[float, ...] = (0.0, 0.0, 0.0)
    accel_noise: float = 0.0
    rpy_noise: float = 0.0


@dataclass(frozen=True)
class RobotConfig:
    """The whole daemon config.  ``source`` is the file it came from (or None)."""

    servos: tuple[ServoConfig, ...]
    robot: str = "robot"
    model: ModelConfig = field(default_factory=ModelConfig)
    bus: BusConfig = field(default_factory=BusConfig)
    loop: LoopConfig = field(default_factory=LoopConfig)
    controller: ControllerConfig = field(default_factory=ControllerConfig)
    startup: StartupConfig = field(default_factory=StartupConfig)
    shutdown: ShutdownConfig = field(default_factory=ShutdownConfig)
    safety: SafetyConfig = field(default_factory=SafetyConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    socket: SocketConfig = field(default_factory=SocketConfig)
    simulation: SimulationConfig = field(default_factory=SimulationConfig)
    imu: ImuConfig | None = None
    #: per servo model, registers written at connect to every servo of it: {MODEL: {name: value}}
    register_defaults: dict = field(default_factory=dict)
    source: str | None = None

    @property
    def base_dir(self) -> Path:
        """Folder relative paths in the config are taken from."""
        return Path(self.source).resolve().parent if self.source else Path.cwd()

    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(s.joint for s in self.servos)

    @property
    def n(self) -> int:
        return len(self.servos)

    def urdf_path(self) -> Path | None:
        """Absolute URDF path of the dynamics model, or None when there is none."""
        if self.model.urdf:
            p = Path(self.model.urdf)
            return p if p.is_absolute() else self.base_dir / p
        if self.model.name:
            from servoloop.robots import urdf_path

            return urdf_path(self.model.name)
        return None

    def with_overrides(self, **changes: Any) -> RobotConfig:
        """A copy with dotted overrides, e.g. ``{"loop.rate_hz": 500}``; checked like the file."""
        cfg = self
        for dotted, value in changes.items():
            section, _, key = dotted.partition(".")
            if key:
                sub = getattr(cfg, section)
                cfg = replace(cfg, **{section: replace(sub, **{key: value})})
            else:
                cfg = replace(cfg, **{section: value})
        _validate(cfg, cfg.source)
        return cfg


# ---------------------------------------------------------------------------
# Generic dict -> dataclass conversion with precise errors.


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def _convert(tp: Any, value: Any, where: str, path: str | None) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        errors = []
        for a in inner:
            try:
                return _convert(a, value, where, path)
            except ConfigError as exc:
                errors.append(exc)
        raise errors[0]
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{where} must be a mapping, got {value!r}", path, where)
        return _build(tp, value, where, path)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where} must be a list, got {value!r}", path, where)
        return tuple(_convert(args[0], v, f"{where}[{i}]", path) for i, v in enumerate(value))
    if tp is dict or origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where} must be a mapping, got {value!r}", path, where)
        return dict(value)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where} must be true or false, got {value!r}", path, where)
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where} must be an integer, got {value!r}", path, where)
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where} must be a number, got {value!r}", path, where)
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where} must be a string, got {value!r}", path, where)
        return value
    raise ConfigError(f"{where}: unsupported type {_type_name(tp)}", path, where)  # pragma: no cover


def _build(cls: type, data: dict, section: str, path: str | None):
    hints = typing.get_type_hints(cls)
    names = {f.name for f in fields(cls) if f.name != "source" and not f.metadata.get("internal")}
    for key in data:
        where = f"{section}.{key}" if section else str(key)
        if key not in names and where in REMOVED_KEYS:
            raise ConfigError(f"{where} is no longer supported: use {REMOVED_KEYS[where]}", path, where)
        if key not in names:
            choices = ", ".join(sorted(names))
            raise ConfigError(
                f"unknown key {key!r} in section {section or 'top level'!r} "
                f"(at {where}); known keys: {choices}",
                path,
                where,
            )
    kwargs = {}
    for f in fields(cls):
        if f.name not in names or f.name not in data:
            if f.name in names and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                where = f"{section}.{f.name}" if section else f.name
                raise ConfigError(f"missing required key {where!r}", path, where)
            continue
        where = f"{section}.{f.name}" if section else f.name
        kwargs[f.name] = _convert(hints[f.name], data[f.name], where, path)
    return cls(**kwargs)


# ---------------------------------------------------------------------------
# Semantic checks: limits, uniqueness, choices.


def _validate(cfg: RobotConfig, path: str | None) -> None:
    def err(msg: str, key: str) -> ConfigError:
        return ConfigError(msg, path, key)

    if not cfg.servos:
        raise err("servos: at least one servo is needed", "servos")
    seen_ids: dict[int, int] = {}
    seen_joints: dict[str, int] = {}
    for i, s in enumerate(cfg.servos):
        where = f"servos[{i}] (id {s.id}, joint {s.joint!r})"
        if not 0 <= s.id <= 252:
            raise err(f"{where}: id must be 0..252", f"servos[{i}].id")
        if s.id in seen_ids:
            raise err(f"{where}: id {s.id} already used by servos[{seen_ids[s.id]}]", f"servos[{i}].id")
        if s.joint in seen_joints:
            raise err(f"{where}: joint already driven by servos[{seen_joints[s.joint]}]", f"servos[{i}].joint")
        seen_ids[s.id] = i
        seen_joints[s.joint] = i
        if s.direction not in (1, -1):
            raise err(f"{where}: direction must be 1 or -1, got {s.direction}", f"servos[{i}].direction")
        if not s.min < s.max:
            raise err(f"{where}: min {s.min} must be below max {s.max} (rad)", f"servos[{i}].min")
        if s.mode not in SERVO_MODES:
            raise err(f"{where}: mode {s.mode!r} is not one of {SERVO_MODES}", f"servos[{i}].mode")
        if s.mode == "current" and not s.torque_constant:
            raise err(f"{where}: mode 'current' needs torque_constant (N*m/A)", f"servos[{i}].torque_constant")
        if s.max_velocity is not None and not s.max_velocity > 0:
            raise err(f"{where}: max_velocity must be > 0 rad/s, got {s.max_velocity}", f"servos[{i}].max_velocity")
        check_model(s, i, where, err)   # and its friction (controller.servo_friction)
    b = cfg.bus
    if b.protocol not in (1, 2, "mixed"):
        raise err(f"bus.protocol must be 1, 2 or mixed, got {b.protocol!r}", "bus.protocol")
    check_protocols(cfg, err)
    if b.baud <= 0:
        raise err(f"bus.baud must be > 0, got {b.baud}", "bus.baud")
    check_loop(cfg.loop, err)
    check_read_ahead(cfg, err)
    if not cfg.simulation.held_s >= 0:
        raise err(f"simulation.held_s must be >= 0 s, got {cfg.simulation.held_s}", "simulation.held_s")
    check_pushes(cfg, err)
    check_ground(cfg, err)
    if cfg.startup.ramp_s < 0:
        raise err(f"startup.ramp_s must be >= 0, got {cfg.startup.ramp_s}", "startup.ramp_s")
    sd = cfg.shutdown
    if sd.mode not in SHUTDOWN_MODES:
        raise err(f"shutdown.mode {sd.mode!r} is not one of {SHUTDOWN_MODES}", "shutdown.mode")
    if sd.stop_cycles < 1:
        raise err(f"shutdown.stop_cycles must be >= 1, got {sd.stop_cycles}", "shutdown.stop_cycles")
    check_safety(cfg.safety, err, SHUTDOWN_MODES, HARDWARE_ERROR_REACTIONS)
    if cfg.model.name and cfg.model.urdf:
        raise err("model: give either name or urdf, not both", "model")
    validate_model(cfg, err)
    check_imu(cfg, err)
    check_registers(cfg, err)
    check_logging(cfg, err)


# ---------------------------------------------------------------------------
# Entry points.


def config_from_dict(data: dict, path: str | os.PathLike | None = None) -> RobotConfig:
    """Build and check a :class:`RobotConfig` from parsed YAML.

    Parameters
    ----------
    data : dict
        The YAML document.  ``model`` may also be a plain string: a built-in
        robot name, or a path ending in ``.urdf``.
    path : path-like or None
        File the data came from (named in errors; base of relative paths).

    Raises
    ------
    ConfigError
        Naming the file, the section and the key.
    """
    spath = str(path) if path is not None else None
    if not isinstance(data, dict):
        raise ConfigError(f"the top level must be a mapping, got {type(data).__name__}", spath)
    data = dict(data)
    if isinstance(data.get("model"), str):
        m = data["model"]
        data["model"] = {"urdf": m} if m.endswith(".urdf") else {"name": m}
    cfg = _build(RobotConfig, data, "", spath)
    cfg = replace(cfg, source=spath)
    _validate(cfg, spath)
    return cfg


def load_config(path: str | os.PathLike) -> RobotConfig:
    """Read a robot config YAML file.

    Raises
    ------
    ConfigError
        File missing, not YAML (with line), unknown key, bad value.
    """
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read config: {exc.strerror}", str(p)) from exc
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"not valid YAML{at}: {getattr(exc, 'problem', exc)}", str(p)) from exc
    try:
        return config_from_dict(data if data is not None else {}, p)
    except ConfigError as exc:
        line = line_of(text, exc.key)
        if line is None:
            raise
        msg = str(exc)
        prefix = f"{exc.path}: "
        msg = msg[len(prefix):] if exc.path and msg.startswith(prefix) else msg
        raise ConfigError(f"line {line}: {msg}", str(p), exc.key) from None


def builtin_config(name: str) -> RobotConfig:
    """The config of the built-in robot ``name`` (``robots/NAME/NAME.yaml``)."""
    from servoloop.robots import config_path

    try:
        path = config_path(name)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    return load_config(path)
