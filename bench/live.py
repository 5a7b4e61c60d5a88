"""``servoloop bench live``: does the live view slow a tick?  Tick work with and without it.

The built-in arm runs in lockstep against the in-process virtual bus (the
same run every time); each tick's work is timed in wall time around
``ControlLoop.tick`` (in lockstep the loop's own ``cost_us`` is simulated
time, so it cannot tell).  Cases, interleaved in blocks so that load from
elsewhere falls on all alike:

* ``off``: no live view (the anchor);
* ``on``: ``--live`` serving, no client;
* ``client``: ``--live`` with a Foxglove-protocol client in another process
  subscribed to every channel (what Foxglove does when the view is open).

A lockstep run goes as fast as the machine allows (a tick every ~100 us of
wall time), so the view's thread competes for the GIL far more often per
tick than at 1 kHz of real time: a worst case.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import numpy as np

from servoloop.bench.common import Row, report

__all__ = ["add_arguments", "run"]

_CLIENT = r"""
import json, sys
from websockets.sync.client import connect
with connect(sys.argv[1], subprotocols=["foxglove.sdk.v1", "foxglove.websocket.v1"], open_timeout=30) as c:
    subs = []
    while True:
        m = c.recv()
        if isinstance(m, str) and json.loads(m)["op"] == "advertise":
            subs += [{"id": len(subs) + i, "channelId": ch["id"]} for i, ch in enumerate(json.loads(m)["channels"])]
            c.send(json.dumps({"op": "subscribe", "subscriptions": subs[-len(json.loads(m)["channels"]):]}))
            print("subscribed", flush=True)
"""


def add_arguments(p) -> None:
    p.add_argument("--seconds", type=float, default=4.0, help="simulated seconds per block (default 4)")
    p.add_argument("--blocks", type=int, default=3, help="blocks per case (default 3)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _block(case: str, seconds: float) -> np.ndarray:
    """Wall-time work of each run-state tick of one lockstep run, us."""
    from servoloop.controller.config import builtin_config
    from servoloop.controller.daemon import Daemon
    from servoloop.controller.live import LiveView
    from servoloop.controller.runtime import make_lockstep

    cfg = builtin_config("arm")
    lock = make_lockstep(cfg)
    d = Daemon(cfg, lock.bus, lock.clock, telemetry_path=None, socket_path=None, realtime=False)
    client = None
    if case != "off":
        d.outputs.live = LiveView(_free_port())
    n = int(seconds * cfg.loop.rate_hz) + int(cfg.startup.ramp_s * cfg.loop.rate_hz) + 100
    work = np.zeros(n)
    k = [0]
    tick = d.loop.tick
    clock = time.perf_counter_ns

    def timed() -> None:
        t0 = clock()
        tick()
        if k[0] < n:
            work[k[0]] = (clock() - t0) * 1e-3
            k[0] += 1

    d.loop.tick = timed
    try:
        d.open_outputs()
        if case == "client":
            client = subprocess.Popen([sys.executable, "-c", _CLIENT, f"ws://127.0.0.1:{d.outputs.live.port}"],
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            client.stdout.readline()  # subscribed
        d.connect()
        d.startup()
        k[0] = 0  # run-state ticks only
        d.run_loop(seconds)
        d.shutdown()
    finally:
        d.close_bus()
        d.close_outputs()
        lock.close()
        if client is not None:
            client.terminate()
            client.wait(timeout=10)
    return work[:k[0]]


def run(args) -> dict:
    cases = ("off", "on", "client")
    work: dict[str, list] = {c: [] for c in cases}
    for _ in range(args.blocks):
        for c in cases:
            work[c].append(_block(c, args.seconds))
    all_ = {c: np.concatenate(w) for c, w in work.items()}
    rows = []
    for c in ("on", "client"):
        for q in (50, 99):
            rows.append(Row(f"arm lockstep, live {c}", f"tick work p{q}", "us",
                            float(np.percentile(all_[c], q)), "no live view",
                            float(np.percentile(all_["off"], q))))
    return report("live", rows) | {"ticks": {c: int(v.size) for c, v in all_.items()},
                                   "note": json.dumps({"seconds": args.seconds, "blocks": args.blocks})}
