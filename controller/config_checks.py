"""Semantic checks of a robot config: limits, uniqueness, choices, models, contacts.

:func:`controller.config.load_config` builds the typed config (unknown keys
and wrong types are refused there), then calls :func:`validate`; every
error names the file and the key, and :func:`line_of` finds the key's line.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from servoloop.controller.config import (
    HARDWARE_ERROR_REACTIONS,
    SERVO_MODES,
    SHUTDOWN_MODES,
    RobotConfig,
)
from servoloop.controller.errors import ConfigError

__all__ = ["validate", "line_of", "MIMIC_CHOICES"]


def validate(cfg: RobotConfig, path: str | None) -> None:
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
        _check_model(s, i, where, err)
    b = cfg.bus
    if b.protocol not in (1, 2, "mixed"):
        raise err(f"bus.protocol must be 1, 2 or mixed, got {b.protocol!r}", "bus.protocol")
    _check_protocols(cfg, err)
    if b.baud <= 0:
        raise err(f"bus.baud must be > 0, got {b.baud}", "bus.baud")
    lp = cfg.loop
    if not lp.rate_hz > 0:
        raise err(f"loop.rate_hz must be > 0, got {lp.rate_hz}", "loop.rate_hz")
    if lp.spin_s < 0 or lp.spin_s >= 1.0 / lp.rate_hz:
        raise err(f"loop.spin_s must be in [0, one period), got {lp.spin_s}", "loop.spin_s")
    if cfg.startup.ramp_s < 0:
        raise err(f"startup.ramp_s must be >= 0, got {cfg.startup.ramp_s}", "startup.ramp_s")
    sd = cfg.shutdown
    if sd.mode not in SHUTDOWN_MODES:
        raise err(f"shutdown.mode {sd.mode!r} is not one of {SHUTDOWN_MODES}", "shutdown.mode")
    if sd.stop_cycles < 1:
        raise err(f"shutdown.stop_cycles must be >= 1, got {sd.stop_cycles}", "shutdown.stop_cycles")
    sf = cfg.safety
    for key in ("max_velocity", "max_acceleration", "bus_watchdog_s"):
        v = getattr(sf, key)
        if v is not None and not v > 0:
            raise err(f"safety.{key} must be > 0 (or null), got {v}", f"safety.{key}")
    if not sf.comm_timeout_s > 0:
        raise err(f"safety.comm_timeout_s must be > 0 s, got {sf.comm_timeout_s}", "safety.comm_timeout_s")
    if not 0 <= sf.comm_hold_s <= sf.comm_timeout_s:
        raise err(f"safety.comm_hold_s must be in [0, comm_timeout_s], got {sf.comm_hold_s}", "safety.comm_hold_s")
    if not sf.comm_window_s > 0:
        raise err(f"safety.comm_window_s must be > 0 s, got {sf.comm_window_s}", "safety.comm_window_s")
    if not 0 <= sf.comm_warn_rate <= 1:
        raise err(f"safety.comm_warn_rate must be in [0, 1], got {sf.comm_warn_rate}", "safety.comm_warn_rate")
    if sf.comm_timeout_action not in SHUTDOWN_MODES:
        raise err(f"safety.comm_timeout_action {sf.comm_timeout_action!r} is not one of {SHUTDOWN_MODES}",
                  "safety.comm_timeout_action")
    if sf.monitor_every < 1:
        raise err("safety.monitor_every must be >= 1", "safety.monitor_every")
    if sf.on_hardware_error not in HARDWARE_ERROR_REACTIONS:
        raise err(
            f"safety.on_hardware_error {sf.on_hardware_error!r} is not one of {HARDWARE_ERROR_REACTIONS}",
            "safety.on_hardware_error",
        )
    if cfg.model.name and cfg.model.urdf:
        raise err("model: give either name or urdf, not both", "model")
    _validate_model(cfg, err)
    if cfg.logging.flush_s <= 0 or cfg.logging.ring_s < 4 * cfg.logging.flush_s:
        raise err("logging.ring_s must hold at least 4 flush_s periods", "logging.ring_s")
    if cfg.logging.max_mb is not None and not cfg.logging.max_mb > 0:
        raise err(f"logging.max_mb must be > 0 (or null: no cap), got {cfg.logging.max_mb}", "logging.max_mb")
    if cfg.logging.max_files < 1:
        raise err(f"logging.max_files must be >= 1, got {cfg.logging.max_files}", "logging.max_files")


def _check_protocols(cfg, err) -> None:
    """A Protocol-1.0-only model is not on a 2.0 bus; velocity mode exists on each velocity servo."""
    from servoloop.firmware_bridge.control_table import get_table

    for i, s in enumerate(cfg.servos):
        t = get_table(s.model)
        if t.protocol == 1 and cfg.bus.protocol == 2:   # an X servo may speak 1.0 (Protocol Type 1)
            raise err(f"servos[{i}] (id {s.id}): {t.name} speaks Protocol 1.0 only, bus.protocol is 2; "
                      "use bus.protocol: mixed for 1.0 and 2.0 servos on one port", "bus.protocol")
        if s.mode == "velocity" and not ({"goal_velocity", "operating_mode"} <= set(t.registers)
                                         or {"moving_speed", "cw_angle_limit"} <= set(t.registers)):
            raise err(f"servos[{i}] (id {s.id}): {t.name} has no velocity (wheel) mode", f"servos[{i}].mode")


def _check_model(s, i: int, where: str, err) -> None:
    """An unknown servo model is a config error naming the known ones (not a traceback at connect)."""
    from servoloop.firmware_bridge.control_table import MODELS, get_table
    from servoloop.firmware_bridge.errors import UnknownModelError

    try:
        get_table(s.model)
    except UnknownModelError:
        raise err(f"{where}: unknown servo model {s.model!r} (at servos[{i}].model); "
                  f"known models: {', '.join(sorted(MODELS))}", f"servos[{i}].model") from None


def line_of(text: str, key: str | None) -> int | None:
    """1-based line of dotted ``key`` (``servos[2].model``) in the YAML ``text``, or None."""
    import re

    if not key:
        return None
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return None
    for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", key):
        if node is None:
            return None
        if index:
            if not isinstance(node, yaml.SequenceNode) or int(index) >= len(node.value):
                return None
            node = node.value[int(index)]
        elif isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if getattr(k, "value", None) == name), None)
        else:
            return None
    return None if node is None else node.start_mark.line + 1


MIMIC_CHOICES = ("error", "independent")


def _validate_model(cfg: RobotConfig, err) -> None:
    """The robot description and its contact geometry."""
    if cfg.model.mimic not in MIMIC_CHOICES:
        raise err(f"model.mimic {cfg.model.mimic!r} is not one of {MIMIC_CHOICES}", "model.mimic")
    urdf = cfg.model.urdf or ""
    if urdf.endswith(".xacro") or urdf.endswith(".urdf.xacro"):
        out = Path(urdf).name.removesuffix(".xacro")
        out = out if out.endswith(".urdf") else out + ".urdf"
        raise err(f"model.urdf {urdf!r} is a xacro file, not a URDF: expand it first with "
                  f"`xacro {urdf} > {out}` (pip install xacro) and point model.urdf at {out}",
                  "model.urdf")
    from servoloop.core_cy.sim.model import SHAPES  # the shapes the simulator knows

    for k, c in enumerate(cfg.simulation.contacts):
        where = f"simulation.contacts[{k}] (link {c.link!r})"
        if c.shape not in SHAPES:
            raise err(f"{where}: shape {c.shape!r} is not one of {tuple(SHAPES)}", f"simulation.contacts[{k}].shape")
        if len(c.size) != SHAPES[c.shape] or min(c.size) < 0:
            what = {"box": "[x, y, z] full edge lengths", "sphere": "[radius]",
                    "cylinder": "[radius, length]"}[c.shape]
            raise err(f"{where}: a {c.shape} needs size {what} in m, got {list(c.size)}",
                      f"simulation.contacts[{k}].size")
        if len(c.origin) != 3:
            raise err(f"{where}: origin must be [x, y, z] in m", f"simulation.contacts[{k}].origin")
    plant = cfg.simulation.plant
    if plant is not None and plant not in ("contact", "independent") and ":" not in plant:
        raise err(f"simulation.plant {plant!r}: expected contact, independent or MODULE:FUNCTION",
                  "simulation.plant")
    if cfg.simulation.contacts and cfg.urdf_path() is None:
        raise err("simulation.contacts needs a robot description (model.urdf or model.name)",
                  "simulation.contacts")
