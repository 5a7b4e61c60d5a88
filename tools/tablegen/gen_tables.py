"""Writes firmware_bridge/tables/*.yaml (the YAML files are the data).

Usage::

    python tools/tablegen/gen_tables.py --model-dir PATH

PATH is a directory of ROBOTIS ``.model`` files (DynamixelSDK's
``control_table/`` or dynamixel_hardware_interface's ``param/dxl_model/``;
ROBOTIS's files are not committed here).  The twelve first tables (AX, MX,
XL330-M288, XL430, XM430-W350, XM540-W270) are transcribed from the e-Manual
below and only take their Indirect Address / Indirect Data blocks from the
``.model`` files; every other table is generated from its ``.model`` file by
the family rules of :mod:`families` (see :mod:`models` for the list, the
datasheet figures and where each comes from).
"""
import argparse
import math
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
OUT = str(Path(__file__).resolve().parents[2] / "firmware_bridge" / "tables")
RPM = 0.229 * 2 * math.pi / 60
P4096 = 2 * math.pi / 4096
ACC = 214.577 * 2 * math.pi / 3600   # rev/min^2 -> rad/s^2
AXPOS = (300.0 / 1024) * math.pi / 180
AXRPM = 0.111 * 2 * math.pi / 60
MXRPM = 0.114 * 2 * math.pi / 60
MXACC = 8.583 * math.pi / 180

def r(addr, size, acc, mem, enc, unit, scale, zero, default, lo, hi):
    return (addr, size, acc, mem, enc, unit, scale, zero, default, lo, hi)

