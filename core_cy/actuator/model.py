"""The one servo model: its parameters (:class:`ServoModel`), SI units in every name.

A position servo's active (motor) torque is seed 000's PD law, or in
velocity / current mode the velocity loop or the torque command,

    demand = kp (q_goal - q) - kd qd          (position)
           = kv (qd_goal - qd)                (velocity)
           = tau_goal                         (current / PWM)

bounded by the DC motor's line at the supply voltage V (the back-EMF limit)
and then by the firmware torque limit:

    -tau_s V/V_r - k_e qd  <=  tau_m  <=  tau_s V/V_r - k_e qd,   |tau_m| <= limit

(``tau_s`` the stall torque at the rated voltage ``V_r`` of the datasheet
figures; a DC motor gives ``kt (V_applied - ke qd) / R`` with
``|V_applied| <= V``, so ``tau_s = kt V_r / R`` and ``k_e = kt ke / R``).
The gearbox adds Coulomb friction ``coulomb_nm`` and viscous friction, torque
on or off; with torque off the drive is open (no motor torque) and the
torque-off damping is added.  ``k_e`` is chosen so that with no load at the
rated voltage the steady speed, friction included, is the datasheet no-load
speed ``w0``: ``tau_s - coulomb - viscous w0 = k_e w0``.

The compiled law is ``core_cy/actuator/_law.pxd`` (used by the simulator,
the virtual bus plant and the bench kernel); its NumPy reference is
:func:`core_cy.actuator.reference.servo_torque_reference`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

__all__ = ["ServoModel", "ServoModelError", "ALIASES"]


class ServoModelError(ValueError):
    """Servo parameters that cannot be used; the message names the field and the source."""


# Short names used by older APIs, override specs (``--actuator 1:kp=9``) and
# calibration reports -> the one field name.
ALIASES = {
    "kp": "kp_nm_per_rad",
    "kd": "kd_nm_s_per_rad",
    "kv": "velocity_gain_nm_s_per_rad",
    "kc": "coulomb_nm",
    "friction_base": "coulomb_nm",
    "stall_torque": "stall_torque_nm",
    "friction_viscous": "viscous_nm_s_per_rad",
    "damping_off": "torque_off_damping_nm_s_per_rad",
    "armature": "armature_kg_m2",
}


@dataclass(frozen=True)
class ServoModel:
    """Parameters of one servo (SI units; see the module docstring for the law).

    Attributes
    ----------
    kp_nm_per_rad : float
        Position stiffness at the factory gain registers, N m/rad.
    kd_nm_s_per_rad : float
        Drive damping while torque is on (position mode), N m s/rad.
    coulomb_nm : float
        Gearbox Coulomb friction, N m (torque on or off).
    stall_torque_nm : float
        Stall torque at ``rated_voltage_v``, N m (datasheet).
    no_load_speed_rad_s : float
        No-load output speed at ``rated_voltage_v``, rad/s (datasheet);
        ``inf``: no back-EMF limit (the active torque saturates at the
        stall torque at any speed).
    rated_voltage_v : float
        Supply voltage the stall torque and no-load speed belong to, V.
    supply_voltage_v : float
        Supply voltage the servo runs at, V (the motor line scales with it).
    viscous_nm_s_per_rad : float
        Gearbox viscous friction, N m s/rad (torque on or off).
    torque_off_damping_nm_s_per_rad : float
        Extra damping with torque off (open drive, gearbox only), N m s/rad.
    armature_kg_m2 : float
        Reflected rotor inertia about the output axis, kg m^2.
    velocity_gain_nm_s_per_rad : float
        Velocity-mode loop gain, N m s/rad; NaN (default): ``10 kd`` (a
        velocity servo ~10x stiffer than the position loop's damping).
    model : str
        Servo model name the parameters describe ("" if none).
    """

    kp_nm_per_rad: float
    kd_nm_s_per_rad: float
    coulomb_nm: float
    stall_torque_nm: float
    no_load_speed_rad_s: float = math.inf
    rated_voltage_v: float = 12.0
    supply_voltage_v: float = 12.0
    viscous_nm_s_per_rad: float = 0.0
    torque_off_damping_nm_s_per_rad: float = 0.0
    armature_kg_m2: float = 0.0
    velocity_gain_nm_s_per_rad: float = math.nan
    model: str = ""

    def __post_init__(self):
        for f in fields(self):
            if f.name == "model":
                continue
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ServoModelError(f"servo parameter {f.name} must be a number, got {v!r}")
            if f.name == "velocity_gain_nm_s_per_rad" and math.isnan(v):
                continue              # 10 kd, see velocity_loop_gain_nm_s_per_rad
            if math.isnan(v) or v < 0 or (math.isinf(v) and f.name != "no_load_speed_rad_s"):
                raise ServoModelError(f"servo parameter {f.name} must be finite and >= 0, got {v!r}")
            object.__setattr__(self, f.name, float(v))
        for name in ("stall_torque_nm", "no_load_speed_rad_s", "rated_voltage_v", "supply_voltage_v"):
            if not getattr(self, name) > 0:
                raise ServoModelError(f"servo parameter {name} must be > 0, got {getattr(self, name)!r}")
        if self.coulomb_nm >= self.stall_torque_nm:
            raise ServoModelError(f"servo parameter coulomb_nm ({self.coulomb_nm}) must be below "
                                  f"stall_torque_nm ({self.stall_torque_nm}): the servo could not move")
        if math.isfinite(self.no_load_speed_rad_s) and not self.back_emf_nm_s_per_rad > 0:
            raise ServoModelError(
                f"servo parameters: viscous_nm_s_per_rad ({self.viscous_nm_s_per_rad}) is too large "
                f"for the no-load speed ({self.no_load_speed_rad_s} rad/s at {self.stall_torque_nm} "
                f"N m stall): friction alone would stop the motor below it")

    # ---------------------------------------------------------------- derived
    @property
    def velocity_loop_gain_nm_s_per_rad(self) -> float:
        """Velocity-mode loop gain in use, N m s/rad (``10 kd`` unless set)."""
        kv = self.velocity_gain_nm_s_per_rad
        return 10.0 * self.kd_nm_s_per_rad if math.isnan(kv) else kv

    @property
    def voltage_ratio(self) -> float:
        """Supply over rated voltage (the motor line scales with it), dimensionless."""
        return self.supply_voltage_v / self.rated_voltage_v

    @property
    def stall_torque_at_supply_nm(self) -> float:
        """Stall torque at the supply voltage, N m."""
        return self.stall_torque_nm * self.voltage_ratio

    @property
    def back_emf_nm_s_per_rad(self) -> float:
        """Slope k_e of the motor line, N m s/rad (0: no back-EMF limit).

        Chosen so that at the rated voltage with no load the steady speed,
        friction included, is the datasheet no-load speed.
        """
        w0 = self.no_load_speed_rad_s
        if math.isinf(w0):
            return 0.0
        return (self.stall_torque_nm - self.coulomb_nm) / w0 - self.viscous_nm_s_per_rad

    @property
    def no_load_speed_at_supply_rad_s(self) -> float:
        """Steady unloaded speed at the supply voltage, rad/s (inf: unlimited)."""
        slope = self.back_emf_nm_s_per_rad + self.viscous_nm_s_per_rad
        if slope <= 0:
            return math.inf
        return max(self.stall_torque_at_supply_nm - self.coulomb_nm, 0.0) / slope

    def natural_frequency(self, inertia_kg_m2: float) -> float:
        """sqrt(kp / I) of the position loop with total inertia I [kg m^2], rad/s."""
        return math.sqrt(self.kp_nm_per_rad / inertia_kg_m2)

    def damping_ratio(self, inertia_kg_m2: float) -> float:
        """kd / (2 sqrt(kp I)) of the position loop, dimensionless."""
        return self.kd_nm_s_per_rad / (2.0 * math.sqrt(self.kp_nm_per_rad * inertia_kg_m2))

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_datasheet(cls, datasheet, kp_nm_per_rad: float, kd_nm_s_per_rad: float,
                       coulomb_nm: float, model: str = "", **extra) -> ServoModel:
        """Gains plus a datasheet's motor figures (``firmware_bridge.control_table.Datasheet``).

        The supply voltage defaults to the figures' voltage; ``extra`` sets
        any other field.
        """
        values = dict(stall_torque_nm=datasheet.stall_torque_nm,
                      no_load_speed_rad_s=datasheet.no_load_speed_rad_s,
                      rated_voltage_v=datasheet.voltage_v, supply_voltage_v=datasheet.voltage_v)
        values.update(extra)
        return cls(kp_nm_per_rad=kp_nm_per_rad, kd_nm_s_per_rad=kd_nm_s_per_rad,
                   coulomb_nm=coulomb_nm, model=model, **values)

    def to_dict(self) -> dict:
        """Plain dict of every field (``no_load_speed_rad_s`` inf stays inf)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict, where: str = "servo model") -> ServoModel:
        """From a dict of field names (or :data:`ALIASES`); unknown keys are an error naming them.

        ``no_load_speed_rad_s: null`` means no back-EMF limit.
        """
        if not isinstance(data, dict):
            raise ServoModelError(f"{where}: expected a mapping of servo parameters, got {type(data).__name__}")
        values = _canonical(data, where)
        if values.get("no_load_speed_rad_s", 0.0) is None:
            values["no_load_speed_rad_s"] = math.inf
        missing = [name for name in _REQUIRED if name not in values]
        if missing:
            raise ServoModelError(f"{where}: missing servo parameter(s) {missing}")
        try:
            return cls(**values)
        except ServoModelError as e:
            raise ServoModelError(f"{where}: {e}") from None

    def with_overrides(self, overrides: dict | None, where: str = "servo overrides") -> ServoModel:
        """A copy with fields replaced (field names or :data:`ALIASES`)."""
        if not overrides:
            return self
        try:
            return replace(self, **_canonical(overrides, where))
        except ServoModelError as e:
            raise ServoModelError(f"{where}: {e}") from None

    @classmethod
    def from_calibration(cls, report, base: ServoModel, kp_fw: float | None = None) -> ServoModel:
        """``base`` with the parameters a ``servoloop calibrate`` report identified.

        Parameters
        ----------
        report : dict or path
            The report (``calibrate actuator --out`` or ``calibrate fit --out``
            YAML, or its dict): its ``params`` are read.
        base : ServoModel
            The model's defaults; fields the report does not identify stay.
        kp_fw : float, optional
            Firmware position gain to evaluate a ``kp_scale`` fit at (the
            report's own gain otherwise needed).

        Notes
        -----
        ``kp``/``kp_scale``, ``kd``, ``kc``/``friction_base``/``coulomb``,
        ``friction_viscous``/``viscous`` and ``armature`` map one to one;
        ``torque_limit`` (the bench's identified saturation) becomes the
        stall torque at the base's supply voltage; a voltage-drive fit's
        ``kt`` and ``R`` give the motor line (stall ``kt V / R`` and slope
        ``kt ke / R``, ``ke = back_emf`` or ``kt``).  Parameters this model
        has no place for (``q_offset``, ``command_delay``, load-dependent
        friction, ...) are left out.
        """
        where = "calibration report"
        if not isinstance(report, dict):
            where = str(report)
            report = _read_yaml(report)
        params = report.get("params") if isinstance(report, dict) else None
        if not isinstance(params, dict):
            raise ServoModelError(f"{where}: no 'params' mapping (is it a servoloop calibrate report?)")
        out = {}
        if "kp" in params:
            out["kp_nm_per_rad"] = params["kp"]
        elif "kp_scale" in params:
            if kp_fw is None:
                raise ServoModelError(f"{where}: kp_scale needs the firmware gain kp_fw to give kp")
            out["kp_nm_per_rad"] = params["kp_scale"] * kp_fw
        for key in ("kd", "kc", "friction_base", "friction_viscous", "armature"):
            if key in params:
                out[ALIASES[key]] = params[key]
        for key, name in _FRICTION_REPORT.items():     # ``calibrate friction``'s curve
            if params.get(key) is not None:
                out[name] = params[key]
        stall, emf = None, None
        base_emf = base.back_emf_nm_s_per_rad
        if "torque_limit" in params and params["torque_limit"] is not None:
            stall = params["torque_limit"] / base.voltage_ratio
        if "kt" in params and "R" in params:
            stall = params["kt"] * base.rated_voltage_v / params["R"]
            emf = params["kt"] * params.get("back_emf", params["kt"]) / params["R"]
        try:
            model = base.with_overrides(out, where)
            if stall is not None:
                if emf is None:
                    emf = base_emf
                w0 = math.inf if emf <= 0 else (stall - model.coulomb_nm) / (emf + model.viscous_nm_s_per_rad)
                model = replace(model, stall_torque_nm=stall, no_load_speed_rad_s=w0)
        except (ServoModelError, TypeError) as e:
            raise ServoModelError(f"{where}: {e}") from None
        return model


