"""The virtual bus inside the caller's process, driven by simulated time (lockstep).

No thread, no wall clock in what it answers: the host writes an
instruction, calls :meth:`InProcessVirtualBus.pump`, reads the reply;
:meth:`InProcessVirtualBus.advance` moves simulated time.  Two runs that
make the same calls get bit-identical replies.
"""

from __future__ import annotations

import os
import select
import time

from servoloop.virtual_bus.engine import BusEngine
from servoloop.virtual_bus.pty import open_pty, termios_baud

__all__ = ["InProcessVirtualBus"]


class InProcessVirtualBus:
    """Emulated servos behind a pty, pumped by the caller.

    Parameters
    ----------
    servos : SPEC str, dict {id: model} or sequence of (id, model) / ServoSpec-like objects
    plant : Plant, optional
        Default :class:`~virtual_bus.IndependentServosPlant`.
    protocol : 1 or 2, optional
        Default: the servos' control-table protocol.
    baud, faults, seed, actuators, eeprom, noise_ticks, reboot_s, imu
        As :class:`~virtual_bus.engine.BusEngine`.  ``baud``
        defaults to None: the servos answer at whatever rate the host sets;
        ``reboot_s`` to 0 (a rebooted servo answers at once: a lockstep host
        that waits out a boot must advance simulated time while it pings).

    Attributes
    ----------
    port : str
        Path of the pty the host opens (give it to ``Bus(port=...)``).
    engine : BusEngine
    """

    def __init__(self, servos, plant=None, protocol: int | None = None, *, baud: int | None = None,
                 faults=None, seed: int = 0, actuators: dict | None = None, eeprom: dict | None = None,
                 noise_ticks: float = 0.25, reboot_s: float = 0.0, imu=None):
        self.engine = BusEngine(servos, plant=plant, protocol=protocol, baud=baud, faults=faults,
                                seed=seed, actuators=actuators, eeprom=eeprom, noise_ticks=noise_ticks,
                                reboot_s=reboot_s, imu=imu)
        self._master, self._slave, self.port = open_pty()
        self._closed = False

    @property
    def time_s(self) -> float:
        """Simulated time, s."""
        return self.engine.time_s

    @property
    def plant(self):
        return self.engine.plant

    def advance(self, dt: float) -> None:
        """Integrate the physics by ``dt`` s of simulated time (fires due timed faults)."""
        self.engine.advance(dt)
        if self.engine.unplugged:
            self._unplug()

    def pump(self, timeout: float = 0.5) -> int:
        """Answer every instruction that has reached the bus; returns how many packets were handled.

        The kernel moves bytes from the host's side of the pty to ours
        asynchronously (measured: right after a write, 3 in 4 times nothing
        has arrived yet), so this waits, on the wall clock and at most
        ``timeout`` s, until at least one complete instruction is here, then
        answers everything that has arrived.  What it answers never depends
        on that wait.
        """
        if self.engine.unplugged:
            self._unplug()
        if self._closed:
            return 0
        handled = 0
        deadline = None
        while True:
            data = self._read()
            if data is None:
                return handled
            handled += self._handle(data)
            if handled and not self.engine.pending_bytes():
                return handled
            now = time.monotonic()
            if deadline is None:
                deadline = now + timeout
            if now >= deadline:
                # a packet that never completes is line noise: skip bytes as a servo's
                # inter-byte timeout would, so what follows it is still answered
                while not handled and self.engine.pending_bytes():
                    handled += self._answer(self.engine.drop_partial())
                return handled
            select.select([self._master], [], [], deadline - now)

    def _read(self) -> bytes | None:
        chunks = []
        while True:
            try:
                chunk = os.read(self._master, 65536)
            except BlockingIOError:
                break
            except OSError:
                return None
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)

    def _handle(self, data: bytes) -> int:
        engine = self.engine
        engine.set_client_baud(termios_baud(self._master))
        return self._answer(engine.feed(data))

    def _answer(self, exchanges) -> int:
        out = b"".join(pkt for _, replies in exchanges for pkt, _, _ in replies)
        if out:
            try:
                os.write(self._master, out)
            except BlockingIOError:
                pass      # the host is not reading: the bytes are lost, as on a real bus
        return len(exchanges)

    def _unplug(self) -> None:
        if not self._closed:
            self._closed = True
            os.close(self._master)
            os.close(self._slave)

    def close(self) -> None:
        """Close the pty (the host sees the port vanish)."""
        self._unplug()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
