"""Fault injection for the virtual bus: a small grammar and the injector.

Grammar (``--faults SPEC``)::

    SPEC  := FAULT ("," FAULT)*
    FAULT := KIND (":" KEY "=" VALUE)*
    KIND  := drop | corrupt | delay | hwerror | vanish | powercycle | unplug

    keys  id=3 | id=1-4 | id=2+5+7   servos it applies to (default: all)
          p=0.05                     probability per reply (default 1)
          at=2.0, until=3.5          active from/until this simulated time, s
          us=2000                    extra reply delay, microseconds (delay)
          bits=overload+overheat     hardware error bits, names or an integer (hwerror)
          down=0.1                   time without power, s (powercycle; default 0.1)
          bytes=2                    bytes flipped per corrupted reply (corrupt; default 1)

Example: ``drop:id=3:p=0.05,corrupt:p=0.01,delay:id=2:us=2000,
hwerror:id=4:bits=overload:at=2.0,vanish:id=5:at=3.0,powercycle:at=4.0,unplug:at=5.0``

What each does, as real servos and cables do (FIELD-NOTES a3-a6):
dropped replies (the servo stays silent once), corrupted bytes (bad CRC or
checksum at the host), extra delay before a reply, hardware error bits
latched (alert bit, torque off if the Shutdown mask says so), a servo that
vanishes (until ``until`` if given), a power cycle (silent for ``down``,
then RAM back to defaults), the adapter unplugged (port closed).

``delay`` is honoured by both buses: the pty server sends the reply that much
later on the wall clock, the in-process (lockstep) bus in simulated time, where
a host instruction sent while the delayed reply is on the wire collides with it
(:mod:`.inprocess`).
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass

__all__ = ["Fault", "FaultSpecError", "FaultInjector", "parse_faults", "HARDWARE_ERROR_BITS"]

# Hardware Error Status bits (X / MX 2.0); the first three are also the
# Protocol 1.0 status error bits of the same meaning.
HARDWARE_ERROR_BITS = {
    "voltage": 0x01, "input_voltage": 0x01,
    "overheat": 0x04, "overheating": 0x04,
    "encoder": 0x08,
    "electrical": 0x10, "electrical_shock": 0x10,
    "overload": 0x20,
}
_P1_ALLOWED_BITS = 0x01 | 0x04 | 0x20

_KEYS = {
    "drop": {"id", "p", "at", "until"},
    "corrupt": {"id", "p", "at", "until", "bytes"},
    "delay": {"id", "p", "at", "until", "us"},
    "hwerror": {"id", "bits", "at"},
    "vanish": {"id", "at", "until"},
    "powercycle": {"id", "at", "down"},
    "unplug": {"at"},
}
_REQUIRED = {"delay": {"us"}, "hwerror": {"bits"}}


class FaultSpecError(ValueError):
    """A --faults SPEC that cannot be parsed; the message names the token."""


@dataclass(frozen=True)
class Fault:
    """One parsed fault (see the module docstring for the meaning of each field)."""

    kind: str
    ids: tuple[int, ...] | None = None
    p: float = 1.0
    at: float = 0.0
    until: float | None = None
    us: float = 0.0
    bits: int = 0
    down: float = 0.1
    nbytes: int = 1
    token: str = ""

    def applies(self, servo_id: int, t: float) -> bool:
        if self.ids is not None and servo_id not in self.ids:
            return False
        return t >= self.at and (self.until is None or t < self.until)


def _parse_ids(value: str, where: str) -> tuple[int, ...]:
    ids: list[int] = []
    for part in value.split("+"):
        lo, sep, hi = part.partition("-")
        try:
            a = int(lo)
            b = int(hi) if sep else a
        except ValueError:
            raise FaultSpecError(f"{where}: id must be N, A-B or A+B+C, got {value!r}") from None
        if not (0 <= a <= b <= 252):
            raise FaultSpecError(f"{where}: ids must lie in 0..252 with A <= B, got {value!r}")
        ids.extend(range(a, b + 1))
    return tuple(ids)


def _parse_bits(value: str, where: str) -> int:
    try:
        return int(value, 0)
    except ValueError:
        pass
    bits = 0
    for name in value.split("+"):
        if name not in HARDWARE_ERROR_BITS:
            raise FaultSpecError(f"{where}: unknown hardware error bit {name!r}; "
                                 f"known: {', '.join(sorted(HARDWARE_ERROR_BITS))} or an integer")
        bits |= HARDWARE_ERROR_BITS[name]
    return bits


def _number(value: str, where: str, key: str, lo: float = 0.0, hi: float | None = None) -> float:
    try:
        x = float(value)
    except ValueError:
        raise FaultSpecError(f"{where}: {key} must be a number, got {value!r}") from None
    if not (x >= lo and (hi is None or x <= hi)):
        bound = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        raise FaultSpecError(f"{where}: {key}={value} out of range {bound}")
    return x


def parse_faults(spec: str | None) -> list[Fault]:
    """Parse a fault SPEC; raises :class:`FaultSpecError` naming the bad token."""
    if not spec:
        return []
    faults = []
    for k, token in enumerate(spec.split(","), start=1):
        token = token.strip()
        where = f"fault {k} {token!r}"
        if not token:
            raise FaultSpecError(f"fault {k}: empty fault (stray comma?) in {spec!r}")
        kind, *items = token.split(":")
        if kind not in _KEYS:
            raise FaultSpecError(f"{where}: unknown kind {kind!r}; known: {', '.join(_KEYS)}")
        fields: dict = {"kind": kind, "token": token}
        seen = set()
        for item in items:
            key, eq, value = item.partition("=")
            if not eq or not value:
                raise FaultSpecError(f"{where}: expected KEY=VALUE, got {item!r}")
            if key not in _KEYS[kind]:
                raise FaultSpecError(f"{where}: {kind} takes {', '.join(sorted(_KEYS[kind]))}, not {key!r}")
            if key in seen:
                raise FaultSpecError(f"{where}: {key} given twice")
            seen.add(key)
            if key == "id":
                fields["ids"] = _parse_ids(value, where)
            elif key == "p":
                fields["p"] = _number(value, where, key, 0.0, 1.0)
            elif key in ("at", "until", "down"):
                fields[key] = _number(value, where, key)
            elif key == "us":
                fields["us"] = _number(value, where, key)
            elif key == "bits":
                fields["bits"] = _parse_bits(value, where)
                if not 0 < fields["bits"] < 256:
                    raise FaultSpecError(f"{where}: bits must be 1..255, got {value!r}")
            elif key == "bytes":
                fields["nbytes"] = int(_number(value, where, key, 1.0, 64.0))
        missing = _REQUIRED.get(kind, set()) - seen
        if missing:
            raise FaultSpecError(f"{where}: {kind} needs {', '.join(sorted(missing))}")
        if "until" in fields and fields["until"] <= fields.get("at", 0.0):
            raise FaultSpecError(f"{where}: until must be after at")
        faults.append(Fault(**fields))
    return faults


class FaultInjector:
    """Applies faults to one bus engine, deterministically (seeded RNG, simulated time).

    Parameters
    ----------
    faults : list of Fault
    seed : int
        Seed of the random draws (drop/corrupt/delay probabilities, corrupted bytes).
    """

    def __init__(self, faults: list[Fault], seed: int = 0):
        self.faults = list(faults)
        self.rng = random.Random(seed)
        self.reply_faults = [f for f in self.faults if f.kind in ("drop", "corrupt", "delay")]
        self._events: list = []
        self.fired: list[str] = []
        self.counts = {"dropped": 0, "corrupted": 0, "delayed": 0}

    def bind(self, engine) -> None:
        """Check the faults against the bus (ids, bits) and schedule the timed ones."""
        known = {s.id for s in engine.servos}
        for f in self.faults:
            if f.ids is not None:
                unknown = sorted(set(f.ids) - known)
                if unknown:
                    raise FaultSpecError(f"fault {f.token!r}: no servo with id {unknown} on this bus "
                                         f"(ids: {sorted(known)})")
            p1 = any(s.protocol == 1 for s in engine.servos if f.ids is None or s.id in f.ids)
            if f.kind == "hwerror" and p1 and f.bits & ~_P1_ALLOWED_BITS:
                raise FaultSpecError(f"fault {f.token!r}: Protocol 1.0 servos report only "
                                     "voltage, overheat and overload")
        seq = 0
        for f in self.faults:
            if f.kind in ("hwerror", "vanish", "powercycle", "unplug"):
                heapq.heappush(self._events, (f.at, seq, "start", f))
                seq += 1
            if f.kind == "vanish" and f.until is not None:
                heapq.heappush(self._events, (f.until, seq, "end", f))
                seq += 1
            if f.kind == "powercycle" and f.down > 0:
                heapq.heappush(self._events, (f.at + f.down, seq, "end", f))
                seq += 1

    @property
    def next_event_time(self) -> float | None:
        return self._events[0][0] if self._events else None

    def on_time(self, engine, t: float) -> None:
        """Fire every timed event due at or before simulated time ``t``."""
        while self._events and self._events[0][0] <= t:
            _, _, phase, f = heapq.heappop(self._events)
            targets = [s for s in engine.servos if f.ids is None or s.bus_id0 in f.ids]
            if f.kind == "unplug":
                engine.unplug()
            elif f.kind == "hwerror":
                for s in targets:
                    s.inject_hardware_error(f.bits)
            elif f.kind == "vanish":
                for s in targets:
                    s.vanished = phase == "start"
            elif f.kind == "powercycle":
                for s in targets:
                    if phase == "start":
                        s.unpowered = f.down > 0
                        if s.unpowered:
                            s.mem[s.info.a_torque] = 0
                            s.refresh_actuation()
                        else:
                            s.boot()
                    else:
                        s.unpowered = False
                        s.boot()
            self.fired.append(f"{f.token}@{t:.3f}s:{phase}")
            engine._ids_changed()

    def filter_reply(self, servo_id: int, t: float, packet: bytes):
        """(packet or None if dropped, extra delay s) for one reply of ``servo_id``."""
        delay = 0.0
        rng = self.rng
        for f in self.reply_faults:
            if not f.applies(servo_id, t) or (f.p < 1.0 and rng.random() >= f.p):
                continue
            if f.kind == "drop":
                self.counts["dropped"] += 1
                return None, 0.0
            if f.kind == "corrupt":
                b = bytearray(packet)
                for _ in range(f.nbytes):
                    b[rng.randrange(len(b))] ^= rng.randrange(1, 256)
                packet = bytes(b)
                self.counts["corrupted"] += 1
            else:
                delay += f.us * 1e-6
                self.counts["delayed"] += 1
        return packet, delay
