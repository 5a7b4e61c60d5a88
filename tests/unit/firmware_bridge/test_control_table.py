"""Control tables: loaded from YAML, cross-checked against e-Manual facts."""

import pytest

from servoloop.firmware_bridge.control_table import (
    MODELS,
    baud_to_raw,
    get_table,
    model_name,
    raw_to_baud,
)
from servoloop.firmware_bridge.errors import UnknownModelError

REQUIRED = {
    "AX-12A": (12, 1), "AX-18A": (18, 1), "MX-28": (29, 1), "MX-64": (310, 1), "MX-106": (320, 1),
    "MX-28(2.0)": (30, 2), "MX-64(2.0)": (311, 2), "MX-106(2.0)": (321, 2),
    "XL330-M288": (1200, 2), "XL430-W250": (1060, 2), "XM430-W350": (1020, 2), "XM540-W270": (1120, 2),
}


def test_every_required_model_loads_with_number_and_protocol():
    for name, (number, protocol) in REQUIRED.items():
        t = get_table(name)
        assert (t.name, t.model_number, t.protocol) == (name, number, protocol)
        assert get_table(number) is t
        assert t["model_number"].default == number


# (model, register, address, size, eeprom, access) straight from the e-Manual tables
EMANUAL_ROWS = [
    ("XM430-W350", "present_position", 132, 4, False, "R"),
    ("XM430-W350", "goal_position", 116, 4, False, "RW"),
    ("XM430-W350", "present_current", 126, 2, False, "R"),
    ("XM430-W350", "current_limit", 38, 2, True, "RW"),
    ("XM430-W350", "return_delay_time", 9, 1, True, "RW"),
    ("XM430-W350", "hardware_error_status", 70, 1, False, "R"),
    ("XL430-W250", "present_load", 126, 2, False, "R"),
    ("XL330-M288", "present_input_voltage", 144, 2, False, "R"),
    ("XM540-W270", "present_temperature", 146, 1, False, "R"),
    ("MX-28(2.0)", "acceleration_limit", 40, 4, True, "RW"),
    ("MX-64(2.0)", "goal_current", 102, 2, False, "RW"),
    ("AX-12A", "present_position", 36, 2, False, "R"),
    ("AX-12A", "present_velocity", 38, 2, False, "R"),     # "Present Speed"
    ("AX-12A", "moving_speed", 32, 2, False, "RW"),
    ("AX-12A", "torque_enable", 24, 1, False, "RW"),
    ("AX-18A", "max_torque", 14, 2, True, "RW"),
    ("MX-28", "multi_turn_offset", 20, 2, True, "RW"),
    ("MX-64", "present_current", 68, 2, False, "RW"),
    ("MX-106", "drive_mode", 10, 1, True, "RW"),
]


@pytest.mark.parametrize("model,name,address,size,eeprom,access", EMANUAL_ROWS)
def test_rows_match_emanual(model, name, address, size, eeprom, access):
    r = get_table(model)[name]
    assert (r.address, r.size, r.eeprom, r.access) == (address, size, eeprom, access)


def test_defaults_from_emanual():
    assert get_table("XM430-W350")["position_p_gain"].default == 800
    assert get_table("XL430-W250")["position_d_gain"].default == 4000
    assert get_table("XL330-M288")["current_limit"].default == 1750
    assert get_table("AX-18A")["temperature_limit"].default == 75
    assert get_table("MX-28")["baud_rate"].default == 34


def test_shared_names_and_no_overlaps():
    # the shared names the bus, daemon and emulator use; DYNAMIXEL-P/-Y (not emulated, RGB LED,
    # Error Code) name some of them differently: tests/unit/firmware_bridge/test_control_table_coverage.py
    for t in (t for t in MODELS.values() if t.not_emulated is None):
        # the waterproof XW540 has no LED register (ROBOTIS's xw540_*.model)
        assert "led" in t or t.name.startswith("XW"), (t.name, "led")
        for name in ("model_number", "id", "baud_rate", "return_delay_time", "torque_enable",
                     "status_return_level", "goal_position", "present_position", "present_velocity",
                     "present_input_voltage", "present_temperature"):
            assert name in t, (t.name, name)
        assert ("present_current" in t) or ("present_load" in t)
        spans = sorted((r.address, r.address + r.size, r.name) for r in t.registers.values())
        for (_a0, e0, n0), (a1, _e1, n1) in zip(spans, spans[1:], strict=False):
            assert e0 <= a1, f"{t.name}: {n0} overlaps {n1}"


def test_signedness():
    x = get_table("XM430-W350")
    assert x["present_velocity"].encoding == "s" and x["present_velocity"].signed
    assert x["present_temperature"].encoding == "u" and not x["present_temperature"].signed
    assert get_table("AX-12A")["present_velocity"].encoding == "sm"


def test_unknown_model_names_the_model_and_the_known_ones():
    with pytest.raises(UnknownModelError, match="XM999.*known: .*XM430-W350"):
        get_table("XM999")
    with pytest.raises(KeyError, match="no register 'present_widget'"):
        get_table("XM430-W350")["present_widget"]
    assert model_name(1020) == "XM430-W350" and model_name(4242) == "unknown(4242)"


def test_name_aliases():
    assert get_table("mx-28 (2.0)").model_number == 30
    assert get_table("xm430-w350").model_number == 1020


def test_baud_codes():
    x, ax, mx = get_table("XM430-W350"), get_table("AX-12A"), get_table("MX-28")
    assert raw_to_baud(x, 6) == 4_000_000 and baud_to_raw(x, 57600) == 1
    assert raw_to_baud(ax, 1) == 1_000_000 and baud_to_raw(ax, 57600) == 34
    assert raw_to_baud(mx, 250) == 2_250_000 and baud_to_raw(mx, 3_000_000) == 252
    with pytest.raises(ValueError):
        baud_to_raw(x, 12345)


def test_looking_up_one_model_parses_one_table_file_and_finds_the_same_table():
    """Connecting to a bus looks up each servo's model: that must not parse all 52 YAML tables
    (it made Bus() take 6-10 s on the project's machine); the one found is the table the full
    listing holds, by name, alias, suffixed name and model number."""
    from servoloop.firmware_bridge import control_table as ct

    for f in (ct._load_path, ct._all_tables, ct._names, ct._headers):
        f.cache_clear()
    t = ct.get_table("xm430-w350-t")
    assert t.name == "XM430-W350" and ct._load_path.cache_info().currsize == 1
    assert ct._all_tables.cache_info().currsize == 0
    every = ct._all_tables()
    assert t in every
    for table in every:
        assert ct.get_table(table.name) is table
        assert ct.get_table(table.model_number) is table
        for alias in table.aliases:
            assert ct.get_table(alias) is table
