"""Actuator models of increasing richness, as parameter sets over one kernel.

Every model maps a dict of named physical parameters plus one recording
(its firmware gain, supply voltage, load) to the parameter vector of
:mod:`core_cy.actuator.layout`.  One parameter set serves every firmware
gain: the firmware gain enters through a fixed or fitted gain scale.

Models
------
seed000
    Seed 000's actuator: ``tau = kp (q_goal - q) - kd qd - kc sgn(qd)`` with
    ``kp = kp_scale * kp_fw`` (one scale across firmware gains); no armature.
pd
    seed000 + armature, viscous friction (also with torque off) and a torque
    limit.
m1 ... m6
    BAM's models (Rhoban/bam, ICRA 2025) exactly: firmware P law -> duty ->
    ``V = vin * duty`` with the nominal ``vin`` of the log -> DC motor with
    back-EMF; friction budget M1 Coulomb-viscous, M2 + Stribeck, M3 + load,
    M4 Stribeck + load, M5 directional load, M6 + quadratic.
v3, v6
    Ours: BAM's m3 / m6 driven by the *recorded* supply voltage (it sags by
    up to 1.5 V at firmware gain 400, which with the PWM limit caps the
    torque), low-passed over 0.2 s (the register is read at 0.1 V
    resolution in the middle of PWM ripple; 0.05-1 s all cross-validate
    within noise, 0.2 s best); the firmware current limit at the XL330
    control-table default 1.75 A, as BAM's own XL330 actuator has it (the
    e-Manual documents Current Limit(38) for the current-based modes only; the
    cross-validated MAE is within noise either way); the motor's kt and R
    fixed at the datasheet stall point (XL330-M288-T: 0.60 N*m at 6.0 V and
    1.74 A, so kt = 0.345 N*m/A, R = 3.45 ohm) rather than fitted: a fit on
    one firmware gain otherwise trades kt/R against friction in ways that do
    not carry to another gain (cross-validated MAE 39 -> 31 mrad); a fitted
    command delay (bus + firmware latency) and a duty offset (dead-zone
    compensation, which does not scale with the gain).  ``drive_asymmetry``
    and ``back_emf`` exist but are not in the default set (they did not help
    across gains).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from servoloop.core_cy.actuator import ServoModel
from servoloop.core_cy.actuator import layout as L

__all__ = ["ModelSpec", "MODELS", "get_model", "XL330_ERROR_GAIN", "BAM_XL330_PUBLISHED", "XL330_DATASHEET_MOTOR",
           "to_servo_model", "servo_model_vector"]

# BAM's XL330 conversion: duty = kp_fw * err_rad * (4096/2pi) / (256 * 885)
XL330_ERROR_GAIN = (4096.0 / (2.0 * math.pi)) / (256.0 * 885.0)

# Rhoban/bam bam/params/xl330/{m1,m3,m6}.json (commit 11bb7ec), for the
# published-parameter baseline.
BAM_XL330_PUBLISHED = {
    "m1": {"kt": 0.37005152119117146, "R": 3.498349797205021, "armature": 0.0019898151031250474,
           "q_offset": -0.0017672434168936602, "friction_base": 0.01821167858833861,
           "friction_viscous": 0.005902005392322235},
    "m3": {"kt": 0.2914666127989648, "R": 2.0000000000177396, "armature": 0.002596131287992887,
           "q_offset": 0.015547202120246767, "friction_base": 0.002319691753871906,
           "load_friction_base": 0.26407734798146426, "friction_viscous": 0.016903883836368913},
    "m6": {"kt": 0.28638649600668775, "R": 2.000017119760972, "armature": 0.002569774737524995,
           "q_offset": 0.01553585638800363, "friction_base": 0.0023258418670152347,
           "friction_stribeck": 0.0001856264715700908, "load_friction_motor": 0.23063000784446322,
           "load_friction_external": 0.26077932692372613,
           "load_friction_motor_stribeck": 1.9157733081388423e-06,
           "load_friction_external_stribeck": 0.15158776983752117,
           "load_friction_motor_quad": 0.005595958708218643,
           "load_friction_external_quad": 0.0037747149629857673,
           "dtheta_stribeck": 0.11532863880939243, "alpha": 1.000022697315946,
           "friction_viscous": 0.0185448141303962},
}

# name: (initial, lower, upper) -- BAM's Parameter ranges where BAM has one
_RANGES = {
    "kp_scale": (0.02, 1e-4, 1.0),       # N*m/rad per firmware unit
    "kp": (5.0, 0.01, 200.0),            # N*m/rad at the recorded gain (bench experiment)
    "kd": (0.1, 0.0, 5.0),
    "kc": (0.02, 0.0, 0.5),
    "torque_limit": (1.0, 0.05, 10.0),
    "kt": (0.35, 0.1, 3.0),
    "R": (2.5, 0.5, 10.0),
    "armature": (0.002, 0.0, 0.05),
    "q_offset": (0.0, -0.1, 0.1),
    "friction_base": (0.01, 0.0, 0.2),
    "friction_stribeck": (0.01, 0.0, 0.2),
    "load_friction_base": (0.2, 0.0, 0.5),
    "load_friction_stribeck": (0.05, 0.0, 1.0),
    "load_friction_motor": (0.2, 0.0, 0.5),
    "load_friction_external": (0.2, 0.0, 0.5),
    "load_friction_motor_stribeck": (0.05, 0.0, 1.0),
    "load_friction_external_stribeck": (0.05, 0.0, 1.0),
    "load_friction_motor_quad": (0.001, 0.0, 0.01),
    "load_friction_external_quad": (0.001, 0.0, 0.01),
    "dtheta_stribeck": (0.2, 0.01, 3.0),
    "alpha": (1.35, 1.0, 10.0),
    "friction_viscous": (0.01, 0.0, 1.0),
    "gain_scale": (1.0, 0.3, 3.0),       # x BAM's XL330 error gain
    "command_delay": (0.005, 0.0, 0.05),  # s
    "max_current": (1.75, 0.3, 5.0),      # A
    "drive_asymmetry": (0.0, -0.5, 0.5),  # motor torque x (1 + a sgn(tau))
    "duty_offset": (0.02, 0.0, 0.3),      # duty floor (dead-zone compensation)
    "gain_exponent": (1.0, 0.5, 1.2),     # effective gain ~ kp_fw^beta
    "reading_noise_ticks": (0.3, 0.05, 2.0),  # encoder reading noise before rounding
    "back_emf": (0.4, 0.1, 3.0),          # V*s/rad
}

_M1 = ["kt", "R", "armature", "q_offset", "friction_base", "friction_viscous"]
_STRIBECK = ["friction_stribeck", "dtheta_stribeck", "alpha"]


@dataclass(frozen=True)
class ModelSpec:
    """One actuator model: its free parameters and how they fill the kernel vector.

    Attributes
    ----------
    name : str
    drive : str
        "pd" (seed 000 torque law) or "voltage" (BAM's DC motor drive).
    free : tuple of str
        Fitted parameter names (see ``_RANGES`` for units and bounds).
    fixed : dict
        Parameters held at a value.
    recorded_voltage : bool
        Drive with the logged supply voltage instead of the nominal one.
    """

    name: str
    drive: str
    free: tuple
    fixed: dict = field(default_factory=dict)
    recorded_voltage: bool = False
    voltage_filter_s: float = 0.0
    doc: str = ""

    def bounds(self):
        lo = np.array([_RANGES[k][1] for k in self.free])
        hi = np.array([_RANGES[k][2] for k in self.free])
        return lo, hi

    def initial(self, start: dict | None = None) -> dict:
        """Initial values of the free parameters (``start`` overrides, clipped to bounds)."""
        out = {}
        for k in self.free:
            v = _RANGES[k][0] if not start or k not in start else start[k]
            out[k] = float(np.clip(v, _RANGES[k][1], _RANGES[k][2]))
        return out

    def values(self, params: dict) -> dict:
        """All parameters: fixed, then defaults, then ``params``."""
        out = {"command_delay": 0.0, "q_offset": 0.0}
        out.update(self.fixed)
        out.update({k: v for k, v in params.items()})
        return out

    def vector(self, params: dict, kp_fw: float) -> np.ndarray:
        """Kernel parameter vector (NP,) for one firmware gain."""
        v = self.values(params)
        p = np.zeros(L.NP)
        p[L.P_KP_FW] = kp_fw
        p[L.P_SUBSTEPS] = v.get("substeps", 1)
        p[L.P_ASYM] = v.get("drive_asymmetry", 0.0)
        p[L.P_DUTY0] = v.get("duty_offset", 0.0)
        p[L.P_DUTY0_ERR] = v.get("duty_offset_err", 0.003)
        beta = v.get("gain_exponent", 1.0)
        if beta != 1.0:
            # effective gain ~ kp_fw^beta, equal to kp_fw at 100
            p[L.P_KP_FW] = 100.0 * (kp_fw / 100.0) ** beta
        p[L.P_VS] = 1.0
        p[L.P_ALPHA] = 1.0
        p[L.P_MAX_CURRENT] = v.get("max_current", math.inf)
        p[L.P_ARMATURE] = v.get("armature", 0.0)
        p[L.P_Q_OFFSET] = v.get("q_offset", 0.0)
        p[L.P_VISC] = v.get("friction_viscous", 0.0)
        if self.drive == "pd":
            p[L.P_MODE] = L.MODE_PD
            if "kp" in v:  # one gain: kp itself, the firmware value does not enter
                p[L.P_KP_FW] = 1.0
                p[L.P_GAIN] = v["kp"]
            else:
                p[L.P_GAIN] = v["kp_scale"]
            p[L.P_KD] = v["kd"]
            p[L.P_LIMIT] = v.get("torque_limit", math.inf)
            p[L.P_FB] = v["kc"]
            return p
        p[L.P_MODE] = L.MODE_VOLTAGE
        p[L.P_GAIN] = XL330_ERROR_GAIN * v.get("gain_scale", 1.0)
        p[L.P_LIMIT] = v.get("max_pwm", 1.0)
        p[L.P_KT] = v["kt"]
        p[L.P_KE] = v.get("back_emf", v["kt"])
        p[L.P_R] = v["R"]
        p[L.P_FB] = v.get("friction_base", 0.0)
        p[L.P_FS] = v.get("friction_stribeck", 0.0)
        lfb = v.get("load_friction_base", 0.0)
        lfs = v.get("load_friction_stribeck", 0.0)
        p[L.P_LFM] = v.get("load_friction_motor", lfb)
        p[L.P_LFE] = v.get("load_friction_external", lfb)
        p[L.P_LFMS] = v.get("load_friction_motor_stribeck", lfs)
        p[L.P_LFES] = v.get("load_friction_external_stribeck", lfs)
        p[L.P_LFMQ] = v.get("load_friction_motor_quad", 0.0)
        p[L.P_LFEQ] = v.get("load_friction_external_quad", 0.0)
        p[L.P_VS] = v.get("dtheta_stribeck", 1.0)
        p[L.P_ALPHA] = v.get("alpha", 1.0)
        return p


_M3 = _M1 + ["load_friction_base"]
_M4 = _M3 + _STRIBECK + ["load_friction_stribeck"]
_M5 = _M1 + _STRIBECK + ["load_friction_motor", "load_friction_external",
                          "load_friction_motor_stribeck", "load_friction_external_stribeck"]
_M6 = _M5 + ["load_friction_motor_quad", "load_friction_external_quad"]
_OURS = ["command_delay", "duty_offset"]
# XL330-M288-T datasheet stall point (ROBOTIS e-Manual): 0.60 N*m at 6.0 V, 1.74 A
XL330_DATASHEET_MOTOR = {"kt": 0.60 / 1.74, "R": 6.0 / 1.74}
_XL330_FIXED = dict(XL330_DATASHEET_MOTOR, max_current=1.75)

MODELS = {
    "seed000": ModelSpec("seed000", "pd", ("kp_scale", "kd", "kc"), doc="seed 000, one kp scale"),
    "pd": ModelSpec("pd", "pd", ("kp_scale", "kd", "kc", "armature", "friction_viscous", "torque_limit", "q_offset")),
    # the bench experiment at one firmware gain: seed 000's law + stall saturation + latency
    "bench": ModelSpec("bench", "pd", ("kp", "kd", "kc", "torque_limit", "command_delay"),
                       {"substeps": 2}),
    "m1": ModelSpec("m1", "voltage", tuple(_M1)),
    "m2": ModelSpec("m2", "voltage", tuple(_M1 + _STRIBECK)),
    "m3": ModelSpec("m3", "voltage", tuple(_M3)),
    "m4": ModelSpec("m4", "voltage", tuple(_M4)),
    "m5": ModelSpec("m5", "voltage", tuple(_M5)),
    "m6": ModelSpec("m6", "voltage", tuple(_M6)),
    "v3": ModelSpec("v3", "voltage", tuple(k for k in _M3 + _OURS if k not in _XL330_FIXED),
                    dict(_XL330_FIXED), recorded_voltage=True, voltage_filter_s=0.2),
    "v6": ModelSpec("v6", "voltage", tuple(k for k in _M6 + _OURS if k not in _XL330_FIXED),
                    dict(_XL330_FIXED), recorded_voltage=True, voltage_filter_s=0.2),
}


def get_model(name: str) -> ModelSpec:
    """Model by name; ValueError naming the known ones otherwise."""
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}") from None


def to_servo_model(params: dict, base: ServoModel, kp_fw: float | None = None) -> ServoModel:
    """Fitted parameters (a fit's ``params``) loaded into ``base``: see ``ServoModel.from_calibration``."""
    return ServoModel.from_calibration({"params": dict(params)}, base, kp_fw=kp_fw)


def servo_model_vector(model: ServoModel, torque_limit_nm: float = math.inf) -> np.ndarray:
    """The bench kernel's parameter vector (NP,) of a :class:`ServoModel` (``MODE_PD``, one gain).

    ``vin`` of the simulation is then the supply voltage: pass
    ``model.supply_voltage_v`` to :func:`core_cy.actuator.simulate`.
    """
    p = np.zeros(L.NP)
    p[L.P_MODE] = L.MODE_PD
    p[L.P_KP_FW], p[L.P_GAIN] = 1.0, model.kp_nm_per_rad
    p[L.P_KD] = model.kd_nm_s_per_rad
    p[L.P_LIMIT] = min(torque_limit_nm, model.stall_torque_at_supply_nm)
    p[L.P_FB] = model.coulomb_nm
    p[L.P_VISC] = model.viscous_nm_s_per_rad
    p[L.P_ARMATURE] = model.armature_kg_m2
    p[L.P_STALL] = model.stall_torque_nm
    p[L.P_EMF] = model.back_emf_nm_s_per_rad
    p[L.P_V_RATED] = model.rated_voltage_v
    p[L.P_OFF_DAMP] = model.torque_off_damping_nm_s_per_rad
    p[L.P_VS], p[L.P_ALPHA], p[L.P_SUBSTEPS] = 1.0, 1.0, 1
    p[L.P_MAX_CURRENT] = math.inf
    return p
