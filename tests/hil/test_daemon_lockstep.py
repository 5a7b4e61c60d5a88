"""The daemon in lockstep against the in-process virtual bus (a real pty, real bytes).

Startup without a jump (goal := present before torque on, checked in the
bytes the servos received), bit-identical repeated runs, no per-tick
allocation (test_daemon_process.py), and every injected fault driving its documented reaction
within two ticks:

| fault (virtual bus)           | reaction                                               |
|-------------------------------|--------------------------------------------------------|
| dropped / corrupt reply       | counted by kind and the tick's write skipped, same tick; |
|                               | fault on the tick that reaches max_consecutive or the  |
|                               | window rate                                            |
| hardware error bits (alert)   | fault on the same tick (or reboot + restore + go on)   |
| adapter unplugged             | fault on the same tick, port closed, no exception      |
| temperature / voltage         | fault on the monitor tick (monitor_every = 1 here)     |
| joint past its limit + margin | fault on the tick that measures it                     |
| SIGTERM / SIGINT              | shutdown on the next tick, torque off; a 2nd one faults |
"""

from __future__ import annotations

import signal
from dataclasses import replace

import numpy as np
import pytest

from servoloop.controller.config import builtin_config
from servoloop.controller.daemon import Daemon
from servoloop.controller.lifecycle import State
from servoloop.controller.runtime import make_bus, make_lockstep
from servoloop.controller.telemetry_format import read_telemetry
from servoloop.firmware_bridge import protocol as P

pytestmark = pytest.mark.hil

ADDR_TORQUE_ENABLE = 64  # X-series control table
ADDR_GOAL_POSITION = 116


def short_config(robot: str = "quadruped", **sections):
    """The built-in ``robot`` config with a short ramp and the given section overrides.

    These tests check the daemon's reactions, so the servos drive independent
    loads (a servo reaches its goal); the whole robot on the contact simulator
    is tested in test_daemon_stands.py.
    """
    cfg = builtin_config(robot)
    cfg = replace(cfg, startup=replace(cfg.startup, ramp_s=0.05),
                  simulation=replace(cfg.simulation, plant="independent"))
    for name, changes in sections.items():
        cfg = replace(cfg, **{name: replace(getattr(cfg, name), **changes)})
    return cfg


class LockstepRig:
    """A lockstep daemon plus access to the virtual servos and what they received.

    ``hooks`` are called with the simulated time after each ``advance``.
    """

    def __init__(self, cfg, faults=None, plant=None, telemetry_path=None, position0=None,
                 daemon_cfg=None):
        if position0 is not None and plant is None:
            from servoloop.firmware_bridge.control_table import get_table
            from servoloop.virtual_bus import IndependentServosPlant, default_actuator

            plant = IndependentServosPlant([default_actuator(get_table(s.model)) for s in cfg.servos],
                                           position0=position0)
        self.lock = make_lockstep(cfg, faults=faults, plant=plant)
        self.virtual = self.lock.virtual
        if daemon_cfg is not None:  # the daemon believes in other servos than the bus has
            self.lock.bus = make_bus(daemon_cfg, self.virtual.port, on_after_write=self.virtual.pump)
        self.received: list[tuple[float, bytes]] = []
        self.hooks = []
        engine = self.virtual.engine
        feed = engine.feed
        self._stream = bytearray()

        def recording_feed(data):
            # keep the raw instruction stream; packets are split off as they complete
            self._stream += bytes(data)
            self._split(engine.time_s)
            return feed(data)

        engine.feed = recording_feed

        def on_advance(dt):
            self.virtual.advance(dt)
            for h in list(self.hooks):
                h(self.virtual.time_s)

        self.lock.clock.on_advance = on_advance
        self.daemon = Daemon(daemon_cfg or cfg, self.lock.bus, self.lock.clock, telemetry_path=telemetry_path,
                             socket_path=None)

    def servo(self, servo_id):
        return next(s for s in self.virtual.engine.servos if s.bus_id0 == servo_id)

    def _split(self, t: float, protocol: int = 2) -> None:
        buf = self._stream
        while buf:
            start = P.find_header(bytes(buf), protocol)
            if start < 0:
                return
            del buf[:start]
            try:
                pkt, used = P.parse_packet(bytes(buf), protocol, status=False)
            except Exception:  # noqa: BLE001 - not ours to judge here: skip a byte
                del buf[:1]
                continue
            if pkt is None:
                return
            self.received.append((t, pkt))
            del buf[:used]

    def instructions(self, protocol: int = 2):
        """Decoded instruction packets, in order: [(time_s, Packet)]."""
        return list(self.received)

    def close(self):
        self.lock.close()


