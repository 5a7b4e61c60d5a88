"""The live view: a Foxglove WebSocket server fed from the telemetry ring, off the hot path.

``servoloop run --live [PORT]`` starts it (default port 8765, localhost
only); open Foxglove, "Open connection", ``ws://localhost:8765``.  Topics:

======================  =========================  ============================================
topic                   schema                     what
======================  =========================  ============================================
/joint_states           servoloop.JointStates      name, position (rad), velocity (rad/s),
                                                   effort (A or load fraction), goal (rad),
                                                   feedforward (N*m), per joint; ``publish_hz``
/servos                 servoloop.ServoStates      per servo: temperature (degC), voltage (V),
                                                   current, hardware error bits and their names
/loop                   servoloop.LoopTiming       state, tick, late / period / work time of
                                                   the newest tick, work p99 and late max over
                                                   the ticks since the last message, missed
/tf                     foxglove.FrameTransforms   the URDF's movable joints (3D panel)
/robot_description      std_msgs/String            the URDF text (3D panel: add a URDF layer,
                                                   source "Topic"); sent to each new subscriber
/servoloop/log          foxglove.Log               the daemon's events (state changes, faults)
======================  =========================  ============================================

How it stays off the hot path: the loop thread does nothing for it.  The
view's own thread wakes ``publish_hz`` times a second, copies the newest
committed row of :class:`~servoloop.controller.telemetry.TelemetryRing`
(as the telemetry writer does, never a row the loop is filling) and the
work-time column of the rows since its last wake, and hands JSON to the
foxglove-sdk server, whose sockets live in its own (Rust) threads: a slow
or stuck client costs the loop nothing.  The thread is one of the daemon's
helpers (priority just below the loop's when real-time is on).  Events
reach it through a deque, as they reach the telemetry writer.

Times are wall clock: the view's start plus the loop time ``t_s`` of the
row (the same mapping as the MCAP export), so a lockstep run faster than
real time is shown ahead of the clock.
"""

from __future__ import annotations

import collections
import json
import logging
import math
import threading
import time

import numpy as np

from servoloop.controller import foxglove_schemas as F
from servoloop.controller.lifecycle import State

__all__ = ["DEFAULT_PORT", "LiveView", "LiveViewError", "TOPICS", "require_sdk"]

log = logging.getLogger("servoloop.live")

DEFAULT_PORT = 8765
TOPICS = ("/joint_states", "/servos", "/loop", "/tf", "/robot_description", "/servoloop/log")

_ARR = {"type": "array", "items": {"type": ["number", "null"]}}
JOINT_STATES_SCHEMA = {
    "title": "servoloop.JointStates", "type": "object",
    "properties": {
        "timestamp": F._TIME, "t_s": {"type": "number", "description": "loop time, s"},
        "name": {"type": "array", "items": {"type": "string"}},
        "position": _ARR, "velocity": _ARR, "effort": _ARR, "goal": _ARR, "feedforward": _ARR,
        "effort_units": {"type": "array", "items": {"type": "string"}},
    },
}
SERVO_STATES_SCHEMA = {
    "title": "servoloop.ServoStates", "type": "object",
    "properties": {"timestamp": F._TIME, "servos": {"type": "array", "items": {
        "type": "object", "properties": {
            "id": {"type": "integer"}, "joint": {"type": "string"},
            "temperature": {"type": ["number", "null"], "description": "degC"},
            "voltage": {"type": ["number", "null"], "description": "V"},
            "current": {"type": ["number", "null"], "description": "A or load fraction"},
            "hardware_error": {"type": ["integer", "null"], "description": "status bits"},
            "hardware_error_text": {"type": "string"}}}}},
}
LOOP_SCHEMA = {
    "title": "servoloop.LoopTiming", "type": "object",
    "properties": {k: {"type": ["number", "null"]} for k in (
        "tick", "t_s", "late_us", "period_us", "cost_us", "cost_p99_us", "late_max_us", "rate_hz",
        "missed", "comm_errors")} | {"timestamp": F._TIME, "state": {"type": "string"},
                                     "read_ok": {"type": "boolean"}},
}


class LiveViewError(Exception):
    """The live view cannot start (no foxglove-sdk, port taken); the message says which."""


def require_sdk():
    """The ``foxglove`` module, or LiveViewError saying how to install it."""
    try:
        import foxglove
    except ImportError as exc:
        raise LiveViewError("the live view needs the foxglove-sdk package: "
                            "pip install 'servoloop[live]' (or pip install foxglove-sdk)") from exc
    return foxglove


def _nums(values) -> list:
    """JSON numbers of an array; NaN / inf become null (JSON has no NaN)."""
    return [v if math.isfinite(v) else None for v in values.tolist()]


