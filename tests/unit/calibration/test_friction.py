"""Friction curve fit from steady-state sweeps."""

import json

import numpy as np
import pytest

from servoloop.calibration.errors import FitError
from servoloop.calibration.friction import fit_friction_curve, friction_torque
from servoloop.cli import main

TRUE = dict(fc=0.05, fv=0.02, fs=0.03, vs=0.3)


def _sweep(noise=0.0, seed=0):
    v = np.array([0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2])
    v = np.concatenate([v, -v])
    tau = friction_torque(v, **TRUE) + noise * np.random.default_rng(seed).standard_normal(v.size)
    return v, tau


def test_recovers_curve_noise_free():
    c = fit_friction_curve(*_sweep())
    assert (c.fc, c.fv, c.fs, c.vs) == pytest.approx((0.05, 0.02, 0.03, 0.3), rel=1e-5)


def test_recovers_curve_with_noise():
    c = fit_friction_curve(*_sweep(noise=0.002))
    assert c.fc == pytest.approx(0.05, abs=0.006)
    assert c.fv == pytest.approx(0.02, abs=0.003)
    assert c.stderr["coulomb"] > 0


def test_too_few_speeds():
    with pytest.raises(FitError, match="distinct speeds"):
        fit_friction_curve([0.1, -0.1], [0.05, -0.05])


def test_cli_from_saved_sweep(tmp_path, capsys):
    v, tau = _sweep()
    log = tmp_path / "sweep.json"
    log.write_text(json.dumps({"velocity": v.tolist(), "torque": tau.tolist()}))
    rc = main(["calibrate", "friction", "--log", str(log), "--json", "--out", str(tmp_path / "f.yaml")])
    assert rc == 0
    res = json.loads(capsys.readouterr().out)
    assert res["params"]["coulomb"] == pytest.approx(0.05, rel=1e-4)
    assert (tmp_path / "f.yaml").exists()
