"""Root pytest configuration: the real-hardware gate.

Tests marked ``servo`` talk to real servos and run only when a port is
given: ``pytest --servo-port /dev/ttyUSB0 [--servo-baud 1000000]``.  They are
never deleted and never run by hand.

The real-servo suite (``tests/servo``) runs either way: with ``--servo-port``
against that servo (``--servo-id``, ``--servo-model``, ``--servo-protocol``,
``--servo-baud``), without it against a ``servoloop virtual-bus`` process on a
pty, so ``make test`` exercises the same code the bench run does.
"""

import pytest


def pytest_addoption(parser):
    parser.addoption("--servo-port", default=None, help="serial port of real servos (enables servo tests)")
    parser.addoption("--servo-baud", type=int, default=1_000_000, help="baud rate of the real servos")
    parser.addoption("--servo-protocol", type=int, default=2, choices=(1, 2))
    parser.addoption("--servo-id", type=int, default=1, help="id of the servo the real-servo suite uses")
    parser.addoption("--servo-model", default=None,
                     help="model of that servo (default: read by ping; virtual bus: XM430-W350 / AX-18A)")
    parser.addoption("--servo-inertia", type=float, default=None,
                     help="load inertia on the servo's horn, kg*m^2, for the calibration test "
                          "(default: the emulated servo's standard load)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--servo-port"):
        return
    skip = pytest.mark.skip(reason="needs real servos: pass --servo-port")
    for item in items:
        # the marker, not the keyword: keywords include directory names (tests/servo runs anyway)
        if item.get_closest_marker("servo") is not None:
            item.add_marker(skip)


@pytest.fixture
def servo_port(request):
    port = request.config.getoption("--servo-port")
    if not port:
        pytest.skip("needs real servos: pass --servo-port")
    return port
