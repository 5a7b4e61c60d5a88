"""Config checks that need other packages' data: servo models, control-table registers, the
robot description and its contacts; and the line of a key in the YAML text.

Split from :mod:`controller.config` (which keeps the schema and the generic checks).  Every
check raises through ``err(message, key)``, the config's error factory, so the message
names the file and the dotted key (and :func:`load_config` adds the line).

Registers in the config (``servos[].registers`` and ``register_defaults: {MODEL: {...}}``)
are control-table names with a value in the register's own unit: SI where the table
gives a unit (rad, rad/s, rad/s^2, A, V, degC, s, ratio), the raw integer where it gives
none (gains, drive mode).  The daemon owns some registers (ids, baud, mode, torque, goals,
the Bus Watchdog): those are refused here with the reason, not silently overwritten.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import yaml

__all__ = ["load_yaml", "check_model", "check_safety", "check_protocols", "check_read_ahead", "check_registers", "check_logging", "LOG_LEVELS", "register_plan", "line_of", "validate_model",
           "check_description", "gravity_overload", "keyed_error", "DAEMON_REGISTERS", "MIMIC_CHOICES"]

#: registers the daemon writes itself (or that would cut it off the bus), and why
DAEMON_REGISTERS = {
    "id": "change it with `servoloop setup id`",
    "baud_rate": "change it with `servoloop setup baud`",
    "protocol_type": "the bus protocol is bus.protocol",
    "operating_mode": "set servos[].mode instead",
    "torque_enable": "the daemon turns torque on after goal := present",
    "goal_position": "the daemon writes goals",
    "goal_velocity": "the daemon writes goals",
    "goal_current": "the daemon writes goals",
    "goal_pwm": "the daemon writes goals",
    "moving_speed": "the daemon writes goals",
    "goal_torque": "the daemon writes goals",
    "bus_watchdog": "set safety.bus_watchdog_s instead",
    "status_return_level": "the daemon needs every reply",
}

MIMIC_CHOICES = ("error", "independent")


def check_loop(lp, err) -> None:
    """``loop:``: a positive rate, a spin tail shorter than a period, sane CPUs and priority."""
    if not lp.rate_hz > 0:
        raise err(f"loop.rate_hz must be > 0, got {lp.rate_hz}", "loop.rate_hz")
    if lp.spin_s is not None and (lp.spin_s < 0 or lp.spin_s >= 1.0 / lp.rate_hz):
        raise err(f"loop.spin_s must be in [0, one period = {1.0 / lp.rate_hz:g} s) or null, "
                  f"got {lp.spin_s}", "loop.spin_s")
    if not 1 <= lp.priority <= 99:
        raise err(f"loop.priority must be in 1..99 (SCHED_FIFO), got {lp.priority}", "loop.priority")
    if lp.cpu_latency_us is not None and not 0 <= lp.cpu_latency_us <= 2_000_000:
        raise err(f"loop.cpu_latency_us must be in 0..2000000 us or null, got {lp.cpu_latency_us}",
                  "loop.cpu_latency_us")
    if lp.cpus is not None and (not lp.cpus or any(c < 0 for c in lp.cpus)):
        raise err(f"loop.cpus must list CPU indices >= 0, got {list(lp.cpus)}", "loop.cpus")
    if lp.cpu is not None:
        if lp.cpu < 0:
            raise err(f"loop.cpu must be a CPU index >= 0, got {lp.cpu}", "loop.cpu")
        if lp.cpus is not None and lp.cpu not in lp.cpus:
            raise err(f"loop.cpu {lp.cpu} is not one of loop.cpus {list(lp.cpus)}", "loop.cpu")


def check_protocols(cfg, err) -> None:
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


def check_read_ahead(cfg, err) -> None:
    """``loop.read_ahead`` needs the tick's read to be one transaction: every servo (and the
    IMU board) on Protocol 2.0 (one sync read, or one bulk read), or a single servo."""
    from servoloop.firmware_bridge.control_table import get_table

    if not cfg.loop.read_ahead:
        return
    proto = cfg.bus.protocol
    p1 = [s.id for s in cfg.servos if proto == 1 or (proto == "mixed" and get_table(s.model).protocol == 1)]
    if not p1:      # all on 2.0: one sync read, or one bulk read with several models or the IMU
        return
    if len(cfg.servos) == 1 and cfg.imu is None:
        return      # one servo: one READ
    why = (f"servos {p1} speak Protocol 1.0, which reads one servo per transaction (no sync read "
           "on AX, no bulk read across models)")
    if cfg.imu is not None:
        why += f", and the IMU board (id {cfg.imu.id}) needs a read of its own"
    raise err(f"loop.read_ahead needs the tick's read to be one bus transaction (one sync read, or "
              f"one Protocol 2.0 bulk read of servos and IMU); here {why}. Set loop.read_ahead: false "
              "for this robot", "loop.read_ahead")


def check_model(s, i: int, where: str, err) -> None:
    """An unknown servo model is a config error naming the known ones (not a traceback at connect);
    so is a friction figure it cannot have (:func:`controller.servo_friction.check_friction`)."""
    from servoloop.firmware_bridge.control_table import MODELS, get_table
    from servoloop.firmware_bridge.errors import UnknownModelError

    try:
        get_table(s.model)
    except UnknownModelError:
        raise err(f"{where}: unknown servo model {s.model!r} (at servos[{i}].model); "
                  f"known models: {', '.join(sorted(MODELS))}", f"servos[{i}].model") from None
    from servoloop.controller.servo_friction import check_friction

    check_friction(s, i, where, err)


def _raw_for(table, name: str, value, where: str, key: str, err) -> int:
    """The raw integer ``value`` (SI or raw, per the table's unit) stands for; range-checked."""
    from servoloop.firmware_bridge.units import from_si, to_si

    if name not in table.registers:
        known = ", ".join(sorted(n for n, r in table.registers.items() if r.writable and n not in DAEMON_REGISTERS))
        raise err(f"{where}: {table.name} has no register {name!r}; writable registers: {known}", key)
    reg = table[name]
    if name in DAEMON_REGISTERS:
        raise err(f"{where}: register {name!r} is not set from the config: {DAEMON_REGISTERS[name]}", key)
    if not reg.writable:
        raise err(f"{where}: register {name!r} of {table.name} is read-only", key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise err(f"{where}: register {name!r} needs a number, got {value!r}", key)
    if reg.unit:
        raw = from_si(reg, float(value))
    else:
        if float(value) != int(value):
            raise err(f"{where}: register {name!r} has no unit: give its raw integer, got {value!r}", key)
        raw = int(value)
    lo, hi = reg.min_raw, reg.max_raw
    if (lo is not None and raw < lo) or (hi is not None and raw > hi):
        unit = reg.unit or "raw"
        span = (f"{to_si(reg, lo):g}..{to_si(reg, hi):g} {unit}" if reg.unit else f"{lo}..{hi}")
        raise err(f"{where}: register {name!r} = {value!r} is outside {table.name}'s range {span}", key)
    return raw


def register_plan(cfg) -> list[tuple[int, str, int, object]]:
    """What to write at connect: ``(servo id, register, raw, value as configured)`` in config order.

    A servo's own ``registers`` win over its model's ``register_defaults``.  The config has
    been checked (:func:`check_registers`), so this does not raise for a loaded config.
    """
    from servoloop.firmware_bridge.control_table import get_table

    defaults = {get_table(m).name: regs for m, regs in (cfg.register_defaults or {}).items()}
    plan = []
    for s in cfg.servos:
        table = get_table(s.model)
        merged = dict(defaults.get(table.name, {}))
        merged.update(s.registers or {})
        for name, value in merged.items():
            def err(msg, key):
                return ValueError(msg)
            plan.append((s.id, name, _raw_for(table, name, value, "", "", err), value))
    return plan


def check_registers(cfg, err) -> None:
    """``register_defaults`` (known models, known writable registers) and ``servos[].registers``."""
    from servoloop.firmware_bridge.control_table import MODELS, get_table
    from servoloop.firmware_bridge.errors import UnknownModelError

    for model, regs in (cfg.register_defaults or {}).items():
        key = f"register_defaults.{model}"
        try:
            table = get_table(str(model))
        except UnknownModelError:
            raise err(f"register_defaults: unknown servo model {model!r}; known models: "
                      f"{', '.join(sorted(MODELS))}", key) from None
        if not isinstance(regs, dict):
            raise err(f"{key} must be a mapping of register: value, got {regs!r}", key)
        for name, value in regs.items():
            _raw_for(table, str(name), value, key, f"{key}.{name}", err)
    for i, s in enumerate(cfg.servos):
        table = get_table(s.model)
        for name, value in (s.registers or {}).items():
            key = f"servos[{i}].registers.{name}"
            _raw_for(table, str(name), value, f"servos[{i}] (id {s.id}, joint {s.joint!r}).registers",
                     key, err)


LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


def check_logging(cfg, err) -> None:
    """``logging.level``: one of :data:`LOG_LEVELS` (what ``-v`` / ``-q`` override); the ring
    holds 4 flushes; ``max_mb`` > 0 or null; ``max_files`` >= 1."""
    lg = cfg.logging
    if str(lg.level).lower() not in LOG_LEVELS:
        raise err(f"logging.level {lg.level!r} is not one of {LOG_LEVELS}", "logging.level")
    if lg.flush_s <= 0 or lg.ring_s < 4 * lg.flush_s:
        raise err("logging.ring_s must hold at least 4 flush_s periods", "logging.ring_s")
    if lg.max_mb is not None and not lg.max_mb > 0:
        raise err(f"logging.max_mb must be > 0 (or null: no cap), got {lg.max_mb}", "logging.max_mb")
    if lg.max_files < 1:
        raise err(f"logging.max_files must be >= 1, got {lg.max_files}", "logging.max_files")


def line_of(text: str, key: str | None) -> int | None:
    """1-based line of dotted ``key`` (``servos[2].model``) in the YAML ``text``, or None."""
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


def validate_model(cfg, err) -> None:
    """The robot description and its contact geometry."""
    if cfg.model.mimic not in MIMIC_CHOICES:
        raise err(f"model.mimic {cfg.model.mimic!r} is not one of {MIMIC_CHOICES}", "model.mimic")
    urdf = cfg.model.urdf or ""
    if urdf.endswith(".xacro") or urdf.endswith(".urdf.xacro"):
        out = Path(urdf).name.removesuffix(".xacro")
        out = out if out.endswith(".urdf") else out + ".urdf"
        raise err(f"model.urdf {urdf!r} is a xacro file, not a URDF: expand it first with "
                  f"`xacro {urdf} > {out}` (pip install xacro; outside ROS, replace `$(find PKG)` in its "
                  f"includes by the package's folder first) and point model.urdf at {out}",
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


def check_description(cfg, err) -> list[str]:
    """The robot description against the servos, as ``servoloop run`` would find it.

    ``load_config`` leaves the URDF to what needs it (the simulator, a model-based
    controller), so a config whose URDF is missing, has a ``<mimic>`` joint, or lacks a
    servo's joint loaded fine and failed at ``run``.  ``servoloop config check`` calls
    this so that it says so first: the file, the joint and the key to change.  Returns
    warnings: a fixed-base joint whose servo cannot hold what hangs on it
    (:func:`gravity_overload`), the mark of masses written in g instead of kg.
    """
    path = cfg.urdf_path()
    if path is None:
        return []
    from servoloop.core_cy.dynamics.urdf import parse_urdf
    from servoloop.core_cy.errors import MimicJointError, ModelError

    key = "model.urdf" if cfg.model.urdf else "model.name"
    if not path.is_file():
        raise err(f"{key}: robot description {path} not found (a path relative to the config "
                  "file, or absolute)", key)
    try:
        tree = parse_urdf(path, floating_base=cfg.model.floating_base, mimic=cfg.model.mimic)
    except MimicJointError as exc:
        joint = re.search(r"joint '([^']+)'", str(exc))
        name = f"joint {joint.group(1)!r}" if joint else "a joint"
        raise err(f"{path.name}: {name} is a <mimic> joint; servoloop does not couple joints: "
                  "set `model: {urdf: ..., mimic: independent}` to load it as a joint of its own "
                  "(driven by its own servo; without one, limp in the simulation)", "model.mimic") from None
    except ModelError as exc:
        raise err(f"{key}: {exc}", key) from None
    moving = set(tree.joint_names) - {"root_joint"}
    for k, s in enumerate(cfg.servos):
        if s.joint not in moving:
            near = sorted(moving - {t.joint for t in cfg.servos})
            raise err(f"servos[{k}].joint {s.joint!r} (id {s.id}) is not a moving joint of {path.name}; "
                      f"its joints without a servo: {near or 'none'}", f"servos[{k}].joint")
    for k, c in enumerate(cfg.simulation.contacts):
        if c.link not in tree.frames:
            raise err(f"simulation.contacts[{k}].link {c.link!r} is not a link of {path.name}",
                      f"simulation.contacts[{k}].link")
    return [] if cfg.model.floating_base else gravity_overload(tree, cfg.servos, path.name)


def keyed_error(path):
    """``err(message, key)`` for a check after :func:`load_config`: the file and the key's
    line, as ``load_config`` names them."""
    from servoloop.controller.errors import ConfigError

    try:
        text = Path(path).read_text()
    except (OSError, TypeError):
        text = ""

    def err(msg: str, key: str):
        line = line_of(text, key) if text else None
        return ConfigError(f"line {line}: {msg}" if line else msg, str(path), key)

    return err


#: a joint's gravity torque bound past this many stall torques is a warning
OVERLOAD_FACTOR = 3.0


def gravity_overload(tree, servos, source: str) -> list[str]:
    """Revolute joints of a fixed-base tree whose servo cannot hold its subtree, whatever the pose.

    The bound: g times, over every body the joint carries, its mass times its farthest
    reach from the joint (the links' offsets along the chain plus its centre of mass).
    No pose needs more; a real arm needs less.  Past ``OVERLOAD_FACTOR`` stall torques
    the description is wrong, not the servo: masses written in grams (an XM430-sized
    link of 138 "kg") give a bound a thousand times too large.
    """
    import numpy as np

    from servoloop.firmware_bridge.control_table import get_table

    parent, mass = tree.parent, tree.mass
    offset = np.linalg.norm(tree.p_tree, axis=1)
    com = np.linalg.norm(tree.com, axis=1)
    by_joint = {name: b for b, name in enumerate(tree.joint_names)}
    out = []
    for s in servos:
        b = by_joint.get(s.joint)
        if b is None or tree.jtype[b] != 0 or getattr(s, "mode", "position") == "velocity":
            continue
        if parent[b] < 0 and abs(abs((tree.R_tree[b] @ tree.axis[b])[2]) - 1.0) < 1e-9:
            continue                        # a vertical axis on the base: gravity never turns it
        stall = get_table(s.model).stall_torque_nm
        if not stall:
            continue
        bound = 0.0
        for c in range(len(mass)):
            reach, k = com[c], c
            while k != b and k >= 0:        # walk up from body c to the joint's body
                reach += offset[k]
                k = parent[k]
            if k == b:
                bound += mass[c] * reach
        bound *= 9.81
        if bound > OVERLOAD_FACTOR * stall:
            out.append(f"joint {s.joint!r} (id {s.id}) may need up to {bound:.3g} N m to hold what "
                       f"hangs on it ({mass[[c for c in range(len(mass)) if _under(parent, c, b)]].sum():.3g} kg "
                       f"in {source}); its {s.model} stalls at {stall:.3g} N m: are the URDF's "
                       "<mass> values in kg (not g)?")
    return out


def _under(parent, c: int, b: int) -> bool:
    """Whether body ``c`` is ``b`` or hangs below it."""
    while c >= 0 and c != b:
        c = parent[c]
    return c == b


def check_safety(sf, err, shutdown_modes, reactions) -> None:
    """The ``safety:`` section's ranges and choices."""
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
    if sf.comm_timeout_action not in shutdown_modes:
        raise err(f"safety.comm_timeout_action {sf.comm_timeout_action!r} is not one of {shutdown_modes}",
                  "safety.comm_timeout_action")
    if sf.monitor_every < 1:
        raise err("safety.monitor_every must be >= 1", "safety.monitor_every")
    if sf.on_hardware_error not in reactions:
        raise err(
            f"safety.on_hardware_error {sf.on_hardware_error!r} is not one of {reactions}",
            "safety.on_hardware_error",
        )
    from servoloop.controller.fall import FALL_REACTIONS

    if sf.on_fall not in FALL_REACTIONS:
        raise err(f"safety.on_fall {sf.on_fall!r} is not one of {FALL_REACTIONS}", "safety.on_fall")
    if sf.fall_tilt_rad is not None and not 0 < sf.fall_tilt_rad < math.pi:
        raise err(f"safety.fall_tilt_rad must be in (0, pi) rad (or null: no fall detection), "
                  f"got {sf.fall_tilt_rad}", "safety.fall_tilt_rad")
    if sf.fall_rate_rad_s is not None and not sf.fall_rate_rad_s > 0:
        raise err(f"safety.fall_rate_rad_s must be > 0 rad/s (or null: the tilt alone), "
                  f"got {sf.fall_rate_rad_s}", "safety.fall_rate_rad_s")
    for key in ("fall_dwell_s", "fall_damp_s"):
        v = getattr(sf, key)
        if not v >= 0:
            raise err(f"safety.{key} must be >= 0 s, got {v}", f"safety.{key}")


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (YAML keeps the last silently)."""

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                first = seen.get(key)
            except TypeError:        # an unhashable key: the base class reports it
                break
            seen[key] = key_node.start_mark.line
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} given twice (first at line {first + 1}); "
                    "only one can count", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str):
    """``yaml.safe_load`` that refuses duplicate keys (a YAMLError with the line of the second)."""
    return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
