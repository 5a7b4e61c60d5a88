"""A controller that produces a non-finite goal gets a named fault, not a crash.

A NaN position or velocity goal holds the last written goal (the safety
stage); a NaN torque for a current-mode servo cannot be held that way (no
"last current" is safe to keep), so the write stage refuses to encode it: the daemon goes to
its fault path (torque off), and the fault names the servo and the joint.
Before, the register encoder's ValueError surfaced as "unexpected ValueError".
"""

from __future__ import annotations

import pytest

from servoloop.controller.config import config_from_dict
from tests.hil.velocity_rigs import lockstep_daemon

pytestmark = pytest.mark.hil


def _nan_after(daemon, field: str, t_nan: float) -> None:
    """From loop time ``t_nan`` on, the controller's ``field`` command is NaN for joint 1."""
    ctl = daemon.loop.control.controller
    inner = ctl.update

    def update(t, state, command):
        inner(t, state, command)
        if t >= t_nan:
            getattr(command, field)[1] = float("nan")
    ctl.update = update


def test_nonfinite_current_goal_is_a_named_fault():
    mode, field, register = "current", "effort", "goal_current"
    servos = [(1, "XM430-W350", "position", 0.0), (2, "XM430-W350", mode, 0.0)]
    cfg = config_from_dict({
        "robot": "pair", "bus": {"protocol": 2, "baud": 1_000_000},
        "servos": [{"id": 1, "model": "XM430-W350", "joint": "j1"},
                   {"id": 2, "model": "XM430-W350", "joint": "j2", "mode": mode,
                    **({"torque_constant": 1.8} if mode == "current" else {})}],
        "loop": {"rate_hz": 500}, "startup": {"ramp_s": 0.02},
        "controller": {"name": "hold"}, "simulation": {"plant": "independent"},
    })
    daemon, lock, _position = lockstep_daemon(cfg, servos)
    _nan_after(daemon, field, 0.3)
    try:
        s = daemon.run(1.0)
    finally:
        lock.close()
    assert s["state"] == "fault", s
    (fault,) = s["fault_details"]
    assert fault["kind"] == "internal"
    assert fault["servo"] == 2 and fault["joint"] == "j2", fault
    assert register in fault["message"] and "non-finite" in fault["message"], fault
    assert "unexpected" not in fault["message"]
    # the fault path turned torque off on both servos
    for servo in lock.virtual.engine.servos:
        reg = servo.info.reg["torque_enable"]
        assert servo.mem[reg.address] == 0
