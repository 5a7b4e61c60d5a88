"""``servoloop bench loop``: control-loop timing, the daemon vs a plain Python loop, same run.

Both loops do the same I/O every tick against the same virtual bus process
on a pty (12 XM430 by default, 4 Mbaud): one sync read of position,
velocity and current, one sync write of goal positions.

* ours: the daemon's run state (absolute deadlines with clock_nanosleep
  from Cython, late ticks skipped; read -> estimate -> hold controller ->
  safety -> write -> telemetry ring);
* anchor: ``time.sleep`` to the next deadline, then the same exchange
  with ``dynamixel_sdk`` GroupSyncRead/GroupSyncWrite (its getData /
  changeParam per servo), with the same skip-and-count rule for late ticks.

They alternate in blocks of ``--block`` s, so load from elsewhere on the
machine falls on both.  Jitter is the wake-up lateness of each tick
(wake-up time - deadline).  Cases: SCHED_OTHER, and SCHED_FIFO (for both
loops and the virtual bus process) when the system allows it.
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np

from servoloop.bench.common import Row, report

__all__ = ["add_arguments", "run"]

ADDR, LEN = 126, 10  # present_current .. present_position (X series)
GOAL_ADDR, GOAL_LEN = 116, 4


def add_arguments(p) -> None:
    p.add_argument("--seconds", type=float, default=10.0, help="seconds per loop per case (default 10)")
    p.add_argument("--rate", type=float, default=1000.0, help="loop rate, Hz (default 1000)")
    p.add_argument("--servos", type=int, default=12, help="XM430 servos on the virtual bus (default 12)")
    p.add_argument("--block", type=float, default=1.0, help="seconds per interleaved block (default 1)")
    p.add_argument("--spin-us", type=float, default=0.0, help="busy-wait tail of our clock, us (default 0)")
    p.add_argument("--policy", choices=("other", "fifo", "both"), default="both",
                   help="scheduling cases to measure (default both; fifo is skipped when refused)")
    p.add_argument("--wakeup", action="store_true",
                   help="no bus: wake-up lateness of our clock with the kernel's default 50 us timer "
                        "slack and no spin tail (the anchor) against 1 ns slack, + the spin tail "
                        "(--spin-us, default 50), + the loop thread alone on a CPU; interleaved blocks")
    p.add_argument("--clock-only", action="store_true",
                   help="no bus: our clock (FixedRate on clock_nanosleep) vs time.sleep to the "
                        "deadline, to separate clock quality from bus latency")


def _config(n: int, rate: float, spin_us: float):
    from servoloop.controller.config import config_from_dict

    return config_from_dict({
        "robot": "loopbench",
        "bus": {"port": None, "baud": 4_000_000, "protocol": 2},
        "servos": [{"id": i, "model": "XM430-W350", "joint": f"j{i}", "min": -3.0, "max": 3.0}
                   for i in range(1, n + 1)],
        "loop": {"rate_hz": rate, "spin_s": spin_us * 1e-6},
        "startup": {"ramp_s": 0.05},
        # measuring timing, not judging it: no fault on late ticks or lost replies
        "safety": {"max_consecutive_missed": None, "comm_timeout_s": 1e9},
        "logging": {"telemetry": None},
        "socket": {"path": None},
    })


class _Anchor:
    """time.sleep to the deadline + dynamixel_sdk sync read/write, same accounting as ours."""

    def __init__(self, port: str, n: int, baud: int, rate: float):
        from servoloop.controller.loop_stats import JitterStats
        from servoloop.firmware_bridge.sdk import sdk as dxl

        self.dxl = dxl
        self.ph = dxl.PortHandler(port)
        if not (self.ph.openPort() and self.ph.setBaudRate(baud)):
            raise RuntimeError(f"dynamixel_sdk could not open {port}")
        pk = dxl.PacketHandler(2.0)
        self.ids = list(range(1, n + 1))
        self.gr = dxl.GroupSyncRead(self.ph, pk, ADDR, LEN)
        for i in self.ids:
            self.gr.addParam(i)
        self.gw = dxl.GroupSyncWrite(self.ph, pk, GOAL_ADDR, GOAL_LEN)
        for i in self.ids:
            self.gw.addParam(i, [0, 8, 0, 0])
        self.values = np.zeros((3, n))
        self.goal = np.zeros(n)
        self.period = int(round(1e9 / rate))
        self.jitter = JitterStats()
        self.missed = 0
        self.ticks = 0
        self.failures = 0
        self.seconds = 0.0
        self.first = True

    def _cycle(self) -> None:
        dxl, gr, gw = self.dxl, self.gr, self.gw
        if gr.txRxPacket() != dxl.COMM_SUCCESS:
            self.failures += 1
            return
        pos_scale = 2 * math.pi / 4096
        for k, i in enumerate(self.ids):
            self.values[0, k] = _signed(gr.getData(i, 126, 2), 16) * 0.00269
            self.values[1, k] = _signed(gr.getData(i, 128, 4), 32) * 0.0239808
            self.values[2, k] = (_signed(gr.getData(i, 132, 4), 32) - 2048) * pos_scale
        if self.first:  # hold where the servos are, like the daemon's hold controller
            self.goal[:] = self.values[2]
            self.first = False
        for k, i in enumerate(self.ids):
            raw = int(round(self.goal[k] / pos_scale)) + 2048
            gw.changeParam(i, list((raw & 0xFFFFFFFF).to_bytes(4, "little")))
        gw.txPacket()

    def run_block(self, seconds: float) -> None:
        _sleep_loop(self, self.period, seconds, self._cycle)

    def close(self) -> None:
        self.ph.closePort()


def _signed(v: int, bits: int) -> int:
    return v - (1 << bits) if v >> (bits - 1) else v


class _Ours:
    """The daemon, connected and ramped, run in blocks of its run state."""

    def __init__(self, cfg, port: str):
        from servoloop.controller.clock import MonotonicClock
        from servoloop.controller.daemon import Daemon
        from servoloop.controller.runtime import make_bus

        self.daemon = Daemon(cfg, make_bus(cfg, port), MonotonicClock(cfg.loop.spin_tail_s(sched_fifo=False)),
                             telemetry_path=None, socket_path=None, realtime=False)
        d = self.daemon
        d.connect()
        d.startup()
        self.missed = 0
        self.seconds = 0.0
        self.failures0 = 0

    @property
    def ticks(self) -> int:
        return self.daemon.run_ticks

    @property
    def jitter(self):
        return self.daemon.jitter

    @property
    def failures(self) -> int:
        return sum(self.daemon.bus_errors.values())

    def run_block(self, seconds: float) -> None:
        d = self.daemon
        d.rate.start()  # a fresh deadline grid: the anchor's block is not our missed ticks
        m0 = d.rate.missed
        t0 = time.monotonic_ns()
        d.run_loop(seconds)
        self.seconds += (time.monotonic_ns() - t0) * 1e-9
        self.missed += d.rate.missed - m0
        if d.lifecycle.terminal:
            raise RuntimeError(f"the daemon faulted during the benchmark: {d.faults}")

    def close(self) -> None:
        d = self.daemon
        try:
            d.shutdown()
        except Exception:  # noqa: BLE001 - benchmark teardown
            d.stop_all_servos()
        d.resume_gc()
        d.close_bus()


def _case(cfg, port: str, seconds: float, block: float) -> tuple[_Ours, _Anchor]:
    ours = _Ours(cfg, port)
    anchor = _Anchor(port, cfg.n, cfg.bus.baud, cfg.loop.rate_hz)
    try:
        nblocks = max(1, int(round(seconds / block)))
        for _ in range(nblocks):
            ours.run_block(seconds / nblocks)
            anchor.run_block(seconds / nblocks)
    finally:
        anchor.close()
        ours.close()
    return ours, anchor


def _case_name(rate: float, n: int, pol: str, spin_us: float) -> str:
    name = f"{rate / 1000:g}kHz" + (f" x{n}" if n else "") + (" FIFO" if pol == "fifo" else " OTHER")
    return name + (f" spin{spin_us:g}" if spin_us else "")


def _rows(case: str, ours, anchor, anchor_name: str = "time.sleep+dynamixel_sdk") -> list[Row]:
    jo, ja = ours.jitter.summary(), anchor.jitter.summary()
    rows = [
        Row(case, "jitter_p50", "us", jo["p50"], anchor_name, ja["p50"]),
        Row(case, "jitter_p99", "us", jo["p99"], anchor_name, ja["p99"]),
        Row(case, "jitter_max", "us", jo["max"], anchor_name, ja["max"]),
        Row(case, "missed_ticks", "ticks", float(ours.missed), anchor_name, float(anchor.missed)),
        Row(case, "rate", "Hz", ours.ticks / ours.seconds, anchor_name, anchor.ticks / anchor.seconds),
    ]
    if anchor_name != "time.sleep":
        rows.append(Row(case, "failed_reads", "count", float(ours.failures), anchor_name,
                        float(anchor.failures)))
    return rows


def _clock_case(rate: float, seconds: float, block: float, spin_us: float):
    """Clock only: our FixedRate + MonotonicClock vs a time.sleep loop, same skip rule."""
    from servoloop.controller.clock import FixedRate, MonotonicClock
    from servoloop.controller.loop_stats import JitterStats

    class _Side:
        def __init__(self):
            self.jitter = JitterStats()
            self.missed = 0
            self.ticks = 0
            self.seconds = 0.0
            self.failures = 0

    ours, anchor = _Side(), _Side()
    rate_obj = FixedRate(rate, MonotonicClock(spin_us * 1e-6))
    period = rate_obj.period_ns
    nblocks = max(1, int(round(seconds / block)))
    for _ in range(nblocks):
        t0 = time.monotonic_ns()
        rate_obj.start()
        end = rate_obj.next_deadline_ns + int(seconds / nblocks * 1e9)
        m0 = rate_obj.missed
        while rate_obj.next_deadline_ns < end:
            rate_obj.wait()
            ours.jitter.add(rate_obj.late_ns)
            ours.ticks += 1
        ours.missed += rate_obj.missed - m0
        ours.seconds += (time.monotonic_ns() - t0) * 1e-9
        _sleep_loop(anchor, period, seconds / nblocks)
    return ours, anchor


class _Side:
    """One loop's tallies: lateness histogram, ticks, missed, seconds, failures."""

    def __init__(self):
        from servoloop.controller.loop_stats import JitterStats

        self.jitter = JitterStats()
        self.missed = 0
        self.ticks = 0
        self.seconds = 0.0
        self.failures = 0


