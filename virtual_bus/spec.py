"""Which servos a virtual bus emulates: ``--servos SPEC``, ``--robot NAME`` or Python objects."""

from __future__ import annotations

from servoloop.firmware_bridge.control_table import get_table
from servoloop.firmware_bridge.errors import UnknownModelError

__all__ = ["ServoSpecError", "parse_servo_spec", "robot_config", "robot_servos", "robot_plant", "normalize_servos",
           "config_plant", "load_config_file", "CONTACT_PLANT", "PLANT_NAMES",
           "parse_actuator_spec", "load_plant"]


class ServoSpecError(ValueError):
    """A servo list that cannot be used; the message names the item."""


def _parse_ids(text: str, where: str) -> list[int]:
    lo, sep, hi = text.partition("-")
    try:
        a = int(lo)
        b = int(hi) if sep else a
    except ValueError:
        raise ServoSpecError(f"{where}: ids must be N or A-B, got {text!r}") from None
    if not (0 <= a <= b <= 252):
        raise ServoSpecError(f"{where}: ids must lie in 0..252 with A <= B, got {text!r}")
    return list(range(a, b + 1))


def parse_servo_spec(spec: str) -> list[tuple[int, str]]:
    """``"1-12:XM430-W350"`` or ``"1:AX-18A,2:AX-18A"`` -> [(id, model name), ...].

    Raises :class:`ServoSpecError` naming the bad item (unknown model, bad or
    repeated id).
    """
    out: list[tuple[int, str]] = []
    for k, item in enumerate(spec.split(","), start=1):
        item = item.strip()
        where = f"--servos item {k} {item!r}"
        ids, colon, model = item.partition(":")
        if not colon or not model:
            raise ServoSpecError(f"{where}: expected IDS:MODEL, e.g. 1-12:XM430-W350")
        out.extend((i, model) for i in _parse_ids(ids.strip(), where))
    return normalize_servos(out, source="--servos")


def robot_config(name: str):
    """The built-in robot's config through the daemon's typed loader (unknown keys are errors)."""
    from servoloop.controller.config import builtin_config
    from servoloop.controller.errors import ConfigError

    try:
        return builtin_config(name)
    except ConfigError as e:
        raise ServoSpecError(f"robot {name!r}: {e}") from None


def robot_servos(name: str) -> tuple[list[tuple[int, str]], dict]:
    """Servo list and ``bus`` section (as a dict) of the built-in robot ``name``."""
    import dataclasses

    cfg = robot_config(name)
    pairs = [(s.id, s.model) for s in cfg.servos]
    return normalize_servos(pairs, source=cfg.source or name), dataclasses.asdict(cfg.bus)


CONTACT_PLANT = "servoloop.virtual_bus.robot_plant:make_plant"
#: short names of the plants, as ``--plant`` and ``simulation.plant`` take them
PLANT_NAMES = {"contact": CONTACT_PLANT, "independent": "independent"}


def load_config_file(path: str):
    """A robot config file through the daemon's typed loader."""
    from servoloop.controller.config import load_config
    from servoloop.controller.errors import ConfigError

    try:
        return load_config(path)
    except ConfigError as e:
        raise ServoSpecError(str(e)) from None


def config_plant(cfg) -> str:
    """The plant a config runs on: its ``simulation.plant``, else the contact simulator
    when it has a URDF, else independent loads."""
    plant = cfg.simulation.plant
    if plant is None:
        plant = "contact" if cfg.urdf_path() is not None else "independent"
    return PLANT_NAMES.get(plant, plant)


def robot_plant(name: str) -> str:
    """The plant the built-in robot ``name`` runs on (see :func:`config_plant`)."""
    return config_plant(robot_config(name))


