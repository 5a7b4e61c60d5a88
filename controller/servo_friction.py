"""The figures of the servo law each servo is taken to have, and where each came from.

Controllers that invert the servo law (``wbc`` / ``trot``: seed 000's ``tau = k_p (goal - q)
- k_d dq``, less the gearbox's ``k_c sgn(dq) + b dq``) need each servo's velocity damping
``k_d`` [N*m*s/rad] (the goal's damping advance ``k_d / k_p``: a servo damped more than the
controller thinks eats the torque a swing asks for), its rotor inertia reflected at the
output (``armature`` [kg*m^2], in the contact inverse dynamics' mass matrix), and, with
``coulomb_compensation``, its Coulomb friction ``k_c`` [N*m] and viscous friction ``b``
[N*m*s/rad].  (``k_p`` is ``servos[].position_stiffness``: :mod:`controller.joint_map`.)
One figure per servo and key (:data:`KEYS`), first found of:

1. a ``servoloop run --calibration FILE`` that identified it, on the servos of the model
   the report names (the same matching as its stiffness: :mod:`controller.calibration_file`);
2. the config's ``servos[].coulomb_friction`` / ``viscous_friction`` / ``position_damping``
   / ``armature``;
3. the servo model's default (:func:`core_cy.sim.model.simulator_servo_model`: 0.134 N*m,
   0, 0.15 N*m*s/rad and 0.0012 kg*m^2 on the XM430-W350, the figures the built-in virtual
   bus simulates).

The run summary, ``servoloop status`` and the startup log say which (:func:`friction_summary`,
:func:`law_summary`).
"""

from __future__ import annotations

import math

__all__ = ["ServoFriction", "servo_friction", "friction_summary", "friction_text", "print_friction",
           "check_friction", "law_summary", "law_text", "KEYS"]

#: the ServoConfig keys, their unit and the servo model field they override (the
#: :class:`ServoFriction` attribute too); ``sources`` are in this order
KEYS = {"coulomb_friction": ("N*m", "coulomb_nm"), "viscous_friction": ("N*m*s/rad", "viscous_nm_s_per_rad"),
        "position_damping": ("N*m*s/rad", "kd_nm_s_per_rad"), "armature": ("kg*m^2", "armature_kg_m2")}


class ServoFriction:
    """Per servo (config order): ``coulomb_nm`` (n,) [N*m], ``viscous_nm_s_per_rad`` (n,)
    [N*m*s/rad], ``kd_nm_s_per_rad`` (n,) [N*m*s/rad], ``armature_kg_m2`` (n,) [kg*m^2] and,
    for each servo, where each came from (``sources``: n tuples of strings, :data:`KEYS` order)."""

    def __init__(self, figures: dict, sources) -> None:
        import numpy as np  # not at import: ``servoloop status`` prints with this module

        for key, (_, attr) in KEYS.items():
            setattr(self, attr, np.asarray(figures[key], dtype=float))
        self.sources = tuple(sources)


def _default_model(model: str):
    """The servo model's defaults, or None for a model without datasheet figures (PM, YM)."""
    from servoloop.core_cy.sim.model import simulator_servo_model
    from servoloop.firmware_bridge.control_table import get_table

    table = get_table(model)
    if table.datasheet is None:
        return None
    return simulator_servo_model(table.datasheet, table.name)


def servo_friction(cfg) -> ServoFriction:
    """The friction, damping and armature in use for every servo of ``cfg`` (a RobotConfig),
    see the module docstring."""
    figures: dict[str, list] = {key: [] for key in KEYS}
    sources = []
    where = cfg.source or f"the {cfg.robot} config"
    for s in cfg.servos:
        given = dict(s.friction_from)
        said = []
        for key, out in figures.items():
            value = getattr(s, key)
            model = _default_model(s.model) if value is None else None
            if value is None and model is None:      # nothing known: nothing compensated
                out.append(0.0)
                said.append(f"none: {s.model} has no datasheet figures; set servos[].{key}")
            elif value is None:
                out.append(getattr(model, KEYS[key][1]))
                said.append(f"{s.model} default" + (f"; {given[key]}" if key in given else ""))
            else:
                out.append(value)
                said.append(given.get(key, where))
        sources.append(tuple(said))
    return ServoFriction(figures, sources)


