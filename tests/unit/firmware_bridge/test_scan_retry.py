"""``sdk.scan`` on Protocol 1.0 (one ping per id): an id whose reply came too late is pinged
once more, so one late reply (a loaded host: CI saw the virtual AX-12A's go missing) does not
hide a servo; an id that answered is not pinged again, and a silent one is given up after two."""

from __future__ import annotations

from servoloop.firmware_bridge import sdk
from servoloop.firmware_bridge.errors import BusTimeoutError


class _Client:
    """Servos 2 (AX-12A, 12) and 5 (AX-18A, 18); the first ping of id 2 times out."""

    pings: list[int] = []

    def __init__(self, port, baud, protocol, margin_ms=3.0):
        self.protocol = protocol

    def ping(self, sid, strict=False):
        _Client.pings.append(sid)
        if sid == 2 and _Client.pings.count(2) == 1:
            raise BusTimeoutError("servo 2: ping: no status packet", 2)
        if sid in (2, 5):
            return {2: 12, 5: 18}[sid], 24
        raise BusTimeoutError(f"servo {sid}: ping: no status packet", sid)

    def close(self):
        pass


def test_a_late_reply_on_the_first_sweep_is_found_on_the_second(monkeypatch):
    _Client.pings = []
    monkeypatch.setattr(sdk, "SdkClient", _Client)
    hits = sdk.scan("/dev/null", [1_000_000], [1], ids=range(0, 8))
    assert [(h.id, h.model, h.protocol) for h in hits] == [(2, "AX-12A", 1), (5, "AX-18A", 1)]
    # every id once, then the silent ones (2 among them) once more; 5 answered: not again
    assert _Client.pings == list(range(8)) + [0, 1, 2, 3, 4, 6, 7]
