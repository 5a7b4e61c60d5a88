"""``servoloop bench bus``: host CPU per control cycle, ours vs dynamixel_sdk, same bus, same run.

One cycle = one sync read of present current+velocity+position (10 bytes,
address 126..135) from 12 servos + one sync write of goal position (4
bytes), converted from/to SI on our side and from raw integers with a
Python scale on the SDK side (what a user of GroupSyncRead writes).

- ``cpu_per_cycle_us``: ``time.process_time`` per cycle (user + system CPU
  of this process; time blocked in ``ppoll`` costs nothing, the SDK's busy
  polling does).  Anchor: dynamixel_sdk GroupSyncRead/GroupSyncWrite.
- ``cycle_rate_hz`` (``--wire-timing``): achieved cycles per second when
  the virtual bus delays every reply by its wire time at 4 Mbps, as 1 /
  median cycle time (row "wire") and as the best mean over 0.5 s windows
  (row "mean", which also counts cycles other processes stretched); anchor:
  the wire-time limit, 10 bits per byte over every byte of the cycle
  (12 servos: 352 bytes, 880 us, 1136 Hz).

- ``reply_us`` (``--reply-latency``): time from writing the sync read to
  the last reply in, p50/p99/p99.9/max, and ``stalls_per_20s`` (replies
  later than 1.7 ms, per 20 s at 1 kHz), with the built-in quadruped's
  contact simulator behind the bus and the host paced at 1 kHz (each request
  finds a millisecond of physics owed, as the daemon's do), plus the goal
  sync write.  Ours: the virtual bus's compiled reply path (answers from the
  latest state without the GIL, physics beside; ``--fast-path``); anchors: the
  Python reader with the physics beside (``--physics beside``, the default)
  and the same process integrating up to now before each answer
  (``--physics inline``), the three alternating in ``--block`` s blocks.
- ``read_us`` (``--reply-latency --imu``): the tick's whole read, servos and the
  quadruped's IMU board (OpenCR, ID 200), from the first write to the last
  reply in, same pacing and physics beside.  Ours: one BULK READ of both
  (:class:`firmware_bridge.bulk.BulkReader`); anchor: the previous design, the
  servos' sync read then the board's own sync read; one bus, alternating blocks.

Without ``--port`` the benchmark starts ``servoloop virtual-bus`` itself.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time

import numpy as np

from servoloop.bench.common import Row, interleaved_times, report

__all__ = ["add_arguments", "run", "wire_limit_hz", "cycle_bytes"]

STALL_US = 1700             # a reply later than this makes the daemon's 1 kHz tick miss its deadline
ADDR, LEN = 126, 10          # present_current (126, 2) .. present_position (132, 4)
GOAL_ADDR, GOAL_LEN = 116, 4
MODEL = "XM430-W350"


def add_arguments(p) -> None:
    p.add_argument("--port", help="a bus to use (pty of a running virtual bus, or hardware); "
                                  "default: start a virtual bus")
    p.add_argument("--wire-timing", action="store_true",
                   help="also measure the cycle rate at 4 Mbps against the wire-time limit")
    p.add_argument("--servos", type=int, default=12, help="number of servos, ids 1..n (default 12)")
    p.add_argument("--baud", type=int, default=4_000_000)
    p.add_argument("--cycles", type=int, default=300, help="cycles per timed block (default 300)")
    p.add_argument("--repeats", type=int, default=5, help="timed blocks per side (default 5)")
    p.add_argument("--reply-latency", action="store_true",
                   help="only the reply latency with the quadruped's physics: compiled reply path "
                        "vs Python reader (physics beside) vs inline")
    p.add_argument("--seconds", type=float, default=10.0,
                   help="seconds per side of --reply-latency (default 10)")
    p.add_argument("--block", type=float, default=1.0, help="seconds per interleaved block (default 1)")
    p.add_argument("--imu", action="store_true",
                   help="with --reply-latency: servos + IMU board in one bulk read vs two sync reads")


def cycle_bytes(n: int) -> int:
    """Bytes on the wire per cycle (Protocol 2.0): sync read + n replies + sync write."""
    sync_read = 14 + n
    replies = n * (11 + LEN)
    sync_write = 14 + n * (1 + GOAL_LEN)
    return sync_read + replies + sync_write


def wire_limit_hz(n: int, baud: int) -> float:
    return baud / (10.0 * cycle_bytes(n))


class _VirtualBus:
    """``servoloop virtual-bus`` as a child process; the pty path is its first stdout line."""

    def __init__(self, n: int, baud: int, wire_timing: bool, which: list[str] | None = None):
        cmd = [sys.executable, "-m", "servoloop.cli", "virtual-bus",
               *(which or ["--servos", f"1-{n}:{MODEL}"]), "--baud", str(baud), "--return-delay", "0"]
        if wire_timing:
            cmd.append("--wire-timing")
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, cwd=root)
        self.port = self.proc.stdout.readline().strip()
        if not self.port:
            err = self.proc.stderr.read()
            self.close()
            raise RuntimeError(f"virtual bus did not start: {err.strip()}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _ours(port: str, n: int, baud: int):
    from servoloop.firmware_bridge.bus import Bus, ServoSpec

    bus = Bus(port, baud, 2, [ServoSpec(i, MODEL) for i in range(1, n + 1)])
    bus.open()
    bus.connect()
    reader = bus.sync_reader(["present_current", "present_velocity", "present_position"])
    writer = bus.sync_writer("goal_position")
    goal = np.linspace(-0.5, 0.5, n)   # rad; converted to raw inside the writer
    failures = [0]

    def cycle():
        try:
            reader.read()
        except Exception:
            failures[0] += 1
        writer.write(goal)

    return bus, cycle, failures


def _sdk(port: str, n: int, baud: int):
    from servoloop.firmware_bridge.sdk import sdk as dxl

    ph = dxl.PortHandler(port)
    if not (ph.openPort() and ph.setBaudRate(baud)):
        raise RuntimeError(f"dynamixel_sdk could not open {port}")
    pk = dxl.PacketHandler(2.0)
    ids = list(range(1, n + 1))
    gr = dxl.GroupSyncRead(ph, pk, ADDR, LEN)
    for i in ids:
        gr.addParam(i)
    gw = dxl.GroupSyncWrite(ph, pk, GOAL_ADDR, GOAL_LEN)
    for i in ids:
        gw.addParam(i, [0, 8, 0, 0])
    pos_scale = 2 * math.pi / 4096
    vel_scale = 0.229 * 2 * math.pi / 60
    cur_scale = 0.00269
    values = np.zeros((3, n))
    goal = np.linspace(-0.5, 0.5, n)
    failures = [0]

    def signed(v, bits):
        return v - (1 << bits) if v >> (bits - 1) else v

    def cycle():
        if gr.txRxPacket() != dxl.COMM_SUCCESS:
            failures[0] += 1
        for k, i in enumerate(ids):
            values[0, k] = signed(gr.getData(i, 126, 2), 16) * cur_scale
            values[1, k] = signed(gr.getData(i, 128, 4), 32) * vel_scale
            values[2, k] = (signed(gr.getData(i, 132, 4), 32) - 2048) * pos_scale
        for k, i in enumerate(ids):
            raw = int(round(goal[k] / pos_scale)) + 2048
            gw.changeParam(i, list((raw & 0xFFFFFFFF).to_bytes(4, "little")))
        gw.txPacket()

    return ph, cycle, failures


def _rates(cycle, seconds: float = 0.5, windows: int = 4) -> tuple[float, float]:
    """(1 / median cycle time, best mean rate over ``windows`` windows of ``seconds``), Hz.

    The median cycle is what the loop achieves when this shared machine lets
    it run; the windowed mean also counts the cycles that other processes
    (the virtual bus is one of them) stretched.
    """
    for _ in range(20):
        cycle()
    periods = []
    best = 0.0
    clock = time.perf_counter
    for _ in range(windows):
        t0 = t_prev = clock()
        k = 0
        while t_prev - t0 < seconds:
            cycle()
            t = clock()
            periods.append(t - t_prev)
            t_prev = t
            k += 1
        best = max(best, k / (t_prev - t0))
    return 1.0 / float(np.median(periods)), best


class _Paced:
    """Sync read + sync write at ``rate`` Hz on ``port``; reply latency (write -> replies in), ns."""

    def __init__(self, port: str, n: int, baud: int, rate: float = 1000.0):
        from servoloop.controller.loop_stats import JitterStats

        bus, _, self.failures = _ours(port, n, baud)
        self.bus = bus
        self.reader = bus.sync_reader(["present_current", "present_velocity", "present_position"])
        self.writer = bus.sync_writer("goal_position")
        self.goal = np.zeros(n)
        self.period = 1.0 / rate
        self.latency = JitterStats()
        self.errors = 0

    def run_block(self, seconds: float) -> None:
        clock = time.perf_counter_ns
        t_next = time.monotonic()
        end = t_next + seconds
        while t_next < end:
            t_next += self.period
            left = t_next - time.monotonic()
            if left > 0:
                time.sleep(left)
            t0 = clock()
            try:
                self.reader.read()
            except Exception:  # noqa: BLE001 - a lost reply is counted, the timing goes on
                self.errors += 1
                continue
            self.latency.add(clock() - t0)
            self.goal[:] = self.reader.values["present_position"]
            self.writer.write(self.goal)


#: --reply-latency sides: (anchor name, virtual-bus options); the first is ours
_REPLY_SIDES = (("compiled reply path", ["--physics", "beside", "--fast-path"]),
                ("physics beside, Python reader", ["--physics", "beside"]),
                ("physics inline", ["--physics", "inline"]))


def _latency_figures(stats) -> dict:
    """p50/p99/p99.9/max reply latency, us, and replies later than ``STALL_US`` per 20 s at 1 kHz."""
    s = stats.summary()
    s["p99.9"] = stats.percentile_us(99.9)
    late = float(stats.hist[STALL_US:].sum())
    s["stalls_per_20s"] = late / stats.count * 20_000.0 if stats.count else float("nan")
    return s


def _reply_latency(seconds: float, block: float, baud: int) -> list[Row]:
    """The quadruped's virtual bus: compiled reply path vs Python reader vs inline, alternating blocks."""
    from servoloop.controller.config import builtin_config

    n = builtin_config("quadruped").n
    procs, sides = [], []
    try:
        for _, opts in _REPLY_SIDES:
            vb = _VirtualBus(n, baud, False, ["--robot", "quadruped", *opts])
            procs.append(vb)
            sides.append(_Paced(vb.port, n, baud))
        for side in sides:
            side.run_block(0.5)      # warm-up: connect, first replies
            side.latency.reset()
        nblocks = max(1, int(round(seconds / block)))
        for _ in range(nblocks):
            for side in sides:
                side.run_block(seconds / nblocks)
    finally:
        for side in sides:
            side.bus.close()
        for vb in procs:
            vb.close()
    figures = [_latency_figures(s.latency) for s in sides]
    ours = figures[0]
    case = f"quadruped {n} servos 1 kHz"
    rows = []
    for (name, _), side, anchor in zip(_REPLY_SIDES[1:], sides[1:], figures[1:], strict=True):
        rows += [Row(case, f"reply_us_{k}", "us", ours[k], name, anchor[k]) for k in ("p50", "p99", "p99.9", "max")]
        rows.append(Row(case, "stalls_per_20s", "count", ours["stalls_per_20s"], name, anchor["stalls_per_20s"]))
        rows.append(Row(case, "failed_reads", "count", float(sides[0].errors), name, float(side.errors)))
    return rows


