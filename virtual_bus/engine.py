"""The virtual bus itself: bytes in, status packets out, physics in between.

:class:`BusEngine` knows nothing about ptys or clocks.  ``feed(bytes)``
frames instruction packets (resynchronising on garbage, answering a bad
CRC/checksum the way a servo does), runs each one against the emulated
servos and returns, per packet, its length on the wire and the replies with
the delay each servo waits before sending (its Return Delay Time, and any
injected delay).  ``advance(dt)`` moves simulated time: the plant
integrates, timed faults fire.  The pty server drives it from the
monotonic clock, :class:`~virtual_bus.InProcessVirtualBus`
from simulated time only.

Hot path (a 12-servo sync read + sync write every millisecond): parsed
read-type packets are cached by their bytes (the same sync read comes every
tick, so its CRC is checked once), status packets are assembled from a
cached prefix whose CRC state is precomputed, present-state registers are
written for all servos of a model with a few NumPy operations, and nothing
is logged.
"""

from __future__ import annotations

import inspect

import numpy as np

from servoloop.firmware_bridge.control_table import baud_to_raw, get_table, raw_to_baud
from servoloop.firmware_bridge.protocol import HEADER_V2, build_status, unstuff
from servoloop.firmware_bridge.protocol import crc16 as P_crc16
from servoloop.virtual_bus.actuator import default_actuator, with_overrides
from servoloop.virtual_bus.crc import crc16, crc16_continue, crc_to_state
from servoloop.virtual_bus.faults import FaultInjector, parse_faults
from servoloop.virtual_bus.plant import IndependentServosPlant
from servoloop.virtual_bus.servo import ERR, ServoBank, VirtualServo, table_info
from servoloop.virtual_bus.spec import normalize_servos

__all__ = ["BusEngine"]

BROADCAST = 0xFE
_MAX_LEN_V2 = 2048          # longer length fields are taken as line noise, not waited for
_READ_INSTRUCTIONS = (0x01, 0x02, 0x82, 0x8A, 0x92, 0x9A)
_STUFF = b"\xff\xff\xfd"


