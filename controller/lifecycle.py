"""The daemon lifecycle as an explicit state machine.

::

    init -> connect -> startup -> run -> shutdown -> done
               \\          \\        \\        \\
                +----------+--------+--------+--> fault   (terminal)

``connect`` pings every servo and checks its model, the latency timer and
the return delay; ``startup`` sets goal := present *before* torque on, then
ramps to the controller's first command; ``shutdown`` sends stop cycles and
holds or releases the servos; ``fault`` releases every servo on a path that
cannot fail.  Anything else is a :class:`LifecycleError` naming both states.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from servoloop.controller.errors import LifecycleError

__all__ = ["State", "Lifecycle", "Transition", "TRANSITIONS"]


class State(enum.IntEnum):
    """Lifecycle states; the integer is what telemetry records per tick."""

    INIT = 0
    CONNECT = 1
    STARTUP = 2
    RUN = 3
    SHUTDOWN = 4
    DONE = 5
    FAULT = 6

    @property
    def label(self) -> str:
        return self.name.lower()


TRANSITIONS: dict[State, frozenset[State]] = {
    State.INIT: frozenset({State.CONNECT, State.FAULT}),
    State.CONNECT: frozenset({State.STARTUP, State.SHUTDOWN, State.FAULT}),
    State.STARTUP: frozenset({State.RUN, State.SHUTDOWN, State.FAULT}),
    State.RUN: frozenset({State.SHUTDOWN, State.FAULT}),
    State.SHUTDOWN: frozenset({State.DONE, State.FAULT}),
    State.DONE: frozenset(),
    State.FAULT: frozenset(),
}


@dataclass(frozen=True)
class Transition:
    """One recorded state change: at ``tick``, ``source`` -> ``target`` because ``reason``."""

    tick: int
    source: State
    target: State
    reason: str


class Lifecycle:
    """Current state plus the history of transitions (a few per run, never per tick)."""

    def __init__(self) -> None:
        self.state = State.INIT
        self.history: list[Transition] = []
        self.listeners: list = []  # callables(Transition), e.g. the telemetry event log

    def can(self, target: State) -> bool:
        """True when ``target`` is reachable from the current state in one step."""
        return target in TRANSITIONS[self.state]

    def to(self, target: State, reason: str = "", tick: int = 0) -> Transition:
        """Move to ``target``.

        Raises
        ------
        LifecycleError
            When the transition is not in :data:`TRANSITIONS`.
        """
        if target not in TRANSITIONS[self.state]:
            raise LifecycleError(
                f"lifecycle: no transition {self.state.label} -> {target.label}"
                + (f" ({reason})" if reason else "")
            )
        tr = Transition(tick, self.state, target, reason)
        self.state = target
        self.history.append(tr)
        for fn in self.listeners:
            try:
                fn(tr)
            except Exception:  # a listener must never break the lifecycle
                pass
        return tr

    @property
    def terminal(self) -> bool:
        """True in ``done`` and ``fault``."""
        return not TRANSITIONS[self.state]
