"""Identification: seed 000's regression, the output-error fit, and the real-data properties."""

import dataclasses

import numpy as np
import pytest

from servoloop.calibration.models import BAM_XL330_PUBLISHED, get_model
from servoloop.calibration.offline import cross_validate_by_gain, load_resampled, score_logs
from servoloop.calibration.output_error import fit_output_error
from servoloop.calibration.recording import GRAVITY, Recording
from servoloop.calibration.seed000 import fit_seed000, segments
from servoloop.calibration.simulation import simulate_recording

SEED000 = {"kp": 9.272, "kd": 0.3069, "kc": 0.03}


def _recording(t, q, goal, inertia=None, mass=0.0, length=0.0, kp_fw=32.0):
    n = t.shape[0]
    return Recording("synthetic", t, q, goal, np.zeros(n), np.ones(n, bool), np.full(n, 7.4), kp_fw, 7.4,
                     mass=mass, length=length, inertia=inertia, dt=float(t[1] - t[0]))


def test_seed000_regression_reproduces_its_inputs():
    """q(t) quartic per segment and a goal that satisfies seed 000's equation exactly: the
    regression must return the gains it was built with (paper's equation, with gravity)."""
    rng = np.random.default_rng(0)
    dt, seg = 0.002, 0.5
    t = np.arange(0, 4.0, dt)
    mass, length = 0.2, 0.1
    inertia, mgl = mass * length**2, mass * GRAVITY * length
    q = np.empty_like(t)
    goal = np.empty_like(t)
    for k in range(int(4.0 / seg)):
        sl = slice(int(round(k * seg / dt)), int(round((k + 1) * seg / dt)))
        tc = t[sl] - t[sl].mean()
        c = rng.normal(0, [2.0, 1.0, 1.0, 1.0, 0.3])
        q[sl] = np.polyval(c, tc)
        qd, qdd = np.polyval(np.polyder(c), tc), np.polyval(np.polyder(c, 2), tc)
        tau = inertia * qdd + mgl * np.sin(q[sl])
        goal[sl] = q[sl] + (tau + SEED000["kd"] * qd + SEED000["kc"] * np.sign(qd)) / SEED000["kp"]
    rec = _recording(t, q, goal, mass=mass, length=length)
    # segments are cut by the goal "steps" between the polynomial pieces
    res = fit_seed000([rec], max_segment_s=seg)
    assert res.kp == pytest.approx(SEED000["kp"], rel=1e-6)
    assert res.kd == pytest.approx(SEED000["kd"], rel=1e-6)
    assert res.kc == pytest.approx(SEED000["kc"], rel=1e-5)
    assert res.stderr["kp"] < 1e-6 and res.rms_torque < 1e-9


def test_seed000_kc_is_constrained_nonnegative():
    rng = np.random.default_rng(1)
    t = np.arange(0, 2.0, 0.002)
    q = 0.3 * np.sin(3 * t)
    qd = 0.9 * np.cos(3 * t)
    goal = q + (0.01 * -2.7 * np.sin(3 * t) + 0.1 * qd - 0.05 * np.sign(qd)) / 5.0  # kc = -0.05
    res = fit_seed000([_recording(t, q + 1e-6 * rng.standard_normal(t.size), goal, inertia=0.01)], 0.3)
    assert 0.0 <= res.kc < 1e-9   # the unconstrained optimum is kc = -0.05


def _simulated_pd_step(noise_ticks=0.0, seed=0):
    from servoloop.calibration.experiment import LoadSpec
    from servoloop.calibration.simulated_bench import simulate_square_wave

    return simulate_square_wave(**SEED000, load=LoadSpec(inertia=4e-3), amplitude=0.0767, cycles=3,
                                noise_ticks=noise_ticks, tick_rad=1e-9 if noise_ticks == 0 else 0.00511,
                                seed=seed, substeps=2)


