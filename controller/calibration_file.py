"""A ``servoloop calibrate`` result (the YAML ``--out`` writes), loaded for the daemon and the
virtual bus: ``servoloop run --calibration FILE`` and ``servoloop virtual-bus --actuator-file FILE``.

A calibration is made at one firmware position gain (``position_p_gain`` on X / MX 2.0, the
compliance slopes on AX / MX 1.0): the stiffness it identified holds at that gain only, so
loading it pins that gain by writing the register at connect, and sets each matching
servo's ``position_stiffness`` (N*m/rad), the servo model that controllers turning torque
into goal offsets use (:mod:`controller.joint_map`), and the gearbox friction the report
identified (:data:`FRICTION_KEYS`: Coulomb from ``calibrate actuator`` / ``fit`` /
``friction``, viscous from ``fit`` and ``friction`` only: the bench's seed-000 law has
none, its ``kd`` holds it) as ``coulomb_friction`` / ``viscous_friction``, and the rest of
the servo law it identified (:data:`LAW_KEYS`: the damping ``kd`` of ``calibrate actuator``
and ``fit pd`` as ``position_damping``, a fit's ``armature``), which the controllers that
invert the servo law use (:mod:`controller.servo_friction`); a figure the report lacks
stays the config's or the model's default.  A report that does not model
the position loop (``calibrate friction``'s: :data:`STIFFNESS_KEYS`) leaves
``position_stiffness`` and the gain alone.
It applies to the servos of the model the report names (``data.servo.model``), or to
every servo when it names none (a simulated bench).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from servoloop.controller.errors import ConfigError

__all__ = ["Calibration", "load_calibration", "apply_calibration", "actuator_overrides", "plant_law",
           "gain_registers", "FRICTION_KEYS", "LAW_KEYS"]

#: config key <- the report's ``params`` that give it (any one; the servo model's field names
#: through ``ServoModel.from_calibration``): bench / ``fit`` ``kc``, BAM-style ``friction_base``,
#: ``calibrate friction``'s ``coulomb`` and ``viscous``
FRICTION_KEYS = {"coulomb_friction": ("kc", "friction_base", "coulomb"),
                 "viscous_friction": ("friction_viscous", "viscous")}
#: config key <- the report's ``params`` for every figure of the servo law a controller
#: inverts (the friction, seed 000's damping ``kd``, the rotor's ``armature``); ``kp`` is the
#: stiffness (:data:`STIFFNESS_KEYS`).  A voltage-drive fit's motor (``kt``, ``R``) is not
#: here: its position loop has no separate k_d (the back EMF damps it)
LAW_KEYS = dict(FRICTION_KEYS, position_damping=("kd",), armature=("armature",))
#: params of a report that models the position loop (seed 000's kp, or a voltage-drive fit's
#: motor, whose P law runs at the pinned gain); one with none of them (``calibrate
#: friction``'s) sets the friction only
STIFFNESS_KEYS = ("kp", "kp_scale", "kp_by_gain", "kt")


def gain_registers(table) -> tuple[str, ...]:
    """Registers that hold the firmware position gain on this model (empty: none)."""
    if "position_p_gain" in table.registers:
        return ("position_p_gain",)
    if "cw_compliance_slope" in table.registers:
        return ("cw_compliance_slope", "ccw_compliance_slope")
    return ()


@dataclass(frozen=True)
class Calibration:
    """What a calibration file says.

    Attributes
    ----------
    path : str, the file
    report : dict, the whole YAML document
    model : str or None, the servo model it was made on (None: any)
    gain : int or None, firmware position gain (raw register value) it was made at
    """

    path: str
    report: dict
    model: str | None
    gain: int | None

    def matches(self, servo_model: str) -> bool:
        """Does it apply to a servo of model ``servo_model``?"""
        if self.model is None:
            return True
        from servoloop.firmware_bridge.control_table import get_table

        return get_table(self.model).name == get_table(servo_model).name

    @property
    def identified_stiffness(self) -> bool:
        """Does the report model the position loop (not only the friction)?"""
        return any(k in (self.report.get("params") or {}) for k in STIFFNESS_KEYS)

    def friction(self, servo_model: str) -> dict[str, float]:
        """``{coulomb_friction: N*m, viscous_friction: N*m*s/rad, position_damping:
        N*m*s/rad, armature: kg*m^2}`` the report identified (:data:`LAW_KEYS`), for a servo
        of ``servo_model`` (a key it has no figure for is left out)."""
        from servoloop.controller.servo_friction import KEYS

        params = self.report.get("params") or {}
        model = self.servo_model(servo_model)
        return {key: float(getattr(model, KEYS[key][1])) for key, names in LAW_KEYS.items()
                if any(params.get(n) is not None for n in names)}

    def servo_model(self, servo_model: str):
        """The :class:`core_cy.actuator.ServoModel` of ``servo_model`` with the calibrated parameters.

        Raises
        ------
        ConfigError
            The report cannot give a model (no ``params``, a ``kp_scale`` without a gain).
        """
        from servoloop.core_cy.actuator import ServoModelError
        from servoloop.core_cy.actuator.model import ServoModel
        from servoloop.virtual_bus.actuator import servo_model_for

        report = self.report
        params = dict(report.get("params") or {})
        by_gain = params.pop("kp_by_gain", None)
        if isinstance(by_gain, dict) and self.gain is not None and str(self.gain) in by_gain:
            params["kp"] = by_gain[str(self.gain)]  # the stiffness at the gain that is pinned
        try:
            return ServoModel.from_calibration(dict(report, params=params), servo_model_for(servo_model),
                                               kp_fw=self.gain)
        except (ServoModelError, ValueError) as exc:
            raise ConfigError(f"calibration: {exc}", self.path) from None


def _gain_of(report: dict) -> int | None:
    """The firmware gain a report was made at: bench per-gain fits first, then fitted logs."""
    fit = report.get("fit") if isinstance(report.get("fit"), dict) else {}
    for row in fit.get("per_gain") or ():
        if isinstance(row, dict) and row.get("gain") is not None:
            return int(round(float(row["gain"])))
    for row in fit.get("logs") or ():
        if isinstance(row, dict) and row.get("kp_fw") is not None:
            return int(round(float(row["kp_fw"])))
    if report.get("gain") is not None:
        return int(round(float(report["gain"])))
    return None


def load_calibration(path) -> Calibration:
    """Read a calibration YAML.

    Raises
    ------
    ConfigError
        Naming the file: missing, not YAML, not a ``servoloop calibrate`` result, an unknown model.
    """
    from servoloop.firmware_bridge.control_table import MODELS, get_table
    from servoloop.firmware_bridge.errors import UnknownModelError

    p = Path(path)
    try:
        report = yaml.safe_load(p.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read the calibration file: {exc.strerror}", str(p)) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"the calibration file is not valid YAML: {exc}", str(p)) from None
    if not isinstance(report, dict) or not isinstance(report.get("params"), dict):
        raise ConfigError("not a `servoloop calibrate` result: it has no 'params' mapping", str(p))
    servo = (report.get("data") or {}).get("servo") if isinstance(report.get("data"), dict) else None
    model = servo.get("model") if isinstance(servo, dict) else None
    if model is not None:
        try:
            get_table(str(model))
        except UnknownModelError:
            raise ConfigError(f"calibration made on an unknown servo model {model!r}; known models: "
                              f"{', '.join(sorted(MODELS))}", str(p)) from None
    return Calibration(str(p), report, None if model is None else str(model), _gain_of(report))


def apply_calibration(cfg, cal: Calibration):
    """``cfg`` with ``position_stiffness``, the pinned gain register and the identified friction
    and law (:data:`LAW_KEYS`) of every matching servo.

    Raises
    ------
    ConfigError
        No servo of the config matches the calibration's model, or its parameters give no model.
    """
    from servoloop.firmware_bridge.control_table import get_table

    servos = []
    hit = 0
    for s in cfg.servos:
        if not cal.matches(s.model):
            servos.append(s)
            continue
        hit += 1
        friction = cal.friction(s.model)
        given = dict(s.friction_from, **{key: f"calibration {cal.path}" for key in friction})
        for key in LAW_KEYS.keys() - friction.keys():
            if getattr(s, key) is None:      # said with the default in use (servo_friction)
                given[key] = f"calibration {cal.path} has none"
        s = replace(s, **friction, friction_from=tuple(given.items()))
        if not cal.identified_stiffness:
            servos.append(s)          # friction only (calibrate friction): the stiffness stays
            continue
        regs = dict(s.registers)
        if cal.gain is not None:
            for name in gain_registers(get_table(s.model)):
                regs[name] = cal.gain
        stiffness = cal.servo_model(s.model).kp_nm_per_rad
        servos.append(replace(s, position_stiffness=float(stiffness), registers=regs))
    if not hit:
        models = sorted({s.model for s in cfg.servos})
        raise ConfigError(f"calibration made on {cal.model}, but the config has no such servo "
                          f"(its models: {', '.join(models)})", cal.path)
    new = replace(cfg, servos=tuple(servos))
    return new.with_overrides()  # checked like the file (a gain out of range names the register)


def actuator_overrides(cal: Calibration, servos) -> dict[int, dict[str, float]]:
    """``{id: {ServoModel field: value}}`` for the virtual bus's emulated servos of a matching model."""
    from dataclasses import fields

    out = {}
    for sid, model in servos:
        if not cal.matches(model):
            continue
        m = cal.servo_model(model)
        out[sid] = {f.name: getattr(m, f.name) for f in fields(m) if f.name != "model"}
    if not out:
        raise ConfigError(f"calibration made on {cal.model}: no emulated servo of that model", cal.path)
    return out


