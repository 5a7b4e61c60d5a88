"""Family rules: what a ROBOTIS ``.model`` file leaves out, per product family.

A ``.model`` file gives each register's address, size and name.  Access,
EEPROM/RAM, encoding, unit, scale, factory default and range come from the
family's e-Manual control table, written once per family here:

- ``X`` / ``X330`` (X-series, MX(2.0)): the template of ``gen_tables.x_table``
  (the e-Manual X control table) with the model's current unit, limits and
  gains; EEPROM below address 64.
- ``XL320``: its own layout (AX-like units under Protocol 2.0), e-Manual XL-320.
- ``P`` (DYNAMIXEL-P): EEPROM below 512; position unit one encoder pulse
  (2 pi / resolution), velocity 0.01 rev/min, current 1 mA, PWM 1/2009.
- ``Y`` (DYNAMIXEL-Y): EEPROM below 512; position 2 pi / 524288, velocity
  0.01 rev/min (the ``.model`` file's unit block); other registers raw.

A register a family rule does not know gets the generic rule: read-only
when its name says it is a reading (present_*, *_status, model/firmware,
error codes ...), EEPROM when below the family's EEPROM end, raw unsigned,
no default, no range.  Indirect Address k / Indirect Data k are expanded
from the first entries the ``.model`` file lists (see
:func:`indirect_registers`).
"""

from __future__ import annotations

import math

from gen_tables import ACC, AXPOS, AXRPM, r, x_table
from robotis_model import indirect_markers, read_rows, snake

__all__ = ["build_table", "indirect_registers", "EEPROM_END"]

EEPROM_END = {"X": 64, "X330": 64, "XL320": 24, "P": 512, "Y": 512}
_READ_ONLY_PREFIX = ("present_", "model_", "firmware", "realtime_tick", "moving", "registered_instruction",
                     "hardware_error_status", "velocity_trajectory", "position_trajectory", "backup_ready",
                     "error_code", "controller_state", "build_date")
PRPM = 0.01 * 2 * math.pi / 60          # 0.01 rev/min -> rad/s


def _generic(name, addr, size, family):
    ro = name.startswith(_READ_ONLY_PREFIX)
    mem = "E" if addr < EEPROM_END[family] else "R"
    return r(addr, size, "R" if ro else "RW", mem, "u", "", 1, 0, None, None, None)


def indirect_registers(rows, family, eeprom_end=None):
    """``[(name, row)]`` of Indirect Address 1..n / Indirect Data 1..n.

    The ``.model`` files list ``Indirect Address 1`` and ``Indirect Data 1``
    and where the SDK's read half starts.  The block sizes are the
    e-Manual's: X-series 20 (168..206 / 224..243 or, XL330/XC330 firmware
    52+, 208..227) plus a second block of 28 (21..48) at 578..632 / 634..661 when the
    file's read half starts there; DYNAMIXEL-P/-Y 128 in one block.  Indirect
    Address k defaults to the address of Indirect Data k (e-Manual).
    """
    m = indirect_markers(rows)
    if "addr1" not in m or "data1" not in m:
        return []
    blocks = []
    if family in ("P", "Y"):
        blocks.append((m["addr1"], m["data1"], 128))
    else:
        blocks.append((m["addr1"], m["data1"], 20))
        if m.get("addr_read", 0) >= m["addr1"] + 40:
            blocks.append((m["addr_read"], m["data_read"], 28))
    end = EEPROM_END[family if family in EEPROM_END else "X"] if eeprom_end is None else eeprom_end
    out, k = [], 0
    last = max(d + n for _, d, n in blocks) - 1
    for a0, d0, n in blocks:
        for j in range(n):
            k += 1
            a, d = a0 + 2 * j, d0 + j
            out.append((f"indirect_address_{k}", r(a, 2, "RW", "E" if a < end else "R", "u", "", 1, 0, d, 0, last)))
    k = 0
    for _a0, d0, n in blocks:
        for j in range(n):
            k += 1
            d = d0 + j
            out.append((f"indirect_data_{k}", r(d, 1, "RW", "E" if d < end else "R", "u", "", 1, 0, 0, 0, 255)))
    return out


