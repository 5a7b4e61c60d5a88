"""Telemetry's monitor columns: temperature, voltage and hardware error bits per servo.

The built-in arm runs in lockstep; the virtual bus latches an overload on
servo 2 at 1.0 s (``safety.on_hardware_error: disable_servo``, so the run
goes on).  The columns hold the monitor stage's last read: NaN before the
first, the servo's figures after, and the error bits from the tick the
monitor sees the alert.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import yaml

from servoloop import robots
from servoloop.controller.telemetry_format import read_telemetry

pytestmark = pytest.mark.hil


def test_monitor_columns_show_temperature_voltage_and_a_latched_overload(tmp_path):
    with open(robots.config_path("arm")) as f:
        cfg = yaml.safe_load(f)
    cfg["model"]["urdf"] = str(robots.urdf_path("arm"))
    cfg["safety"] = {"on_hardware_error": "disable_servo"}
    path = tmp_path / "arm.yaml"
    path.write_text(yaml.safe_dump(cfg))
    tel_path = tmp_path / "run.sltl"
    r = subprocess.run([sys.executable, "-m", "servoloop.cli", "run", "--config", str(path), "--lockstep",
                        "--duration", "2", "--faults", "hwerror:id=2:bits=overload:at=1.0",
                        "--telemetry", str(tel_path), "--socket", "none", "--quiet"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    tel = read_telemetry(tel_path)
    assert tel.header["version"] == 2 and not tel.problems
    t = tel.column("t_s")
    volt, temp = tel.column("voltage.base_yaw"), tel.column("temperature.base_yaw")
    seen = np.isfinite(volt)
    assert np.isnan(volt[0]) and seen.mean() > 0.9  # NaN only before the first monitor read
    assert np.all((volt[seen] > 5.0) & (volt[seen] < 20.0)) and np.all(temp[seen] > 0.0)
    hw = tel.column("hw_error.shoulder_pitch")
    before, after = hw[(t > 0.1) & (t < 0.99)], hw[t > 1.1]
    assert np.all(before == 0.0)
    assert after.size > 500 and np.all(after == 0x20)  # overload, bit 5 of Hardware Error Status
    assert np.all(tel.column("hw_error.base_yaw")[t > 0.1] == 0.0)  # the others stay clean
