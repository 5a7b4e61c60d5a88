"""Real-time settings: applied when allowed, a warning (never an error) when refused."""

import os

import pytest

from servoloop.controller import realtime
from servoloop.controller.realtime import apply_realtime, restore_realtime


def test_refused_settings_become_warnings(monkeypatch):
    def refuse(*a, **k):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    monkeypatch.setattr(os, "sched_setaffinity", refuse)

    class NoLock:
        def mlockall(self, flags):
            return -1

    monkeypatch.setattr(realtime, "_libc", lambda: NoLock())
    rep = apply_realtime(sched_fifo=True, lock_memory=True, cpus=[0])
    assert not rep.sched_fifo and not rep.mlockall and rep.affinity is None
    text = " ".join(rep.warnings)
    assert "SCHED_FIFO refused" in text and "mlockall refused" in text and "affinity" in text
    restore_realtime(rep)  # nothing to undo, and no error


def test_affinity_applied_and_restored():
    before = os.sched_getaffinity(0)
    cpu = min(before)
    rep = apply_realtime(cpus=[cpu])
    try:
        assert rep.affinity == (cpu,) and os.sched_getaffinity(0) == {cpu}
    finally:
        restore_realtime(rep)
    assert os.sched_getaffinity(0) == before


def test_sched_fifo_where_allowed():
    rep = apply_realtime(sched_fifo=True, priority=10)
    try:
        if not rep.sched_fifo:
            pytest.skip(f"not permitted here: {rep.warnings}")
        assert os.sched_getscheduler(0) == os.SCHED_FIFO
    finally:
        restore_realtime(rep)
    assert os.sched_getscheduler(0) != os.SCHED_FIFO


def test_cpu_latency_request_is_held_for_the_run_and_withdrawn(tmp_path, monkeypatch):
    """loop.cpu_latency_us: the PM QoS request (an int32 written to /dev/cpu_dma_latency) lasts
    while the file is open; restore closes it.  A missing device is a warning, not an error."""
    import struct

    qos = tmp_path / "cpu_dma_latency"
    qos.write_bytes(b"")
    monkeypatch.setattr(realtime, "_QOS_PATH", str(qos))
    rep = apply_realtime(cpu_latency_us=0)
    assert rep.cpu_latency_us == 0 and not rep.warnings
    fd = rep._qos_fd
    os.fstat(fd)                                   # held open during the run
    assert struct.unpack("i", qos.read_bytes()) == (0,)
    restore_realtime(rep)
    assert rep._qos_fd is None
    with pytest.raises(OSError):
        os.fstat(fd)                               # withdrawn
    monkeypatch.setattr(realtime, "_QOS_PATH", str(tmp_path / "missing" / "cpu_dma_latency"))
    rep = apply_realtime(cpu_latency_us=50)
    assert rep.cpu_latency_us is None
    assert len(rep.warnings) == 1 and "CPU wake-up latency 50 us refused" in rep.warnings[0]


def test_a_bad_cpu_latency_is_refused_naming_the_key():
    from servoloop.controller.config import builtin_config
    from servoloop.controller.errors import ConfigError

    cfg = builtin_config("quadruped")
    with pytest.raises(ConfigError, match=r"loop.cpu_latency_us must be in 0..2000000 us"):
        cfg.with_overrides(**{"loop.cpu_latency_us": -1})
