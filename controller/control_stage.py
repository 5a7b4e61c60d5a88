"""The control stage: who fills the command this tick, and commands from the socket.

==========  =====================================================
state       the command comes from
==========  =====================================================
startup     the startup ramp (:mod:`controller.startup_ramp`)
run         the controller, ``update(t, state, command)``
shutdown    nobody: the last command stays (stop cycles)
==========  =====================================================

Goals and parameters sent over the command socket are checked in the
socket's thread (:meth:`ControlStage.set_goal` / :meth:`set_params`) and
queued; the loop applies them between ticks (:meth:`apply_pending`), so a
client never makes a tick wait.
"""

from __future__ import annotations

import collections
import logging

from servoloop.controller.errors import CommandError, ControllerParamError
from servoloop.controller.lifecycle import State

__all__ = ["ControlStage"]

log = logging.getLogger("servoloop.daemon")

_RUN = int(State.RUN)
_STARTUP = int(State.STARTUP)


class ControlStage:
    """Fills ``cmd`` in place from the controller or the startup ramp.

    Parameters
    ----------
    controller : Controller
    ramp : StartupRamp
    state : JointState, measured this tick
    cmd : Command, filled in place
    event : callable(kind, message), the daemon's event log
    """

    def __init__(self, controller, ramp, state, cmd, event) -> None:
        self.controller = controller
        self.ramp = ramp
        self.state = state
        self.cmd = cmd
        self.event = event
        self._pending: collections.deque = collections.deque()

    def run(self, state_code: int, t: float) -> None:
        """Fill the command for lifecycle state ``state_code`` at ``t`` s since the run began."""
        if state_code == _RUN:
            self.controller.update(t, self.state, self.cmd)
        elif state_code == _STARTUP:
            self.ramp.step(self.controller, self.state, self.cmd)
        # SHUTDOWN: cmd stays frozen at the last command

    # ------------------------------------------------------------------
    # commands (socket thread: check and queue; loop thread: apply)

    def set_params(self, params: dict) -> None:
        """Check controller parameters now, apply them between ticks.

        Raises
        ------
        ControllerParamError
            Unknown or bad parameter (the reply names it).
        """
        self._pending.append(("params", self.controller.check_params(dict(params))))

    def set_goal(self, goal, state: State) -> None:
        """Check a goal now (only in startup / run), apply it between ticks.

        Raises
        ------
        CommandError
            The daemon is not in startup or run.
        ControllerParamError
            Unknown joint, outside the limits, or a controller that takes no goals.
        """
        if state not in (State.STARTUP, State.RUN):
            raise CommandError(f"cannot take a goal in state {state.label}")
        self._pending.append(("goal", self.controller.check_goal(goal)))

    @property
    def has_pending(self) -> bool:
        return bool(self._pending)

    def apply_pending(self) -> None:
        """Apply queued goals and parameters (loop thread, between ticks)."""
        while self._pending:
            kind, payload = self._pending.popleft()
            try:
                if kind == "params":
                    self.controller.apply_params(payload)
                else:
                    self.controller.apply_goal(payload)
                self.event("command", f"applied {kind}")
            except (ControllerParamError, ValueError) as exc:
                log.warning("command %s not applied: %s", kind, exc)
                self.event("command", f"{kind} not applied: {exc}")
