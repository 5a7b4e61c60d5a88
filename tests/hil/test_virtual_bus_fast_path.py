"""The compiled reply path answers byte for byte as the Python engine does.

Two pty servers on identical buses (a plant that never moves, no position
noise, so the state the replies carry is the same whenever they are read):
one with the compiled reader (``fast=True``, ``--fast-path``), one without.  The
same byte stream goes to both: a scripted part and a seeded-random part made
of sync reads of present and goal registers (servos and the IMU board), sync
writes in and out of range, writes to Torque Enable / Operating Mode between
them, reads over Indirect Data, READ and PING, packets split across writes,
several packets in one write, garbage, bad CRCs / checksums, unknown ids,
Protocol 1.0 and 2.0 on one bus.  Every reply byte, the engines' final control
tables and their statistics must be equal, and the fast path must have
answered a good share of the reads itself (so the test cannot pass with it
silently off).  No timing is asserted.
"""

from __future__ import annotations

import os
import random
import select
import threading
import time

import numpy as np
import pytest

from servoloop.firmware_bridge import protocol as P
from servoloop.firmware_bridge.imu import IMU_REGISTERS, get_imu_table
from servoloop.virtual_bus.engine import BusEngine
from servoloop.virtual_bus.imu_device import ImuEmulation
from servoloop.virtual_bus.server import PtyServer

pytestmark = pytest.mark.hil

X = "XM430-W350"
AX = "AX-18A"
MX1 = "MX-28"                # Protocol 1.0 with BULK READ
P2_IDS = (1, 2, 3, 4)
P1_IDS = (5, 6)              # AX-18A, MX-28
IMU_ID = 200
PRESENT = (126, 10)          # present current .. present position
GOAL = (116, 4)
GOAL_VEL = (104, 4)
INDIRECT = (224, 4)          # Indirect Data 1..4
AX_GOAL = (30, 2)            # Goal Position of both 1.0 models
P1_PRESENT = (36, 2)


class StillPlant:
    """Joints that never move: the replies carry the same state whenever they are read."""

    def __init__(self, n: int):
        self.n = n

    def step(self, dt, goal_rad, torque_on, position, velocity, torque):
        position[:] = 0.0
        velocity[:] = 0.0
        torque[:] = 0.0


def _engine(mixed: bool) -> BusEngine:
    servos = [(i, X) for i in P2_IDS] + ([(5, AX), (6, MX1)] if mixed else [])
    return BusEngine(servos, plant=StillPlant(len(servos)), noise_ticks=0.0,
                     imu=ImuEmulation(id=IMU_ID))


class _Host:
    """Writes the same bytes to two buses and collects what each answers."""

    def __init__(self, ports):
        import serial

        self.ports = [serial.Serial(p, 1_000_000, timeout=0) for p in ports]
        self.rx = [bytearray() for _ in ports]

    def close(self):
        for p in self.ports:
            p.close()

    def _pull(self, k: int, wait: float) -> bool:
        fd = self.ports[k].fileno()
        ready, _, _ = select.select([fd], [], [], wait)
        if ready:
            self.rx[k] += os.read(fd, 65536)
        return bool(ready)

    def send(self, *chunks: bytes, gap: float = 0.0, quiet: float = 0.03) -> None:
        """Write ``chunks`` (``gap`` s apart) to both buses; collect until each is ``quiet`` s silent."""
        for c in chunks:
            for p in self.ports:
                os.write(p.fileno(), c)
            if gap:
                time.sleep(gap)
        for k in range(len(self.ports)):
            while self._pull(k, quiet):
                pass


def _p2(sid, inst, params=b""):
    return P.build_instruction(2, sid, inst, bytes(params))


def _p1(sid, inst, params=b""):
    return P.build_instruction(1, sid, inst, bytes(params))


def _le(v: int, n: int) -> bytes:
    return (v & ((1 << 8 * n) - 1)).to_bytes(n, "little")


def sync_read(addr_len, ids) -> bytes:
    a, n = addr_len
    return _p2(0xFE, 0x82, _le(a, 2) + _le(n, 2) + bytes(ids))