class BusEngine:
    """Emulated servos on one half-duplex bus.

    Parameters
    ----------
    servos : SPEC str, dict {id: model}, or sequence of (id, model) / objects with id, model
    plant : Plant, optional
        Physics; default :class:`IndependentServosPlant` with per-model actuator defaults.
    protocol : 1 or 2, optional
        Default: the protocol of the servos' control tables (which must agree).
    baud : int, optional
        The servos' configured baud rate.  Given, a servo answers only when
        the host's port runs at its Baud Rate register's rate (within 3 %);
        None: every servo answers whatever the host's rate.
    faults : str or list of Fault, optional
    seed : int
        Seed of the position noise and the fault draws.
    actuators : dict {id: dict of ActuatorParams fields}, optional
        Per-servo overrides of the default actuator (calibration tests).
    eeprom : dict {name: raw}, optional
        EEPROM values of the configured robot for every servo (e.g.
        ``{"return_delay_time": 0}``); default: factory values.
    noise_ticks : float
        Standard deviation of the position measurement noise, encoder ticks.
    """

    def __init__(self, servos, plant=None, protocol: int | None = None, baud: int | None = None,
                 faults=None, seed: int = 0, actuators: dict | None = None,
                 eeprom: dict | None = None, noise_ticks: float = 0.25):
        specs = normalize_servos(servos)
        tables = [get_table(m) for _, m in specs]
        protocols = {t.protocol for t in tables}
        if protocol is None:
            if len(protocols) > 1:
                raise ValueError("servos mix Protocol 1.0 and 2.0 control tables; give protocol=")
            protocol = protocols.pop()
        if protocol not in (1, 2):
            raise ValueError(f"protocol must be 1 or 2, not {protocol!r}")
        for (sid, _), t in zip(specs, tables, strict=True):
            if t.protocol != protocol:
                raise ValueError(f"servo {sid}: {t.name}'s control table is for Protocol "
                                 f"{t.protocol}.0, the bus runs Protocol {protocol}.0")
        self.protocol = protocol
        self.n = n = len(specs)
        self.bus_baud = baud
        self.client_baud: int | None = None
        self.time_s = 0.0
        self.unplugged = False
        self.noise_ticks = float(noise_ticks)
        self._rng = np.random.default_rng(seed)
        # state shared with the servos and the plant (bus order = spec order)
        self.goal_rad = np.zeros(n)
        self.torque_on = np.zeros(n, dtype=bool)
        self.kp_scale = np.ones(n)
        self.mode = np.zeros(n, dtype=np.int8)        # plant mode: 0 position, 1 velocity, 2 torque
        self.command = np.zeros(n)                     # rad/s (mode 1) or N*m (mode 2)
        self.torque_limit = np.array([t.stall_torque_nm or 1.0 for t in tables])
        self.position = np.zeros(n)
        self.velocity = np.zeros(n)
        self.torque = np.zeros(n)
        actuators = actuators or {}
        unknown = sorted(set(actuators) - {sid for sid, _ in specs})
        if unknown:
            raise ValueError(f"actuator overrides for ids {unknown} that are not on the bus")
        if plant is None:
            plant = IndependentServosPlant(
                [with_overrides(default_actuator(t), actuators.get(sid)) for (sid, _), t in zip(specs, tables, strict=True)])
        elif actuators:
            raise ValueError("actuator overrides apply to the default plant only")
        if plant.n != n:
            raise ValueError(f"plant has {plant.n} joints, the bus {n} servos")
        self.plant = plant
        self._set_actuation = getattr(plant, "set_actuation", None)
        try:
            self._modes_ok = "mode" in inspect.signature(self._set_actuation).parameters
        except (TypeError, ValueError):
            self._modes_ok = False
        self._actuation_dirty = True
        plant.step(0.0, self.goal_rad, self.torque_on, self.position, self.velocity, self.torque)
        # servos, grouped by model into shared memory banks
        self.banks: dict[str, ServoBank] = {}
        counts: dict[str, int] = {}
        for t in tables:
            counts[t.name] = counts.get(t.name, 0) + 1
        for t in tables:
            if t.name not in self.banks:
                self.banks[t.name] = ServoBank(table_info(t), counts[t.name])
        fill = dict.fromkeys(counts, 0)
        self.servos: list[VirtualServo] = []
        for i, ((sid, _), t) in enumerate(zip(specs, tables, strict=True)):
            bank = self.banks[t.name]
            k = fill[t.name]
            fill[t.name] += 1
            baud_raw = baud_to_raw(t, baud) if baud is not None else None
            servo = VirtualServo(bank.info, bank.memory(k), i, self, sid, baud_raw, eeprom)
            bank.add(servo, k)
            self.servos.append(servo)
        self._present_dirty = True
        self._prefix: dict = {}
        self._parse_cache: dict = {}
        self._rx = bytearray()
        self.stats = {"instructions": 0, "replies": 0, "bad_checksum": 0, "malformed": 0}
        if isinstance(faults, str) or faults is None:
            faults = parse_faults(faults)
        self.faults = FaultInjector(faults, seed)
        self._ids_changed()
        self.faults.bind(self)
        self._reply_faults = bool(self.faults.reply_faults)
        self._handlers = self._handlers_v2() if protocol == 2 else self._handlers_v1()
        self.faults.on_time(self, 0.0)     # faults "at=0" hold from the first byte

    # ------------------------------------------------------------------ bus state
    def _ids_changed(self) -> None:
        """Rebuild id -> servo for the servos that can hear the host now."""
        by_id: dict[int, list] = {}
        for s in self.servos:
            if s.vanished or s.unpowered or not self._baud_ok(s):
                continue
            by_id.setdefault(s.id, []).append(s)
        self._by_id = {i: v[0] for i, v in by_id.items()}
        self._collide = {i: v for i, v in by_id.items() if len(v) > 1}

    def _baud_ok(self, s: VirtualServo) -> bool:
        if self.bus_baud is None or self.client_baud is None:
            return True
        rate = raw_to_baud(s.info.table, s.baud_raw) if s.info.protocol == 1 or s.baud_raw <= 7 else 0
        return abs(rate - self.client_baud) <= 0.03 * self.client_baud

    def set_client_baud(self, baud: int | None) -> None:
        """The host port's rate (read from the pty's termios); servos at another rate go deaf."""
        if baud != self.client_baud:
            self.client_baud = baud
            self._ids_changed()

    def _actuation_changed(self) -> None:
        self._actuation_dirty = True

    def unplug(self) -> None:
        """The adapter is gone: the transport closes its port."""
        self.unplugged = True

    def listening_ids(self) -> list[int]:
        """Ids that answer now, sorted."""
        return sorted(self._by_id)

    # ------------------------------------------------------------------ time
    def advance(self, dt: float) -> None:
        """Integrate the plant by ``dt`` s of simulated time and fire due faults."""
        if dt < 0:
            raise ValueError(f"advance: dt must be >= 0 s, got {dt!r}")
        if self._actuation_dirty and self._set_actuation is not None:
            if self._modes_ok:
                self._set_actuation(self.kp_scale, self.torque_limit, self.mode, self.command)
            else:
                self._set_actuation(self.kp_scale, self.torque_limit)
        self._actuation_dirty = False
        self.plant.step(dt, self.goal_rad, self.torque_on, self.position, self.velocity, self.torque)
        self.time_s += dt
        self._present_dirty = True
        ev = self.faults.next_event_time
        if ev is not None and ev <= self.time_s:
            self.faults.on_time(self, self.time_s)

    def _refresh_present(self) -> None:
        noise = self.noise_ticks
        for bank in self.banks.values():
            ticks = self._rng.standard_normal(bank.n) * noise if noise > 0 else None
            bank.write_present(self.position, self.velocity, self.torque, self.time_s, ticks)
        self._present_dirty = False

    # ------------------------------------------------------------------ framing
    def feed(self, data: bytes) -> list:
        """Take bytes from the host; return one ``(packet_bytes, replies)`` per instruction packet.

        ``replies`` is a list of ``(status_packet, return_delay_s, extra_delay_s)``
        in wire order: the servo's Return Delay Time and any injected delay.
        Incomplete packets stay buffered for the next call.
        """
        rx = self._rx
        if data:
            rx += data
        if self.protocol == 2:
            return self._frame_v2(rx)
        return self._frame_v1(rx)

    def pending_bytes(self) -> int:
        """Bytes buffered without a complete packet yet."""
        return len(self._rx)

    def drop_partial(self) -> list:
        """Give up on a stalled partial packet (a servo's inter-byte timeout): skip one byte, reframe."""
        if self._rx:
            del self._rx[:1]
            self.stats["malformed"] += 1
        return self.feed(b"")

    def _frame_v2(self, rx: bytearray) -> list:
        out = []
        cache = self._parse_cache
        while True:
            i = rx.find(HEADER_V2)
            if i < 0:
                # keep a possible header start for the next read
                keep = 3 if rx[-3:] == b"\xff\xff\xfd" else 2 if rx[-2:] == b"\xff\xff" else 1 if rx[-1:] == b"\xff" else 0
                if len(rx) > keep:
                    del rx[: len(rx) - keep]
                return out
            if i:
                del rx[:i]
            if len(rx) < 7:
                return out
            length = rx[5] | (rx[6] << 8)
            if length < 3 or length > _MAX_LEN_V2 or rx[4] in (0xFD, 0xFF):
                del rx[:1]
                self.stats["malformed"] += 1
                continue
            total = 7 + length
            if len(rx) < total:
                return out
            pkt = bytes(rx[:total])
            parsed = cache.get(pkt)
            if parsed is None:
                if crc16(memoryview(pkt)[:-2]) != (pkt[-2] | (pkt[-1] << 8)):
                    self.stats["bad_checksum"] += 1
                    sid = pkt[4]
                    servo = self._by_id.get(sid)
                    if servo is None or sid == BROADCAST:
                        del rx[:1]          # maybe not a packet at all: resynchronise
                        continue
                    del rx[:total]
                    out.append((total, self._reply(servo, ERR.CRC)))
                    continue
                body = pkt[7:-2]
                if _STUFF in body:
                    body = unstuff(body)
                parsed = (pkt[4], body[0], body[1:])
                if body[0] in _READ_INSTRUCTIONS:
                    if len(cache) > 256:
                        cache.clear()
                    cache[pkt] = parsed
            del rx[:total]
            self.stats["instructions"] += 1
            out.append((total, self._dispatch(*parsed)))

    def _frame_v1(self, rx: bytearray) -> list:
        out = []
        while True:
            i = rx.find(b"\xff\xff")
            if i < 0:
                if len(rx) > 1 or rx[-1:] != b"\xff":
                    del rx[: len(rx) - (1 if rx[-1:] == b"\xff" else 0)]
                return out
            if i:
                del rx[:i]
            if len(rx) < 4:
                return out
            if rx[2] == 0xFF:            # FF FF FF ...: the header starts one byte later
                del rx[:1]
                continue
            sid, length = rx[2], rx[3]
            if length < 2:
                del rx[:1]
                self.stats["malformed"] += 1
                continue
            total = 4 + length
            if len(rx) < total:
                return out
            pkt = bytes(rx[:total])
            if (~sum(pkt[2:-1])) & 0xFF != pkt[-1]:
                self.stats["bad_checksum"] += 1
                servo = self._by_id.get(sid)
                if servo is None or sid == BROADCAST:
                    del rx[:1]
                    continue
                del rx[:total]
                out.append((total, self._reply(servo, ERR.CRC)))
                continue
            del rx[:total]
            self.stats["instructions"] += 1
            out.append((total, self._dispatch(sid, pkt[4], pkt[5:-1])))

    # ------------------------------------------------------------------ replies
    def _dispatch(self, sid: int, inst: int, params: bytes) -> list:
        handler = self._handlers.get(inst)
        if sid in self._collide:
            return self._collision(sid, handler, params)
        if handler is not None:
            return handler(sid, params)
        servo = self._by_id.get(sid)
        if servo is None or sid == BROADCAST:
            return []
        return self._reply(servo, ERR.INSTRUCTION, level=2)

    def _reply(self, servo: VirtualServo, err: int, data: bytes = b"", level: int = 2) -> list:
        """One servo's status packet as a reply list (empty if its Status Return Level says no).

        ``level``: 0 ping (always answered), 1 read, 2 anything else.
        """
        if level and servo.status_return_level < level:
            return []
        pkt = self._status(servo, err, data)
        extra = 0.0
        if self._reply_faults:
            pkt, extra = self.faults.filter_reply(servo.bus_id0, self.time_s, pkt)
            if pkt is None:
                return []
        self.stats["replies"] += 1
        return [(pkt, servo.return_delay_s, extra)]

    def _status(self, servo: VirtualServo, err: int, data: bytes) -> bytes:
        sid = servo.id
        e = servo.status_bits(err)
        if self.protocol == 1:
            n = len(data) + 2
            return b"\xff\xff" + bytes((sid, n, e)) + data + bytes(((~(sid + n + e + sum(data))) & 0xFF,))
        if _STUFF in data:          # the error byte is never 0xFF: only the data can need stuffing
            return build_status(2, sid, e, data)
        key = (sid, len(data), e)
        pre = self._prefix.get(key)
        if pre is None:
            # header + id + length + 0x55 + error is fixed per (id, length, error): CRC it once
            n = len(data) + 4
            head = HEADER_V2 + bytes((sid, n & 0xFF, n >> 8, 0x55, e))
            pre = self._prefix[key] = (head, crc_to_state(P_crc16(head)))
        crc = crc16_continue(pre[1], data)
        return pre[0] + data + bytes((crc & 0xFF, crc >> 8))

    def _collision(self, sid: int, handler, params: bytes) -> list:
        """Servos sharing an id all obey, and answer at once: the wire ANDs their bits."""
        answers = []
        for s in self._collide[sid]:
            self._by_id[sid] = s
            answers.append(handler(sid, params) if handler is not None
                           else self._reply(s, ERR.INSTRUCTION, level=2))
        self._by_id[sid] = self._collide[sid][0]
        pkts = [a[0][0] for a in answers if a]
        if not pkts:
            return []
        out = bytearray(max(pkts, key=len))
        for p in pkts:
            for k, b in enumerate(p):
                out[k] &= b
        first = next(a for a in answers if a)[0]
        return [(bytes(out), first[1], first[2])]

    def _targets(self, sid: int) -> list:
        if sid == BROADCAST:
            return [self._by_id[i] for i in sorted(self._by_id)]
        s = self._by_id.get(sid)
        return [s] if s is not None else []

    def _fresh(self) -> None:
        if self._present_dirty:
            self._refresh_present()

    # ------------------------------------------------------------------ instructions (shared)
    def _do_write(self, sid: int, address: int, data: bytes) -> list:
        out = []
        for s in self._targets(sid):
            err = s.write(address, data)
            if sid != BROADCAST:
                out += self._reply(s, err)
        return out

    def _do_read(self, sid: int, address: int, length: int) -> list:
        s = self._by_id.get(sid)
        if s is None or sid == BROADCAST:
            return []
        self._fresh()
        err, data = s.read(address, length)
        return self._reply(s, err, data or b"", level=1)

    def _do_reg_write(self, sid: int, address: int, data: bytes) -> list:
        out = []
        for s in self._targets(sid):
            s.registered = (address, bytes(data))
            if s.info.a_regd is not None:
                s.mem[s.info.a_regd] = 1
            if sid != BROADCAST:
                out += self._reply(s, ERR.OK)
        return out

    def _do_action(self, sid: int, params: bytes) -> list:
        out = []
        for s in self._targets(sid):
            if s.registered is None:
                err = ERR.INSTRUCTION
            else:
                address, data = s.registered
                s.registered = None
                if s.info.a_regd is not None:
                    s.mem[s.info.a_regd] = 0
                err = s.write(address, data)
            if sid != BROADCAST:
                out += self._reply(s, err)
        return out

    def _do_reboot(self, sid: int, params: bytes) -> list:
        out = []
        for s in self._targets(sid):
            if not s.info.reboot:
                if sid != BROADCAST:
                    out += self._reply(s, ERR.INSTRUCTION)
                continue
            if sid != BROADCAST:
                out += self._reply(s, ERR.OK)     # the status goes out before the restart
            s.boot()
        self._ids_changed()
        return out

    def _do_factory_reset(self, sid: int, params: bytes) -> list:
        option = params[0] if params else 0xFF
        if self.protocol == 2 and sid == BROADCAST and option == 0xFF:
            return []                            # firmware >= 42 ignores a broadcast reset-all
        if self.protocol == 2 and option not in (0x01, 0x02, 0xFF):
            s = self._by_id.get(sid)
            return self._reply(s, ERR.RANGE) if s is not None and sid != BROADCAST else []
        out = []
        for s in self._targets(sid):
            if sid != BROADCAST:
                out += self._reply(s, ERR.OK)
            s.factory_reset(option)
        self._ids_changed()
        return out

    def _ping_reply(self, s: VirtualServo) -> list:
        if self.protocol == 1:
            return self._reply(s, ERR.OK, level=0)
        mem, info = s.mem, s.info
        mn = info.reg["model_number"].address
        fw = info.reg["firmware_version"].address
        return self._reply(s, ERR.OK, bytes((mem[mn], mem[mn + 1], mem[fw])), level=0)

    # ------------------------------------------------------------------ Protocol 2.0
    def _handlers_v2(self) -> dict:
        return {0x01: self._v2_ping, 0x02: self._v2_read, 0x03: self._v2_write,
                0x04: self._v2_reg_write, 0x05: self._do_action, 0x06: self._do_factory_reset,
                0x08: self._do_reboot, 0x10: self._v2_clear, 0x82: self._v2_sync_read,
                0x83: self._v2_sync_write, 0x8A: self._v2_fast_sync_read, 0x92: self._v2_bulk_read,
                0x93: self._v2_bulk_write, 0x9A: self._v2_fast_bulk_read}

    def _malformed(self, sid: int) -> list:
        self.stats["malformed"] += 1
        s = self._by_id.get(sid)
        return self._reply(s, ERR.INSTRUCTION) if s is not None and sid != BROADCAST else []

    def _v2_ping(self, sid, params):
        out = []
        for s in self._targets(sid):   # broadcast: every servo, in id order
            out += self._ping_reply(s)
        return out

    def _v2_read(self, sid, params):
        if len(params) != 4:
            return self._malformed(sid)
        return self._do_read(sid, params[0] | (params[1] << 8), params[2] | (params[3] << 8))

    def _v2_write(self, sid, params):
        if len(params) < 3:
            return self._malformed(sid)
        return self._do_write(sid, params[0] | (params[1] << 8), params[2:])

    def _v2_reg_write(self, sid, params):
        if len(params) < 3:
            return self._malformed(sid)
        return self._do_reg_write(sid, params[0] | (params[1] << 8), params[2:])

    def _v2_clear(self, sid, params):
        if params[:1] != b"\x01" or params[1:5] != b"DXL\x22":
            return self._malformed(sid)
        out = []
        for s in self._targets(sid):
            moving = abs(self.velocity[s.index]) > 1e-3
            if sid != BROADCAST:
                out += self._reply(s, ERR.RESULT_FAIL if moving else ERR.OK)
        return out

    def _v2_sync_read(self, sid, params):
        if sid != BROADCAST or len(params) < 5:
            return []
        address, length = params[0] | (params[1] << 8), params[2] | (params[3] << 8)
        self._fresh()
        out = []
        by_id = self._by_id
        end = address + length
        status = self._status
        for i in params[4:]:
            s = by_id.get(i)
            if s is None:
                continue
            mem = s.mem
            if end > s.info.size or self._reply_faults:
                err, data = s.read(address, length)
                out += self._reply(s, err, data or b"", level=1)
            elif mem[s.info.a_srl]:
                # the every-tick path: inlined _reply (no faults configured)
                out.append((status(s, 0, bytes(mem[address:end])), mem[s.info.a_rdt] * 2e-6, 0.0))
                self.stats["replies"] += 1
        return out

    def _v2_bulk_read(self, sid, params):
        if sid != BROADCAST or len(params) < 5 or len(params) % 5:
            return []
        self._fresh()
        out = []
        for k in range(0, len(params), 5):
            s = self._by_id.get(params[k])
            if s is not None:
                address = params[k + 1] | (params[k + 2] << 8)
                length = params[k + 3] | (params[k + 4] << 8)
                err, data = s.read(address, length)
                out += self._reply(s, err, data or b"", level=1)
        return out

    def _v2_fast_sync_read(self, sid, params):
        if sid != BROADCAST or len(params) < 5:
            return []
        address, length = params[0] | (params[1] << 8), params[2] | (params[3] << 8)
        return self._fast_read([(i, address, length) for i in params[4:]])

    def _v2_fast_bulk_read(self, sid, params):
        if sid != BROADCAST or len(params) < 5 or len(params) % 5:
            return []
        items = [(params[k], params[k + 1] | (params[k + 2] << 8), params[k + 3] | (params[k + 4] << 8))
                 for k in range(0, len(params), 5)]
        return self._fast_read(items)

    def _fast_read(self, items) -> list:
        """Fast Sync/Bulk Read: one status packet from id 0xFE that every servo extends.

        Layout: FF FF FD 00 FE LEN_L LEN_H 55, then per servo ERR ID DATA CRC_L CRC_H
        where each CRC covers the packet from its first byte (the last one is
        the packet's CRC); LEN = 1 + sum(4 + data length).  The first servo
        sends the header with the length of the whole chain: a servo that does
        not answer leaves a short packet the host rejects.  No byte stuffing
        (``dynamixel_sdk`` reads these packets without unstuffing).
        """
        self._fresh()
        first = self._by_id.get(items[0][0]) if items else None
        if first is None or not first.info.fast_read or first.status_return_level < 1:
            return []
        n = 1 + sum(4 + length for _, _, length in items)
        pkt = bytearray(HEADER_V2 + bytes((BROADCAST, n & 0xFF, n >> 8, 0x55)))
        for i, address, length in items:
            s = self._by_id.get(i)
            if s is None or not s.info.fast_read:
                continue
            err, data = s.read(address, length)
            slot = bytearray((s.status_bits(err), s.id))
            slot += data if data is not None else bytes(length)
            if self._reply_faults:
                slot_pkt, _ = self.faults.filter_reply(s.bus_id0, self.time_s, bytes(slot))
                if slot_pkt is None:
                    continue
                slot = bytearray(slot_pkt)
            pkt += slot
            crc = crc16(pkt)
            pkt += bytes((crc & 0xFF, crc >> 8))
        self.stats["replies"] += 1
        return [(bytes(pkt), first.return_delay_s, 0.0)]

    def _v2_sync_write(self, sid, params):
        if sid != BROADCAST or len(params) < 4:
            return []
        address, length = params[0] | (params[1] << 8), params[2] | (params[3] << 8)
        step = length + 1
        by_id = self._by_id
        for k in range(4, len(params) - length, step):
            s = by_id.get(params[k])
            if s is not None:
                s.write(address, params[k + 1:k + step])
        return []

    def _v2_bulk_write(self, sid, params):
        if sid != BROADCAST:
            return []
        k = 0
        while k + 5 <= len(params):
            length = params[k + 3] | (params[k + 4] << 8)
            s = self._by_id.get(params[k])
            data = params[k + 5:k + 5 + length]
            if s is not None and len(data) == length:
                s.write(params[k + 1] | (params[k + 2] << 8), data)
            k += 5 + length
        return []

    # ------------------------------------------------------------------ Protocol 1.0
    def _handlers_v1(self) -> dict:
        return {0x01: self._v1_ping, 0x02: self._v1_read, 0x03: self._v1_write,
                0x04: self._v1_reg_write, 0x05: self._do_action, 0x06: self._do_factory_reset,
                0x08: self._do_reboot, 0x83: self._v1_sync_write, 0x92: self._v1_bulk_read}

    def _v1_ping(self, sid, params):
        s = self._by_id.get(sid)
        return self._ping_reply(s) if s is not None and sid != BROADCAST else []

    def _v1_read(self, sid, params):
        if len(params) != 2:
            return self._malformed(sid)
        return self._do_read(sid, params[0], params[1])

    def _v1_write(self, sid, params):
        if len(params) < 2:
            return self._malformed(sid)
        return self._do_write(sid, params[0], params[1:])

    def _v1_reg_write(self, sid, params):
        if len(params) < 2:
            return self._malformed(sid)
        return self._do_reg_write(sid, params[0], params[1:])

    def _v1_sync_write(self, sid, params):
        if sid != BROADCAST or len(params) < 2:
            return []
        address, length = params[0], params[1]
        step = length + 1
        by_id = self._by_id
        for k in range(2, len(params) - length, step):
            s = by_id.get(params[k])
            if s is not None:
                s.write(address, params[k + 1:k + step])
        return []

    def _v1_bulk_read(self, sid, params):
        """MX (1.0) Bulk Read: 00, then (length, id, address) per servo; AX servos ignore it."""
        if sid != BROADCAST or len(params) < 4 or (len(params) - 1) % 3:
            return []
        self._fresh()
        out = []
        for k in range(1, len(params), 3):
            s = self._by_id.get(params[k + 1])
            if s is not None and s.info.bulk_read:
                err, data = s.read(params[k + 2], params[k])
                out += self._reply(s, err, data or b"", level=1)
        return out