class _Listener:
    """foxglove-sdk server callbacks (the server's thread): only sets flags."""

    def __init__(self) -> None:
        self.subscribed: collections.deque = collections.deque()

    def on_subscribe(self, client, channel) -> None:
        self.subscribed.append(channel.topic)

    def on_unsubscribe(self, client, channel) -> None:
        pass


class LiveView:
    """A Foxglove WebSocket server showing one daemon's run (see the module docstring).

    Parameters
    ----------
    port : int, TCP port (0: any free one; :attr:`port` tells which)
    host : str, address to bind (default localhost only: the view has no authentication)
    publish_hz : float, joint states, frames and loop timing per second
    servo_every : int, servo states every this many publishes
    announce : callable(url) or None, told the server's address once it listens (default: log it)
    """

    def __init__(self, port: int = DEFAULT_PORT, host: str = "127.0.0.1", publish_hz: float = 30.0,
                 servo_every: int = 10, announce=None) -> None:
        if not 0 <= int(port) <= 65535:
            raise LiveViewError(f"live view port {port} is not a TCP port (0..65535)")
        self.requested_port = int(port)
        self.host = host
        self.period_s = 1.0 / float(publish_hz)
        self.servo_every = max(1, int(servo_every))
        self.events: collections.deque = collections.deque()
        self.published = 0
        self.server = None
        self.port: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="servoloop-live", daemon=True)
        self._listener = _Listener()
        self.error: str | None = None
        self.announce = announce or (lambda url: log.info("live view: Foxglove WebSocket on %s", url))

    # -- the daemon's side ---------------------------------------------------
    def open(self, daemon) -> None:
        """Start the server and the publishing thread for ``daemon`` (before its first tick).

        Raises
        ------
        LiveViewError
            No foxglove-sdk, or the port cannot be bound (names the port).
        """
        fox = require_sdk()
        cfg = daemon.cfg
        loop = daemon.loop
        self.loop = loop
        self.ring = loop.ring
        self.joint_names = list(cfg.joint_names)
        self.ids = [int(s.id) for s in cfg.servos]
        self._urdf_frames(cfg)
        # our own context (kept: channels close with it): two views in one process do not mix
        self.ctx = ctx = fox.Context()
        try:
            self.server = fox.start_server(name=f"servoloop {cfg.robot}", host=self.host,
                                           port=self.requested_port, context=ctx,
                                           server_listener=self._listener)
        except Exception as exc:  # the SDK raises RuntimeError / its own error for a taken port
            raise LiveViewError(f"live view: cannot serve on {self.host}:{self.requested_port}: {exc} "
                                "(another program on that port? choose one with --live PORT)") from exc
        self.port = int(self.server.port)

        def channel(topic, schema):
            data = json.dumps(schema).encode()
            return fox.Channel(topic, schema=fox.Schema(name=schema["title"], encoding="jsonschema",
                                                        data=data),
                               message_encoding="json", context=ctx)

        self.ch_joints = channel("/joint_states", JOINT_STATES_SCHEMA)
        self.ch_servos = channel("/servos", SERVO_STATES_SCHEMA)
        self.ch_loop = channel("/loop", LOOP_SCHEMA)
        self.ch_log = channel("/servoloop/log", F.LOG_SCHEMA)
        self.ch_tf = self.ch_desc = None
        if self.frames is not None:
            self.ch_tf = channel("/tf", F.FRAME_TRANSFORMS_SCHEMA)
            self.ch_desc = channel("/robot_description", F.STRING_SCHEMA)
        self.wall0_ns = time.time_ns()
        self._thread.start()
        self.announce(f"ws://{'localhost' if self.host == '127.0.0.1' else self.host}:{self.port}")

    def _urdf_frames(self, cfg) -> None:
        self.frames = None
        try:
            urdf = cfg.urdf_path()
            if urdf is not None and urdf.exists():
                self.frames = F.UrdfFrames(urdf, self.joint_names)
        except Exception as exc:  # noqa: BLE001 - no 3D view is not a reason to refuse the run
            log.warning("live view: no robot description (%s)", exc)

    def event(self, kind: str, message: str, tick: int, t_s: float) -> None:
        """Queue an event for ``/servoloop/log`` (any thread, cheap)."""
        self.events.append({"kind": kind, "message": message, "tick": tick, "t_s": t_s})

    def threads(self) -> list:
        return [self._thread] if self._thread.is_alive() else []

    def close(self) -> None:
        """Publish what is left, stop the thread and the server; never raises."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)
        if self.server is not None:
            try:
                self._publish_events()
                self.server.stop()
            except Exception as exc:  # noqa: BLE001 - closing must not fail
                log.warning("live view: stopping the server: %s", exc)
            self.server = None

    # -- the view's thread -----------------------------------------------------
    def _t_ns(self, t_s) -> int:
        ok = isinstance(t_s, float) and math.isfinite(t_s) and t_s > 0
        return self.wall0_ns + (int(t_s * 1e9) if ok else 0)

    def _run(self) -> None:
        k = 0
        last_head = 0
        next_desc = 0.0
        while not self._stop.wait(self.period_s):
            try:
                while self._listener.subscribed:
                    if self._listener.subscribed.popleft() == "/robot_description":
                        next_desc = 0.0
                now = time.monotonic()
                if self.ch_desc is not None and now >= next_desc:
                    self.ch_desc.log({"data": self.frames.text}, log_time=time.time_ns())
                    next_desc = now + 5.0  # and every 5 s, for panels opened later
                self._publish_events()
                head = self.ring.head
                if head == last_head:
                    continue
                self._publish_rows(head, last_head, k % self.servo_every == 0)
                last_head = head
                k += 1
            except Exception as exc:  # noqa: BLE001 - the view must never take the run down
                if self.error is None:
                    self.error = f"live view stopped publishing: {type(exc).__name__}: {exc}"
                    log.error(self.error)
                return

    def _publish_events(self) -> None:
        while self.events:
            ev = self.events.popleft()
            t_ns = self._t_ns(ev.get("t_s"))
            self.ch_log.log(F.log_message(ev, t_ns), log_time=t_ns)

    def _publish_rows(self, head: int, last_head: int, servos: bool) -> None:
        ring = self.ring
        cap = ring.capacity
        row = ring.buf[(head - 1) % cap].copy()  # committed: the loop fills row head % cap
        count = min(head - last_head, cap // 2)  # never near the row being filled
        idx = np.arange(head - count, head) % cap
        col = ring.col
        cost = ring.buf[idx, col["cost_us"]]
        late = ring.buf[idx, col["late_us"]]
        ticks = ring.buf[idx, col["tick"]]
        t_s = float(row[col["t_s"]])
        t_ns = self._t_ns(t_s)
        sl = ring.joint_slice
        units = getattr(getattr(self.loop.read, "reader", None), "effort_units", None) or []
        self.ch_joints.log({
            "timestamp": F.timestamp(t_ns), "t_s": t_s, "name": self.joint_names,
            "position": _nums(row[sl["q"]]), "velocity": _nums(row[sl["dq"]]),
            "effort": _nums(row[sl["current"]]), "goal": _nums(row[sl["goal"]]),
            "feedforward": _nums(row[sl["tau_ff"]]), "effort_units": list(units),
        }, log_time=t_ns)
        span = float(row[col["t_s"]]) - float(ring.buf[idx[0], col["t_s"]])
        rate = (ticks[-1] - ticks[0]) / span if count > 1 and span > 0 else None
        finite = cost[np.isfinite(cost)]
        state = row[col["state"]]
        self.ch_loop.log({
            "timestamp": F.timestamp(t_ns), "tick": _nums(row[col["tick"]:col["tick"] + 1])[0],
            "t_s": t_s, "state": State(int(state)).label if math.isfinite(state) else "?",
            "late_us": _nums(row[col["late_us"]:col["late_us"] + 1])[0],
            "period_us": _nums(row[col["period_us"]:col["period_us"] + 1])[0],
            "cost_us": _nums(row[col["cost_us"]:col["cost_us"] + 1])[0],
            "cost_p99_us": float(np.percentile(finite, 99)) if finite.size else None,
            "late_max_us": float(np.nanmax(late)) if np.isfinite(late).any() else None,
            "rate_hz": rate, "missed": float(row[col["missed"]]),
            "comm_errors": float(row[col["comm_errors"]]), "read_ok": bool(row[col["read_ok"]] == 1.0),
        }, log_time=t_ns)
        if self.ch_tf is not None:
            self.ch_tf.log({"transforms": self.frames.transforms(row[sl["q"]], t_ns)}, log_time=t_ns)
        if servos:
            self._publish_servos(row, t_ns)
        self.published += 1

    def _publish_servos(self, row, t_ns: int) -> None:
        from servoloop.controller.servo_faults import hardware_error_text

        sl = self.ring.joint_slice
        temp, volt, cur, hw = (_nums(row[sl[f]]) for f in ("temperature", "voltage", "current", "hw_error"))
        servos = []
        for i, (sid, joint) in enumerate(zip(self.ids, self.joint_names, strict=True)):
            bits = None if hw[i] is None else int(hw[i])
            servos.append({"id": sid, "joint": joint, "temperature": temp[i], "voltage": volt[i],
                           "current": cur[i], "hardware_error": bits,
                           "hardware_error_text": "not read" if bits is None else hardware_error_text(bits)})
        self.ch_servos.log({"timestamp": F.timestamp(t_ns), "servos": servos}, log_time=t_ns)