#: ``servoloop calibrate friction``'s report params (its Stribeck bump has no place here)
_FRICTION_REPORT = {"coulomb": "coulomb_nm", "viscous": "viscous_nm_s_per_rad"}
_REQUIRED = ("kp_nm_per_rad", "kd_nm_s_per_rad", "coulomb_nm", "stall_torque_nm")
_FIELDS = {f.name for f in fields(ServoModel)}


def _canonical(data: dict, where: str) -> dict:
    """Field names for aliases; unknown keys raise naming them and the known ones."""
    out = {}
    for key, value in data.items():
        name = ALIASES.get(key, key)
        if name not in _FIELDS:
            raise ServoModelError(f"{where}: unknown servo parameter {key!r}; known: "
                                  f"{', '.join(sorted(_FIELDS | set(ALIASES)))}")
        if name in out:
            raise ServoModelError(f"{where}: {key!r} gives {name} twice")
        if name != "model" and value is not None and not isinstance(value, (int, float)):
            raise ServoModelError(f"{where}: {key} must be a number, got {value!r}")
        out[name] = value
    return out


def _read_yaml(path) -> dict:
    import yaml

    try:
        with open(Path(path)) as f:
            doc = yaml.safe_load(f)
    except OSError as e:
        raise ServoModelError(f"{path}: cannot read the calibration report ({e.strerror})") from None
    except yaml.YAMLError as e:
        raise ServoModelError(f"{path}: not YAML ({e})") from None
    if not isinstance(doc, dict):
        raise ServoModelError(f"{path}: expected a mapping, got {type(doc).__name__}")
    return doc
