"""The FTDI latency timer, through sysfs.

FTDI adapters (U2D2, USB2Dynamixel) hold received bytes for up to the
latency timer (default 16 ms) before handing them to the host: the #1 cause
of "slow" Dynamixel buses (FIELD-NOTES a1).  Linux exposes it at
``/sys/bus/usb-serial/devices/ttyUSBn/latency_timer``; CDC-ACM devices
(OpenCR, OpenRB, USB2AX) and pseudo-terminals have none ("n/a").
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["latency_timer_path", "read_latency_timer", "write_latency_timer", "SYSFS_ROOT"]

SYSFS_ROOT = Path("/sys/bus/usb-serial/devices")


def latency_timer_path(port: str, root: Path = SYSFS_ROOT) -> Path | None:
    """sysfs file of ``port``'s latency timer (symlinks like /dev/serial/by-id resolved), or None."""
    name = os.path.basename(os.path.realpath(port))
    path = Path(root) / name / "latency_timer"
    return path if path.exists() else None


def read_latency_timer(port: str, root: Path = SYSFS_ROOT) -> int | str:
    """Latency timer in ms, or ``"n/a"`` when the port has none (pty, ttyACM)."""
    path = latency_timer_path(port, root)
    if path is None:
        return "n/a"
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return "n/a"


def write_latency_timer(port: str, ms: int = 1, root: Path = SYSFS_ROOT) -> tuple[bool, str]:
    """Set the latency timer; returns (done, message).  Needs write access to sysfs
    (root, or a udev rule: ``ATTR{latency_timer}="1"`` on ``DRIVER=="ftdi_sio"``)."""
    path = latency_timer_path(port, root)
    if path is None:
        return False, f"{port} has no latency timer (not an FTDI ttyUSB)"
    try:
        path.write_text(f"{int(ms)}\n")
    except OSError as exc:
        return False, (f"cannot write {path}: {exc}; run as root or add the udev rule "
                       'ACTION=="add", SUBSYSTEM=="usb-serial", DRIVER=="ftdi_sio", ATTR{latency_timer}="1"')
    return True, f"{path} set to {ms} ms"
