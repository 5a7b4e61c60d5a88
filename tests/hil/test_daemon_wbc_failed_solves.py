"""``wbc`` when its contact inverse dynamics finds no torques.

A failed solve keeps the last torques for that tick (one bad tick must not
stop a robot); a run of them longer than ``MAX_FAILED_S`` is a fault of kind
``control`` that names the variant and the solver's error, and the daemon's
fault path turns the servos' torque off.  Old torques are not a command once
the contacts have changed.  Both through the virtual bus, lockstep, on the
built-in quadruped.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from servoloop.controller.config import ControllerConfig, builtin_config
from servoloop.controller.controllers.wbc import MAX_FAILED_S
from servoloop.controller.daemon import Daemon
from servoloop.controller.runtime import make_lockstep
from servoloop.controller.wholebody import balance
from tests.hil.test_daemon_wbc import run_daemon

pytestmark = pytest.mark.hil


def _failing_solver(monkeypatch, good: int, bad: int | None):
    """The balance step's contact ID: ``good`` solves answer, then ``bad`` fail (None: all),
    then they answer again."""
    real = balance.ContactInverseDynamics
    calls = [0]

    class Flaky:
        def __init__(self, *args, **kwargs):
            self._ws = real(*args, **kwargs)

        def __getattr__(self, name):
            return getattr(self._ws, name)

        def __setattr__(self, name, value):
            if name == "_ws":
                object.__setattr__(self, name, value)
            else:
                setattr(self._ws, name, value)

        def solve_into(self, *args):
            calls[0] += 1
            k = calls[0] - good
            if k > 0 and (bad is None or k <= bad):
                raise RuntimeError("no complementary basis (injected)")
            return self._ws.solve_into(*args)

    monkeypatch.setattr(balance, "ContactInverseDynamics", Flaky)
    return calls


def _cfg():
    cfg = builtin_config("quadruped")
    return replace(cfg, controller=ControllerConfig(name="wbc", params={}))


def test_a_run_of_failed_solves_is_a_named_fault_and_torque_goes_off(monkeypatch):
    calls = _failing_solver(monkeypatch, good=300, bad=None)
    cfg = _cfg()
    lock = make_lockstep(cfg)
    try:
        sim = lock.virtual.engine.plant.sim
        summary = Daemon(cfg, lock.bus, lock.clock, telemetry_path=None, socket_path=None).run(
            cfg.startup.ramp_s + 2.0)
        torque_on = [s.torque_enabled for s in lock.virtual.engine.servos]
        z = float(sim.q[2])
    finally:
        lock.close()
    assert summary["state"] == "fault"
    limit = round(MAX_FAILED_S * 1000)                 # ticks at the quadruped's 1 kHz
    assert calls[0] == 300 + limit                     # it faulted on the limit's tick, not later
    detail = summary["fault_details"][0]
    assert detail["kind"] == "control"
    msg = detail["message"]
    assert "lcp_coulomb" in msg and f"{limit} ticks in a row" in msg and "injected" in msg
    assert z > 0.2                                     # it stood until then (0.35 s of run)
    assert not any(torque_on)                          # the fault path turned torque off


def test_a_short_run_of_failed_solves_is_ridden_through(monkeypatch):
    """Fewer failures in a row than the limit: the last torques carry those ticks and the
    quadruped keeps standing to the end of the run."""
    limit = round(MAX_FAILED_S * 1000)
    calls = _failing_solver(monkeypatch, good=300, bad=limit - 5)
    summary, s, status, _ = run_daemon(_cfg(), 1.5)
    assert summary["state"] == "done", summary["faults"]
    assert status["id_failures"] == limit - 5 and calls[0] > 1000
    assert s[:, 2].min() > 0.2 and s[-1, 3] < 3.0      # standing and level at the end


def test_failed_no_slip_solves_are_answered_by_the_coulomb_lcp():
    """`trot` with ``variant: lcp_noslip``: at touchdowns its set of sticking contacts can fail
    to settle for tens of ticks in a row; the Coulomb LCP at MU_FALLBACK answers those ticks,
    so the trot goes on (before: the last torques, then the fault above)."""
    from tests.unit.controller.test_wbc import Rig

    rig = Rig("quadruped", "trot", {"speed_mps": 0.1, "variant": "lcp_noslip"})
    rig.run(2.0)                                   # raises FaultRaised past MAX_FAILED_S
    core = rig.ctrl.core
    assert core.failures > 0 and core.fallbacks == core.failures   # every failure answered
    assert core.failed_streak == 0
    assert rig.plant.q[2] > 0.2                    # still up after 2 s of trot