def normalize_servos(servos, source: str = "servos") -> list[tuple[int, str]]:
    """[(id, canonical model name)] from a SPEC string, a dict {id: model}, or a
    sequence of (id, model) pairs / objects with ``id`` and ``model`` / dicts."""
    if isinstance(servos, str):
        return parse_servo_spec(servos)
    if isinstance(servos, dict):
        servos = list(servos.items())
    out: list[tuple[int, str]] = []
    seen: set[int] = set()
    for k, s in enumerate(servos):
        if isinstance(s, dict):
            sid, model = s.get("id"), s.get("model")
        elif hasattr(s, "id") and hasattr(s, "model"):
            sid, model = s.id, s.model
        else:
            try:
                sid, model = s
            except (TypeError, ValueError):
                raise ServoSpecError(f"{source}[{k}]: expected (id, model), got {s!r}") from None
        if not isinstance(sid, int) or isinstance(sid, bool) or not 0 <= sid <= 252:
            raise ServoSpecError(f"{source}[{k}]: id must be an integer 0..252, got {sid!r}")
        if sid in seen:
            raise ServoSpecError(f"{source}[{k}]: id {sid} given twice")
        seen.add(sid)
        try:
            table = get_table(model)
        except UnknownModelError as e:
            raise ServoSpecError(f"{source}[{k}] (id {sid}): {e.args[0]}") from None
        if table.not_emulated or table.datasheet is None:
            raise ServoSpecError(f"{source}[{k}] (id {sid}): {table.name} cannot be emulated yet: "
                                 f"{table.not_emulated or 'its control table has no datasheet figures'}")
        out.append((sid, table.name))
    if not out:
        raise ServoSpecError(f"{source}: no servos")
    return out


def parse_actuator_spec(spec: str) -> dict[int, dict[str, float]]:
    """``"1-3:kp=9.272:kd=0.3069,4:inertia=0.01"`` -> {id: {field: value}}.

    Fields: :class:`core_cy.actuator.ServoModel` fields or their short
    aliases (kp, kd, kc, stall_torque, ...), :class:`virtual_bus.JointLoad`
    fields, ``inertia`` (load + armature), ``gravity_torque``, ``gravity_down_rad``.
    """
    from servoloop.virtual_bus.actuator import OVERRIDE_KEYS

    fields = set(OVERRIDE_KEYS)
    out: dict[int, dict[str, float]] = {}
    for k, item in enumerate(spec.split(","), start=1):
        where = f"--actuator item {k} {item.strip()!r}"
        ids, *pairs = item.strip().split(":")
        if not pairs:
            raise ServoSpecError(f"{where}: expected IDS:KEY=VALUE[:KEY=VALUE...]")
        values = {}
        for pair in pairs:
            key, eq, value = pair.partition("=")
            if key not in fields:
                raise ServoSpecError(f"{where}: unknown field {key!r}; known: {', '.join(sorted(fields))}")
            try:
                values[key] = float(value)
            except ValueError:
                raise ServoSpecError(f"{where}: {key} must be a number, got {value!r}") from None
        for i in _parse_ids(ids, where):
            out.setdefault(i, {}).update(values)
    return out


def load_plant(target: str, servos: list[tuple[int, str]], robot: str | None, config=None):
    """Build a plant from ``"package.module:function"`` (or ``contact``) called with ``servos=``,
    ``robot=`` and, when the factory takes it and a config is given, ``config=``."""
    import importlib
    import inspect

    target = PLANT_NAMES.get(target, target)
    module, colon, func = target.partition(":")
    if not colon or not module or not func:
        raise ServoSpecError(f"--plant {target!r}: expected MODULE:FUNCTION")
    try:
        if config is not None:
            from servoloop.controller.controllers import import_beside  # next to the config

            factory = getattr(import_beside(module, config.base_dir), func)
        else:
            factory = getattr(importlib.import_module(module), func)
    except (ImportError, AttributeError) as e:
        raise ServoSpecError(f"--plant {target!r}: {e}") from None
    kwargs = {"servos": servos, "robot": robot}
    try:
        if config is not None and "config" in inspect.signature(factory).parameters:
            kwargs["config"] = config
    except (TypeError, ValueError):
        pass
    return factory(**kwargs)