def sync_write(addr_len, items) -> bytes:
    a, n = addr_len
    return _p2(0xFE, 0x83, _le(a, 2) + _le(n, 2) + b"".join(bytes((i,)) + _le(v, n) for i, v in items))


def sync_write_p1(addr_len, items) -> bytes:
    a, n = addr_len
    return _p1(0xFE, 0x83, bytes((a, n)) + b"".join(bytes((i,)) + _le(v, n) for i, v in items))


def write(sid, address, value, n) -> bytes:
    return _p2(sid, 0x03, _le(address, 2) + _le(value, n))


def bulk_read(items) -> bytes:
    return _p2(0xFE, 0x92, b"".join(bytes((i,)) + _le(a, 2) + _le(n, 2) for i, (a, n) in items))


def bulk_read_p1(items) -> bytes:
    return _p1(0xFE, 0x92, b"\x00" + b"".join(bytes((n, i, a)) for i, (a, n) in items))


def bad_crc(pkt: bytes) -> bytes:
    return pkt[:-1] + bytes(((pkt[-1] + 1) & 0xFF,))


def _imu_span() -> tuple[int, int]:
    t = get_imu_table("OpenCR")
    regs = [t[n] for n in IMU_REGISTERS]
    lo = min(r.address for r in regs)
    return lo, max(r.address + r.size for r in regs) - lo


def scripted(mixed: bool) -> list[tuple]:
    ids = list(P2_IDS)
    s = [
        (sync_read(PRESENT, ids),),                                     # first: at the baud it learns
        (sync_read(PRESENT, ids),),
        (sync_read(GOAL, ids),),
        (sync_write(GOAL, [(i, 2048 + 10 * i) for i in ids]), sync_read(GOAL, ids)),
        (sync_write(GOAL, [(i, 2048 + 10 * i) for i in ids]) + sync_read(GOAL, ids),),   # one chunk
        (sync_write(GOAL, [(1, 100), (2, 5000)]),),                     # 5000: past Max Position Limit
        (sync_read(GOAL, ids),),
        (write(1, 64, 1, 1),),                                          # torque on
        (sync_write(GOAL, [(1, 1000), (3, 3000)]), sync_read(GOAL, [1, 3])),
        (write(2, 11, 1, 1),),                                          # velocity mode (torque off)
        (write(1, 11, 1, 1),),                                          # refused: torque on
        (sync_write(GOAL_VEL, [(2, 50), (3, 400), (4, -50)]),),         # 400: past Velocity Limit (3)
        (sync_write(GOAL_VEL, [(2, 50), (4, -50)]), sync_read(GOAL_VEL, ids)),
        (write(2, 108, 0xFD, 4),),                                      # Profile Acceleration 253 ...
        (sync_write(GOAL_VEL, [(2, -1)]) + sync_read((104, 8), [2]),),  # ... after FF FF FF FF: stuffed reply
        (sync_write(GOAL_VEL, [(2, -3)]), bulk_read([(2, (104, 8))])),
        (write(3, 168, 132, 2), write(3, 170, 133, 2)),                 # Indirect Data 1, 2 -> Present Position
        (sync_read(INDIRECT, ids),),
        (sync_read((168, 2), ids),),
        (_p2(1, 0x02, _le(116, 2) + _le(4, 2)),),                       # READ
        (_p2(2, 0x01),), (_p2(0xFE, 0x01),),                            # PING, broadcast PING
        (bulk_read([(1, PRESENT), (IMU_ID, _imu_span()), (3, GOAL)]),),
        (bulk_read([(1, PRESENT), (2, INDIRECT)]),),
        (sync_read(PRESENT, [1, 9, 2]),),                               # unknown id
        (bad_crc(sync_read(PRESENT, ids)),), (bad_crc(_p2(1, 0x02, _le(116, 2) + _le(4, 2))),),
        (b"\x01\x02\x03garbage",), (b"\xff\xff\xfd",),                  # garbage, a lone header start
        (sync_read(PRESENT, ids),),
        (sync_read(_imu_span(), [IMU_ID]),), (sync_read(_imu_span(), [1, IMU_ID, 4]),),
        (write(4, 7, 44, 1),),                                          # a new id
        (sync_read(PRESENT, [1, 2, 3, 44]),),
        (write(44, 7, 4, 1),),
        (write(1, 68, 0, 1),), (sync_read(PRESENT, ids),), (write(1, 68, 2, 1),),   # Status Return Level
    ]
    pkt = sync_write(GOAL, [(i, 1500) for i in ids]) + sync_read(PRESENT, ids)
    s.append(("split", pkt[:9], pkt[9:]))                               # one packet across two writes
    if mixed:
        s += [
            (sync_write_p1(AX_GOAL, [(5, 300), (6, 700)]),),
            (_p1(5, 0x02, bytes(AX_GOAL)),),
            (sync_write_p1(AX_GOAL, [(5, 2000)]),),                     # past 1023
            (_p1(5, 0x03, bytes((24, 1))),),                            # AX torque on
            (sync_write_p1(AX_GOAL, [(5, 512), (6, 100)]), sync_read(GOAL, ids)),
            (_p1(6, 0x03, bytes((6, 100, 0))),),                        # CW Angle Limit 100 (torque off)
            (sync_write_p1(AX_GOAL, [(6, 50)]),),                       # below it
            (sync_write_p1(AX_GOAL, [(6, 150)]), _p1(6, 0x02, bytes(AX_GOAL))),
            (bad_crc(sync_write_p1(AX_GOAL, [(5, 1)])),),
            (_p1(6, 0x02, bytes(P1_PRESENT)) + _p1(5, 0x02, bytes(P1_PRESENT)),),
            (_p1(5, 0x01),), (_p1(6, 0x01), _p1(9, 0x01)),
            (bulk_read_p1([(6, P1_PRESENT), (6, AX_GOAL)]),),
            (bulk_read_p1([(6, P1_PRESENT), (5, P1_PRESENT)]),),        # the AX ignores it
            (sync_write_p1(AX_GOAL, [(6, 5000)]),), (sync_write_p1(AX_GOAL, [(6, 4000)]),),
            (_p1(6, 0x02, bytes(AX_GOAL)),),
        ]
    return s


