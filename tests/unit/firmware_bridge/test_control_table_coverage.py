"""Servo coverage: every generated table loads, is consistent, and is found by its product names."""

import json
from collections import Counter

import pytest

from servoloop.firmware_bridge.control_table import MODELS, get_table, list_models
from servoloop.firmware_bridge.errors import UnknownModelError

# issue 13's list (model numbers from ROBOTIS's dynamixel.model index / the e-Manual)
REQUIRED = {
    "XL330-M077": 1190, "XL330-M288": 1200, "XL-320": 350,
    "XC330-M181": 1230, "XC330-M288": 1240, "XC330-T181": 1210, "XC330-T288": 1220,
    "XC430-W150": 1070, "XC430-W240": 1080, "XL430-W250": 1060, "2XL430-W250": 1090, "2XC430-W250": 1160,
    "XM430-W210": 1030, "XM430-W350": 1020, "XM540-W150": 1130, "XM540-W270": 1120,
    "XH430-W210": 1010, "XH430-W350": 1000, "XH430-V210": 1050, "XH430-V350": 1040,
    "XH540-W150": 1110, "XH540-W270": 1100, "XH540-V150": 1150, "XH540-V270": 1140,
    "XW540-T140": 1180, "XW540-T260": 1170,
    "MX-28": 29, "MX-64": 310, "MX-106": 320, "MX-28(2.0)": 30, "MX-64(2.0)": 311, "MX-106(2.0)": 321,
    "AX-12A": 12, "AX-18A": 18,
    "YM070-210-R099": 4030, "YM080-230-R099": 4150,
    "PH42-020-S300-R": 2000, "PH54-100-S500-R": 2010, "PH54-200-S500-R": 2020,
    "PM42-010-S260-R": 2100, "PM54-040-S250-R": 2110, "PM54-060-S250-R": 2120,
}


def test_at_least_40_models_and_the_required_ones():
    assert len(MODELS) >= 40
    for name, number in REQUIRED.items():
        t = get_table(name)
        assert (t.name, t.model_number) == (name, number)
        assert t["model_number"].default == number


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_table_has_unique_addresses_and_no_overlaps(name):
    t = get_table(name)
    starts = Counter(r.address for r in t.registers.values())
    assert not [a for a, n in starts.items() if n > 1], f"{name}: two registers at one address"
    spans = sorted((r.address, r.address + r.size, r.name) for r in t.registers.values())
    for (_a0, e0, n0), (a1, _e1, n1) in zip(spans, spans[1:], strict=False):
        assert e0 <= a1, f"{name}: {n0} overlaps {n1}"
    for r in t.registers.values():
        if r.min_raw is not None and r.max_raw is not None:
            assert r.min_raw <= r.max_raw, (name, r.name)
        if r.default is not None and r.min_raw is not None and r.max_raw is not None:
            assert r.min_raw <= r.default <= r.max_raw, (name, r.name, r.default)
    for n in ("model_number", "id", "baud_rate", "goal_position", "present_position", "present_velocity",
              "torque_enable", "status_return_level"):
        assert n in t, (name, n)


def test_model_numbers_unique_per_protocol():
    seen = Counter((t.protocol, t.model_number) for t in MODELS.values())
    assert [k for k, n in seen.items() if n > 1] == []
    for t in MODELS.values():
        assert get_table(t.model_number) is t


@pytest.mark.parametrize("name", sorted(n for n, t in MODELS.items() if t.protocol == 2 and n != "XL-320"))
def test_protocol2_tables_have_indirect_registers(name):
    t = get_table(name)
    addr = [r for r in t.registers.values() if r.name.startswith("indirect_address_")]
    data = [r for r in t.registers.values() if r.name.startswith("indirect_data_")]
    assert len(addr) == len(data) >= 20
    for k in range(1, len(addr) + 1):
        a, d = t[f"indirect_address_{k}"], t[f"indirect_data_{k}"]
        assert (a.size, d.size, a.access, d.access) == (2, 1, "RW", "RW")
        assert a.default == d.address       # e-Manual: Indirect Address k points at Indirect Data k


def test_x_series_indirect_blocks_match_the_emanual():
    t = get_table("XM430-W350")
    assert (t["indirect_address_1"].address, t["indirect_address_20"].address) == (168, 206)
    assert (t["indirect_data_1"].address, t["indirect_data_20"].address) == (224, 243)
    assert (t["indirect_address_21"].address, t["indirect_data_21"].address) == (578, 634)
    p = get_table("PH54-200-S500-R")
    assert (p["indirect_address_1"].address, p["indirect_data_128"].address) == (168, 761)


@pytest.mark.parametrize("alias,name", [
    ("xm430-w350", "XM430-W350"), ("XM430-W350-T", "XM430-W350"), ("XM430-W350-R", "XM430-W350"),
    ("xm540-w270-t/r", "XM540-W270"), ("XL330-M288-T", "XL330-M288"), ("xl330_m077_t", "XL330-M077"),
    ("ph54-200-s500-r", "PH54-200-S500-R"), ("PH54-200-S500", "PH54-200-S500-R"), ("xl-320", "XL-320"),
    ("XC430-T150BB", "XC430-W150"), ("mx-28-2.0", "MX-28(2.0)"), ("2xl430-w250-t", "2XL430-W250"),
])
def test_product_names_with_suffixes_and_any_case(alias, name):
    assert get_table(alias).name == name


def test_unknown_name_lists_close_matches():
    with pytest.raises(UnknownModelError, match=r"'XM430-W355'; did you mean XM430-W350"):
        get_table("XM430-W355")
    with pytest.raises(UnknownModelError, match="no control table for model number 4242"):
        get_table(4242)


def test_datasheet_figures_with_every_emulated_table():
    for t in MODELS.values():
        if t.not_emulated is None:
            ds = t.datasheet
            assert ds is not None and ds.source.startswith("https://emanual.robotis.com/"), t.name
            # the motor line: stall torque / stall current is a plausible torque constant
            assert 0.05 < t.torque_constant_nm_per_a < 20, t.name
        else:
            assert "not emulated" in t.not_emulated


def test_models_cli_json_shape(capsys):
    from servoloop.cli import main

    assert main(["models", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert isinstance(doc, list) and len(doc) == len(MODELS)
    for item in doc:
        assert isinstance(item["name"], str) and isinstance(item["model_number"], int)
        assert item["protocol"] and all(p in (1, 2) for p in item["protocol"])
        assert get_table(item["name"]).model_number == item["model_number"]
    assert {"name": "AX-18A", "model_number": 18, "protocol": [1]}.items() <= \
        next(i for i in doc if i["name"] == "AX-18A").items()
    assert doc == list_models()
    assert main(["models"]) == 0
    assert "XL330-M077" in capsys.readouterr().out


def test_virtual_bus_refuses_models_it_cannot_emulate_and_takes_suffixed_names():
    from servoloop.virtual_bus.spec import ServoSpecError, parse_servo_spec

    assert parse_servo_spec("1:xm430-w350-t,2:XL330-M077,3:AX-18A") == \
        [(1, "XM430-W350"), (2, "XL330-M077"), (3, "AX-18A")]
    with pytest.raises(ServoSpecError, match=r"id 4\): PH54-200-S500-R cannot be emulated yet: DYNAMIXEL-P"):
        parse_servo_spec("1:XM430-W350,4:PH54-200-S500-R")
    with pytest.raises(ServoSpecError, match="YM070-210-R099 cannot be emulated yet"):
        parse_servo_spec("1:ym070-210-r099")