_X_EXTRA = {
    "pwm_slope": ("RW", "E", "u", "", 1, 0, 140, 1, 255),
    "startup_configuration": ("RW", "E", "u", "", 1, 0, 0, 0, 3),
    "acceleration_limit": ("RW", "E", "u", "rad/s^2", ACC, 0, 32767, 0, 32767),
    "external_port_mode_1": ("RW", "E", "u", "", 1, 0, 3, 0, 3),
    "external_port_mode_2": ("RW", "E", "u", "", 1, 0, 3, 0, 3),
    "external_port_mode_3": ("RW", "E", "u", "", 1, 0, 3, 0, 3),
    "external_port_data_1": ("RW", "R", "u", "", 1, 0, 0, 0, 4095),
    "external_port_data_2": ("RW", "R", "u", "", 1, 0, 0, 0, 4095),
    "external_port_data_3": ("RW", "R", "u", "", 1, 0, 0, 0, 4095),
    "backup_ready": ("R", "R", "u", "", 1, 0, 0, 0, 1),
}


def _x_template(p, has_current):
    t = x_table(p["current_unit_a"] if has_current else None, has_current,
                p["current_limit"] if has_current else None, p["velocity_limit"], p["temperature_limit"],
                p["voltage"][0], p["voltage"][1], p["voltage_range"], p["gains"], accel_limit=True,
                drive_max=p.get("drive_max", 5))
    return t


def _xl320_template():
    E_, R_ = "E", "R"
    return {
        "model_number": r(0, 2, "R", E_, "u", "", 1, 0, 350, None, None),
        "firmware_version": r(2, 1, "R", E_, "u", "", 1, 0, None, None, None),
        "id": r(3, 1, "RW", E_, "u", "", 1, 0, 1, 0, 252),
        "baud_rate": r(4, 1, "RW", E_, "u", "", 1, 0, 3, 0, 3),
        "return_delay_time": r(5, 1, "RW", E_, "u", "s", 2e-6, 0, 250, 0, 254),
        "cw_angle_limit": r(6, 2, "RW", E_, "u", "rad", AXPOS, 512, 0, 0, 1023),
        "ccw_angle_limit": r(8, 2, "RW", E_, "u", "rad", AXPOS, 512, 1023, 0, 1023),
        "control_mode": r(11, 1, "RW", E_, "u", "", 1, 0, 2, 1, 2),
        "temperature_limit": r(12, 1, "RW", E_, "u", "degC", 1, 0, 65, 0, 150),
        "min_voltage_limit": r(13, 1, "RW", E_, "u", "V", 0.1, 0, 60, 50, 250),
        "max_voltage_limit": r(14, 1, "RW", E_, "u", "V", 0.1, 0, 90, 50, 250),
        "max_torque": r(15, 2, "RW", E_, "u", "ratio", 0.1 / 100 * 1000 / 1023, 0, 1023, 0, 1023),
        "status_return_level": r(17, 1, "RW", E_, "u", "", 1, 0, 2, 0, 2),
        "shutdown": r(18, 1, "RW", E_, "u", "", 1, 0, 3, 0, 7),
        "torque_enable": r(24, 1, "RW", R_, "u", "", 1, 0, 0, 0, 1),
        "led": r(25, 1, "RW", R_, "u", "", 1, 0, 0, 0, 7),
        "position_d_gain": r(27, 1, "RW", R_, "u", "", 1, 0, 0, 0, 254),
        "position_i_gain": r(28, 1, "RW", R_, "u", "", 1, 0, 0, 0, 254),
        "position_p_gain": r(29, 1, "RW", R_, "u", "", 1, 0, 32, 0, 254),
        "goal_position": r(30, 2, "RW", R_, "u", "rad", AXPOS, 512, None, 0, 1023),
        "moving_speed": r(32, 2, "RW", R_, "sm", "rad/s", AXRPM, 0, 0, 0, 2047),
        "torque_limit": r(35, 2, "RW", R_, "u", "ratio", 0.1 / 100 * 1000 / 1023, 0, 1023, 0, 1023),
        "present_position": r(37, 2, "R", R_, "u", "rad", AXPOS, 512, None, None, None),
        "present_velocity": r(39, 2, "R", R_, "sm", "rad/s", AXRPM, 0, None, 0, 2047),
        "present_load": r(41, 2, "R", R_, "sm", "ratio", 0.001, 0, None, 0, 2047),
        "present_input_voltage": r(45, 1, "R", R_, "u", "V", 0.1, 0, None, None, None),
        "present_temperature": r(46, 1, "R", R_, "u", "degC", 1, 0, None, None, None),
        "registered_instruction": r(47, 1, "R", R_, "u", "", 1, 0, 0, 0, 1),
        "moving": r(49, 1, "R", R_, "u", "", 1, 0, 0, 0, 1),
        "hardware_error_status": r(50, 1, "R", R_, "u", "", 1, 0, 0, None, None),
        "punch": r(51, 2, "RW", R_, "u", "", 1, 0, 32, 0, 1023),
    }


