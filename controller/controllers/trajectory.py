"""``trajectory``: play keyframes with minimum-jerk interpolation between them.

params:
  ``keyframes``: list of ``{t: s, q: {joint: rad} | [rad, ...]}``, or
  ``file``: a YAML file (that list, or ``{keyframes: [...]}``) or a CSV file
  with a header ``t,JOINT,...`` (a subset of joints is fine), relative to the
  config file;
  ``loop``: replay from the start after the last keyframe (default false);
  ``goal_duration``: s to reach a goal sent over the socket (default 1.0).

Joints a keyframe leaves out keep their previous value (the start pose for
the first one); a first keyframe after t=0 starts from the start pose.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import yaml

from servoloop.controller.controllers.base import (
    Command,
    Controller,
    JointState,
    _number,
    joint_vector,
)
from servoloop.controller.controllers.minimum_jerk import min_jerk_s
from servoloop.controller.errors import ControllerParamError

__all__ = ["TrajectoryController", "load_keyframes"]


def load_keyframes(path: Path) -> list[dict]:
    """Keyframes ``[{t, q: {joint: rad}}]`` from a YAML or CSV file.

    Raises
    ------
    ControllerParamError
        Unreadable file, bad header, or a bad value (names file and row).
    """
    try:
        text = path.read_text()
    except OSError as exc:
        raise ControllerParamError(f"trajectory.file {path}: {exc.strerror}") from exc
    if path.suffix.lower() == ".csv":
        rows = list(csv.reader(line for line in text.splitlines() if line.strip()))
        if not rows or not rows[0] or rows[0][0].strip() != "t":
            raise ControllerParamError(f"trajectory.file {path}: the CSV header must start with 't'")
        joints = [h.strip() for h in rows[0][1:]]
        frames = []
        for r, row in enumerate(rows[1:], start=2):
            if len(row) != len(rows[0]):
                raise ControllerParamError(
                    f"trajectory.file {path} line {r}: {len(row)} values, header has {len(rows[0])}"
                )
            try:
                vals = [float(x) for x in row]
            except ValueError as exc:
                raise ControllerParamError(f"trajectory.file {path} line {r}: {exc}") from exc
            frames.append({"t": vals[0], "q": dict(zip(joints, vals[1:], strict=False))})
        return frames
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ControllerParamError(f"trajectory.file {path}: not valid YAML: {exc}") from exc
    if isinstance(data, dict):
        unknown = [k for k in data if k != "keyframes"]
        if unknown:
            raise ControllerParamError(f"trajectory.file {path}: unknown key {unknown[0]!r}")
        data = data.get("keyframes")
    if not isinstance(data, list):
        raise ControllerParamError(f"trajectory.file {path}: expected a list of keyframes")
    return data


class TrajectoryController(Controller):
    name = "trajectory"
    param_keys = ("keyframes", "file", "loop", "goal_duration")

    def __init__(self, ctx, params=None):
        self.times = np.zeros(0)
        self.poses = np.zeros((0, ctx.n))
        self._cursor = 0
        self._t_last = 0.0
        self._t_offset = 0.0
        super().__init__(ctx, params)
        self._frames = self.params["_frames"]

    # -- parameters -------------------------------------------------------
    def check_params(self, params: dict, initial: bool = False) -> dict:
        params = super().check_params(params, initial)
        if "keyframes" in params and "file" in params:
            raise ControllerParamError("trajectory: give keyframes or file, not both")
        if "file" in params:
            p = Path(str(params["file"]))
            frames = load_keyframes(p if p.is_absolute() else self.ctx.base_dir / p)
        elif "keyframes" in params:
            frames = params["keyframes"]
        elif initial:
            raise ControllerParamError("trajectory: needs keyframes or file")
        else:
            frames = None
        out = dict(params)
        if frames is not None:
            out["_frames"] = self._check_frames(frames)
        if "loop" in params and not isinstance(params["loop"], bool):
            raise ControllerParamError(f"trajectory.loop must be true or false, got {params['loop']!r}")
        if "goal_duration" in params:
            d = _number(params["goal_duration"], "trajectory.goal_duration")
            if d <= 0:
                raise ControllerParamError("trajectory.goal_duration must be > 0 s")
        return out

    def _check_frames(self, frames) -> list[tuple[float, object]]:
        if not isinstance(frames, list) or not frames:
            raise ControllerParamError("trajectory.keyframes must be a non-empty list")
        out = []
        t_prev = -np.inf
        for i, fr in enumerate(frames):
            if not isinstance(fr, dict) or set(fr) != {"t", "q"}:
                raise ControllerParamError(f"trajectory.keyframes[{i}] must be {{t: s, q: ...}}, got {fr!r}")
            t = _number(fr["t"], f"trajectory.keyframes[{i}].t")
            if t < 0 or t <= t_prev:
                raise ControllerParamError(
                    f"trajectory.keyframes[{i}].t = {t}: times must be >= 0 and increasing"
                )
            t_prev = t
            # limits checked now; joints left out are filled at start()
            default = np.clip(np.zeros(self.ctx.n), self.ctx.lower, self.ctx.upper)
            joint_vector(self.ctx, fr["q"], f"trajectory.keyframes[{i}].q", default=default)
            out.append((t, fr["q"]))
        return out

    def apply_params(self, params: dict) -> None:
        super().apply_params(params)
        if "_frames" in params:
            # new keyframes play from now, starting where the command is now
            here = self._sample(self._t_last) if len(self.poses) else np.zeros(self.ctx.n)
            self._frames = params["_frames"]
            self._resolve(here, self._t_last)

    def check_goal(self, goal) -> np.ndarray:
        return joint_vector(self.ctx, goal, "goal", default=self.poses[-1] if len(self.poses) else None)

    def apply_goal(self, goal: np.ndarray) -> None:
        # a fresh two-keyframe trajectory from where we are now to the goal
        d = float(self.params.get("goal_duration", 1.0))
        here = self._sample(self._t_last)
        self.times = np.array([self._t_last, self._t_last + d])
        self.poses = np.vstack([here, goal])
        self._cursor = 0
        self.params["loop"] = False

    # -- the loop ---------------------------------------------------------
    def _resolve(self, start_pose: np.ndarray, t0: float) -> None:
        times, poses = [], []
        prev = np.array(start_pose, dtype=float)
        if self._frames[0][0] > 0:
            times.append(0.0)
            poses.append(prev.copy())
        for t, q in self._frames:
            prev = joint_vector(self.ctx, q, "trajectory.keyframe", default=prev)
            times.append(t)
            poses.append(prev.copy())
        self.times = np.array(times) + t0
        self.poses = np.array(poses)
        self._cursor = 0

    def start(self, state: JointState) -> None:
        start = np.clip(state.position, self.ctx.lower, self.ctx.upper)
        self._resolve(start, 0.0)

    def _sample(self, t: float, out: np.ndarray | None = None) -> np.ndarray:
        times, poses = self.times, self.poses
        if out is None:
            out = np.empty(self.ctx.n)
        if t <= times[0]:
            out[:] = poses[0]
            return out
        if t >= times[-1]:
            out[:] = poses[-1]
            return out
        k = self._cursor
        if times[k] > t:  # time went back (loop wrap): search from the start
            k = 0
        while times[k + 1] <= t:
            k += 1
        self._cursor = k
        s = min_jerk_s((t - times[k]) / (times[k + 1] - times[k]))
        # out = q_k + s * (q_{k+1} - q_k), in place
        np.subtract(poses[k + 1], poses[k], out=out)
        out *= s
        out += poses[k]
        return out

    def update(self, t: float, state: JointState, command: Command) -> None:
        self._t_last = t
        if self.params.get("loop") and len(self.times) > 1:
            span = self.times[-1] - self.times[0]
            t = self.times[0] + (t - self.times[0]) % span if t > self.times[-1] else t
        self._sample(t, command.position)
        command.effort[:] = 0.0

    @property
    def duration(self) -> float:
        """End time of the last keyframe, s."""
        return float(self.times[-1]) if len(self.times) else 0.0

    def status(self) -> dict:
        return {"name": self.name, "t": self._t_last, "duration": self.duration,
                "loop": bool(self.params.get("loop", False))}
