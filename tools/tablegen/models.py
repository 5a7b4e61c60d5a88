"""The models generated from ROBOTIS ``.model`` files, with their datasheet figures.

Datasheet figures: the e-Manual Specifications table of each model
(``https://emanual.robotis.com/docs/en/dxl/<series>/<model>/``), read in the
page text.  ``voltage_v`` is the supply voltage the stall torque, stall
current and no-load speed belong to: the recommended voltage when the page
gives figures there, else the listed voltage closest to it.

Rules where a figure is not published:

- DYNAMIXEL-P pages give no stall torque / stall current, only the no-load
  speed w0, no-load current I0 and a continuous point (speed wc, torque Tc,
  current Ic).  Rule: the straight motor line through (w0, 0) and (wc, Tc),
  stall torque = Tc * w0 / (w0 - wc); stall current on the straight
  current-torque line through (0, I0) and (Tc, Ic).  These extrapolations
  are far above what the drive delivers (its Current Limit caps it), so
  these models are marked ``not_emulated``.
- DYNAMIXEL-Y and PM42-010: no figures were taken (``unpublished``): the
  tables carry no datasheet block and the models are not emulated.

Family parameters of the X template (current unit, Current Limit, Velocity
Limit, voltage limits, gains) follow the family's e-Manual control table;
Current Limit and Velocity Limit defaults are raised where needed so that
they do not cut below the datasheet stall current / no-load speed.
"""

from __future__ import annotations

import math

__all__ = ["MODELS", "HANDMADE_MODEL_FILES"]

E = "https://emanual.robotis.com/docs/en/dxl/"
RPM_UNIT = 0.229

# The twelve hand-made tables take their Indirect blocks from these files.
# XL330: the pre-52 firmware layout (Indirect Data at 224), the firmware the
# virtual bus reports (48); firmware 52+ moved it to 208 (``*_fw52.model``).
HANDMADE_MODEL_FILES = {
    "XM430-W350": ("xm430_w350.model", "X"), "XM540-W270": ("xm540_w270.model", "X"),
    "XL430-W250": ("xl430_w250.model", "X"), "XL330-M288": ("xl330_m288.model", "X330"),
    "MX-28(2.0)": ("mx_28.model", "X"), "MX-64(2.0)": ("mx_64.model", "X"),
    "MX-106(2.0)": ("mx_106.model", "X"),
}


def _ds(page, v, rec, torque, current, rpm, gear, notes=()):
    return {"source": E + page, "voltage_v": v, "recommended_voltage_v": rec, "stall_torque_nm": torque,
            "stall_current_a": current, "no_load_speed_rpm": rpm, "gear_ratio": gear, "notes": list(notes)}


def _pro(page, w0, i0, wc, tc, ic, gear):
    """DYNAMIXEL-P figures at 24 V by the straight-line rule of the module docstring."""
    stall = round(tc * w0 / (w0 - wc), 1)
    current = round(i0 + (ic - i0) * stall / tc, 1)
    return _ds(page, 24.0, 24.0, stall, current, w0, gear, [
        "DYNAMIXEL-P: stall torque/current not published; extrapolated from the continuous point",
        f"({wc} rev/min, {tc} N m, {ic} A) and no-load ({w0} rev/min, {i0} A) on straight lines."])


def _unpublished(page, why):
    # the figure keys only fill the lines write() then replaces by the "unpublished" note
    return {"source": E + page, "unpublished": why, "voltage_v": 0.0, "recommended_voltage_v": 0.0,
            "no_load_speed_rpm": 0.0, "gear_ratio": 0.0}


# X template parameter sets (per family; the e-Manual control tables)
_XM = dict(current_unit_a=0.00269, current_limit=1193, velocity_limit=(330, 1023), temperature_limit=80,
           voltage=(160, 95), voltage_range=(95, 160), gains=(1920, 100, 0, 0, 800))
_X540 = dict(_XM, current_limit=2047, velocity_limit=(128, 1023))
_XH430W = dict(_XM, current_limit=648, velocity_limit=(210, 1023))
_XH430V = dict(_XM, current_unit_a=0.00134, current_limit=689, velocity_limit=(210, 1023),
               voltage=(300, 150), voltage_range=(150, 300))