def write_events(rig: LockstepRig, protocol: int = 2):
    """Per servo, in order: ("goal", raw) for each goal_position write, ("torque", v) for torque_enable."""
    events: dict[int, list] = {}
    for _t, pkt in rig.instructions(protocol):
        if pkt.instruction == P.Instruction.WRITE:
            addr = pkt.params[0] | pkt.params[1] << 8
            data = pkt.params[2:]
            if addr == ADDR_TORQUE_ENABLE:
                events.setdefault(pkt.servo_id, []).append(("torque", data[0]))
            elif addr == ADDR_GOAL_POSITION:
                events.setdefault(pkt.servo_id, []).append(("goal", int.from_bytes(data, "little", signed=True)))
        elif pkt.instruction == P.Instruction.SYNC_WRITE:
            addr = pkt.params[0] | pkt.params[1] << 8
            size = pkt.params[2] | pkt.params[3] << 8
            body = pkt.params[4:]
            for k in range(0, len(body), 1 + size):
                sid = body[k]
                val = int.from_bytes(body[k + 1:k + 1 + size], "little", signed=True)
                kind = "goal" if addr == ADDR_GOAL_POSITION else "torque" if addr == ADDR_TORQUE_ENABLE else None
                if kind:
                    events.setdefault(sid, []).append((kind, val))
    return events