def _wakeup_block(side, rate: float, seconds: float, slack_ns: int, spin_us: float, cpu) -> None:
    """One block of a bare FixedRate loop on a fresh thread with these wake-up settings."""
    import os
    import threading

    from servoloop.controller.clock import FixedRate, MonotonicClock, _set_timer_slack_ns

    def body():
        rate_obj = FixedRate(rate, MonotonicClock(spin_us * 1e-6))
        _set_timer_slack_ns(slack_ns)      # after the clock: it sets 1 ns for this thread
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})
        t0 = time.monotonic_ns()
        rate_obj.start()
        end = rate_obj.next_deadline_ns + int(seconds * 1e9)
        while rate_obj.next_deadline_ns < end:
            rate_obj.wait()
            side.jitter.add(rate_obj.late_ns)
            side.ticks += 1
        side.missed += rate_obj.missed
        side.seconds += (time.monotonic_ns() - t0) * 1e-9

    th = threading.Thread(target=body)    # per-thread settings stay with the block
    th.start()
    th.join()


def _bare_block(side, rate: float, seconds: float) -> None:
    """One block of the floor: a loop in C that only sleeps to its deadlines (1 ns slack)."""
    import threading

    from servoloop.controller._clock import bare_loop
    from servoloop.controller.clock import _set_timer_slack_ns

    period = int(round(1e9 / rate))
    late = np.zeros(max(1, int(seconds * rate)), dtype=np.int64)

    def body():
        _set_timer_slack_ns(1)
        t0 = time.monotonic_ns()
        side.missed += bare_loop(period, late)
        side.seconds += (time.monotonic_ns() - t0) * 1e-9

    th = threading.Thread(target=body)    # the policy is inherited, the slack is per thread
    th.start()
    th.join()
    for v in late:
        side.jitter.add(int(v))
    side.ticks += len(late)


