"""The real-servo suite's target: a real servo (``--servo-port``) or a virtual bus process.

``servo_target`` is one servo: with ``--servo-port`` the real one at
``--servo-id`` (model from ``--servo-model`` or read by ping); without it a
``servoloop virtual-bus`` process on a pty serving one emulated servo of
``--servo-model`` (default XM430-W350 on Protocol 2.0, AX-18A on 1.0), so the
suite runs in every ``make test`` and the gate's code path is exercised.
``leave_as_found`` snapshots every writable register before the suite and
writes back whatever differs afterwards (torque off first, torque last).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from servoloop.firmware_bridge.bus import Bus, ServoSpec
from servoloop.firmware_bridge.control_table import get_table
from tests.hil.conftest import _start, _stop

_VIRTUAL_DEFAULT = {1: "AX-18A", 2: "XM430-W350"}


@dataclass(frozen=True)
class ServoTarget:
    """One servo to test: where it is and what it is."""

    port: str
    baud: int
    protocol: int
    id: int
    model: str
    real: bool

    def bus(self) -> Bus:
        """An unopened :class:`Bus` on this servo (use as a context manager)."""
        return Bus(self.port, self.baud, self.protocol, [ServoSpec(id=self.id, model=self.model)])


def _model_by_ping(port, baud, protocol, servo_id) -> str:
    with Bus(port, baud, protocol, []) as bus:
        return get_table(bus.ping(servo_id)).name


@pytest.fixture(scope="session")
def servo_target(request):
    cfg = request.config
    port, baud = cfg.getoption("--servo-port"), cfg.getoption("--servo-baud")
    protocol, sid, model = cfg.getoption("--servo-protocol"), cfg.getoption("--servo-id"), cfg.getoption("--servo-model")
    proc = None
    if port:
        model = get_table(model).name if model else _model_by_ping(port, baud, protocol, sid)
        real = True
    else:
        model = get_table(model or _VIRTUAL_DEFAULT[protocol]).name
        proc, port = _start(servos=f"{sid}:{model}", protocol=protocol, baud=baud)
        real = False
    if get_table(model).protocol != protocol:
        pytest.fail(f"--servo-model {model} speaks Protocol {get_table(model).protocol}.0, "
                    f"--servo-protocol is {protocol}")
    try:
        yield ServoTarget(port, baud, protocol, sid, model, real)
    finally:
        if proc is not None:
            _stop(proc)


def _writable(table):
    skip = {"id", "baud_rate", "protocol_type", "lock"}       # never touched; lock cannot be undone
    regs = [r for n, r in table.registers.items() if r.writable and n not in skip
            and not n.startswith("indirect_data_")]
    return sorted(regs, key=lambda r: (not r.eeprom, r.name == "torque_enable"))


@pytest.fixture(scope="session")
def leave_as_found(servo_target):
    """Registers as found before the suite -> written back after it; yields the snapshot {name: raw}."""
    t = servo_target
    with t.bus() as bus:
        table = bus.table(t.id)
        regs = _writable(table)
        before = {r.name: bus.read_raw(t.id, r.name) for r in regs}
    yield before
    with t.bus() as bus:
        bus.write_raw(t.id, "torque_enable", 0)
        for r in regs:                    # EEPROM first (needs torque off), torque_enable last
            if bus.read_raw(t.id, r.name) != before[r.name]:
                bus.write_raw(t.id, r.name, before[r.name])
        after = {r.name: bus.read_raw(t.id, r.name) for r in regs}
    changed = {n: (before[n], after[n]) for n in before if after[n] != before[n]}
    assert not changed, f"servo {t.id} not left as found: {changed}"