_XH540V = dict(_X540, voltage=(300, 150), voltage_range=(150, 300))
_XC430 = dict(current_unit_a=None, current_limit=None, velocity_limit=(265, 1023), temperature_limit=80,
              voltage=(140, 60), voltage_range=(60, 140), gains=(1000, 100, 4000, 0, 640), drive_max=13)
_X330M = dict(current_unit_a=0.001, current_limit=1750, velocity_limit=(445, 2047), temperature_limit=70,
              voltage=(70, 35), voltage_range=(31, 70), gains=(1600, 180, 0, 0, 400))
_X330T = dict(_X330M, current_limit=910, voltage=(140, 60), voltage_range=(31, 140))


def _x(name, file, family, params, ds, **kw):
    p = dict(params)
    if p.get("current_unit_a"):
        # Current Limit never below the stall current (else it, not the motor, would set the stall torque)
        p["current_limit"] = max(p["current_limit"], math.ceil(ds["stall_current_a"] / p["current_unit_a"]))
    need = math.ceil(ds["no_load_speed_rpm"] / RPM_UNIT)
    d, hi = p["velocity_limit"]
    p["velocity_limit"] = (max(d, need), max(hi, need))
    return {"name": name, "file": file, "family": family, "params": p, "datasheet": ds, **kw}


_P_NOTE = ("DYNAMIXEL-P layout (RAM from 512, RGB LED, 1 mA / 0.01 rev/min units, stall current beyond "
           "the int16 Present Current) is not emulated by the virtual bus yet")
_Y_NOTE = ("DYNAMIXEL-Y layout (Error Code instead of Hardware Error Status, inverter/motor temperatures, "
           "electronic gear ratio) is not emulated by the virtual bus yet, and no datasheet figures are here")


def _p(name, file, res, vel_limit, ds, **kw):
    return {"name": name, "file": file, "family": "P", "datasheet": ds, "not_emulated": _P_NOTE,
            "params": {"resolution": res, "velocity_limit": vel_limit}, **kw}


def _y(size, variant):
    code = f"ym{size}_{'210' if size == '070' else '230'}_{variant}"
    name = code.upper().replace("_", "-")
    return {"name": name, "file": code + ".model", "family": "Y", "not_emulated": _Y_NOTE,
            "params": {"resolution": 524288, "velocity_limit": None},
            "datasheet": _unpublished(f"y/{name.lower()}/", "figures not taken (see tools/tablegen/models.py)")}


