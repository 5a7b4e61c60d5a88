"""The command line stays light: building the parser imports no heavy package, lazily built
subcommands still parse and show their help, and every error maps through one exit-code table."""

import json
import subprocess
import sys

import pytest

from servoloop.cli import build_parser, main
from servoloop.exit_codes import EXIT_CODES, exit_code_for

HEAVY = ("scipy", "matplotlib", "cvxpy", "mcap")


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"],
                         capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("argv", [None, ["status", "--socket", "/nonexistent.sock"], ["log", "info", "x"]])
def test_parser_imports_no_heavy_package(argv):
    code = "import servoloop.cli as c\np = c.build_parser()"
    if argv is not None:
        code += f"\np.parse_args({argv!r})"
    mods = _modules_after(code)
    heavy = sorted(m for m in mods if m.split(".")[0] in HEAVY)
    assert not heavy, heavy
    # nor the compiled kernels or the virtual bus engine (they pull numpy and physics)
    assert not [m for m in mods if m.startswith(("servoloop.core_cy", "servoloop.virtual_bus.engine",
                                                 "servoloop.calibration.inertial."))]


def test_lazy_subcommands_parse_and_show_their_options(capsys):
    p = build_parser()
    args = p.parse_args(["virtual-bus", "--servos", "1:XM430-W350", "--seed", "3"])
    assert args.seed == 3 and args.func.__module__ == "servoloop.virtual_bus.cli"
    args = p.parse_args(["calibrate", "inertial", "--log", "a.npz", "--urdf", "r.urdf"])
    assert args.method == "sdp" and callable(args.func)
    args = p.parse_args(["bench", "startup", "--repeats", "2"])
    assert args.repeats == 2 and args.bench_name == "startup"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["virtual-bus", "--help"])
    assert "--wire-timing" in capsys.readouterr().out


def test_help_lists_commands_and_the_exit_codes(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for word in ("run", "status", "virtual-bus", "calibrate", "bench", "exit codes:", "130  interrupted", "3    bus or hardware error"):
        assert word in out


def test_every_row_of_the_exit_code_table_names_an_exception_class():
    import importlib

    for module, name, code in EXIT_CODES:
        cls = getattr(importlib.import_module(module), name)
        assert issubclass(cls, BaseException), (module, name)
        assert code in (1, 2, 3, 130)
        # a subclass listed after its base would never be reached
        earlier = [getattr(importlib.import_module(m), n) for m, n, _ in EXIT_CODES[:EXIT_CODES.index((module, name, code))]]
        assert not any(issubclass(cls, e) and e is not cls for e in earlier), (name, earlier)


def test_exit_codes_of_each_package():
    from servoloop.calibration.errors import FitError, RecordingError
    from servoloop.controller.errors import CommandError, ConfigError, ConnectError, FaultError
    from servoloop.core_cy.errors import URDFSyntaxError
    from servoloop.firmware_bridge.errors import (
        BusTimeoutError,
        HardwareErrorStatus,
        UnknownModelError,
    )
    from servoloop.virtual_bus.faults import FaultSpecError

    cases = [(ConfigError("x"), 2), (ConnectError("x"), 3), (FaultError("x"), 1), (CommandError("x"), 1),
             (BusTimeoutError("x"), 3), (HardwareErrorStatus("x", 1, 0x80, ("alert",)), 3),
             (UnknownModelError("XX"), 2), (RecordingError("f.json", "gap", 4), 2), (FitError("x"), 1),
             (URDFSyntaxError("x"), 2), (FaultSpecError("x"), 2), (FileNotFoundError(2, "nope"), 2),
             (KeyboardInterrupt(), 130), (RuntimeError("a bug"), None)]
    for exc, code in cases:
        assert exit_code_for(exc) == code, exc


def test_main_maps_errors_to_one_line(tmp_path, capsys):
    assert main(["log", "info", str(tmp_path / "missing.sltl")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("servoloop log info: ") and "missing.sltl" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_run_on_a_missing_port_is_a_bus_error_exit_3(tmp_path, capsys):
    rc = main(["run", "--robot", "arm", "--port", str(tmp_path / "ttyNONE"), "--duration", "0.1", "--json",
               "--quiet", "--telemetry", "none", "--socket", "none"])
    captured = capsys.readouterr()
    assert rc == 3
    summary = json.loads(captured.out.strip().splitlines()[-1])
    assert summary["state"] == "fault" and summary["fault_details"][0]["kind"] == "connect"
    assert "ttyNONE" in captured.err and "Traceback" not in captured.err
