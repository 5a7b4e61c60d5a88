"""The Bus Watchdog: armed after torque on, cleared at shutdown, and a host that stops
talking makes the (emulated) X servos stop by themselves (e-Manual, Bus Watchdog(98))."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from servoloop.controller.bringup import prepare_bus_watchdog, servo_tables
from servoloop.firmware_bridge import protocol as P
from servoloop.firmware_bridge.bus import Bus, ServoSpec
from servoloop.firmware_bridge.errors import ServoStatusError
from servoloop.virtual_bus import InProcessVirtualBus
from tests.hil.test_daemon_lockstep import ADDR_TORQUE_ENABLE, LockstepRig, hook_at, short_config

pytestmark = pytest.mark.hil

ADDR_BUS_WATCHDOG = 98


def watchdog_events(rig):
    """Per servo, in order: ("torque", v) and ("watchdog", raw) single writes, ("goal",) sync writes."""
    ev: dict[int, list] = {}
    for _t, pkt in rig.instructions():
        if pkt.instruction == P.Instruction.WRITE:
            addr = pkt.params[0] | pkt.params[1] << 8
            if addr == ADDR_TORQUE_ENABLE:
                ev.setdefault(pkt.servo_id, []).append(("torque", pkt.params[2]))
            elif addr == ADDR_BUS_WATCHDOG:
                ev.setdefault(pkt.servo_id, []).append(("watchdog", pkt.params[2]))
        elif pkt.instruction == P.Instruction.SYNC_WRITE:
            for sid in ev:
                ev[sid].append(("goal",))
    return ev


def test_armed_after_torque_on_and_cleared_at_shutdown():
    cfg = short_config("quadruped", shutdown={"mode": "hold"})
    rig = LockstepRig(cfg)
    seen = []
    hook_at(rig, 0.2, lambda: seen.append([s.mem[ADDR_BUS_WATCHDOG] for s in rig.virtual.engine.servos]))
    try:
        summary = rig.daemon.run(0.3)
        after = [s.mem[ADDR_BUS_WATCHDOG] for s in rig.virtual.engine.servos]
        trips = rig.virtual.engine.stats["watchdog_trips"]
    finally:
        rig.close()
    assert summary["state"] == "done"
    assert seen == [[5] * len(cfg.servos)]          # 0.1 s in 20 ms units, while running
    assert after == [0] * len(cfg.servos) and trips == 0
    ev = watchdog_events(rig)
    for s in cfg.servos:
        e = ev[s.id]
        arm = e.index(("watchdog", 5))
        assert ("torque", 1) in e[:arm]                   # armed after torque on
        last_goal = max(i for i, x in enumerate(e) if x == ("goal",))
        assert e[-1] == ("watchdog", 0) and len(e) - 1 > last_goal  # cleared after the last goal


def test_models_without_a_watchdog_are_named_at_connect(caplog):
    rig = LockstepRig(short_config("humanoid"))
    try:
        with caplog.at_level(logging.WARNING, logger="servoloop.daemon"):
            summary = rig.daemon.run(0.05)
    finally:
        rig.close()
    assert summary["state"] == "done"
    lines = [r.getMessage() for r in caplog.records if "Bus Watchdog" in r.getMessage()]
    assert len(lines) == 1 and "AX-18A" in lines[0]


def test_a_host_that_stops_the_loop_abruptly_stops_the_servos():
    """Connect, start, run; then nothing more (kill -9): the servos stop within the watchdog time."""
    cfg = short_config("quadruped")
    rig = LockstepRig(cfg)
    engine = rig.virtual.engine
    try:
        d = rig.daemon
        d.open_outputs()
        d.connect()
        d.startup()
        d.run_loop(0.2)
        assert engine.stats["watchdog_trips"] == 0        # a live host never trips it
        # the host is gone: simulated time goes on, nobody talks
        t_dead = engine.time_s
        while engine.time_s < t_dead + 0.095:
            rig.virtual.advance(0.005)
            assert engine.stats["watchdog_trips"] == 0        # not before the 100 ms
        rig.virtual.advance(0.03)
        assert engine.stats["watchdog_trips"] == len(cfg.servos)
        assert all(s.watchdog_tripped for s in engine.servos)
        # a stopped servo holds its present position (goal := present when it fired)
        rig.virtual.advance(0.5)
        assert np.allclose(engine.goal_rad, engine.position, atol=0.05)
        # the next host's connect clears what the dead one left, and goals are writable again
        bus = rig.lock.bus
        prepare_bus_watchdog(bus, cfg, servo_tables(cfg))
        assert not any(s.watchdog_tripped for s in engine.servos)
        bus.write(cfg.servos[0].id, "goal_position", float(engine.position[0]))
    finally:
        rig.daemon.env.end_realtime()
        rig.daemon.resume_gc()                                # startup paused the collector
        rig.daemon.close_bus()
        rig.daemon.close_outputs()
        rig.close()


def _moving_servo(watchdog_raw: int):
    """One XM430 on the in-process virtual bus driven towards a goal 1.5 rad away, then silence."""
    # a heavy load: 1.5 rad take ~0.35 s, so the watchdog (0.1 s) fires on the way
    vb = InProcessVirtualBus({1: "XM430-W350"}, actuators={1: {"inertia_kg_m2": 0.05}})
    bus = Bus(vb.port, 1_000_000, 2, [ServoSpec(1, "XM430-W350")], on_after_write=vb.pump,
              timeout_margin_s=0.05)
    bus.open()
    bus.write(1, "torque_enable", 1)
    bus.write_raw(1, "bus_watchdog", watchdog_raw)
    goal = bus.read(1, "present_position") + 1.5
    bus.write(1, "goal_position", goal)
    reader = bus.sync_reader(["present_position"])
    for _ in range(5):                       # 50 ms of a live host: the servo is on its way
        reader.read()
        vb.advance(0.01)
    q_silent = float(vb.engine.position[0])
    for _ in range(100):                     # then the host says nothing for a second
        vb.advance(0.01)
    return vb, bus, goal, q_silent


def test_the_watchdog_stops_a_moving_servo_and_locks_its_goals_until_cleared():
    vb, bus, goal, q_silent = _moving_servo(5)
    try:
        q_end = float(vb.engine.position[0])
        assert vb.engine.servos[0].watchdog_tripped
        assert abs(q_end - goal) > 0.5                    # it stopped on the way
        assert bus.read_raw(1, "bus_watchdog") == -1
        with pytest.raises(ServoStatusError):             # Range Error: goals are read-only
            bus.write(1, "goal_position", q_end)
        bus.write_raw(1, "bus_watchdog", 0)               # 0 clears the Bus Watchdog Error
        bus.write(1, "goal_position", q_end)
    finally:
        bus.close()
        vb.close()
    # the same without a watchdog: the servo goes on to its goal with nobody talking
    vb, bus, goal, q_silent = _moving_servo(0)
    try:
        assert abs(float(vb.engine.position[0]) - goal) < 0.05
        assert not vb.engine.servos[0].watchdog_tripped
    finally:
        bus.close()
        vb.close()


def test_rearmed_after_a_reboot_recovery():
    # a reboot resets the Bus Watchdog to 0 (e-Manual): the restored servo must be armed again
    cfg = short_config("quadruped", safety={"on_hardware_error": "reboot"})
    rig = LockstepRig(cfg, faults="hwerror:id=3:at=0.15:bits=overheat")
    seen = []
    hook_at(rig, 0.4, lambda: seen.append([s.mem[ADDR_BUS_WATCHDOG] for s in rig.virtual.engine.servos]))
    try:
        summary = rig.daemon.run(0.5)
    finally:
        rig.close()
    assert summary["state"] == "done", summary["faults"]
    kinds = [e["kind"] for e in summary.get("events", [])] if summary.get("events") else None
    assert seen == [[5] * len(cfg.servos)], (seen, kinds)     # servo 3 too, after its reboot
    ev = watchdog_events(rig)[3]
    torque_on = [i for i, x in enumerate(ev) if x == ("torque", 1)]
    assert len(torque_on) == 2 and ("watchdog", 5) in ev[torque_on[1]:]   # armed after the second torque on