def _grouped(cfg, figures: tuple[str, str], names: tuple[str, ...], sources: slice) -> list[dict]:
    """The servos grouped by their two ``figures`` (ServoFriction attributes) and those
    figures' ``sources``, in config order: ``{names[0], names[1], names[2], names[3] (the two
    sources), "joints"}``."""
    f = servo_friction(cfg)
    a, b = (getattr(f, name) for name in figures)
    groups: dict[tuple, dict] = {}
    for s, x, y, src in zip(cfg.servos, a, b, f.sources, strict=True):
        src = src[sources]
        entry = groups.setdefault((float(x), float(y), src), dict(zip(names, (float(x), float(y), *src), strict=True)))
        entry.setdefault("joints", []).append(s.joint)
    return list(groups.values())


def _line(entry: dict, keys: tuple[str, ...], labels: tuple[str, str], units: tuple[str, str]) -> str:
    """One grouped entry as a line: the two figures, their sources (one when the same), joints."""
    joints = entry["joints"]
    on = f"{len(joints)} joints" if len(joints) > 3 else ", ".join(joints)
    src = entry[keys[2]] if entry[keys[2]] == entry[keys[3]] else \
        f"{labels[0]}: {entry[keys[2]]}; {labels[1]}: {entry[keys[3]]}"
    return (f"{labels[0]} {entry[keys[0]]:.4g} {units[0]}, {labels[1]} {entry[keys[1]]:.4g} {units[1]} "
            f"({src}) on {on}")


_FRICTION = ("coulomb_nm", "viscous_nm_s_per_rad", "coulomb_source", "viscous_source")
_LAW = ("kd_nm_s_per_rad", "armature_kg_m2", "kd_source", "armature_source")


def friction_summary(cfg, log=None) -> list[dict]:
    """The friction in use, one entry per distinct (figures, sources), in config order:
    ``{"coulomb_nm", "viscous_nm_s_per_rad", "coulomb_source", "viscous_source", "joints"}``
    (the run summary's and ``servoloop status``'s ``friction``); each said at info level on
    ``log`` (a logging.Logger) when given (the daemon's startup log)."""
    groups = _grouped(cfg, ("coulomb_nm", "viscous_nm_s_per_rad"), _FRICTION, slice(0, 2))
    for entry in groups if log is not None else ():
        log.info("friction: %s", friction_text(entry))
    return groups


def friction_text(entry: dict) -> str:
    """One summary entry as a line: figures, sources, joints."""
    return _line(entry, _FRICTION, ("Coulomb", "viscous"), ("N*m", "N*m*s/rad"))


def law_summary(cfg, log=None) -> list[dict]:
    """The servo law's damping and armature in use, grouped as :func:`friction_summary`:
    ``{"kd_nm_s_per_rad", "armature_kg_m2", "kd_source", "armature_source", "joints"}`` (the
    run summary's and ``servoloop status``'s ``servo_law``)."""
    groups = _grouped(cfg, ("kd_nm_s_per_rad", "armature_kg_m2"), _LAW, slice(2, 4))
    for entry in groups if log is not None else ():
        log.info("servo law: %s", law_text(entry))
    return groups


def law_text(entry: dict) -> str:
    """One :func:`law_summary` entry as a line: figures, sources, joints."""
    return _line(entry, _LAW, ("damping", "armature"), ("N*m*s/rad", "kg*m^2"))


def print_friction(summary: dict) -> None:
    """``  friction: ...`` and ``  servo law: ...`` lines of a run summary or a status (none
    from an older daemon)."""
    for entry in summary.get("friction") or ():
        print(f"  friction: {friction_text(entry)}")
    for entry in summary.get("servo_law") or ():
        print(f"  servo law: {law_text(entry)}")


def check_friction(s, i: int, where: str, err) -> None:
    """``servos[i].coulomb_friction`` / ``viscous_friction`` / ``position_damping`` /
    ``armature``: finite and >= 0, the Coulomb friction below the servo's stall torque (a
    servo that could not move)."""
    for key, (unit, _) in KEYS.items():
        value = getattr(s, key)
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise err(f"{where}: {key} must be a finite number >= 0 {unit}, got {value!r}", f"servos[{i}].{key}")
    model = _default_model(s.model) if s.coulomb_friction is not None else None
    if model is not None:
        stall = model.stall_torque_at_supply_nm
        if not s.coulomb_friction < stall:
            raise err(f"{where}: coulomb_friction {s.coulomb_friction} N*m is not below the {s.model}'s "
                      f"stall torque ({stall:.3g} N*m): the servo could not move", f"servos[{i}].coulomb_friction")
