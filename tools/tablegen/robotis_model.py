"""Reads ROBOTIS's machine-readable control tables (the ``.model`` files).

ROBOTIS publishes one ``.model`` file per product in DynamixelSDK
(``control_table/``) and in dynamixel_hardware_interface
(``param/dxl_model/``); ``dynamixel.model`` maps model numbers to files.  A
file's ``[control table]`` section lists ``Address<TAB>Size<TAB>Data Name``.
What the files do not hold (access, EEPROM/RAM, units, defaults, ranges) is
added by the family rules of :mod:`families`.  These functions only parse.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["read_rows", "read_index", "snake", "indirect_markers"]


def read_rows(path: Path) -> list[tuple[int, int, str]]:
    """``[(address, size, data name)]`` of a ``.model`` file's ``[control table]`` section."""
    rows, section = [], None
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
            continue
        if section != "[control table]" or not line:
            continue
        parts = line.split("\t")
        if len(parts) != 3 or not parts[0].isdigit():
            continue
        rows.append((int(parts[0]), int(parts[1]), parts[2].strip()))
    if not rows:
        raise ValueError(f"{path}: no [control table] rows")
    return rows


def read_index(model_dir: Path) -> dict[str, int]:
    """``{file name: model number}`` from ``dynamixel.model`` (a file may appear twice)."""
    out = {}
    for line in (Path(model_dir) / "dynamixel.model").read_text().splitlines():
        parts = line.strip().split("\t")
        if len(parts) == 2 and parts[0].isdigit():
            out.setdefault(parts[1].strip(), int(parts[0]))
    return out


# ROBOTIS data names -> our register names where ours differ (shared names across models).
_RENAME = {
    "secondary(shadow)_id": "secondary_id",
    "present_speed": "present_velocity",
    "present_voltage": "present_input_voltage",
    "baud_rate_(bus)": "baud_rate",
    "d_gain": "position_d_gain",
    "i_gain": "position_i_gain",
    "p_gain": "position_p_gain",
}


def snake(data_name: str) -> str:
    """``"Present Position"`` -> ``"present_position"``; ROBOTIS names mapped to ours."""
    key = data_name.strip().lower().replace(" ", "_")
    if key in _RENAME:
        return _RENAME[key]
    return re.sub(r"[^a-z0-9]+", "_", key).strip("_")


def indirect_markers(rows) -> dict[str, int]:
    """Addresses of ``Indirect Address/Data 1`` and of the SDK's ``... Read`` split points."""
    out = {}
    for addr, _size, name in rows:
        key = {"Indirect Address 1": "addr1", "Indirect Data 1": "data1",
               "Indirect Address Read": "addr_read", "Indirect Data Read": "data_read"}.get(name)
        if key and key not in out:
            out[key] = addr
    return out