def randomized(mixed: bool, seed: int, n: int) -> list[tuple]:
    rng = random.Random(seed)
    ids = list(P2_IDS)

    def some_ids():
        out = rng.sample(ids, rng.randint(1, len(ids)))
        if rng.random() < 0.1:
            out.insert(rng.randrange(len(out) + 1), rng.choice((9, 44, IMU_ID)))
        return out

    makers = [
        (6, lambda: sync_read(PRESENT, some_ids())),
        (4, lambda: sync_read(GOAL, some_ids())),
        (4, lambda: sync_write(GOAL, [(i, rng.randint(-200, 4300)) for i in some_ids()])),
        (2, lambda: sync_write(GOAL_VEL, [(i, rng.randint(-300, 300)) for i in some_ids()])),
        (1, lambda: sync_read(GOAL_VEL, some_ids())),
        (1, lambda: write(rng.choice(ids), 64, rng.randint(0, 1), 1)),
        (1, lambda: write(rng.choice(ids), 11, rng.choice((1, 3, 4)), 1)),
        (1, lambda: sync_read(INDIRECT, some_ids())),
        (1, lambda: _p2(rng.choice((*ids, 9)), 0x02, _le(rng.choice((116, 126, 224)), 2) + _le(4, 2))),
        (1, lambda: _p2(rng.choice((*ids, IMU_ID, 9)), 0x01)),
        (1, lambda: bad_crc(sync_read(PRESENT, some_ids()))),
        (1, lambda: bytes(rng.randrange(256) for _ in range(rng.randint(1, 12)))),
        (1, lambda: sync_read(_imu_span(), [IMU_ID] + some_ids())),
        (2, lambda: bulk_read([(i, rng.choice((PRESENT, GOAL, INDIRECT))) for i in some_ids()])),
    ]
    if mixed:
        makers += [
            (3, lambda: sync_write_p1(AX_GOAL, [(i, rng.randint(0, 1100)) for i in
                                                rng.sample(P1_IDS, rng.randint(1, 2))])),
            (1, lambda: _p1(rng.choice(P1_IDS), 0x02, bytes(AX_GOAL))),
            (1, lambda: _p1(rng.choice(P1_IDS), 0x03, bytes((24, rng.randint(0, 1))))),
            (3, lambda: _p1(rng.choice((*P1_IDS, 9)), 0x02, bytes(rng.choice((P1_PRESENT, AX_GOAL))))),
            (1, lambda: _p1(rng.choice((*P1_IDS, 9)), 0x01)),
            (2, lambda: bulk_read_p1([(rng.choice(P1_IDS), P1_PRESENT)])),
        ]
    weights = [w for w, _ in makers]
    out = []
    for _ in range(n):
        pkts = [rng.choices(makers, weights)[0][1]() for _ in range(rng.choice((1, 1, 1, 2, 3)))]
        data = b"".join(pkts)
        if rng.random() < 0.1 and len(data) > 4:
            cut = rng.randrange(1, len(data))
            out.append(("split", data[:cut], data[cut:]))
        else:
            out.append((data,))
    return out


