"""Progress bars for long commands (calibration experiments, fits, sweeps).

On a terminal: a ``tqdm`` bar on stderr.  Redirected to a file or a pipe:
plain lines (at most one every ``every_s`` seconds, and one at the end), so a
log file never fills with ``\\r`` frames.  Never raises on a closed stream.
"""

from __future__ import annotations

import sys
import time

__all__ = ["Progress"]


class Progress:
    """A progress report of ``total`` steps (None: unknown).

    Parameters
    ----------
    total : number of steps, or None
    desc : what is progressing, e.g. ``"fit v3"``
    unit : the step's unit, e.g. ``"s"``, ``"simulations"``
    stream : default ``sys.stderr``
    every_s : seconds between plain lines when ``stream`` is not a terminal
    """

    def __init__(self, total=None, desc: str = "", unit: str = "it", stream=None, every_s: float = 5.0) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.total, self.desc, self.unit, self.every_s = total, desc, unit, every_s
        self.n = 0.0
        self.note = ""
        self._last = time.monotonic()
        self._bar = None
        isatty = getattr(self.stream, "isatty", None)
        if isatty is not None and isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=desc, unit=unit, file=self.stream, leave=True,
                             dynamic_ncols=True)

    def update(self, n: float = 1) -> None:
        """``n`` more steps done."""
        self.set(self.n + n)

    def set(self, n: float, note: str = "") -> None:
        """``n`` steps done in all (``note``: a short status shown beside it)."""
        self.note = note or self.note
        if self._bar is not None:
            self._bar.update(n - self.n)
            if note:
                self._bar.set_postfix_str(note, refresh=False)
            self.n = n
            return
        self.n = n
        now = time.monotonic()
        if now - self._last >= self.every_s:
            self._last = now
            self._line()

    def _line(self) -> None:
        of = f"/{self.total:g}" if self.total else ""
        note = f" ({self.note})" if self.note else ""
        try:
            self.stream.write(f"{self.desc}: {self.n:g}{of} {self.unit}{note}\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        """End the report (the bar stays on screen; a plain line gives the final count)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self.n:
            self._line()
            self.n = 0.0

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
