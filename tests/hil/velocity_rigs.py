"""Rigs for the velocity-mode and mixed-bus daemon tests: a lockstep daemon on one pty.

:class:`SplitProtocolBus` is a test double for a mixed Protocol 1.0 / 2.0
bus, used while the emulator in this branch cannot put both protocols on
one :class:`~servoloop.virtual_bus.engine.BusEngine`: one pty, two engines
(one per protocol), every instruction packet routed to the engine of its
protocol by its header (``FF FF FD 00``: 2.0; ``FF FF id``: 1.0).  That is
what a real mixed chain does: each servo answers its own protocol's
packets only.  :func:`mixed_lockstep` uses the emulator's own mixed bus when
it has one.
"""

from __future__ import annotations

import os
import select
import time

import numpy as np

from servoloop.controller.clock import SimulatedClock
from servoloop.controller.config import config_from_dict
from servoloop.controller.daemon import Daemon
from servoloop.controller.runtime import Lockstep, make_bus, make_lockstep
from servoloop.firmware_bridge.control_table import get_table
from servoloop.virtual_bus import IndependentServosPlant, default_actuator
from servoloop.virtual_bus.engine import BusEngine
from servoloop.virtual_bus.pty import open_pty

HEADER2 = b"\xff\xff\xfd\x00"


def wheel_config(servos, protocol, params, rate_hz=500, **sections):
    """A config of ``servos`` [(id, model, mode, position or None)] driving independent loads."""
    data = {
        "robot": "wheels", "bus": {"protocol": protocol, "baud": 1_000_000},
        "servos": [{"id": sid, "model": m, "joint": f"j{sid}", "mode": mode} for sid, m, mode, _ in servos],
        "loop": {"rate_hz": rate_hz}, "startup": {"ramp_s": 0.02},
        "controller": {"name": "hold", "params": params},
        "simulation": {"plant": "independent"},
    }
    data.update(sections)
    return config_from_dict(data)


def plant_for(servos):
    """Independent loads starting at each servo's given position (rad, None: 0)."""
    return IndependentServosPlant([default_actuator(get_table(m)) for _, m, _, _ in servos],
                                  position0=[q or 0.0 for *_, q in servos])


class SplitProtocolBus:
    """One pty, one emulated bus per protocol, packets routed by header (see module doc).

    Attributes
    ----------
    port : str, the pty the host opens
    engines : {1: BusEngine, 2: BusEngine}
    packets : {1: int, 2: int}, instruction packets each protocol's servos received
    """

    def __init__(self, servos):
        self.engines, self.index = {}, {}
        for proto in (1, 2):
            part = [s for s in servos if get_table(s[1]).protocol == proto]
            self.engines[proto] = BusEngine([(sid, m) for sid, m, _, _ in part], plant=plant_for(part),
                                            protocol=proto)
            for k, s in enumerate(part):
                self.index[s[0]] = (proto, k)
        self._master, self._slave, self.port = open_pty()
        self._buf = bytearray()
        self.packets = {1: 0, 2: 0}
        self.time_s = 0.0

    def position(self, sid: int) -> float:
        """Joint position of servo ``sid`` in its engine's plant, rad."""
        proto, k = self.index[sid]
        return float(self.engines[proto].position[k])

    def advance(self, dt: float) -> None:
        for e in self.engines.values():
            e.advance(dt)
        self.time_s += dt

    def _packets(self):
        buf = self._buf
        while len(buf) >= 4:
            if buf[:4] == HEADER2:
                if len(buf) < 7:
                    return
                total, proto = 7 + (buf[5] | buf[6] << 8), 2
            elif buf[:2] == b"\xff\xff":
                total, proto = 4 + buf[3], 1
            else:
                del buf[:1]         # line noise between packets
                continue
            if len(buf) < total:
                return
            yield proto, bytes(buf[:total])
            del buf[:total]

    def pump(self, timeout: float = 0.5) -> int:
        """Answer every complete instruction on the wire (waits up to ``timeout`` s for one)."""
        handled = 0
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._buf += os.read(self._master, 65536)
            except BlockingIOError:
                pass
            for proto, pkt in self._packets():
                self.packets[proto] += 1
                handled += 1
                out = b"".join(r for _, replies in self.engines[proto].feed(pkt) for r, _, _ in replies)
                if out:
                    os.write(self._master, out)
            if handled and not self._buf:
                return handled
            left = deadline - time.monotonic()
            if left <= 0:
                return handled
            select.select([self._master], [], [], left)

    def close(self) -> None:
        if self._master >= 0:
            os.close(self._master)
            os.close(self._slave)
            self._master = -1


def emulator_mixes_protocols() -> bool:
    """True when one BusEngine carries Protocol 1.0 and 2.0 servos (the emulator's mixed bus)."""
    try:
        BusEngine("1:AX-18A,2:XM430-W350")
    except ValueError:
        return False
    return True


def emulator_has_direction_bit() -> bool:
    """True when the emulator takes Moving Speed 1024-2047 (CW) in wheel mode on AX."""
    from servoloop.firmware_bridge import _codec

    e = BusEngine("1:AX-18A", protocol=1)
    err = []
    for addr, raw in ((6, 0), (8, 0), (32, 1024 + 100)):     # angle limits 0 (wheel), then CW
        for _, replies in e.feed(_codec.write(1, 1, addr, raw.to_bytes(2, "little"))):
            err += [r[4] for r, _, _ in replies]
    return err == [0, 0, 0]


def lockstep_daemon(cfg, servos, split: bool = False):
    """(daemon, lockstep, position(sid) -> rad): the daemon on the emulator (or the split double)."""
    if split:
        virtual = SplitProtocolBus(servos)
        lock = Lockstep(virtual, SimulatedClock(on_advance=virtual.advance),
                        make_bus(cfg, virtual.port, on_after_write=virtual.pump))
        position = virtual.position
    else:
        lock = make_lockstep(cfg, plant=plant_for(servos))
        order = {s[0]: k for k, s in enumerate(servos)}

        def position(sid):
            return float(lock.virtual.engine.position[order[sid]])
    daemon = Daemon(cfg, lock.bus, lock.clock, telemetry_path=None, socket_path=None)
    return daemon, lock, position


def sample(lock, position, ids, hooks=()):
    """Record (t, position of each id) after every advance; ``hooks``: [(t, fn)] run once at t."""
    log = []
    inner = lock.clock.on_advance
    pending = sorted(hooks, key=lambda h: h[0])
    t = [0.0]

    def on_advance(dt):
        inner(dt)
        t[0] += dt
        log.append([t[0]] + [position(i) for i in ids])
        while pending and t[0] >= pending[0][0] - 1e-12:
            pending.pop(0)[1]()

    lock.clock.on_advance = on_advance
    return log


def speed(log, col: int, t0: float, t1: float) -> float:
    """Least-squares slope of column ``col`` of ``log`` between ``t0`` and ``t1``, rad/s."""
    a = np.array(log)
    m = (a[:, 0] > t0) & (a[:, 0] < t1)
    return float(np.polyfit(a[m, 0], a[m, col], 1)[0])