def x_table(cur_scale, has_current, cur_limit, vel_limit, temp, vmax, vmin, vrange, gains, extra=(), accel_limit=False, drive_max=5):
    vi, vp, pd, pi_, pp = gains
    t = {
        "model_number": r(0, 2, "R", "E", "u", "", 1, 0, None, None, None),
        "model_information": r(2, 4, "R", "E", "u", "", 1, 0, None, None, None),
        "firmware_version": r(6, 1, "R", "E", "u", "", 1, 0, None, None, None),
        "id": r(7, 1, "RW", "E", "u", "", 1, 0, 1, 0, 252),
        "baud_rate": r(8, 1, "RW", "E", "u", "", 1, 0, 1, 0, 7),
        "return_delay_time": r(9, 1, "RW", "E", "u", "s", 2e-6, 0, 250, 0, 254),
        "drive_mode": r(10, 1, "RW", "E", "u", "", 1, 0, 0, 0, drive_max),
        "operating_mode": r(11, 1, "RW", "E", "u", "", 1, 0, 3, 0, 16),
        "secondary_id": r(12, 1, "RW", "E", "u", "", 1, 0, 255, 0, 255),
        "protocol_type": r(13, 1, "RW", "E", "u", "", 1, 0, 2, 1, 2),
        "homing_offset": r(20, 4, "RW", "E", "s", "rad", P4096, 0, 0, -1044479, 1044479),
        "moving_threshold": r(24, 4, "RW", "E", "u", "rad/s", RPM, 0, 10, 0, 1023),
        "temperature_limit": r(31, 1, "RW", "E", "u", "degC", 1, 0, temp, 0, 100),
        "max_voltage_limit": r(32, 2, "RW", "E", "u", "V", 0.1, 0, vmax, vrange[0], vrange[1]),
        "min_voltage_limit": r(34, 2, "RW", "E", "u", "V", 0.1, 0, vmin, vrange[0], vrange[1]),
        "pwm_limit": r(36, 2, "RW", "E", "u", "ratio", 0.00113, 0, 885, 0, 885),
    }
    if has_current:
        t["current_limit"] = r(38, 2, "RW", "E", "u", "A", cur_scale, 0, cur_limit, 0, cur_limit)
    if accel_limit:
        t["acceleration_limit"] = r(40, 4, "RW", "E", "u", "rad/s^2", ACC, 0, 32767, 0, 32767)
    t.update({
        "velocity_limit": r(44, 4, "RW", "E", "u", "rad/s", RPM, 0, vel_limit[0], 0, vel_limit[1]),
        "max_position_limit": r(48, 4, "RW", "E", "u", "rad", P4096, 2048, 4095, 0, 4095),
        "min_position_limit": r(52, 4, "RW", "E", "u", "rad", P4096, 2048, 0, 0, 4095),
    })
    for k, v in extra:
        t[k] = v
    t.update({
        "shutdown": r(63, 1, "RW", "E", "u", "", 1, 0, 52, 0, 255),
        "torque_enable": r(64, 1, "RW", "R", "u", "", 1, 0, 0, 0, 1),
        "led": r(65, 1, "RW", "R", "u", "", 1, 0, 0, 0, 1),
        "status_return_level": r(68, 1, "RW", "R", "u", "", 1, 0, 2, 0, 2),
        "registered_instruction": r(69, 1, "R", "R", "u", "", 1, 0, 0, 0, 1),
        "hardware_error_status": r(70, 1, "R", "R", "u", "", 1, 0, 0, None, None),
        "velocity_i_gain": r(76, 2, "RW", "R", "u", "", 1, 0, vi, 0, 16383),
        "velocity_p_gain": r(78, 2, "RW", "R", "u", "", 1, 0, vp, 0, 16383),
        "position_d_gain": r(80, 2, "RW", "R", "u", "", 1, 0, pd, 0, 16383),
        "position_i_gain": r(82, 2, "RW", "R", "u", "", 1, 0, pi_, 0, 16383),
        "position_p_gain": r(84, 2, "RW", "R", "u", "", 1, 0, pp, 0, 16383),
        "feedforward_2nd_gain": r(88, 2, "RW", "R", "u", "", 1, 0, 0, 0, 16383),
        "feedforward_1st_gain": r(90, 2, "RW", "R", "u", "", 1, 0, 0, 0, 16383),
        "bus_watchdog": r(98, 1, "RW", "R", "s", "s", 0.02, 0, 0, -1, 127),
        "goal_pwm": r(100, 2, "RW", "R", "s", "ratio", 0.00113, 0, 0, -885, 885),
    })
    if has_current:
        t["goal_current"] = r(102, 2, "RW", "R", "s", "A", cur_scale, 0, 0, -cur_limit, cur_limit)
    t.update({
        "goal_velocity": r(104, 4, "RW", "R", "s", "rad/s", RPM, 0, 0, -vel_limit[1], vel_limit[1]),
        "profile_acceleration": r(108, 4, "RW", "R", "u", "rad/s^2", ACC, 0, 0, 0, 32767),
        "profile_velocity": r(112, 4, "RW", "R", "u", "rad/s", RPM, 0, 0, 0, 32767),
        "goal_position": r(116, 4, "RW", "R", "s", "rad", P4096, 2048, None, -1048575, 1048575),
        "realtime_tick": r(120, 2, "R", "R", "u", "s", 0.001, 0, None, 0, 32767),
        "moving": r(122, 1, "R", "R", "u", "", 1, 0, 0, 0, 1),
        "moving_status": r(123, 1, "R", "R", "u", "", 1, 0, 0, None, None),
        "present_pwm": r(124, 2, "R", "R", "s", "ratio", 0.00113, 0, None, None, None),
    })
    if has_current:
        t["present_current"] = r(126, 2, "R", "R", "s", "A", cur_scale, 0, None, None, None)
    else:
        t["present_load"] = r(126, 2, "R", "R", "s", "ratio", 0.001, 0, None, -1000, 1000)
    t.update({
        "present_velocity": r(128, 4, "R", "R", "s", "rad/s", RPM, 0, None, None, None),
        "present_position": r(132, 4, "R", "R", "s", "rad", P4096, 2048, None, None, None),
        "velocity_trajectory": r(136, 4, "R", "R", "s", "rad/s", RPM, 0, None, None, None),
        "position_trajectory": r(140, 4, "R", "R", "s", "rad", P4096, 2048, None, None, None),
        "present_input_voltage": r(144, 2, "R", "R", "u", "V", 0.1, 0, None, None, None),
        "present_temperature": r(146, 1, "R", "R", "u", "degC", 1, 0, None, None, None),
    })
    return t