def test_paper_method_is_only_a_first_guess_on_a_step():
    """Seed 000's half-period quartic cannot follow a ~50 ms step transient (the issue's
    observation); windows of 20 ms can."""
    rec = _simulated_pd_step()
    rec.dt = 0.001
    assert len(segments(rec, 0.67)) == 6
    paper = fit_seed000([rec], 0.67)
    short = fit_seed000([rec], 0.02)
    assert abs(paper.kp / SEED000["kp"] - 1) > 0.5
    assert short.kp == pytest.approx(SEED000["kp"], rel=0.03)


@pytest.mark.parametrize("noise_ticks, tol", [(0.0, 1e-4), (0.5, 0.05)])
def test_output_error_recovers_bench_gains(noise_ticks, tol):
    """Noise-free: exact to 1e-4. AX-18 encoder (5.1 mrad ticks) with 0.5 tick noise: kp, kd
    within 5 % (kc is below one tick of steady-state error and is not asserted here)."""
    from servoloop.calibration.recording import resample

    rec = resample(_simulated_pd_step(noise_ticks), 0.001)
    spec = dataclasses.replace(get_model("bench"), free=("kp", "kd", "kc"),
                               fixed={"substeps": 2, "torque_limit": 10.0})
    res = fit_output_error(spec, [rec], {"kp": 6.0, "kd": 0.2, "kc": 0.01}, method="lsq")
    assert res.params["kp"] == pytest.approx(SEED000["kp"], rel=tol)
    assert res.params["kd"] == pytest.approx(SEED000["kd"], rel=tol)
    if noise_ticks == 0.0:
        assert res.params["kc"] == pytest.approx(SEED000["kc"], rel=tol)


def test_output_error_recovers_bam_model_parameters(bam_logs):
    """Voltage-drive model (v3: BAM m3 + recorded voltage, delay, duty offset) simulated on the
    real goals of one kp-100 and one kp-400 log, then fitted from 20 % off: recovered to 2e-3."""
    recs = load_resampled([bam_logs[1], bam_logs[6]])
    spec = get_model("v3")
    truth = spec.initial(dict(BAM_XL330_PUBLISHED["m3"], command_delay=0.008, duty_offset=0.02))
    for r in recs:
        r.position = simulate_recording(spec, truth, r)[0]
    start = {k: v * 1.2 + 1e-3 for k, v in truth.items()}
    res = fit_output_error(spec, recs, start, method="lsq", max_nfev=400)
    for k in ("armature", "load_friction_base", "friction_viscous", "command_delay", "duty_offset"):
        assert res.params[k] == pytest.approx(truth[k], rel=2e-3), k
    assert max(res.mae) < 1e-5


def test_published_bam_m3_baseline(bam_logs):
    """BAM's published XL330 m3 parameters (bam/params/xl330/m3.json @ 11bb7ec) on the eight logs,
    scored as BAM scores them.  Values pin our simulator to BAM's: the issue quotes 27.8 / 73.5 mrad
    for a version of those parameters we could not identify."""
    recs = load_resampled(bam_logs)
    rows = score_logs("m3", get_model("m3").values(BAM_XL330_PUBLISHED["m3"]), recs, "eval")
    kp100 = np.mean([r["mae_rad"] for r in rows if r["kp_fw"] == 100])
    kp400 = np.mean([r["mae_rad"] for r in rows if r["kp_fw"] == 400])
    assert kp100 == pytest.approx(0.02299, abs=2e-4)
    assert kp400 == pytest.approx(0.07837, abs=2e-4)


def test_cross_validated_mae_beats_seed000_refit(bam_logs):
    """The headline property on real data: fit on one firmware gain, predict the other; the
    voltage-drive model's (v3) held-out MAE beats seed 000's model refit the same way."""
    recs = load_resampled(bam_logs)

    def cv_mean(name, evals):
        folds = cross_validate_by_gain(name, recs, evals=evals, method="cmaes")
        return np.mean([r["mae_rad"] for f in folds for r in f.logs if r["role"] == "holdout"])

    ours = cv_mean("v3", 800)
    seed = cv_mean("seed000", 300)
    assert ours < seed
