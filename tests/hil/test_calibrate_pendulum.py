"""``calibrate actuator`` on a pendulum: kp and the inertia, apart or honestly not.

A square wave fixes kp / I and kd / I; kp and the inertia (load + the
rotor's armature, fitted on a pendulum) come apart only through gravity's
torque over the step, m g l x amplitude, against the Coulomb band.  A user
trial (an XL430 carrying 0.2 kg at 0.1 m, gains 400 and 800, 2 cycles)
got kp 1.8x and 2.7x the truth with a 0.70 mrad fit: a well-fitting wrong
answer.  Lockstep on the in-process virtual bus (its servo law is the
emulator's, integrated at 0.05 ms, not the identifier's), so runs repeat.
"""

from __future__ import annotations

import pytest

from servoloop.calibration.bench_fit import KP_SEPARABLE_SPREAD, identify_bench
from servoloop.calibration.experiment import LoadSpec, known_torque_limit, run_experiment

pytestmark = pytest.mark.hil

MODEL = "XL430-W250"
MASS_KG, LENGTH_M = 0.2, 0.1
GRAVITY = 9.81
# the identifier's systematic error on these runs (its friction law and integrator are not the
# emulator's): the calibration tests' 3 %
KP_TOLERANCE = 0.03


class LockstepClock:
    def __init__(self, vb, dt=0.001):
        self.vb, self.dt = vb, dt

    def now(self):
        return self.vb.time_s

    def tick(self):
        self.vb.advance(self.dt)


def _pendulum_run(gains, cycles, amplitude=None):
    """Raw recordings, known torque limit and the emulator's kp per gain [N*m/rad]."""
    from servoloop.firmware_bridge.bus import Bus, ServoSpec
    from servoloop.firmware_bridge.control_table import get_table
    from servoloop.virtual_bus import IndependentServosPlant, InProcessVirtualBus
    from servoloop.virtual_bus.actuator import default_actuator, with_overrides

    table = get_table(MODEL)
    actuator = with_overrides(default_actuator(table), {"inertia": MASS_KG * LENGTH_M**2,
                                                         "gravity_torque": MASS_KG * GRAVITY * LENGTH_M})
    plant = IndependentServosPlant([actuator], substep_s=5e-5)
    vb = InProcessVirtualBus({1: MODEL}, plant=plant, protocol=2)
    try:
        bus = Bus(vb.port, 1_000_000, 2, [ServoSpec(id=1, model=MODEL)], on_after_write=lambda: vb.pump())
        with bus:
            bus.connect()
            limit = known_torque_limit(bus, 1)
            recs = run_experiment(bus, 1, LoadSpec(mass=MASS_KG, length=LENGTH_M), list(gains), 0.67,
                                  amplitude, cycles, clock=LockstepClock(vb), progress=False)
    finally:
        vb.close()
    p_default = table.registers["position_p_gain"].default
    truth = {g: actuator.servo.kp_nm_per_rad * g / p_default for g in gains}
    return recs, limit, truth


@pytest.mark.slow
def test_trial_case_says_kp_is_not_separable_with_the_numbers():
    """The trial's experiment: kp's 95 % interval spans the valley (armature 0 .. ~1e-3 kg*m^2 fit
    alike) and holds the truth; the report warns per gain with the interval and the remedy."""
    recs, limit, truth = _pendulum_run((400, 800), cycles=2)
    res = identify_bench(recs, torque_limit=limit)
    assert len(res["warnings"]) == 2
    for g, warning in zip(res["fit"]["per_gain"], res["warnings"], strict=True):
        kp = truth[g["gain"]]
        lo, hi = g["kp_interval_95"]
        assert lo * (1 - KP_TOLERANCE) <= kp <= hi * (1 + KP_TOLERANCE)
        assert hi - lo > KP_SEPARABLE_SPREAD * g["params"]["kp"]       # what the warning says
        assert hi > 1.2 * kp                       # the valley: a larger armature fits as well
        assert f"gain {g['gain']:g}: kp is not separable from the inertia" in warning
        assert f"kp from {lo:.3g} to {hi:.3g}" in warning
        assert "--amplitude" in warning and "m g l x amplitude" in warning
        # the Gauss-Newton standard error alone claimed far less than the valley
        assert g["stderr"]["kp"] < 0.1 * (hi - lo)


@pytest.mark.slow
def test_low_gain_large_step_separates_kp_from_the_inertia():
    """Gravity's torque over the step (0.196 N*m x 0.3 rad) well out of the Coulomb band (0.025
    N*m): kp within 3 % of the truth, its interval under 10 %, no warning."""
    recs, limit, truth = _pendulum_run((200,), cycles=4, amplitude=0.3)
    res = identify_bench(recs, torque_limit=limit)
    g = res["fit"]["per_gain"][0]
    lo, hi = g["kp_interval_95"]
    assert g["params"]["kp"] == pytest.approx(truth[200], rel=KP_TOLERANCE)
    assert hi - lo < KP_SEPARABLE_SPREAD * g["params"]["kp"]
    assert lo * (1 - KP_TOLERANCE) <= truth[200] <= hi * (1 + KP_TOLERANCE)
    assert res["warnings"] == []


@pytest.mark.slow
def test_known_armature_pins_kp_on_the_trial_experiment():
    """The trial's 2-cycle run at gains 400 and 800 with the rotor's armature given (the
    emulated XL430's is 0; a run that separates kp, as above, measures it): kp within 3 % at
    both gains, and no interval or warning (nothing is traded against kp)."""
    recs, limit, truth = _pendulum_run((400, 800), cycles=2)
    res = identify_bench(recs, torque_limit=limit, armature=0.0)
    for g in res["fit"]["per_gain"]:
        assert g["params"]["kp"] == pytest.approx(truth[g["gain"]], rel=KP_TOLERANCE)
        assert "kp_interval_95" not in g and g["armature_fixed"] == 0.0
    assert res["warnings"] == []