def _serve(engine, fast: bool):
    server = PtyServer(engine, fast=fast)
    th = threading.Thread(target=server.serve, name=f"server-{fast}", daemon=True)
    th.start()
    return server, th


@pytest.mark.parametrize("mixed", [False, True], ids=["protocol2", "mixed"])
def test_fast_path_answers_as_the_engine(mixed):
    engines = [_engine(mixed), _engine(mixed)]
    servers = [_serve(engines[0], True), _serve(engines[1], False)]
    host = _Host([s.port for s, _ in servers])
    steps = scripted(mixed) + randomized(mixed, seed=11 if mixed else 7, n=150)
    per_step = []
    try:
        for step in steps:
            before = [len(r) for r in host.rx]
            if step[0] == "split":
                host.send(*step[1:], gap=0.002)
            else:
                host.send(*step)
            per_step.append(tuple(bytes(r[b:]) for r, b in zip(host.rx, before, strict=True)))
        host.send(quiet=0.3)          # anything late
    finally:
        host.close()
        for s, th in servers:
            s.stop()
            th.join(timeout=5.0)
    fast, slow = host.rx
    first_diff = next((k for k, (a, b) in enumerate(per_step) if a != b), None)
    assert bytes(fast) == bytes(slow), (
        f"replies differ (first at step {first_diff}: {steps[first_diff] if first_diff is not None else ''})")
    assert len(slow) > 2000                    # the stream was answered at all
    a, b = engines
    for name in a.banks:
        keep = np.ones(a.banks[name].info.size, dtype=bool)
        tick = a.banks[name].info.reg.get("realtime_tick")      # the clock: the one register time writes
        if tick is not None:
            keep[tick.address:tick.address + tick.size] = False
        np.testing.assert_array_equal(a.banks[name].arr[:, keep], b.banks[name].arr[:, keep], err_msg=name)
    assert [bytes(s.eeprom) for s in a.servos] == [bytes(s.eeprom) for s in b.servos]
    assert bytes(a.devices[0].mem) == bytes(b.devices[0].mem)
    assert {k: v for k, v in a.stats.items() if k != "watchdog_trips"} == \
           {k: v for k, v in b.stats.items() if k != "watchdog_trips"}
    st = servers[0][0].stats
    reads = sum(_count_sync_reads(s) for s in steps)
    assert st["fast_reads"] >= 0.3 * reads, (st, reads)
    assert st["fast_writes"] > 10 and st["slow_chunks"] > 20, st
    assert servers[1][0].stats["fast_reads"] == 0


def _count_sync_reads(step) -> int:
    """Protocol 2.0 SYNC / BULK READ packets sent in a step (a header then instruction 0x82 / 0x92)."""
    data = b"".join(c for c in step if isinstance(c, bytes))
    n, i = 0, data.find(b"\xff\xff\xfd\x00")
    while 0 <= i < len(data) - 7:
        n += data[i + 7] in (0x82, 0x92)
        i = data.find(b"\xff\xff\xfd\x00", i + 1)
    return n