def p1_table(kind, model, temp, vmax, max_torque, punch, current=False, drive_mode=False):
    ax = kind == "AX"
    pos_scale = AXPOS if ax else P4096
    pos_zero = 512 if ax else 2048
    pos_max = 1023 if ax else 4095
    spd = AXRPM if ax else MXRPM
    t = {
        "model_number": r(0, 2, "R", "E", "u", "", 1, 0, None, None, None),
        "firmware_version": r(2, 1, "R", "E", "u", "", 1, 0, None, None, None),
        "id": r(3, 1, "RW", "E", "u", "", 1, 0, 1, 0, 253),
        "baud_rate": r(4, 1, "RW", "E", "u", "", 1, 0, 1 if ax else 34, 0, 254 if ax else 252),
        "return_delay_time": r(5, 1, "RW", "E", "u", "s", 2e-6, 0, 250, 0, 254),
        "cw_angle_limit": r(6, 2, "RW", "E", "u", "rad", pos_scale, pos_zero, 0, 0, pos_max),
        "ccw_angle_limit": r(8, 2, "RW", "E", "u", "rad", pos_scale, pos_zero, pos_max, 0, pos_max),
    }
    if drive_mode:
        t["drive_mode"] = r(10, 1, "RW", "E", "u", "", 1, 0, 0, 0, 3)
    t.update({
        "temperature_limit": r(11, 1, "RW", "E", "u", "degC", 1, 0, temp, 0, 150 if ax else 99),
        "min_voltage_limit": r(12, 1, "RW", "E", "u", "V", 0.1, 0, 60, 50, 250),
        "max_voltage_limit": r(13, 1, "RW", "E", "u", "V", 0.1, 0, vmax, 50, 250),
        "max_torque": r(14, 2, "RW", "E", "u", "ratio", 0.1 / 100 * 1000 / 1023, 0, max_torque, 0, 1023),
        "status_return_level": r(16, 1, "RW", "E", "u", "", 1, 0, 2, 0, 2),
        "alarm_led": r(17, 1, "RW", "E", "u", "", 1, 0, 36, 0, 127),
        "shutdown": r(18, 1, "RW", "E", "u", "", 1, 0, 36, 0, 127),
    })
    if not ax:
        t["multi_turn_offset"] = r(20, 2, "RW", "E", "s", "rad", P4096, 0, 0, -24576, 24576)
        t["resolution_divider"] = r(22, 1, "RW", "E", "u", "", 1, 0, 1, 1, 4)
    t.update({
        "torque_enable": r(24, 1, "RW", "R", "u", "", 1, 0, 0, 0, 1),
        "led": r(25, 1, "RW", "R", "u", "", 1, 0, 0, 0, 1),
    })
    if ax:
        t.update({
            "cw_compliance_margin": r(26, 1, "RW", "R", "u", "", 1, 0, 1, 0, 255),
            "ccw_compliance_margin": r(27, 1, "RW", "R", "u", "", 1, 0, 1, 0, 255),
            "cw_compliance_slope": r(28, 1, "RW", "R", "u", "", 1, 0, 32, 0, 254),
            "ccw_compliance_slope": r(29, 1, "RW", "R", "u", "", 1, 0, 32, 0, 254),
        })
    else:
        t.update({
            "position_d_gain": r(26, 1, "RW", "R", "u", "", 1, 0, 0, 0, 254),
            "position_i_gain": r(27, 1, "RW", "R", "u", "", 1, 0, 0, 0, 254),
            "position_p_gain": r(28, 1, "RW", "R", "u", "", 1, 0, 32, 0, 254),
        })
    t.update({
        # MX multi-turn mode uses -28672..28672 on the same two bytes (two's complement).
        "goal_position": r(30, 2, "RW", "R", "u" if ax else "s", "rad", pos_scale, pos_zero, None,
                           0 if ax else -28672, pos_max if ax else 28672),
        "moving_speed": r(32, 2, "RW", "R", "sm", "rad/s", spd, 0, 0, 0, 2047),
        "torque_limit": r(34, 2, "RW", "R", "u", "ratio", 0.1 / 100 * 1000 / 1023, 0, max_torque, 0, 1023),
        "present_position": r(36, 2, "R", "R", "u" if ax else "s", "rad", pos_scale, pos_zero, None, None, None),
        "present_velocity": r(38, 2, "R", "R", "sm", "rad/s", spd, 0, None, 0, 2047),
        "present_load": r(40, 2, "R", "R", "sm", "ratio", 0.001, 0, None, 0, 2047),
        "present_input_voltage": r(42, 1, "R", "R", "u", "V", 0.1, 0, None, None, None),
        "present_temperature": r(43, 1, "R", "R", "u", "degC", 1, 0, None, None, None),
        "registered_instruction": r(44, 1, "R", "R", "u", "", 1, 0, 0, 0, 1),
        "moving": r(46, 1, "R", "R", "u", "", 1, 0, 0, 0, 1),
        "lock": r(47, 1, "RW", "R", "u", "", 1, 0, 0, 0, 1),
        "punch": r(48, 2, "RW", "R", "u", "", 1, 0, punch, 0, 1023),
    })
    if not ax:
        t["realtime_tick"] = r(50, 2, "R", "R", "u", "s", 0.001, 0, 0, 0, 32767)
        if current:
            t["present_current"] = r(68, 2, "RW", "R", "u", "A", 0.0045, 2048, 0, 0, 4095)
            t["torque_control_mode_enable"] = r(70, 1, "RW", "R", "u", "", 1, 0, 0, 0, 1)
            t["goal_torque"] = r(71, 2, "RW", "R", "sm", "A", 0.0045, 0, 0, 0, 2047)
        t["goal_acceleration"] = r(73, 1, "RW", "R", "u", "rad/s^2", MXACC, 0, 0, 0, 254)
    return t


