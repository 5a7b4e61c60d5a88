"""The ``servoloop bench inverse_dynamics --json`` rows other checks read (issue 11)."""

import argparse
import json
import subprocess
import sys

from servoloop.bench import inverse_dynamics as bench


def test_rows_have_the_interface_fields():
    args = argparse.Namespace(number=1, repeats=1, k=[4], json=True)
    rep = bench.run(args)
    assert rep["benchmark"] == "inverse_dynamics"
    cases = {r["case"] for r in rep["rows"]}
    assert cases == {f"quadruped k=4 {v}" for v in ("lcp_noslip", "lcp_coulomb", "qp")}
    for r in rep["rows"]:
        assert r["metric"] == "us_per_call" and r["anchor_name"] == "pinocchio+qpsolvers"
        assert r["ours"] > 0 and r["anchor"] > 0
        assert r["ratio"] == r["ours"] / r["anchor"]


def test_cli_prints_one_json_object():
    out = subprocess.run([sys.executable, "-m", "servoloop.cli", "bench", "inverse_dynamics",
                          "--json", "--k", "4", "--number", "1", "--repeats", "1"],
                         capture_output=True, text=True, check=True, timeout=300)
    rep = json.loads(out.stdout)
    assert len(rep["rows"]) == 3
