"""Root pytest configuration: the real-hardware gate.

Tests marked ``servo`` talk to real servos and run only when a port is
given: ``pytest --servo-port /dev/ttyUSB0 [--servo-baud 1000000]``.  They are
never deleted and never run by hand.
"""

import pytest


def pytest_addoption(parser):
    parser.addoption("--servo-port", default=None, help="serial port of real servos (enables servo tests)")
    parser.addoption("--servo-baud", type=int, default=1_000_000, help="baud rate of the real servos")
    parser.addoption("--servo-protocol", type=int, default=2, choices=(1, 2))


def pytest_collection_modifyitems(config, items):
    if config.getoption("--servo-port"):
        return
    skip = pytest.mark.skip(reason="needs real servos: pass --servo-port")
    for item in items:
        if "servo" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def servo_port(request):
    port = request.config.getoption("--servo-port")
    if not port:
        pytest.skip("needs real servos: pass --servo-port")
    return port