# Datasheet figures per model, from each model's ROBOTIS e-Manual "Specifications" table
# (https://emanual.robotis.com/docs/en/dxl/<series>/<model>/; the X-series figures are also
# tabulated on https://emanual.robotis.com/docs/en/dxl/x/ and the MX ones on
# https://emanual.robotis.com/docs/en/dxl/mx/).  no_load_speed_rpm and the stall torque /
# current of write() are the figures at voltage_v; recommended_voltage_v is the page's
# "Input Voltage (Recommended)".  The MX Protocol 1.0 and (2.0) firmwares share one motor.
def _spec(page, voltage, recommended, rpm, gear):
    return {"source": EMANUAL + page, "voltage_v": voltage, "recommended_voltage_v": recommended,
            "no_load_speed_rpm": rpm, "gear_ratio": gear}

EMANUAL = "https://emanual.robotis.com/docs/en/dxl/"
DATASHEET = {
    "XM430-W350": _spec("x/xm430-w350/", 12.0, 12.0, 46, 353.5),
    "XM540-W270": _spec("x/xm540-w270/", 12.0, 12.0, 30, 272.5),
    "XL430-W250": _spec("x/xl430-w250/", 12.0, 11.1, 61, 258.5),
    "XL330-M288": _spec("x/xl330-m288/", 5.0, 5.0, 103, 288.4),
    "MX-28(2.0)": _spec("mx/mx-28-2/", 12.0, 12.0, 55, 193.0),
    "MX-64(2.0)": _spec("mx/mx-64-2/", 12.0, 12.0, 63, 200.0),
    "MX-106(2.0)": _spec("mx/mx-106-2/", 12.0, 12.0, 45, 225.0),
    "MX-28": _spec("mx/mx-28/", 12.0, 12.0, 55, 193.0),
    "MX-64": _spec("mx/mx-64/", 12.0, 12.0, 63, 200.0),
    "MX-106": _spec("mx/mx-106/", 12.0, 12.0, 45, 225.0),
    "AX-12A": _spec("ax/ax-12a/", 12.0, 11.1, 59, 254.0),
    "AX-18A": _spec("ax/ax-18a/", 12.0, 11.1, 97, 254.0),
}

def fmt(v):
    if v is None:
        return "null"
    if isinstance(v, float):
        return repr(float(v))
    if isinstance(v, str):
        return '""' if v == "" else v
    return str(v)

