"""The run's status line over seconds of a lockstep run: the robot first, timing only once the run
state has ticks (never ``0.0 Hz`` / ``nan`` while starting up); the startup warning when the rate
cannot fit the baud."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import yaml

from servoloop.cli import main
from servoloop.controller.commands import status_text
from servoloop.controller.config import builtin_config
from servoloop.controller.daemon import Daemon
from servoloop.controller.runtime import make_lockstep

pytestmark = pytest.mark.hil


def test_status_line_shows_the_robot_first_and_no_timing_before_the_run():
    cfg = builtin_config("arm")
    cfg = replace(cfg, startup=replace(cfg.startup, ramp_s=0.5),
                  simulation=replace(cfg.simulation, plant="independent"),
                  safety=replace(cfg.safety, monitor_every=10))
    lock = make_lockstep(cfg)
    d = Daemon(cfg, lock.bus, lock.clock, telemetry_path=None, socket_path=None)
    lines = []
    advance = lock.clock.on_advance
    count = [0]

    def on_advance(dt):
        advance(dt)
        count[0] += 1
        if count[0] % 50 == 0:
            lines.append((d.lifecycle.state.label, status_text(d)))

    lock.clock.on_advance = on_advance
    try:
        summary = d.run(1.5)
    finally:
        lock.close()
    assert summary["state"] == "done"
    startup = [t for s, t in lines if s == "startup"]
    run = [t for s, t in lines if s == "run"]
    assert len(startup) >= 5 and len(run) >= 20
    for t in startup:
        assert "Hz" not in t and "nan" not in t and "worst error" in t
    for t in run:
        robot, _, timing = t.partition(" | 1")       # timing comes last
        assert "worst error" in robot and "rad (" in robot and "hottest" in robot and "degC (servo" in robot
        assert "Hz, p99" in t and t.index("worst error") < t.index("Hz") and "nan" not in t
    joints = set(cfg.joint_names)
    assert any(t.split("worst error ")[1].split("(")[1].split(")")[0] in joints for t in run)


def test_a_rate_the_baud_cannot_carry_is_a_startup_warning(tmp_path, capsys, caplog):
    cfg = {"robot": "slow", "bus": {"baud": 57600},
           "servos": [{"id": 1, "model": "XM430-W350", "joint": "a"}, {"id": 2, "model": "XM430-W350", "joint": "b"}],
           "loop": {"rate_hz": 1000}, "simulation": {"plant": "independent"}, "startup": {"ramp_s": 0.1}}
    path = tmp_path / "slow.yaml"
    path.write_text(yaml.safe_dump(cfg))
    rc = main(["run", "--config", str(path), "--duration", "0.3", "--json", "--quiet", "--telemetry", "none",
               "--socket", "none"])
    captured = capsys.readouterr()
    summary = json.loads(captured.out.strip().splitlines()[-1])
    assert rc in (0, 1), captured.err
    warning = [w for w in summary["warnings"] if w.startswith("loop.rate_hz 1000 Hz cannot fit bus.baud 57600")]
    assert warning and "Hz fits at this baud (--rate " in warning[0]
    # logged at startup, not only in the summary at the end
    assert any("cannot fit bus.baud 57600" in r.getMessage() and r.levelname == "WARNING" for r in caplog.records)
