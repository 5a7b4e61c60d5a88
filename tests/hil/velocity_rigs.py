"""Rigs for the velocity-mode and mixed-bus daemon tests: a lockstep daemon on one pty,
the emulator behind it (a mixed bus carries Protocol 1.0 and 2.0 servos, each answering
its own protocol's packets only, as a real mixed chain does)."""

from __future__ import annotations

import numpy as np

from servoloop.controller.config import config_from_dict
from servoloop.controller.daemon import Daemon
from servoloop.controller.runtime import make_lockstep
from servoloop.firmware_bridge.control_table import get_table
from servoloop.virtual_bus import IndependentServosPlant, default_actuator

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


def lockstep_daemon(cfg, servos):
    """(daemon, lockstep, position(sid) -> rad): the daemon on the emulator."""
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