def _p_template(p):
    """DYNAMIXEL-P / -Y registers with units (the rest: generic rule)."""
    pos = 2 * math.pi / p["resolution"]
    half = p["resolution"] // 2
    vlim = p["velocity_limit"]
    neg = -vlim if vlim is not None else None
    t = {
        "id": ("RW", "E", "u", "", 1, 0, 1, 0, 252),
        "baud_rate": ("RW", "E", "u", "", 1, 0, 1, 0, 8 if p["family"] == "P" else 7),
        "return_delay_time": ("RW", "E", "u", "s", 2e-6, 0, 250, 0, 254),
        "operating_mode": ("RW", "E", "u", "", 1, 0, 3, 0, 16),
        "protocol_type": ("RW", "E", "u", "", 1, 0, 2, 2, 2),
        "homing_offset": ("RW", "E", "s", "rad", pos, 0, 0, -half, half),
        "temperature_limit": ("RW", "E", "u", "degC", 1, 0, 80, 0, 100),
        "max_voltage_limit": ("RW", "E", "u", "V", 0.1, 0, 350, 150, 350),
        "min_voltage_limit": ("RW", "E", "u", "V", 0.1, 0, 150, 150, 350),
        "velocity_limit": ("RW", "E", "u", "rad/s", PRPM, 0, vlim, 0, vlim),
        "max_position_limit": ("RW", "E", "s", "rad", pos, 0, half, -half, half),
        "min_position_limit": ("RW", "E", "s", "rad", pos, 0, -half, -half, half),
        "current_limit": ("RW", "E", "u", "A", 0.001, 0, None, 0, None),
        "torque_enable": ("RW", "R", "u", "", 1, 0, 0, 0, 1),
        "led": ("RW", "R", "u", "", 1, 0, 0, 0, 1),
        "status_return_level": ("RW", "E" if p["family"] == "Y" else "R", "u", "", 1, 0, 2, 0, 2),
        "goal_current": ("RW", "R", "s", "A", 0.001, 0, 0, None, None),
        "goal_velocity": ("RW", "R", "s", "rad/s", PRPM, 0, 0, neg, vlim),
        "goal_position": ("RW", "R", "s", "rad", pos, 0, None, -half, half),
        "present_current": ("R", "R", "s", "A", 0.001, 0, None, None, None),
        "present_velocity": ("R", "R", "s", "rad/s", PRPM, 0, None, None, None),
        "present_position": ("R", "R", "s", "rad", pos, 0, None, None, None),
        "velocity_trajectory": ("R", "R", "s", "rad/s", PRPM, 0, None, None, None),
        "position_trajectory": ("R", "R", "s", "rad", pos, 0, None, None, None),
        "present_input_voltage": ("R", "R", "u", "V", 0.1, 0, None, None, None),
        "present_temperature": ("R", "R", "u", "degC", 1, 0, None, None, None),
        "realtime_tick": ("R", "R", "u", "s", 0.001, 0, None, 0, 32767),
        "present_pwm": ("R", "R", "s", "ratio", 1 / 2009, 0, None, None, None),
        "goal_pwm": ("RW", "R", "s", "ratio", 1 / 2009, 0, 0, -2009, 2009),
        "pwm_limit": ("RW", "E", "u", "ratio", 1 / 2009, 0, 2009, 0, 2009),
    }
    if p["family"] == "Y":
        for k in ("max_voltage_limit", "min_voltage_limit", "temperature_limit", "current_limit", "goal_pwm",
                  "pwm_limit", "present_pwm", "goal_current", "present_current"):
            t[k] = ("RW" if not k.startswith("present") else "R", "E" if k.endswith("limit") else "R",
                    "s" if k.startswith(("goal", "present")) else "u", "", 1, 0, None, None, None)
        t["max_position_limit"] = t["max_position_limit"][:6] + (None, None, None)
        t["min_position_limit"] = t["min_position_limit"][:6] + (None, None, None)
        t["homing_offset"] = t["homing_offset"][:6] + (0, None, None)
    return t


