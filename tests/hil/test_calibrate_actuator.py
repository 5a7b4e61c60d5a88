"""``calibrate actuator`` end to end against the virtual servo bus (real protocol bytes).

Lockstep (in-process virtual bus, simulated time): seed 000's AX-18 values and
random draws must come back within the issue's tolerances (kp, kd 3 %, kc
15 %), and the servo must be left as found.  The virtual servo integrates at
0.05 ms, ten times finer than the identifier's search step and with its own
friction law (Karnopp stiction; the identifier's is BAM's), so that a fit
matching the bus's discretisation instead of the physics fails (no inverse
crime).  One run through the CLI on a virtual bus process checks the whole
command (raw data written first, JSON).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from servoloop.calibration.bench_fit import identify_bench
from servoloop.calibration.experiment import LoadSpec, known_torque_limit, run_experiment

pytestmark = pytest.mark.hil

ROOT = Path(__file__).resolve().parents[2]
SEED000 = (9.272, 0.3069, 0.03, 4.0e-3)
# the truth's integration step: 1/10 of the identifier's 0.5 ms search step
TRUTH_SUBSTEP_S = 5e-5


class LockstepClock:
    """Simulated time of an in-process virtual bus, advanced 1 ms per sample."""

    def __init__(self, vb, dt=0.001):
        self.vb, self.dt = vb, dt

    def now(self):
        return self.vb.time_s

    def tick(self):
        self.vb.advance(self.dt)


def _lockstep_run(kp, kd, kc, inertia, cycles=8, model="AX-18A", protocol=1, substep_s=TRUTH_SUBSTEP_S,
                  faults=None):
    from servoloop.firmware_bridge.bus import Bus, ServoSpec
    from servoloop.firmware_bridge.control_table import get_table
    from servoloop.virtual_bus import IndependentServosPlant, InProcessVirtualBus
    from servoloop.virtual_bus.actuator import default_actuator, with_overrides

    servo = with_overrides(default_actuator(get_table(model)), {"kp": kp, "kd": kd, "kc": kc, "inertia": inertia})
    plant = IndependentServosPlant([servo], substep_s=substep_s)
    vb = InProcessVirtualBus({1: model}, plant=plant, protocol=protocol, faults=faults)
    try:
        bus = Bus(vb.port, 1_000_000, protocol, [ServoSpec(id=1, model=model)], on_after_write=lambda: vb.pump())
        with bus:
            bus.connect()
            before = {n: bus.read_raw(1, n) for n in ("torque_enable", "cw_compliance_margin",
                                                      "cw_compliance_slope", "torque_limit")}
            limit = known_torque_limit(bus, 1)
            recs = run_experiment(bus, 1, LoadSpec(inertia=inertia), None, 0.67, None, cycles,
                                  clock=LockstepClock(vb), progress=False)
            after = {n: bus.read_raw(1, n) for n in before}
    finally:
        vb.close()
    return recs, limit, before, after


AX_TICK_RAD = 0.00511326929295


def _draws(n, seed=5):
    """Random servos: damping ratio 0.5-1.0; Coulomb band kc/kp of 0.5-2 encoder ticks (below
    half a tick the friction leaves no trace in whole-tick readings: kc is then unobservable)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        kp, inertia = rng.uniform(3.0, 20.0), rng.uniform(1e-3, 8e-3)
        kd = 2 * 0.8 * np.sqrt(kp * inertia) * rng.uniform(0.6, 1.3)
        kc = kp * AX_TICK_RAD * rng.uniform(0.5, 2.0)
        out.append((kp, kd, kc, inertia))
    return out


def _draw_at(inertia, seed):
    """One random servo (as :func:`_draws`) on a given load inertia [kg*m^2]."""
    rng = np.random.default_rng(seed)
    kp = rng.uniform(3.0, 20.0)
    kd = 2 * 0.8 * np.sqrt(kp * inertia) * rng.uniform(0.6, 1.3)
    kc = kp * AX_TICK_RAD * rng.uniform(0.5, 2.0)
    return kp, kd, kc, inertia


