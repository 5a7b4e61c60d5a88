"""The lifecycle state machine: allowed and refused transitions."""

import pytest

from servoloop.controller.errors import LifecycleError
from servoloop.controller.lifecycle import TRANSITIONS, Lifecycle, State


def test_happy_path():
    lc = Lifecycle()
    seen = []
    lc.listeners.append(seen.append)
    for s in (State.CONNECT, State.STARTUP, State.RUN, State.SHUTDOWN, State.DONE):
        lc.to(s, tick=1)
    assert lc.state == State.DONE and lc.terminal
    assert [t.target for t in seen] == [State.CONNECT, State.STARTUP, State.RUN, State.SHUTDOWN, State.DONE]


@pytest.mark.parametrize("start", [State.CONNECT, State.STARTUP, State.RUN, State.SHUTDOWN])
def test_fault_reachable_from_every_active_state(start):
    lc = Lifecycle()
    path = [State.CONNECT, State.STARTUP, State.RUN, State.SHUTDOWN]
    for s in path[: path.index(start) + 1]:
        lc.to(s)
    lc.to(State.FAULT, "boom")
    assert lc.state == State.FAULT and lc.terminal
    assert lc.history[-1].reason == "boom"


@pytest.mark.parametrize("source,target", [
    (State.INIT, State.RUN), (State.CONNECT, State.RUN), (State.RUN, State.STARTUP),
    (State.RUN, State.DONE), (State.DONE, State.RUN), (State.FAULT, State.DONE),
])
def test_refused_transitions_name_both_states(source, target):
    lc = Lifecycle()
    lc.state = source
    with pytest.raises(LifecycleError) as e:
        lc.to(target)
    assert source.label in str(e.value) and target.label in str(e.value)
    assert lc.state == source


def test_terminal_states_have_no_exit():
    assert TRANSITIONS[State.DONE] == frozenset() and TRANSITIONS[State.FAULT] == frozenset()


def test_listener_errors_do_not_break_transitions():
    lc = Lifecycle()
    lc.listeners.append(lambda tr: 1 / 0)
    lc.to(State.CONNECT)
    assert lc.state == State.CONNECT