def _registers(m, rows):
    family = m["family"]
    names = {snake(n) for _, _, n in rows}
    if family in ("X", "X330"):
        tmpl = _x_template(m["params"], "present_current" in names)
        tmpl.update({k: r(0, 0, *v) for k, v in _X_EXTRA.items() if k not in tmpl})
    elif family == "XL320":
        tmpl = _xl320_template()
    else:
        tmpl = {k: r(0, 0, *v) for k, v in _p_template({**m["params"], "family": family}).items()}
    regs = {}
    for addr, size, data_name in rows:
        name = snake(data_name)
        if name.startswith("indirect_") or name in regs:
            continue        # indirect blocks: expanded below; later duplicates: the SDK's markers
        if name in tmpl:
            row = tmpl[name]
            regs[name] = (addr, size) + tuple(row[2:])
        else:
            regs[name] = _generic(name, addr, size, family)
    for name, row in indirect_registers(rows, family):
        regs[name] = row
    return dict(sorted(regs.items(), key=lambda kv: kv[1][0]))


def build_table(m, model_dir, index, write):
    """Write the YAML table of model entry ``m`` (see :mod:`models`) from its ``.model`` file."""
    path = model_dir / m["file"]
    rows = read_rows(path)
    number = index.get(m["file"])
    if number is None:
        raise SystemExit(f"{m['name']}: {m['file']} is not in {model_dir}/dynamixel.model")
    regs = _registers(m, rows)
    spec = m["datasheet"]
    header = [f"# Control table of the ROBOTIS {m['name']} (Protocol 2.0 firmware).",
              "# Generated by tools/tablegen/gen_tables.py from ROBOTIS's machine-readable control table",
              f"#   {m['file']} (DynamixelSDK control_table/, dynamixel_hardware_interface param/dxl_model/):",
              "#   addresses, sizes and names; access, memory, units, defaults and ranges from the",
              f"#   '{m['family']}' family rule of tools/tablegen/families.py (e-Manual: {spec['source']})."]
    extra = []
    if m.get("aliases"):
        extra.append("aliases: [" + ", ".join(m["aliases"]) + "]")
    if m.get("not_emulated"):
        extra.append(f"not_emulated: \"{m['not_emulated']}\"")
    torque = (spec.get("stall_torque_nm"), spec.get("stall_current_a"), spec["voltage_v"])
    write(m["name"].lower() + ".yaml", m["name"], number, 2,
          spec["source"], m.get("notes", []), torque, regs, spec=spec, header=header, extra_keys=extra)
