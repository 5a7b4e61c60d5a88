"""Progress bars: tqdm on a terminal, plain lines (no carriage-return frames) when redirected."""

import io
import time

from servoloop.progress import Progress


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_redirected_progress_writes_plain_lines_only():
    out = io.StringIO()
    with Progress(10, "fit v3", "simulations", stream=out, every_s=0.0) as bar:
        for _ in range(10):
            bar.update(1)
        bar.set(10, "best MAE 1.00 mrad")
    text = out.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert lines[0] == "fit v3: 1/10 simulations" and lines[-1] == "fit v3: 10/10 simulations (best MAE 1.00 mrad)"


def test_redirected_progress_is_throttled():
    out = io.StringIO()
    bar = Progress(None, "sweep", "velocities", stream=out, every_s=3600.0)
    t0 = time.monotonic()
    for _ in range(1000):
        bar.update(1)
    bar.close()
    assert out.getvalue() == "sweep: 1000 velocities\n"     # only the closing line
    assert time.monotonic() - t0 < 60


def test_terminal_progress_is_a_tqdm_bar():
    out = Terminal()
    with Progress(4, "square wave", "s", stream=out) as bar:
        for _ in range(4):
            bar.update(1)
    text = out.getvalue()
    assert "\r" in text and "square wave" in text and "100%" in text
