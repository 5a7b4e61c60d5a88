"""Dynamixel control tables, loaded from the YAML data files in ``tables/``.

Each file describes one model (one firmware protocol): for every register its
address, size, access, EEPROM/RAM area, encoding, SI unit and scale, raw
zero, factory default and raw range.  Register names are snake_case and
shared across models (``present_velocity`` is "Present Speed" on AX/MX 1.0),
so code above this module can ask for the same name on any servo.

>>> t = get_table("XM430-W350")
>>> t["present_position"].address
132
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType

import yaml

from servoloop.firmware_bridge.errors import UnknownModelError

__all__ = [
    "Register",
    "Datasheet",
    "ControlTable",
    "MODELS",
    "get_table",
    "model_name",
    "list_models",
    "baud_to_raw",
    "raw_to_baud",
    "TABLE_DIR",
]

TABLE_DIR = Path(__file__).with_name("tables")
_ENCODINGS = ("u", "s", "sm")
_COLUMNS = ("address", "size", "access", "memory", "encoding", "unit", "scale", "zero_raw",
            "default", "min_raw", "max_raw")


@dataclass(frozen=True)
class Register:
    """One register of a control table.

    SI value = ``(decoded_raw - zero_raw) * scale`` in ``unit``; see
    :mod:`firmware_bridge.units`.  ``encoding`` is ``"u"`` (unsigned),
    ``"s"`` (two's complement over ``size`` bytes) or ``"sm"``
    (sign-magnitude, direction bit 10 = 1024, set means negative / CW).
    """

    name: str
    address: int
    size: int
    access: str
    signed: bool
    eeprom: bool
    unit: str
    scale: float
    default: int | None
    min_raw: int | None
    max_raw: int | None
    encoding: str = "u"
    zero_raw: int = 0

    @property
    def writable(self) -> bool:
        return self.access == "RW"


@dataclass(frozen=True)
class Datasheet:
    """A model's motor figures from its ROBOTIS e-Manual Specifications table.

    The stall torque [N m], stall current [A] and no-load speed [rev/min] all
    belong to one supply voltage ``voltage_v`` [V]; ``recommended_voltage_v``
    is the page's recommended input voltage; ``gear_ratio`` is motor turns
    per output turn; ``source`` the page.
    """

    voltage_v: float
    recommended_voltage_v: float
    stall_torque_nm: float
    stall_current_a: float
    no_load_speed_rpm: float
    gear_ratio: float
    source: str = ""

    @property
    def no_load_speed_rad_s(self) -> float:
        """No-load output speed at ``voltage_v``, rad/s."""
        return self.no_load_speed_rpm * 2.0 * math.pi / 60.0


_DATASHEET_KEYS = {f for f in Datasheet.__dataclass_fields__}


def _parse_datasheet(doc, source: str) -> Datasheet | None:
    if doc is None:
        return None
    if not isinstance(doc, dict):
        raise ValueError(f"{source}: datasheet must be a mapping of {sorted(_DATASHEET_KEYS)}")
    missing = sorted(_DATASHEET_KEYS - {"source"} - set(doc))
    unknown = sorted(set(doc) - _DATASHEET_KEYS)
    if missing or unknown:
        raise ValueError(f"{source}: datasheet: missing keys {missing}, unknown keys {unknown}")
    values = {k: float(v) for k, v in doc.items() if k != "source"}
    for k, v in values.items():
        if not (math.isfinite(v) and v > 0):
            raise ValueError(f"{source}: datasheet {k} must be a number > 0, got {doc[k]!r}")
    return Datasheet(source=str(doc.get("source", "")), **values)


class ControlTable:
    """The registers of one servo model; immutable after loading.

    ``datasheet`` (:class:`Datasheet` or None) holds the model's motor
    figures: stall torque, no-load speed, their voltage, gear ratio.
    """

    def __init__(self, name: str, model_number: int, protocol: int,
                 registers: dict[str, Register], stall_torque_nm: float | None = None,
                 stall_current_a: float | None = None, source: str = "",
                 datasheet: Datasheet | None = None, aliases: tuple[str, ...] = (),
                 not_emulated: str | None = None):
        self.name = name
        # other product names with this very table and model number (e.g. XC430-T150BB)
        self.aliases = tuple(aliases)
        # why the virtual bus cannot emulate this model yet (None: it can)
        self.not_emulated = not_emulated
        self.datasheet = datasheet
        self.model_number = model_number
        self.protocol = protocol
        self.registers = MappingProxyType(dict(registers))
        self.stall_torque_nm = stall_torque_nm
        self.stall_current_a = stall_current_a
        self.source = source
        self._by_address = {r.address: r for r in registers.values()}

    def __getitem__(self, name: str) -> Register:
        try:
            return self.registers[name]
        except KeyError:
            raise KeyError(
                f"{self.name} has no register {name!r} (table {self.source}); "
                f"known: {', '.join(sorted(self.registers))}"
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self.registers

    def at(self, address: int) -> Register | None:
        """The register starting at ``address``, or None."""
        return self._by_address.get(address)

    @property
    def size(self) -> int:
        """Bytes from address 0 to the end of the last register."""
        return max(r.address + r.size for r in self.registers.values())

    @property
    def torque_constant_nm_per_a(self) -> float | None:
        """Stall torque over stall current from the datasheet, N*m/A (an estimate)."""
        if self.stall_torque_nm and self.stall_current_a:
            return self.stall_torque_nm / self.stall_current_a
        return None

    def __repr__(self) -> str:
        return f"ControlTable({self.name!r}, model_number={self.model_number}, protocol={self.protocol})"


def _parse_register(name: str, row, source: str) -> Register:
    if not isinstance(row, list) or len(row) != len(_COLUMNS):
        raise ValueError(f"{source}: register {name!r} needs {len(_COLUMNS)} columns {_COLUMNS}, got {row!r}")
    d = dict(zip(_COLUMNS, row, strict=True))
    if d["access"] not in ("R", "RW"):
        raise ValueError(f"{source}: register {name!r}: access must be R or RW, got {d['access']!r}")
    if d["memory"] not in ("E", "R"):
        raise ValueError(f"{source}: register {name!r}: memory must be E or R, got {d['memory']!r}")
    if d["encoding"] not in _ENCODINGS:
        raise ValueError(f"{source}: register {name!r}: encoding must be one of {_ENCODINGS}")
    if d["size"] not in (1, 2, 4):
        raise ValueError(f"{source}: register {name!r}: size {d['size']} not in 1, 2, 4")
    return Register(
        name=name, address=int(d["address"]), size=int(d["size"]), access=d["access"],
        signed=d["encoding"] != "u", eeprom=d["memory"] == "E", unit=str(d["unit"] or ""),
        scale=float(d["scale"]), default=d["default"], min_raw=d["min_raw"], max_raw=d["max_raw"],
        encoding=d["encoding"], zero_raw=int(d["zero_raw"]),
    )


# libyaml's parser where PyYAML has it: the same documents, ~7x faster than the pure-Python one
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_table(path: Path) -> ControlTable:
    """Parse one YAML table file; errors name the file and the register."""
    with open(path) as f:
        doc = yaml.load(f, Loader=_YAML_LOADER)  # noqa: S506 - a safe loader (C or Python)
    source = str(path)
    known = {"name", "model_number", "protocol", "registers", "stall_torque_nm", "stall_current_a",
             "datasheet", "aliases", "not_emulated"}
    unknown = set(doc) - known
    if unknown:
        raise ValueError(f"{source}: unknown keys {sorted(unknown)}")
    regs = {n: _parse_register(n, row, source) for n, row in doc["registers"].items()}
    if doc["protocol"] not in (1, 2):
        raise ValueError(f"{source}: protocol must be 1 or 2")
    return ControlTable(str(doc["name"]), int(doc["model_number"]), int(doc["protocol"]), regs,
                        doc.get("stall_torque_nm"), doc.get("stall_current_a"), source,
                        _parse_datasheet(doc.get("datasheet"), source),
                        tuple(str(a) for a in doc.get("aliases") or ()), doc.get("not_emulated"))


@cache
def _load_path(path: Path) -> ControlTable:
    return load_table(path)


@cache
def _all_tables() -> tuple[ControlTable, ...]:
    return tuple(_load_path(p) for p in sorted(TABLE_DIR.glob("*.yaml")))


@cache
def _headers() -> tuple[dict[str, Path], dict[int, Path]] | None:
    """Normalised name / alias -> file and model number -> file, from each file's top-level
    ``name:``, ``aliases: [...]`` and ``model_number:`` lines, without parsing the YAML: a
    lookup then parses one table, not all 52 (seconds on a small machine).  None when a
    file's header is not in that form (the caller parses everything instead)."""
    by_name: dict[str, Path] = {}
    by_number: dict[int, Path] = {}
    for path in sorted(TABLE_DIR.glob("*.yaml")):
        name = number = None
        aliases: list[str] = []
        with open(path) as f:
            for line in f:
                if line.startswith("registers:"):
                    break
                key, _, value = line.partition(":")
                value = value.split("#")[0].strip().strip("'\"")
                if key == "name":
                    name = value
                elif key == "model_number" and value.isdigit():
                    number = int(value)
                elif key == "aliases":
                    if not (value.startswith("[") and value.endswith("]")):
                        return None
                    aliases = [a.strip().strip("'\"") for a in value[1:-1].split(",") if a.strip()]
        if not name or number is None:
            return None
        for n in (name, *aliases):
            by_name.setdefault(_norm(n), path)
        by_number.setdefault(number, path)
    for key, path in list(by_name.items()):
        by_name.setdefault(_strip_suffix(key), path)
    return by_name, by_number


def _index() -> tuple[dict[str, ControlTable], dict[int, ControlTable]]:
    tables = _all_tables()
    return {t.name: t for t in tables}, {t.model_number: t for t in tables}


class _Models:
    """Read-only mapping name -> ControlTable, loaded on first use."""

    def __getitem__(self, key):
        return _index()[0][key]

    def __iter__(self):
        return iter(_index()[0])

    def __len__(self):
        return len(_index()[0])

    def __contains__(self, key):
        return key in _index()[0]

    def keys(self):
        return _index()[0].keys()

    def items(self):
        return _index()[0].items()

    def values(self):
        return _index()[0].values()

    def __repr__(self):
        return f"MODELS({sorted(self)})"


MODELS = _Models()


# Interface suffixes of product names: -T (TTL), -R (RS-485), -T/R, -RA; ROBOTIS prints them on
# the servo ("XM430-W350-T") but the control table is the same.
_SUFFIXES = ("-T/R", "-TR", "-RA", "-T", "-R")


def _norm(name: str) -> str:
    return name.upper().replace(" ", "").replace("_", "-").replace("-2.0", "(2.0)")


def _strip_suffix(key: str) -> str:
    for suf in _SUFFIXES:
        if key.endswith(suf) and len(key) > len(suf) + 3:
            return key[: -len(suf)]
    return key


def _names_of(t: ControlTable) -> set[str]:
    """Normalised names a table answers to (name, aliases, each without an interface suffix)."""
    keys = {_norm(n) for n in (t.name, *t.aliases)}
    return keys | {_strip_suffix(k) for k in keys}


@cache
def _names() -> dict[str, ControlTable]:
    """Normalised name -> table: canonical names, aliases, and both without interface suffix."""
    out: dict[str, ControlTable] = {}
    for t in _all_tables():
        for n in (t.name, *t.aliases):
            out.setdefault(_norm(n), t)
    for key, t in list(out.items()):
        out.setdefault(_strip_suffix(key), t)
    return out


def get_table(model: str | int) -> ControlTable:
    """The control table of ``model``: a name or a model number.

    Names are matched in any case, with or without the interface suffix
    printed on the servo (``xm430-w350``, ``XM430-W350-T``, ``XL330-M288-T``,
    ``XM540-W270-R``, ``MX-28 (2.0)``), and by their aliases
    (``XC430-T150BB``).  Raises :class:`UnknownModelError` naming the model
    and the closest known names.
    """
    heads = _headers()
    if heads is not None:
        # one file parsed, not every table (connecting to 12 servos took 6-10 s of YAML)
        if isinstance(model, int) and not isinstance(model, bool):
            path = heads[1].get(model)
        else:
            key = _norm(str(model))
            path = heads[0].get(key) or heads[0].get(_strip_suffix(key))
        if path is not None:
            t = _load_path(path)
            if isinstance(model, int) and not isinstance(model, bool):
                if model == t.model_number:
                    return t
            elif {key, _strip_suffix(key)} & _names_of(t):
                return t
    by_name, by_number = _index()
    if isinstance(model, int) and not isinstance(model, bool):
        if model in by_number:
            return by_number[model]
        raise UnknownModelError(f"no control table for model number {model}; known: "
                                + ", ".join(f"{t.name} ({t.model_number})" for t in _all_tables()))
    key = _norm(str(model))
    names = _names()
    for k in (key, _strip_suffix(key)):
        if k in names:
            return names[k]
    import difflib

    close = difflib.get_close_matches(_strip_suffix(key), list(names), n=5, cutoff=0.6)
    close_names = list(dict.fromkeys(names[c].name for c in close))
    hint = f"did you mean {', '.join(close_names)}? " if close_names else ""
    raise UnknownModelError(
        f"no control table for model {model!r}; {hint}known: "
        + ", ".join(f"{t.name} ({t.model_number})" for t in _all_tables())
        + " (`servoloop models` lists them)"
    )


def list_models() -> list[dict]:
    """Every supported model: ``[{"name", "model_number", "protocol", ...}]``, sorted by name.

    ``protocol`` is a list (one firmware per table today); ``aliases`` and
    ``emulated`` (whether ``servoloop virtual-bus`` can emulate it) are extra keys.
    """
    out = []
    for t in sorted(_all_tables(), key=lambda t: t.name):
        out.append({"name": t.name, "model_number": t.model_number, "protocol": [t.protocol],
                    "aliases": list(t.aliases), "emulated": t.not_emulated is None and t.datasheet is not None})
    return out


def model_name(model_number: int) -> str:
    """Model name for a model number (a servo, else an IMU board of :mod:`.imu`), or ``"unknown(N)"``."""
    try:
        return get_table(int(model_number)).name
    except UnknownModelError:
        from servoloop.firmware_bridge.imu import imu_model_name

        return imu_model_name(int(model_number)) or f"unknown({model_number})"


# Baud Rate(8) register values of Protocol 2.0 firmware (X, MX(2.0)).
_BAUD_V2 = {0: 9600, 1: 57600, 2: 115200, 3: 1_000_000, 4: 2_000_000, 5: 3_000_000,
            6: 4_000_000, 7: 4_500_000}
# Protocol 1.0 firmware: baud = 2 Mbps / (raw + 1), plus MX's 250..252 specials.
_BAUD_V1_SPECIAL = {250: 2_250_000, 251: 2_500_000, 252: 3_000_000}


def raw_to_baud(table: ControlTable, raw: int) -> int:
    """Bits per second for a Baud Rate register value of ``table``'s firmware."""
    if table.protocol == 2:
        if raw not in _BAUD_V2:
            raise ValueError(f"{table.name}: baud_rate raw {raw} not in {sorted(_BAUD_V2)}")
        return _BAUD_V2[raw]
    if raw in _BAUD_V1_SPECIAL and table.name.startswith("MX"):
        return _BAUD_V1_SPECIAL[raw]
    return round(2_000_000 / (raw + 1))


def baud_to_raw(table: ControlTable, baud: int) -> int:
    """Baud Rate register value for ``baud`` bps (error < 3 % for Protocol 1.0)."""
    if table.protocol == 2:
        for raw, b in _BAUD_V2.items():
            if b == baud:
                return raw
        raise ValueError(f"{table.name}: {baud} bps not available; use one of {sorted(_BAUD_V2.values())}")
    if table.name.startswith("MX"):
        for raw, b in _BAUD_V1_SPECIAL.items():
            if b == baud:
                return raw
    raw = round(2_000_000 / baud) - 1
    if raw < 0 or raw > 254 or abs(2_000_000 / (raw + 1) - baud) / baud > 0.03:
        raise ValueError(f"{table.name}: {baud} bps not reachable within 3 %")
    return raw
