"""The pty server answers from its latest state without waiting for physics.

A plant whose every step takes 20 ms of wall time stands behind the bus
(the server's slice and idle period raised to 0.1 s so the physics keeps
up).  With the physics beside the replies (the default) every instruction
is answered on the reader thread, the physics is stepped only on the
server's own thread, and between a request's arrival and its answer no step
starts but, at most, the one that was starting as the request landed; the answers
are those of the servos (a write is read back).
``inline`` (the earlier design) starts a step after every arrival, before
the answer.  Order of events only: no timing is asserted.
"""

from __future__ import annotations

import collections
import threading
import time

import pytest

from servoloop.virtual_bus import IndependentServosPlant, default_actuator
from servoloop.virtual_bus.engine import BusEngine
from servoloop.virtual_bus.server import PtyServer

pytestmark = pytest.mark.hil

STEP_WALL_S = 0.02
ADDR_LED = 65


class SlowPlant(IndependentServosPlant):
    """Independent servos whose every step takes ``STEP_WALL_S`` of wall time."""

    def step(self, dt, *args):
        if dt > 0:
            time.sleep(STEP_WALL_S)
        super().step(dt, *args)


def serve(physics):
    from servoloop.firmware_bridge.control_table import get_table

    plant = SlowPlant([default_actuator(get_table("XM430-W350"))] * 2)
    engine = BusEngine([(1, "XM430-W350"), (2, "XM430-W350")], plant=plant, protocol=2)
    events = []
    feed_at, advance = engine.feed_at, engine.advance

    def rec_feed(data, baud, prev=None):
        events.append(("feed", threading.current_thread().name, time.monotonic(), engine.time_s))
        return feed_at(data, baud, prev)

    def rec_advance(dt):
        t = time.monotonic()
        advance(dt)
        events.append(("advance", threading.current_thread().name, t, engine.time_s))

    engine.feed_at, engine.advance = rec_feed, rec_advance
    server = PtyServer(engine, physics=physics, fast=False)   # the Python reader (the compiled one: test_virtual_bus_fast_path)
    if physics == "beside":
        answer = server._answer_now

        def rec_answer(t, *args):
            events.append(("arrive", "", t, 0.0))
            return answer(t, *args)

        server._answer_now = rec_answer
    else:
        class Arrivals(collections.deque):
            def append(self, item):
                events.append(("arrive", "", item[0], 0.0))
                super().append(item)

        server._rxq = Arrivals()
    th = threading.Thread(target=server.serve, name="server", daemon=True)
    th.start()
    return server, th, events


def exchange(client, rounds):
    replies = []
    for k in range(rounds):
        client.send(1, 0x03, bytes((ADDR_LED, 0, k % 2)))                      # write LED
        replies.append(client.status(timeout=2.0))
        client.send(1, 0x02, bytes((ADDR_LED, 0, 1, 0)))                       # read it back
        replies.append(client.status(timeout=2.0))
        time.sleep(3 * STEP_WALL_S)   # the step after the answer is over before the next request
    return replies


def steps_between_arrival_and_answer(events) -> list[int]:
    """Per answer (feed), how many physics steps started after its chunk arrived."""
    out, arrived = [], None
    starts = sorted(e[2] for e in events if e[0] == "advance")
    for e in sorted((e for e in events if e[0] in ("arrive", "feed")), key=lambda e: e[2]):
        if e[0] == "arrive":
            arrived = e[2]
        elif arrived is not None:
            out.append(sum(arrived <= t <= e[2] for t in starts))
            arrived = None
    return out


@pytest.mark.parametrize("physics", ["beside", "inline"])
def test_replies_and_where_physics_runs(physics, pty_client, monkeypatch):
    from servoloop.virtual_bus import server as S

    monkeypatch.setattr(S, "_SLICE_S", 0.1)
    monkeypatch.setattr(S, "_IDLE_S", 0.1)
    server, th, events = serve(physics)
    try:
        client = pty_client(server.port)
        replies = exchange(client, 8)
    finally:
        server.stop()
        th.join(timeout=5.0)
    assert all(r is not None and r.error == 0 for r in replies)
    assert [r.params[0] for r in replies[1::2]] == [k % 2 for k in range(8)]   # each write read back
    feeds = [e for e in events if e[0] == "feed"]
    steps = [e for e in events if e[0] == "advance" and e[3] > 0]
    assert len(feeds) >= 16 and steps
    assert {e[1] for e in steps} == {"server"}             # physics only on the server's thread
    between = steps_between_arrival_and_answer(events)
    assert len(between) >= 16
    if physics == "beside":
        assert {e[1] for e in feeds} == {"virtual-bus-reader"}
        # answered first, the physics owed stepped after.  The physics thread yields to a
        # waiting reader between slices, not inside one: a request that lands just as a slice
        # starts waits that one slice (on a loaded machine a few of 16 do), never more
        assert max(between) <= 1 and between.count(0) >= 3 * len(between) // 4, between
        assert server.stats["physics_slices"] > 0
    else:
        assert {e[1] for e in feeds} == {"server"}
        # integrated up to now before every answer that owes physics: each write after the
        # first comes 3 steps after the last answer (a read-back right after its write may
        # come within the same step, and the first request before any physics is owed)
        assert min(between[2::2]) >= 1
