"""Registers from the config written at connect (before torque on), read back and checked, in
lockstep against the in-process virtual bus; calibration files pinning the gain they were
made at (``run --calibration``) and driving the emulated servo (``virtual-bus --actuator-file``)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
import yaml

from servoloop.controller.calibration_file import apply_calibration, load_calibration
from servoloop.controller.config import builtin_config
from servoloop.controller.daemon import Daemon
from servoloop.controller.runtime import make_lockstep
from servoloop.firmware_bridge.control_table import get_table

pytestmark = pytest.mark.hil

XM = get_table("XM430-W350")


def arm_config(**servo0_registers):
    cfg = builtin_config("arm")
    cfg = replace(cfg, startup=replace(cfg.startup, ramp_s=0.1),
                  simulation=replace(cfg.simulation, plant="independent"))
    s0 = replace(cfg.servos[0], registers=servo0_registers)
    return replace(cfg, servos=(s0,) + cfg.servos[1:])


def run(cfg, tamper=None, duration=1.0):
    lock = make_lockstep(cfg)
    try:
        if tamper:
            tamper(lock)
        d = Daemon(cfg, lock.bus, lock.clock, telemetry_path=None, socket_path=None)
        summary = d.run(duration)
        mem = {s.bus_id0: bytes(s.mem) for s in lock.virtual.engine.servos}
        return d, summary, mem
    finally:
        lock.close()


def raw_of(mem: bytes, name: str) -> int:
    reg = XM[name]
    return int.from_bytes(mem[reg.address:reg.address + reg.size], "little", signed=reg.signed)


def test_registers_are_written_at_connect_and_the_robot_runs():
    cfg = arm_config()
    if cfg.servos[0].model.upper() != "XM430-W350":
        pytest.skip("the built-in arm's first servo is not an XM430-W350")
    cfg = replace(cfg, register_defaults={"XM430-W350": {"position_d_gain": 200, "profile_acceleration": 0.0}})
    s0 = replace(cfg.servos[0], registers={"position_p_gain": 1234, "current_limit": 1.0})
    cfg = replace(cfg, servos=(s0,) + cfg.servos[1:])
    d, summary, mem = run(cfg)
    assert summary["state"] == "done", summary["faults"]
    sid0 = cfg.servos[0].id
    assert raw_of(mem[sid0], "position_p_gain") == 1234
    assert raw_of(mem[sid0], "current_limit") == round(1.0 / 0.00269)
    for s in cfg.servos:
        if get_table(s.model).name == "XM430-W350":
            assert raw_of(mem[s.id], "position_d_gain") == 200
    # the EEPROM write (current_limit) needed torque off: torque came on afterwards and the
    # robot ran a second of ticks
    assert summary["ticks"] > 0.9 * cfg.loop.rate_hz


def test_a_register_the_servo_does_not_keep_is_a_connect_fault_naming_both_values():
    cfg = arm_config(position_p_gain=1234)

    def ignore_gain_writes(lock):
        write_raw = lock.bus.write_raw

        def write(sid, name, raw, **kw):
            if name != "position_p_gain":
                write_raw(sid, name, raw, **kw)
        lock.bus.write_raw = write

    d, summary, _ = run(cfg, ignore_gain_writes)
    assert summary["state"] == "fault"
    detail = summary["fault_details"][0]
    assert detail["kind"] == "connect"
    assert f"servo {cfg.servos[0].id}" in detail["message"]
    assert "register position_p_gain written 1234 but reads back 800" in detail["message"]
    assert summary["ticks"] == 0          # never reached the run state: no torque on


def test_run_calibration_pins_the_gain_it_was_made_at(tmp_path):
    cfg = arm_config()
    model = cfg.servos[0].model
    report = {"params": {"kp": 4.0, "kd": 0.1, "kc": 0.02, "kp_by_gain": {"500": 4.0}},
              "fit": {"per_gain": [{"gain": 500}]},
              "data": {"servo": {"id": 1, "model": model}}}
    path = tmp_path / "servo.yaml"
    path.write_text(yaml.safe_dump(report))
    cal_cfg = apply_calibration(cfg, load_calibration(path))
    d, summary, mem = run(cal_cfg)
    assert summary["state"] == "done", summary["faults"]
    for s in cal_cfg.servos:
        if get_table(s.model).name == get_table(model).name:
            assert s.position_stiffness == 4.0
            assert raw_of(mem[s.id], "position_p_gain") == 500
    # and from the command line: the same file, exit 0
    r = subprocess.run([sys.executable, "-m", "servoloop.cli", "run", "--robot", "arm", "--lockstep",
                        "--duration", "0.5", "--calibration", str(path), "--json", "--telemetry", "none",
                        "--socket", "none", "--quiet"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["state"] == "done"
    bad = tmp_path / "other.yaml"
    bad.write_text(yaml.safe_dump(dict(report, data={"servo": {"model": "AX-12A"}})))
    r = subprocess.run([sys.executable, "-m", "servoloop.cli", "run", "--robot", "arm", "--lockstep",
                        "--calibration", str(bad)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "other.yaml: calibration made on AX-12A" in r.stderr
    assert "Traceback" not in r.stderr


def test_virtual_bus_actuator_file_drives_the_emulated_servo(tmp_path):
    """A calibrated (much softer) servo sags further under the same step than the default one."""
    from servoloop.virtual_bus.cli import _with_actuator_file
    from servoloop.virtual_bus.engine import BusEngine

    report = {"params": {"kp": 0.3, "kd": 0.01, "kc": 0.0}, "data": {"servo": {"model": "XM430-W350"}}}
    path = tmp_path / "soft.yaml"
    path.write_text(yaml.safe_dump(report))
    servos = [(1, "XM430-W350"), (2, "XM430-W350")]
    actuators = _with_actuator_file(str(path), servos, {2: {"kp": 9.0}})
    engine = BusEngine(servos, actuators=actuators)
    soft, explicit = (p.servo for p in engine.plant.params)
    assert soft.kp_nm_per_rad == 0.3 and soft.kd_nm_s_per_rad == 0.01
    assert explicit.kp_nm_per_rad == 9.0      # an --actuator item wins over the file
    r = subprocess.run([sys.executable, "-m", "servoloop.cli", "virtual-bus", "--servos", "1:AX-12A",
                        "--actuator-file", str(path), "--duration", "0.1"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "soft.yaml: calibration made on XM430-W350: no emulated servo" in r.stderr


def test_virtual_bus_actuator_file_drives_the_contact_simulators_servos(tmp_path):
    """On the contact simulator (a robot with a description) the file's identified law reaches
    the servos of its model (``RobotPlant.set_servo_law``); before, any file was refused there
    ("actuator overrides apply to the default plant only")."""
    from servoloop.virtual_bus.cli import _law_from_file
    from servoloop.virtual_bus.robot_plant import make_plant

    report = {"params": {"kp": 18.0, "kd": 0.6, "kc": 0.25, "kp_by_gain": {"800": 18.0}},
              "fit": {"per_gain": [{"gain": 800}]}, "data": {"servo": {"model": "XM430-W350"}}}
    path = tmp_path / "damped.yaml"
    path.write_text(yaml.safe_dump(report))
    servos = [(s.id, s.model) for s in builtin_config("quadruped").servos]
    plant = make_plant(servos, "quadruped")
    stall = plant.sim._core.servo_array("stall")[0].copy()
    _law_from_file(str(path), servos, plant)
    core = plant.sim._core
    for name, value in (("kp", 18.0), ("kd", 0.6), ("kc", 0.25)):
        assert np.allclose(core.servo_array(name)[0], value), name
    assert np.allclose(core.servo_array("armature")[0], 0.0012)    # not in the file: the simulator's
    assert np.array_equal(core.servo_array("stall")[0], stall)
    r = subprocess.run([sys.executable, "-m", "servoloop.cli", "virtual-bus", "--robot", "quadruped",
                        "--actuator-file", str(path), "--duration", "0.2"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