#: config key of :data:`LAW_KEYS` -> the figure of ``RobotPlant.set_servo_law``
PLANT_FIGURES = {"coulomb_friction": "kc", "viscous_friction": "viscous", "position_damping": "kd",
                 "armature": "armature"}


def plant_law(cal: Calibration, servos) -> dict[int, dict[str, float]]:
    """``{bus index: {RobotPlant.set_servo_law figure: value}}``: what the report identified of
    the servo law (its stiffness ``kp``, :data:`LAW_KEYS`), for the contact simulator's servos
    of a matching model (``servos``: [(id, model)], bus order).  Only identified figures: the
    rest (stall torque, the motor line) stays the simulator's model of the servo, which is not
    :func:`actuator_overrides`' independent-servo default.

    Raises
    ------
    ConfigError
        No servo of that model, or the report's parameters give no model.
    """
    params = cal.report.get("params") or {}
    out = {}
    for i, (_, model) in enumerate(servos):
        if not cal.matches(model):
            continue
        law = {PLANT_FIGURES[key]: value for key, value in cal.friction(model).items()}
        if any(params.get(k) is not None for k in ("kp", "kp_scale", "kp_by_gain")):
            law["kp"] = float(cal.servo_model(model).kp_nm_per_rad)
        out[i] = law
    if not out:
        raise ConfigError(f"calibration made on {cal.model}: no emulated servo of that model", cal.path)
    return out