def write(fname, name, number, protocol, url, notes, torque, regs, spec=None, header=None, extra_keys=()):
    spec = spec or DATASHEET[name]
    lines = header or [f"# Control table of the ROBOTIS {name} (Protocol {protocol}.0 firmware).",
                       f"# Checked against the ROBOTIS e-Manual: {url}",
                       "#   (control table source: github.com/ROBOTIS-GIT/emanual, the page's markdown)."]
    lines += [f"# {n}" for n in notes]
    lines += ["#",
              "# Columns: [address, size, access, memory, encoding, unit, scale, zero_raw, default, min_raw, max_raw]",
              "#   memory   E = EEPROM (written only while torque is off), R = RAM",
              "#   encoding u = unsigned, s = two's complement, sm = sign-magnitude with the",
              "#            direction bit at 1024 (bit 10; set = CW = negative)",
              "#   SI value = (raw - zero_raw) * scale, in `unit` (rad, rad/s, rad/s^2, A, V, degC, s,",
              "#            ratio = fraction of the maximum, \"\" = dimensionless raw integer)",
              f"name: {name}", f"model_number: {number}", f"protocol: {protocol}", *extra_keys,
              f"stall_torque_nm: {torque[0]}    # at {torque[2]} V, e-Manual specifications",
              f"stall_current_a: {torque[1]}",
              "# Datasheet figures (e-Manual Specifications table); the stall torque, stall current and",
              "# no-load speed all belong to `voltage_v`.",
              "datasheet:",
              f"  source: {spec['source']}",
              f"  voltage_v: {spec['voltage_v']}",
              f"  recommended_voltage_v: {spec['recommended_voltage_v']}",
              f"  stall_torque_nm: {torque[0]}",
              f"  stall_current_a: {torque[1]}",
              f"  no_load_speed_rpm: {spec['no_load_speed_rpm']}",
              f"  gear_ratio: {spec['gear_ratio']}",
              "registers:"]
    if spec.get("unpublished"):
        # no datasheet figures: the table has no stall/datasheet lines at all
        i, j = lines.index(f"stall_torque_nm: {torque[0]}    # at {torque[2]} V, e-Manual specifications"), \
            lines.index("registers:")
        lines[i:j] = [f"# Datasheet: {spec['unpublished']}"]
    else:
        assert spec["voltage_v"] == torque[2], (name, spec, torque)
    if spec.get("notes") and "datasheet:" in lines:
        i = lines.index("datasheet:")
        lines[i:i] = [f"# {n}" for n in spec["notes"]]
    regs = dict(regs)
    regs["model_number"] = regs["model_number"][:8] + (number,) + regs["model_number"][9:]
    w = max(len(k) for k in regs)
    for k, v in regs.items():
        lines.append(f"  {k + ':':<{w + 1}} [" + ", ".join(fmt(x) for x in v) + "]")
    with open(os.path.join(OUT, fname), "w") as f:
        f.write("\n".join(lines) + "\n")