def _wakeup_rows(rate: float, seconds: float, block: float, spin_us: float, pol: str) -> list[Row]:
    """Default slack, no spin (anchor) vs each setting added in turn, interleaved blocks.

    A last side is the floor, a loop in C that only sleeps (:func:`controller._clock.bare_loop`):
    the daemon's clock as it runs by default (1 ns slack, no spin) is reported against it too,
    so late wake-ups that come from the machine (a virtual machine's host not running it, the
    kernel) are told apart from ours.
    """
    import os

    spin = spin_us or 50.0
    cpu = max(os.sched_getaffinity(0)) if len(os.sched_getaffinity(0)) > 1 else None
    configs = [("slack50us", 50_000, 0.0, None), ("slack1ns", 1, 0.0, None),
               (f"slack1ns spin{spin:g}", 1, spin, None)]
    if cpu is not None:
        configs.append((f"slack1ns spin{spin:g} cpu{cpu}", 1, spin, cpu))
    sides = [_Side() for _ in configs]
    floor = _Side()
    nblocks = max(1, int(round(seconds / block)))
    for _ in range(nblocks):
        for side, (_, slack, sp, c) in zip(sides, configs, strict=True):
            _wakeup_block(side, rate, seconds / nblocks, slack, sp, c)
        _bare_block(floor, rate, seconds / nblocks)
    anchor = sides[0]
    base = f"{rate / 1000:g}kHz {'FIFO' if pol == 'fifo' else 'OTHER'} clock "
    rows = []
    for side, (name, *_rest) in zip(sides[1:], configs[1:], strict=True):
        rows.extend(_rows(base + name, side, anchor, "slack50us no spin")[:4])
    rows.extend(_rows(base + "slack1ns vs floor", sides[1], floor, "bare C loop")[:4])
    return rows


