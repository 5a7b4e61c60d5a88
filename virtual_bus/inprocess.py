"""The virtual bus inside the caller's process, driven by simulated time (lockstep).

No thread, no wall clock in what it answers: the host writes an
instruction, calls :meth:`InProcessVirtualBus.pump`, reads the reply;
:meth:`InProcessVirtualBus.advance` moves simulated time.  Two runs that
make the same calls get bit-identical replies.

Wire time in simulated time: replies go out at once (the line is taken to be
instantaneous), except those an injected ``delay`` fault holds back: such a
reply goes on the wire ``us`` after the reply before it in its train (or its
instruction), takes its bytes at the host's baud rate, and reaches the host
when :meth:`advance` passes its end; the replies after it queue behind it, as
on the half-duplex line.  An instruction the host sends while a held
reply is on the wire collides with it, as on a real RS-485/TTL bus: the
servos never see the instruction, the reply reaches the host with a bad CRC,
and both are counted (``stats["collisions"]``).
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
        #: replies held back by a ``delay`` fault, in wire order: [off the wire at, on it from,
        #: bytes], simulated s
        self._held: list[list] = []
        #: ``collisions``: host instructions sent into a held reply (neither arrives intact);
        #: ``delayed``: replies held back
        self.stats = {"collisions": 0, "delayed": 0}

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
        self._release()

    def _byte_s(self) -> float:
        """Seconds one byte takes on the line (10 bits at the host's rate, else the bus's)."""
        engine = self.engine
        return 10.0 / (engine.client_baud or engine.bus_baud or 1_000_000)

    def _release(self) -> None:
        """Write the held replies now off the wire (simulated time) to the host."""
        held, now = self._held, self.engine.time_s + 1e-12
        k = 0
        while k < len(held) and held[k][0] <= now:
            k += 1
        if k and not self._closed:
            out = b"".join(h[2] for h in held[:k])
            try:
                os.write(self._master, out)
            except BlockingIOError:
                pass
        del held[:k]

    def _collides(self, nbytes: int) -> bool:
        """An instruction of ``nbytes`` sent now overlaps a held reply on the wire: that reply
        is corrupted (its last byte, the CRC's, flipped) and True (the servos ignore the
        instruction)."""
        start = self.engine.time_s
        end = start + nbytes * self._byte_s()
        hit = False
        for h in self._held:
            if h[1] < end and h[0] > start:
                b = bytearray(h[2])
                b[-1] ^= 0xFF
                h[2] = bytes(b)
                hit = True
        if hit:
            self.stats["collisions"] += 1
        return hit

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
        if self._held and self._collides(len(data)):
            return 1        # garbled on the wire: no servo takes it (the pump waits no more)
        return self._answer(engine.feed(data))

    def _answer(self, exchanges) -> int:
        now, held, byte_s = self.engine.time_s, self._held, self._byte_s()
        parts = []
        for _, replies in exchanges:
            # a servo replies after the one before it in the train is off the wire (the line
            # takes no time otherwise), its injected delay later, and then takes its bytes
            t = max(now, held[-1][0]) if held else now
            for pkt, _rdt, extra in replies:
                if extra <= 0.0 and not held:
                    parts.append(pkt)
                    continue
                start = t + extra
                t = start + len(pkt) * byte_s
                held.append([t, start, pkt])
                self.stats["delayed"] += 1
        out = b"".join(parts)
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
