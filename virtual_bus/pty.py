"""Pseudo-terminal plumbing shared by the pty server and the in-process bus."""

from __future__ import annotations

import fcntl
import os
import select
import statistics
import struct
import termios
import time
import tty

__all__ = ["open_pty", "termios_baud", "measure_pty_latency"]

_BAUDS = {getattr(termios, n): int(n[1:]) for n in dir(termios) if n[:1] == "B" and n[1:].isdigit()}
_BOTHER = 0o010000
_TCGETS2 = 0x802C542A        # _IOR('T', 0x2A, struct termios2) on Linux
_TERMIOS2 = struct.Struct("4I B 19B 2I")


def open_pty() -> tuple[int, int, str]:
    """(master fd, slave fd, slave path) of a new raw pty; the master is non-blocking.

    The caller keeps the slave fd open so the master never reads EIO while no
    host has the port open.
    """
    master, slave = os.openpty()
    tty.setraw(slave)
    os.set_blocking(master, False)
    return master, slave, os.ttyname(slave)


def termios_baud(fd: int) -> int | None:
    """Bits per second the host set on the pty (read through the master), or None."""
    try:
        speed = termios.tcgetattr(fd)[5]
    except (termios.error, OSError):
        return None
    if speed == _BOTHER:
        # a custom rate (pyserial uses BOTHER for e.g. 2.25 Mbps): ask termios2
        try:
            raw = fcntl.ioctl(fd, _TCGETS2, bytes(_TERMIOS2.size))
            return _TERMIOS2.unpack(raw)[-1] or None
        except OSError:
            return None
    return _BAUDS.get(speed)


def measure_pty_latency(master: int, slave: int, samples: int = 25) -> tuple[float, float]:
    """Median one-way latency of the pty, s: (host -> master, master -> host).

    Each sample writes one byte on one side and waits for it on the other
    (transfer through the kernel plus the wake-up of the waiting side).  Run
    it before any host opens the port.
    """
    def one_way(src: int, dst: int) -> float:
        times = []
        for _ in range(samples):
            t = time.monotonic()
            os.write(src, b"\x00")
            select.select([dst], [], [], 0.1)
            times.append(time.monotonic() - t)
            try:
                os.read(dst, 64)
            except BlockingIOError:
                pass
        return statistics.median(times)

    blocking = os.get_blocking(slave)
    os.set_blocking(slave, False)
    try:
        return one_way(slave, master), one_way(master, slave)
    finally:
        os.set_blocking(slave, blocking)