def _assert_recovered(res, truth):
    kp, kd, kc, _ = truth
    p = res["params"]
    assert p["kp"] == pytest.approx(kp, rel=0.03)
    assert p["kd"] == pytest.approx(kd, rel=0.03)
    assert p["kc"] == pytest.approx(kc, rel=0.15)


@pytest.mark.parametrize("truth", [SEED000] + _draws(3), ids=["seed000-AX18"] + [f"draw{i}" for i in range(3)])
def test_lockstep_recovers_gains(truth):
    kp, kd, kc, inertia = truth
    recs, limit, before, after = _lockstep_run(kp, kd, kc, inertia)
    assert after == before                       # servo left as found
    assert recs[0].n > 10000                     # ~1 kHz over 10.7 s of square wave
    res = identify_bench(recs, torque_limit=limit)
    _assert_recovered(res, truth)
    assert set(res["paper"]) == {"kp", "kd", "kc"}


# the review's two loads, six random servos each, four cycles (8 steps): at the identifier's old
# 0.5 ms step kp came back ~3-4 % low at 2e-3 kg*m^2 and 2 of 12 runs ended in a wrong basin (20-70 % off)
_SHORT_RUNS = [(inertia, seed) for inertia in (2e-3, 4e-3) for seed in range(6)]


@pytest.mark.slow
@pytest.mark.parametrize("inertia, seed", _SHORT_RUNS, ids=[f"I{i:.0e}-seed{s}" for i, s in _SHORT_RUNS])
def test_lockstep_recovers_gains_in_four_cycles(inertia, seed):
    truth = _draw_at(inertia, seed)
    recs, limit, _, _ = _lockstep_run(*truth, cycles=4)
    res = identify_bench(recs, torque_limit=limit)
    _assert_recovered(res, truth)


def test_lost_replies_cost_samples_not_the_run():
    """2 % of replies dropped (a busy USB adapter): the run completes and the gains still come back."""
    from servoloop.virtual_bus.faults import parse_faults

    recs, limit, _, _ = _lockstep_run(*SEED000, cycles=4, faults=parse_faults("drop:p=0.02:at=0.5"))
    n_clean = 2 * 0.67 * 4 / 0.001
    assert 0.9 * n_clean < recs[0].n < 0.995 * n_clean      # about 2 % of the samples missing
    _assert_recovered(identify_bench(recs, torque_limit=limit), SEED000)


def test_silent_servo_ends_the_run_with_the_data_kept():
    from servoloop.calibration.errors import ExperimentError
    from servoloop.virtual_bus.faults import parse_faults

    with pytest.raises(ExperimentError, match="bus failed after") as info:
        _lockstep_run(*SEED000, cycles=4, faults=parse_faults("vanish:at=2.0"))
    partial = info.value.partial
    assert partial is not None and 1000 < partial["t"].shape[0] < 2000   # vanished ~1.4 s into the wave


def test_cli_against_virtual_bus_process(virtual_bus, tmp_path):
    """The whole command on a pty served by ``servoloop virtual-bus`` in real time."""
    port = virtual_bus(servos="1:AX-18A", protocol=1)
    out = tmp_path / "params.yaml"
    cmd = [sys.executable, "-m", "servoloop.cli", "calibrate", "actuator", "--port", port, "--protocol", "1",
           "--id", "1", "--model", "AX-18A", "--inertia", "4e-3", "--cycles", "2", "--out", str(out),
           "--report", str(tmp_path / "report.png"), "--json"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert set(res) >= {"params", "stderr", "fit", "paper"}
    assert set(res["paper"]) == {"kp", "kd", "kc"}
    raw = list((tmp_path / "params_raw").glob("*.npz"))
    assert raw and out.exists() and (tmp_path / "report.png").exists()
    # real time on a loaded machine: latency and jitter, so a looser check than lockstep
    assert res["params"]["kp"] == pytest.approx(SEED000[0], rel=0.15)
    assert res["params"]["kd"] == pytest.approx(SEED000[1], rel=0.15)