def _imu_read_latency(seconds: float, block: float, baud: int) -> list[Row]:
    """Servos + IMU board: one bulk read vs two sync reads, on one bus, alternating blocks."""
    from servoloop.controller.config import builtin_config
    from servoloop.controller.loop_stats import JitterStats
    from servoloop.firmware_bridge.bulk import BulkReader
    from servoloop.firmware_bridge.imu import IMU_REGISTERS, get_imu_table

    cfg = builtin_config("quadruped")
    n, board = cfg.n, cfg.imu.id
    names = ["present_current", "present_velocity", "present_position"]
    vb = _VirtualBus(n, baud, False, ["--robot", "quadruped"])
    try:
        bus, _, _ = _ours(vb.port, n, baud)
        bus.add_device(board, get_imu_table(cfg.imu.model))
        servos = bus.sync_reader(names)
        imu = bus.sync_reader(list(IMU_REGISTERS), ids=[board], plausibility=False)
        bulk = BulkReader(bus, [(names, list(range(1, n + 1))), (list(IMU_REGISTERS), [board], False)])
        writer = bus.sync_writer("goal_position")

        def one_bulk():
            bulk.read()
            for part in bulk.parts:
                part.check()
            return bulk.parts[0].values["present_position"]

        def two_sync():
            servos.read()
            imu.read()
            return servos.values["present_position"]

        sides = [[one_bulk, JitterStats(), 0], [two_sync, JitterStats(), 0]]

        def run_block(side, secs):
            read, stats = side[0], side[1]
            t_next = time.monotonic()
            end = t_next + secs
            while t_next < end:
                t_next += 1e-3
                left = t_next - time.monotonic()
                if left > 0:
                    time.sleep(left)
                t0 = time.perf_counter_ns()
                try:
                    pos = read()
                except Exception:  # noqa: BLE001 - a lost reply is counted, the timing goes on
                    side[2] += 1
                    continue
                stats.add(time.perf_counter_ns() - t0)
                writer.write(pos)

        for side in sides:
            run_block(side, 0.5)      # warm-up
            side[1].reset()
            side[2] = 0
        nblocks = max(1, int(round(seconds / block)))
        for _ in range(nblocks):
            for side in sides:
                run_block(side, seconds / nblocks)
        bus.close()
    finally:
        vb.close()
    ours, anchor = (side[1].summary() for side in sides)
    case = f"quadruped {n} servos + IMU 1 kHz"
    rows = [Row(case, f"read_us_{k}", "us", ours[k], "sync read + IMU sync read", anchor[k])
            for k in ("p50", "p99", "max")]
    rows.append(Row(case, "failed_reads", "count", float(sides[0][2]), "sync read + IMU sync read",
                    float(sides[1][2])))
    return rows


