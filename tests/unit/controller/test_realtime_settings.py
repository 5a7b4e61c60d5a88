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
