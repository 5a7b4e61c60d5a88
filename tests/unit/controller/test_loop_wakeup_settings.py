"""What reduces wake-up lateness: timer slack of the loop thread, the spin tail, the loop's own
CPU (``loop.cpu``), and the ``loop:`` keys that ask for them, checked and documented."""

import ctypes
import os
import subprocess
import sys
import threading

import pytest

from servoloop.controller.clock import HAVE_COMPILED_CLOCK, MonotonicClock
from servoloop.controller.config import config_from_dict
from servoloop.controller.errors import ConfigError
from servoloop.controller.realtime import (
    RealtimeReport,
    isolate_loop_cpu,
    pin_process,
    process_threads,
    restore_realtime,
    timer_slack_ns,
)
from servoloop.controller.schema import config_schema


def doc(**loop):
    return {"robot": "t", "bus": {"port": None},
            "servos": [{"id": 1, "model": "XM430-W350", "joint": "a"}], "loop": loop}


def in_thread(fn):
    """``fn()`` on a new thread (per-thread settings must not leak into the test runner)."""
    out = {}
    th = threading.Thread(target=lambda: out.setdefault("v", fn()))
    th.start()
    th.join()
    return out["v"]


@pytest.mark.skipif(not HAVE_COMPILED_CLOCK, reason="controller._clock not built")
def test_loop_thread_gets_1ns_timer_slack():
    clock = MonotonicClock()  # built on this thread; the loop thread asks again when it starts

    def loop_thread():
        ctypes.CDLL(None).prctl(29, 50_000, 0, 0, 0)  # PR_SET_TIMERSLACK: the Linux default back
        before = timer_slack_ns()
        ok = clock.prepare_thread()
        return before, ok, timer_slack_ns()

    before, ok, after = in_thread(loop_thread)
    if before is None:
        pytest.skip("no prctl here")
    assert before == 50_000 and ok and after == 1


def test_spin_tail_defaults_to_50us_capped_at_5_percent_of_the_period_under_fifo_only():
    assert config_from_dict(doc()).loop.spin_tail_s() == pytest.approx(50e-6)
    assert config_from_dict(doc()).loop.spin_tail_s(sched_fifo=False) == 0.0
    assert config_from_dict(doc(rate_hz=10_000)).loop.spin_tail_s() == pytest.approx(5e-6)
    assert config_from_dict(doc(spin_s=0)).loop.spin_tail_s() == 0.0
    assert config_from_dict(doc(spin_s=1e-4)).loop.spin_tail_s(sched_fifo=False) == pytest.approx(1e-4)


@pytest.mark.parametrize("loop, key", [
    ({"spin_s": -1e-6}, "loop.spin_s"),
    ({"spin_s": 0.002}, "loop.spin_s"),           # a whole period (1 kHz) or more
    ({"spin_s": "fast"}, "loop.spin_s"),
    ({"cpu": -1}, "loop.cpu"),
    ({"cpu": 1.5}, "loop.cpu"),
    ({"cpu": 2, "cpus": [0, 1]}, "loop.cpu"),
    ({"cpus": []}, "loop.cpus"),
    ({"priority": 0}, "loop.priority"),
])
def test_bad_loop_keys_are_named(loop, key):
    with pytest.raises(ConfigError) as e:
        config_from_dict(doc(**loop))
    assert key in str(e.value)


def test_schema_documents_the_loop_keys():
    props = config_schema()["properties"]["loop"]["properties"]
    for key in ("spin_s", "cpu", "cpus", "sched_fifo", "priority"):
        assert props[key].get("description"), key
    assert "50 us" in props["spin_s"]["description"] and "SCHED_FIFO" in props["spin_s"]["description"]
    assert {"type": "integer"} in props["cpu"]["anyOf"]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_loop_cpu_alone_helpers_elsewhere():
    allowed = os.sched_getaffinity(0)
    cpu = max(allowed)
    stop = threading.Event()
    helper = threading.Thread(target=stop.wait)
    helper.start()
    try:
        def loop_thread():
            rep = RealtimeReport()
            warns = isolate_loop_cpu(cpu, [helper.native_id], rep)
            mine = os.sched_getaffinity(0)
            restore_realtime(rep)
            return warns, rep.cpu, mine, os.sched_getaffinity(0)

        warns, rep_cpu, mine, restored = in_thread(loop_thread)
        assert warns == [] and rep_cpu == cpu and mine == {cpu} and restored == allowed
        assert os.sched_getaffinity(helper.native_id) == allowed - {cpu}
        assert os.sched_getaffinity(0) == allowed  # the caller's thread untouched
    finally:
        stop.set()
        helper.join()
    bad = in_thread(lambda: isolate_loop_cpu(max(allowed) + 64, []))
    assert "not one this process may use" in bad[0]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_pin_process_reaches_every_thread():
    code = "import threading,time; threading.Thread(target=time.sleep, args=(30,)).start(); print(1, flush=True); time.sleep(30)"
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        p.stdout.readline()
        tids = process_threads(p.pid)
        assert len(tids) == 2
        cpu = min(os.sched_getaffinity(0))
        assert pin_process(p.pid, {cpu}) is None
        assert all(os.sched_getaffinity(t) == {cpu} for t in tids)
    finally:
        p.kill()
        p.wait()