def _sleep_loop(side, period: int, seconds: float, work=None) -> None:
    """The anchor's loop: ``time.sleep`` to each deadline, then ``work()``.

    Same rule as our clock: a tick found late by a whole period or more is
    counted in ``side.missed`` and skipped, never caught up.  Updates
    ``side.jitter``, ``ticks``, ``missed``, ``seconds``.
    """
    mono = time.monotonic_ns
    t_start = mono()
    deadline = t_start + period
    end = deadline + int(seconds * 1e9)
    while deadline < end:
        now = mono()
        if now > deadline:
            k = (now - deadline + period - 1) // period
            side.missed += k
            deadline += k * period
        time.sleep(max(0.0, (deadline - mono()) * 1e-9))
        late = mono() - deadline
        if late >= period:
            k = late // period
            side.missed += k
            deadline += k * period
            late -= k * period
        side.jitter.add(late)
        side.ticks += 1
        if work is not None:
            work()
        deadline += period
    side.seconds += (mono() - t_start) * 1e-9


def run(args) -> dict:
    from servoloop.controller.realtime import apply_realtime, restore_realtime
    from servoloop.controller.runtime import VirtualBusProcess

    seconds = float(getattr(args, "seconds", 10.0))
    rate = float(getattr(args, "rate", 1000.0))
    n = int(getattr(args, "servos", 12))
    block = float(getattr(args, "block", 1.0))
    spin_us = float(getattr(args, "spin_us", 0.0))
    policy = getattr(args, "policy", "both")
    cfg = _config(n, rate, spin_us)
    policies = ["other", "fifo"] if policy == "both" else [policy]
    rows: list[Row] = []
    if getattr(args, "wakeup", False):
        for pol in policies:
            rt = apply_realtime(sched_fifo=True, priority=80) if pol == "fifo" else None
            if rt is not None and not rt.sched_fifo:
                print(f"bench loop: {rt.warnings[0]}; skipping the SCHED_FIFO case", file=sys.stderr)
                continue
            try:
                rows.extend(_wakeup_rows(rate, seconds, block, spin_us, pol))
            finally:
                if rt is not None:
                    restore_realtime(rt)
        return report("loop", rows)
    if getattr(args, "clock_only", False):
        for pol in policies:
            rt = apply_realtime(sched_fifo=True, priority=80) if pol == "fifo" else None
            if rt is not None and not rt.sched_fifo:
                print(f"bench loop: {rt.warnings[0]}; skipping the SCHED_FIFO case", file=sys.stderr)
                continue
            try:
                ours, anchor = _clock_case(rate, seconds, block, spin_us)
            finally:
                if rt is not None:
                    restore_realtime(rt)
            rows.extend(_rows(_case_name(rate, 0, pol, spin_us) + " clock", ours, anchor, "time.sleep"))
        return report("loop", rows)
    vb = VirtualBusProcess(cfg)
    port = vb.start()
    try:
        for pol in policies:
            rt = None
            if pol == "fifo":
                rt = apply_realtime(sched_fifo=True, priority=80)
                if not rt.sched_fifo:
                    print(f"bench loop: {rt.warnings[0]}; skipping the SCHED_FIFO case", file=sys.stderr)
                    continue
                w = vb.make_realtime(79)
                if w:
                    print(f"bench loop: {w}", file=sys.stderr)
            try:
                ours, anchor = _case(cfg, port, seconds, block)
            finally:
                if rt is not None:
                    restore_realtime(rt)
            rows.extend(_rows(_case_name(rate, n, pol, spin_us), ours, anchor))
    finally:
        vb.stop()
    return report("loop", rows)