def run(args) -> dict:
    if getattr(args, "reply_latency", False) and getattr(args, "imu", False):
        return report("bus", _imu_read_latency(float(getattr(args, "seconds", 10.0)),
                                               float(getattr(args, "block", 1.0)),
                                               getattr(args, "baud", 4_000_000)))
    if getattr(args, "reply_latency", False):
        return report("bus", _reply_latency(float(getattr(args, "seconds", 10.0)),
                                            float(getattr(args, "block", 1.0)),
                                            getattr(args, "baud", 4_000_000)))
    n = getattr(args, "servos", 12)
    baud = getattr(args, "baud", 4_000_000)
    cycles = getattr(args, "cycles", 300)
    repeats = getattr(args, "repeats", 5)
    wire = getattr(args, "wire_timing", False)
    port = getattr(args, "port", None)
    rows = []
    vb = None
    try:
        if port is None:
            vb = _VirtualBus(n, baud, wire_timing=False)
            port = vb.port
        bus, ours, f_ours = _ours(port, n, baud)
        sdk_port, sdk, f_sdk = _sdk(port, n, baud)
        for _ in range(20):
            ours()
            sdk()
        t_ours, t_sdk = interleaved_times(ours, sdk, cycles, repeats, clock=time.process_time)
        case = f"{n} servos r{LEN}B+w{GOAL_LEN}B"
        rows.append(Row(case, "cpu_per_cycle_us", "us", t_ours * 1e6, "dynamixel_sdk", t_sdk * 1e6))
        bus.close()
        sdk_port.closePort()
        if f_ours[0] or f_sdk[0]:
            print(f"bench bus: failed reads: ours {f_ours[0]}, dynamixel_sdk {f_sdk[0]}", file=sys.stderr)
        if wire:
            if vb is not None:
                vb.close()
                vb = _VirtualBus(n, baud, wire_timing=True)
                port = vb.port
            bus, ours, f_ours = _ours(port, n, baud)
            median_rate, mean_rate = _rates(ours)
            bus.close()
            limit = wire_limit_hz(n, baud)
            rows.append(Row(f"{n} servos {baud / 1e6:g} Mbps wire", "cycle_rate_hz", "Hz",
                            median_rate, "wire-time limit", limit))
            rows.append(Row(f"{n} servos {baud / 1e6:g} Mbps (mean)", "cycle_rate_hz", "Hz",
                            mean_rate, "wire-time limit", limit))
            if f_ours[0]:
                print(f"bench bus: failed reads at wire timing: {f_ours[0]}", file=sys.stderr)
    finally:
        if vb is not None:
            vb.close()
    return report("bus", rows)