MODELS = [
    _x("XL330-M077", "xl330_m077.model", "X330", _X330M, _ds("x/xl330-m077/", 5.0, 5.0, 0.215, 1.47, 383, 77.5)),
    _x("XC330-M181", "xc330_m181.model", "X330", _X330M, _ds("x/xc330-m181/", 5.0, 5.0, 0.60, 1.80, 129, 180.62)),
    _x("XC330-M288", "xc330_m288.model", "X330", _X330M, _ds("x/xc330-m288/", 5.0, 5.0, 0.93, 1.80, 81, 288.35)),
    _x("XC330-T181", "xc330_t181.model", "X330", _X330T,
       _ds("x/xc330-t181/", 12.0, 11.1, 0.80, 0.88, 113, 180.62)),
    _x("XC330-T288", "xc330_t288.model", "X330", _X330T,
       _ds("x/xc330-t288/", 12.0, 11.1, 1.00, 0.88, 71, 288.35)),
    _x("XC430-W150", "xc430_w150.model", "X", _XC430, _ds("x/xc430-w150/", 12.0, 12.0, 1.6, 1.4, 106, 159.59),
       aliases=["XC430-T150BB"],
       notes=["XC430-T150BB (ball-bearing version) reports the same model number 1070 and table."]),
    _x("XC430-W240", "xc430_w240.model", "X", _XC430, _ds("x/xc430-w240/", 12.0, 12.0, 1.9, 1.4, 70, 245.22),
       aliases=["XC430-T240BB"],
       notes=["XC430-T240BB (ball-bearing version) reports the same model number 1080 and table."]),
    _x("2XL430-W250", "2xl430_w250.model", "X", dict(_XC430, temperature_limit=72),
       _ds("x/2xl430-w250/", 12.0, 11.1, 1.5, 1.4, 61, 257.4),
       notes=["Two axes, each its own ID and control table (this one)."]),
    _x("2XC430-W250", "2xc430_w250.model", "X", _XC430, _ds("x/2xl430-w250/", 12.0, 11.1, 1.5, 1.4, 61, 257.4,
       ["2XC430-W250: figures of the 2XL430-W250 (same motor and gear ratio); its own page was not read."]),
       notes=["Two axes, each its own ID and control table (this one)."]),
    _x("XM430-W210", "xm430_w210.model", "X", _XM, _ds("x/xm430-w210/", 12.0, 12.0, 3.0, 2.3, 77, 212.6)),
    _x("XM540-W150", "xm540_w150.model", "X", _X540, _ds("x/xm540-w150/", 12.0, 12.0, 7.3, 4.4, 53, 152.3)),
    _x("XH430-W210", "xh430_w210.model", "X", _XH430W, _ds("x/xh430-w210/", 12.0, 12.0, 2.8, 1.3, 46, 212.6)),
    _x("XH430-W350", "xh430_w350.model", "X", _XH430W, _ds("x/xh430-w350/", 12.0, 12.0, 3.4, 1.3, 30, 353.5)),
    _x("XH430-V210", "xh430_v210.model", "X", _XH430V, _ds("x/xh430-v210/", 24.0, 24.0, 2.6, 0.7, 52, 212.6)),
    _x("XH430-V350", "xh430_v350.model", "X", _XH430V, _ds("x/xh430-v350/", 24.0, 24.0, 3.3, 0.7, 31, 353.5)),
    _x("XH540-W150", "xh540_w150.model", "X", _X540, _ds("x/xh540-w150/", 12.0, 12.0, 7.3, 4.4, 53, 152.3)),
    _x("XH540-W270", "xh540_w270.model", "X", _X540, _ds("x/xh540-w270/", 12.0, 12.0, 10.6, 4.4, 30, 272.5)),
    _x("XH540-V150", "xh540_v150.model", "X", _XH540V, _ds("x/xh540-v150/", 24.0, 24.0, 6.4, 2.4, 60, 152.3)),
    _x("XH540-V270", "xh540_v270.model", "X", _XH540V, _ds("x/xh540-v270/", 24.0, 24.0, 9.2, 2.4, 34, 272.5)),
    _x("XW540-T140", "xw540_t140.model", "X", _X540, _ds("x/xw540-t140/", 12.0, 12.0, 6.9, 4.9, 72, 145.6)),
    _x("XW540-T260", "xw540_t260.model", "X", _X540, _ds("x/xw540-t260/", 12.0, 12.0, 9.5, 4.9, 40, 260.6)),
    {"name": "XL-320", "file": "xl320.model", "family": "XL320", "params": {},
     "datasheet": _ds("x/xl320/", 7.4, 7.4, 0.39, 1.1, 114, 238.0),
     "notes": ["Protocol 2.0 with an AX-like layout: position 0..1023 over 300 deg, speeds and load",
               "sign-magnitude (bit 10); Control Mode(11) 1 = wheel, 2 = joint; no Indirect registers."]},
    _p("PH54-200-S500-R", "ph54_200_s500.model", 1003846, 3310,
       _pro("p/ph54-200-s500-r/", 33.1, 1.65, 29.0, 44.7, 9.3, 501.923)),
    _p("PH54-100-S500-R", "ph54_100_s500.model", 1003846, 3330,
       _pro("p/ph54-100-s500-r/", 33.3, 1.13, 29.2, 25.3, 5.5, 501.923)),
    _p("PH42-020-S300-R", "ph42_020_s300.model", 607500, 3270,
       _pro("p/ph42-020-s300-r/", 32.7, 0.57, 29.2, 5.1, 1.5, 303.75)),
    _p("PM54-060-S250-R", "pm54_060_s250.model", 502834, 3310,
       _pro("p/pm54-060-s250-r/", 33.1, 1.25, 28.3, 10.1, 3.0, 251.417)),
    _p("PM54-040-S250-R", "pm54_040_s250.model", 502834, 2840,
       _pro("p/pm54-040-s250-r/", 28.4, 1.32, 24.2, 3.9, 1.9, 251.417)),
    _p("PM42-010-S260-R", "pm42_010_s260.model", 526374, None,
       _unpublished("p/pm42-010-s260-r/", "figures not taken (see tools/tablegen/models.py)")),
] + [_y(size, v) for size in ("070", "080") for v in ("m001", "b001", "r051", "r099", "a051", "a099")]