def write_handmade(indirect):
    """The twelve e-Manual tables; ``indirect(name)`` -> that model's Indirect registers (list of pairs)."""
    E = EMANUAL

    def w(fname, name, number, protocol, url, notes, torque, regs):
        if protocol == 2:
            regs = {**regs, **dict(indirect(name))}
        write(fname, name, number, protocol, url, notes, torque, regs)

    w("xm430-w350.yaml", "XM430-W350", 1020, 2, E + "x/xm430-w350/#control-table",
          ["Firmware v42+ layout: Acceleration Limit(40) is gone and Velocity Limit defaults to 200;",
           "older pages list 350 and an Acceleration Limit at 40."], (4.1, 2.3, 12.0),
          x_table(0.00269, True, 1193, (200, 1023), 80, 160, 95, (95, 160), (1920, 100, 0, 0, 800),
                  extra=[("startup_configuration", r(60, 1, "RW", "E", "u", "", 1, 0, 0, 0, 3))]))
    w("xm540-w270.yaml", "XM540-W270", 1120, 2, E + "x/xm540-w270/#control-table",
          ["External port registers (56-58, 152-156) are left out."], (10.6, 4.4, 12.0),
          x_table(0.00269, True, 2047, (128, 1023), 80, 160, 95, (95, 160), (1920, 100, 0, 0, 800),
                  extra=[("startup_configuration", r(60, 1, "RW", "E", "u", "", 1, 0, 0, 0, 3))]))
    w("xl430-w250.yaml", "XL430-W250", 1060, 2, E + "x/xl430-w250/#control-table",
          ["No current sensing: Present Load(126) in 0.1 % steps, no Current Limit / Goal Current."],
          (1.5, 1.4, 12.0),
          x_table(None, False, None, (265, 1023), 72, 140, 60, (60, 140), (1000, 100, 4000, 0, 640),
                  extra=[("startup_configuration", r(60, 1, "RW", "E", "u", "", 1, 0, 0, 0, 3))], drive_max=13))
    w("xl330-m288.yaml", "XL330-M288", 1200, 2, E + "x/xl330-m288/#control-table",
          ["Current unit 1 mA (bus current, not phase current); Max Voltage Limit fixed range 31..70."],
          (0.52, 1.47, 5.0),
          x_table(0.001, True, 1750, (445, 2047), 70, 70, 35, (31, 70), (1600, 180, 0, 0, 400),
                  extra=[("startup_configuration", r(60, 1, "RW", "E", "u", "", 1, 0, 0, 0, 3)),
                         ("pwm_slope", r(62, 1, "RW", "E", "u", "", 1, 0, 140, 1, 255))]))
    t = x_table(None, False, None, (380, 1023), 80, 160, 95, (95, 160), (1920, 100, 0, 0, 850), accel_limit=True)
    t["shutdown"] = t["shutdown"]
    w("mx-28-2.yaml", "MX-28(2.0)", 30, 2, E + "mx/mx-28-2/#control-table",
          ["No current sensing: Present Load(126) in 0.1 % steps."], (2.5, 1.4, 12.0), t)
    w("mx-64-2.yaml", "MX-64(2.0)", 311, 2, E + "mx/mx-64-2/#control-table",
          ["Current unit about 3.36 mA."], (6.0, 4.1, 12.0),
          x_table(0.00336, True, 1941, (435, 1023), 80, 160, 95, (95, 160), (1920, 100, 0, 0, 850), accel_limit=True))
    w("mx-106-2.yaml", "MX-106(2.0)", 321, 2, E + "mx/mx-106-2/#control-table",
          ["Current unit about 3.36 mA."], (8.4, 5.2, 12.0),
          x_table(0.00336, True, 2047, (360, 1023), 80, 160, 95, (95, 160), (1920, 100, 0, 0, 850), accel_limit=True))
    w("ax-12a.yaml", "AX-12A", 12, 1, E + "ax/ax-12a/#control-table",
          ["Position: 0..1023 over 300 deg, 512 = centre. Present Speed / Present Load / Moving Speed",
           "are sign-magnitude with the direction bit at 1024. No Sync Read, no Bulk Read."],
          (1.5, 1.5, 12.0), p1_table("AX", 12, 70, 140, 1023, 32))
    w("ax-18a.yaml", "AX-18A", 18, 1, E + "ax/ax-18a/#control-table",
          ["Same layout as the AX-12A; Temperature Limit 75, Max Torque 983."],
          (1.8, 2.2, 12.0), p1_table("AX", 18, 75, 140, 983, 32))
    w("mx-28.yaml", "MX-28", 29, 1, E + "mx/mx-28/#control-table",
          ["Protocol 1.0 firmware. Multi-turn goal/present position is two's complement -28672..28672."],
          (2.5, 1.4, 12.0), p1_table("MX", 29, 80, 160, 1023, 0))
    w("mx-64.yaml", "MX-64", 310, 1, E + "mx/mx-64/#control-table",
          ["Protocol 1.0 firmware. Current(68): I = 4.5 mA * (raw - 2048)."],
          (6.0, 4.1, 12.0), p1_table("MX", 310, 80, 240, 1023, 0, current=True))
    w("mx-106.yaml", "MX-106", 320, 1, E + "mx/mx-106/#control-table",
          ["Protocol 1.0 firmware. Current(68): I = 4.5 mA * (raw - 2048). Drive Mode(10) = dual mode."],
          (8.4, 5.2, 12.0), p1_table("MX", 320, 80, 160, 1023, 0, current=True, drive_mode=True))


def main(argv=None):
    """Write every table; ``--model-dir`` is the directory of ROBOTIS ``.model`` files."""
    global OUT
    from families import build_table, indirect_registers
    from models import HANDMADE_MODEL_FILES, MODELS
    from robotis_model import read_index, read_rows

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model-dir", required=True, type=Path,
                    help="directory of ROBOTIS .model files (with dynamixel.model)")
    ap.add_argument("--out", default=OUT, help="output directory (default: firmware_bridge/tables)")
    args = ap.parse_args(argv)
    OUT = args.out
    os.makedirs(OUT, exist_ok=True)
    d = args.model_dir
    if not (d / "dynamixel.model").is_file():
        ap.error(f"--model-dir {d}: no dynamixel.model there (give DynamixelSDK's control_table/ "
                 "or dynamixel_hardware_interface's param/dxl_model/)")
    index = read_index(d)

    def indirect(name):
        fname, family = HANDMADE_MODEL_FILES[name]
        return indirect_registers(read_rows(d / fname), family)

    write_handmade(indirect)
    for m in MODELS:
        build_table(m, d, index, write)
    print(f"wrote {12 + len(MODELS)} tables to {OUT}")


if __name__ == "__main__":
    main()