def rows_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Bitwise equality of two float arrays (NaN == NaN)."""
    return a.shape == b.shape and a.tobytes() == b.tobytes()


# ---------------------------------------------------------------------------
# helpers on top of the rig

PERIOD = 1e-3


def run_rig(rig: LockstepRig, duration_s: float) -> dict:
    return rig.daemon.run(duration_s)


def tick_of_time(t_engine: float) -> int:
    """Tick number (1-based, as in telemetry) whose deadline is at engine time ``t_engine``."""
    return int(round(t_engine / PERIOD))


def hook_at(rig: LockstepRig, t_at: float, fn):
    """Run ``fn()`` once, right after the advance that reaches simulated time ``t_at``."""
    done = []

    def hook(t):
        if not done and t >= t_at - 1e-12:
            done.append(t)
            fn()

    rig.hooks.append(hook)
    return done


def fault_row(tel) -> int:
    """Tick of the last telemetry row (the tick that raised the fault)."""
    return int(tel.column("tick")[-1])


def quad_pose0(seed=0):
    cfg = builtin_config("quadruped")
    lo = np.array([s.min for s in cfg.servos])
    hi = np.array([s.max for s in cfg.servos])
    return np.random.default_rng(seed).uniform(0.6 * lo, 0.6 * hi)


# ---------------------------------------------------------------------------
# startup, determinism, memory


def test_startup_writes_goal_equal_present_before_torque_on(tmp_path):
    q0 = quad_pose0()
    cfg = short_config()
    rig = LockstepRig(cfg, position0=q0, telemetry_path=tmp_path / "s.sltl")
    try:
        s = run_rig(rig, 0.1)
    finally:
        rig.close()
    assert s["state"] == "done", s
    events = write_events(rig)
    scale = 2 * np.pi / 4096
    for k, servo in enumerate(cfg.servos):
        ev = events[servo.id]
        first_on = ev.index(("torque", 1))
        goals_before = [v for kind, v in ev[:first_on] if kind == "goal"]
        assert goals_before, f"servo {servo.id}: torque on before any goal was written: {ev[:5]}"
        # the goal written before torque on is the present position (raw, within noise)
        present_raw = q0[k] / scale + 2048
        assert abs(goals_before[-1] - present_raw) <= 2, (servo.id, goals_before[-1], present_raw)
    # and the robot did not jump: the first ticks stay where it started
    tel = read_telemetry(tmp_path / "s.sltl")
    q = np.stack([tel.column(f"q.{j}") for j in cfg.joint_names], axis=1)
    assert np.abs(q[:10] - q0).max() < 0.01


def run_trajectory_once(path):
    kf = [{"t": 0.1, "q": {"lf_knee": -0.5, "rh_hip_flex": 0.4}}, {"t": 0.3, "q": {"lf_knee": 0.3}}]
    cfg = short_config(controller={"name": "trajectory", "params": {"keyframes": kf}})
    rig = LockstepRig(cfg, position0=quad_pose0(1), telemetry_path=path)
    try:
        s = run_rig(rig, 0.4)
    finally:
        rig.close()
    assert s["state"] == "done", s
    return read_telemetry(path)


def test_lockstep_run_is_bit_identical(tmp_path):
    a = run_trajectory_once(tmp_path / "a.sltl")
    b = run_trajectory_once(tmp_path / "b.sltl")
    assert a.data.shape[0] == 450 + 5
    assert rows_equal(a.data, b.data)
    # it did move: the trajectory was followed
    knee = a.column("q.lf_knee")
    assert knee.max() - knee.min() > 0.5


# ---------------------------------------------------------------------------
# faults


def test_dropped_replies_count_skip_write_hold_then_timeout(tmp_path):
    cfg = short_config(safety={"comm_timeout_s": 0.2})
    rig = LockstepRig(cfg, faults="drop:id=3:at=0.08", telemetry_path=tmp_path / "d.sltl")
    try:
        s = run_rig(rig, 1.0)
    finally:
        rig.close()
    assert s["state"] == "fault" and "servo 3" in s["faults"][0] and "comm_timeout_s" in s["faults"][0]
    assert s["fault_details"][0]["kind"] == "comm" and s["fault_details"][0]["servo"] == 3
    assert set(s["bus_errors"]) == {"timeout"}  # the tick reads of servo 3 (monitor ticks too)
    assert s["comm"]["errors_per_servo"].keys() == {3}
    tel = read_telemetry(tmp_path / "d.sltl")
    ok = tel.column("read_ok")
    first_bad = int(tel.column("tick")[np.argmax(ok == 0)])
    # the ladder: hold after comm_hold_s, the fault at comm_timeout_s (+ one tick at most)
    kinds = [e["kind"] for e in tel.events]
    assert kinds.index("comm_hold") < kinds.index("fault")
    assert 0.2 / PERIOD - 1 <= fault_row(tel) - first_bad <= 0.2 / PERIOD + 1
    # the failed tick wrote nothing: no sync write at its time
    t_bad = first_bad * PERIOD
    at_bad = [p.instruction for t, p in rig.instructions() if abs(t - t_bad) < 1e-9]
    # (its one read: the quadruped's servos and IMU board share a BULK READ; the monitor's
    # registers ride in it on monitor ticks, such as this one)
    assert P.Instruction.BULK_READ in at_bad and P.Instruction.SYNC_WRITE not in at_bad
    # the fault path turned every servo off (comm_timeout_action torque_off, the default)
    assert not any(rig.servo(sv.id).torque_enabled for sv in cfg.servos)


def test_corrupt_replies_are_counted_as_checksum_errors(tmp_path):
    cfg = short_config(safety={"comm_timeout_s": 0.1})
    rig = LockstepRig(cfg, faults="corrupt:id=5:at=0.08", telemetry_path=tmp_path / "c.sltl")
    try:
        s = run_rig(rig, 1.0)
    finally:
        rig.close()
    assert s["state"] == "fault" and "servo 5" in s["faults"][0]
    # a flipped length byte reads as a short (timed-out) reply, the others fail their CRC
    assert s["bus_errors"].get("checksum", 0) >= 1
    tel = read_telemetry(tmp_path / "c.sltl")
    first_bad = int(tel.column("tick")[np.argmax(tel.column("read_ok") == 0)])
    assert fault_row(tel) - first_bad <= 0.1 / PERIOD + 1


def test_scattered_errors_warn_but_never_fault(tmp_path):
    # 20 % of servo 2's replies lost for 2 s: far above the warn rate, never a timeout
    cfg = short_config()
    rig = LockstepRig(cfg, faults="drop:id=2:p=0.2", telemetry_path=tmp_path / "w.sltl")
    try:
        s = run_rig(rig, 2.0)
    finally:
        rig.close()
    assert s["state"] == "done" and not s["faults"], s["faults"]
    tel = read_telemetry(tmp_path / "w.sltl")
    failed = int((tel.column("read_ok") == 0).sum())
    assert failed > 200 and s["comm"]["errors_per_servo"] == {2: failed}
    warn = [e for e in tel.events if e["kind"] == "comm_warn"]
    assert warn and "{2: " in warn[0]["message"]
    assert any(w.startswith("comm:") for w in s["warnings"])


def test_hardware_error_faults_on_the_same_tick(tmp_path):
    cfg = short_config()
    rig = LockstepRig(cfg, faults="hwerror:id=4:bits=overload:at=0.1", telemetry_path=tmp_path / "h.sltl")
    try:
        s = run_rig(rig, 1.0)
    finally:
        rig.close()
    assert s["state"] == "fault"
    msg = s["faults"][0]
    assert "servo 4" in msg and "overload" in msg.lower() and "lh_hip_abad" in msg
    assert s["fault_details"][0] == {"kind": "hardware_error", "servo": 4, "joint": "lh_hip_abad",
                                     "message": msg}
    tel = read_telemetry(tmp_path / "h.sltl")
    fault_events = [e for e in tel.events if e["kind"] == "fault"]
    assert fault_events and fault_events[0]["fault"]["servo"] == 4
    assert fault_row(tel) - tick_of_time(0.1) <= 1
    assert any(e["kind"] == "servo_error" for e in tel.events)
    # the alerted servo's reply to torque off carries the alert: still a done write
    assert not [w for w in s["warnings"] if w.startswith("torque off failed")]
    assert not any(rig.servo(sv.id).torque_enabled for sv in cfg.servos)


def test_hardware_error_reboot_and_restore(tmp_path):
    cfg = short_config(safety={"on_hardware_error": "reboot"})
    rig = LockstepRig(cfg, faults="hwerror:id=4:bits=overload:at=0.1", telemetry_path=tmp_path / "r.sltl")
    try:
        s = run_rig(rig, 0.3)
    finally:
        rig.close()
    assert s["state"] == "done", s
    tel = read_telemetry(tmp_path / "r.sltl")
    kinds = [e["kind"] for e in tel.events]
    assert "reboot" in kinds
    assert rig.servo(4).hardware_error == 0
    # back under control after the reboot: torque on and holding the pose
    q = tel.column("q.lh_hip_abad")
    goal = tel.column("goal.lh_hip_abad")
    assert abs(q[-10] - goal[-10]) < 0.05


def test_unplug_faults_without_raising(tmp_path):
    cfg = short_config()
    rig = LockstepRig(cfg, faults="unplug:at=0.1", telemetry_path=tmp_path / "u.sltl")
    try:
        s = run_rig(rig, 1.0)
    finally:
        rig.close()
    assert s["state"] == "fault" and "port" in s["faults"][0]
    assert s["fault_details"][0]["kind"] == "port"
    tel = read_telemetry(tmp_path / "u.sltl")
    assert fault_row(tel) - tick_of_time(0.1) <= 1
    assert tel.summary is not None and tel.summary["state"] == "fault"


@pytest.mark.parametrize("register, raw, safety, words", [
    ("present_temperature", 80, {"max_temperature_c": 70.0}, ["temperature", "above"]),
    ("present_input_voltage", 95, {"min_voltage_v": 10.0}, ["voltage", "below"]),
])
def test_temperature_and_voltage_limits(tmp_path, register, raw, safety, words):
    from servoloop.firmware_bridge.control_table import get_table

    cfg = short_config(safety={"monitor_every": 1, **safety})
    rig = LockstepRig(cfg, telemetry_path=tmp_path / "t.sltl")
    reg = get_table("XM430-W350")[register]

    def heat():
        mem = rig.servo(7).mem
        mem[reg.address:reg.address + reg.size] = raw.to_bytes(reg.size, "little")

    hook_at(rig, 0.1, heat)
    try:
        s = run_rig(rig, 1.0)
    finally:
        rig.close()
    assert s["state"] == "fault"
    assert "servo 7" in s["faults"][0] and all(w in s["faults"][0] for w in words)
    detail = s["fault_details"][0]
    assert detail["servo"] == 7 and detail["kind"] == ("temperature" if "temperature" in words else "voltage")
    tel = read_telemetry(tmp_path / "t.sltl")
    assert fault_row(tel) - tick_of_time(0.1) <= 1


def test_joint_past_limit_faults_on_the_measuring_tick(tmp_path):
    cfg = short_config()
    rig = LockstepRig(cfg, telemetry_path=tmp_path / "j.sltl")
    k = cfg.joint_names.index("lf_hip_abad")

    def shove():
        pos = rig.virtual.engine.position.copy()
        pos[k] = cfg.servos[k].max + 0.3
        rig.virtual.plant.set_state(pos, np.zeros_like(pos))
        rig.virtual.engine.position[:] = pos
        rig.virtual.engine._present_dirty = True

    hook_at(rig, 0.1, shove)
    try:
        s = run_rig(rig, 1.0)
    finally:
        rig.close()
    assert s["state"] == "fault" and "'lf_hip_abad'" in s["faults"][0]
    assert s["fault_details"][0]["kind"] == "limit" and s["fault_details"][0]["joint"] == "lf_hip_abad"
    tel = read_telemetry(tmp_path / "j.sltl")
    q = tel.column("q.lf_hip_abad")
    first_past = int(tel.column("tick")[np.argmax(q > cfg.servos[k].max + cfg.safety.position_margin)])
    assert fault_row(tel) == first_past


@pytest.mark.parametrize("mode", ["hold", "torque_off"])
def test_sigterm_shuts_down_with_torque_off(mode):
    cfg = short_config(shutdown={"mode": mode})
    rig = LockstepRig(cfg)
    hook_at(rig, 0.1, lambda: rig.daemon._on_signal(signal.SIGTERM, None))
    try:
        s = run_rig(rig, 5.0)
    finally:
        rig.close()
    assert s["state"] == "done" and s["stop_reason"] == "SIGTERM" and not s["faults"]
    assert s["ticks"] < 200  # it stopped at the signal, not at the end of the 5 s
    assert not any(rig.servo(sv.id).torque_enabled for sv in cfg.servos)


def test_stop_request_in_hold_mode_keeps_torque():
    cfg = short_config(shutdown={"mode": "hold"})
    rig = LockstepRig(cfg)
    hook_at(rig, 0.1, lambda: rig.daemon.request_stop("test"))
    try:
        s = run_rig(rig, 5.0)
    finally:
        rig.close()
    assert s["state"] == "done" and s["stop_reason"] == "test"
    assert all(rig.servo(sv.id).torque_enabled for sv in cfg.servos)


def test_second_signal_takes_the_fault_path():
    cfg = short_config(shutdown={"stop_cycles": 50})
    rig = LockstepRig(cfg)
    hook_at(rig, 0.1, lambda: rig.daemon._on_signal(signal.SIGINT, None))
    hook_at(rig, 0.11, lambda: rig.daemon._on_signal(signal.SIGINT, None))
    try:
        s = run_rig(rig, 5.0)
    finally:
        rig.close()
    assert s["state"] == "fault" and "second signal SIGINT" in s["faults"][0]
    assert s["fault_details"][0]["kind"] == "signal"
    assert not any(rig.servo(sv.id).torque_enabled for sv in cfg.servos)
    assert rig.daemon.lifecycle.state == State.FAULT


def test_goal_from_the_command_handler_is_applied_between_ticks(tmp_path):
    cfg = short_config()
    rig = LockstepRig(cfg, telemetry_path=tmp_path / "g.sltl")
    errors = []

    def send():
        rig.daemon.set_goal({"lf_knee": -0.9})
        try:
            rig.daemon.set_goal({"lf_knee": -9.0})
        except Exception as exc:  # noqa: BLE001 - the socket turns this into a reply
            errors.append(str(exc))

    hook_at(rig, 0.1, send)
    try:
        s = run_rig(rig, 0.6)
    finally:
        rig.close()
    assert s["state"] == "done"
    assert errors and "outside its limits" in errors[0]
    tel = read_telemetry(tmp_path / "g.sltl")
    assert tel.column("goal.lf_knee")[-1] == pytest.approx(-0.9)
    assert tel.column("q.lf_knee")[-1] == pytest.approx(-0.9, abs=0.05)


def test_wrong_model_is_a_connect_fault_not_an_exception():
    cfg = short_config()
    servos = list(cfg.servos)
    servos[5] = replace(servos[5], model="XL430-W250")
    rig = LockstepRig(cfg, daemon_cfg=replace(cfg, servos=tuple(servos)))
    try:
        s = run_rig(rig, 1.0)
    finally:
        rig.close()
    assert s["state"] == "fault" and s["faults"][0].startswith("connect:")
    assert s["fault_details"][0]["kind"] == "connect"
    assert "servo 6" in s["faults"][0] and "XL430-W250" in s["faults"][0]
    assert s["ticks"] == 0


def test_readonly_never_writes(tmp_path):
    cfg = short_config()
    rig = LockstepRig(cfg, position0=quad_pose0(2), telemetry_path=tmp_path / "r.sltl")
    rig.daemon.readonly = True
    try:
        s = run_rig(rig, 0.2)
    finally:
        rig.close()
    assert s["state"] == "done" and s["ticks"] == 200
    kinds = {p.instruction for _t, p in rig.instructions()}
    # reads only (the servos and the IMU board share one BULK READ per tick)
    assert kinds <= {P.Instruction.PING, P.Instruction.READ, P.Instruction.SYNC_READ,
                     P.Instruction.BULK_READ}, kinds
    assert not any(rig.servo(sv.id).torque_enabled for sv in cfg.servos)
    tel = read_telemetry(tmp_path / "r.sltl")
    assert np.isfinite(tel.column("q.lf_knee")).all()


def test_socket_held_by_another_daemon_is_a_clean_fault(tmp_path):
    from servoloop.controller.command_socket import CommandServer

    other = CommandServer(tmp_path / "d.sock", handler=None)
    other.start()
    cfg = short_config()
    lock = make_lockstep(cfg)
    try:
        d = Daemon(cfg, lock.bus, lock.clock, telemetry_path=None, socket_path=tmp_path / "d.sock")
        s = d.run(0.1)
    finally:
        lock.close()
        other.close()
    assert s["state"] == "fault" and s["faults"][0].startswith("command socket: another daemon")
    assert s["ticks"] == 0


def test_no_garbage_collection_inside_the_loop(tmp_path):
    # a full collection of this heap is tens of ms: it runs once before the first
    # deadline, the collector stays off through startup and run, and comes back after
    import gc

    assert gc.isenabled()
    cfg = short_config()
    rig = LockstepRig(cfg)
    seen = []
    rig.hooks.append(lambda t: seen.append((gc.isenabled(), gc.get_freeze_count() > 0)))
    try:
        s = run_rig(rig, 0.1)
    finally:
        rig.close()
    assert s["state"] == "done"
    assert seen and all(not enabled and frozen for enabled, frozen in seen)
    assert gc.isenabled() and gc.get_freeze_count() == 0
