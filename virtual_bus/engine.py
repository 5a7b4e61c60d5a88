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

Framing, status packets and the per-protocol instructions live in
:mod:`.protocol2` and :mod:`.protocol1`; the instruction semantics the two
share (write, read, registered write, action, reboot, factory reset) live
here.  Hot path (a 12-servo sync read + sync write every millisecond):
see :class:`~.protocol2.Protocol2`; present-state registers are written for
all servos of a model with a few NumPy operations, and nothing is logged.
"""

from __future__ import annotations

import inspect

import numpy as np

from servoloop.firmware_bridge.control_table import baud_to_raw, get_table, raw_to_baud
from servoloop.virtual_bus.actuator import default_actuator, servo_model_for, with_overrides
from servoloop.virtual_bus.faults import FaultInjector, parse_faults
from servoloop.virtual_bus.memory import ERR, ServoBank, table_info
from servoloop.virtual_bus.plant import IndependentServosPlant
from servoloop.virtual_bus.profile import step_profile
from servoloop.virtual_bus.protocol1 import Protocol1
from servoloop.virtual_bus.protocol2 import Protocol2
from servoloop.virtual_bus.servo import VirtualServo
from servoloop.virtual_bus.spec import normalize_servos

__all__ = ["BusEngine", "REBOOT_SILENT_S"]

BROADCAST = 0xFE
REBOOT_SILENT_S = 0.4    # s a servo is silent after answering REBOOT (XC330, ROBOTIS-GIT/emanual #1698)


class BusEngine:
    """Emulated servos on one half-duplex bus.

    Parameters
    ----------
    servos : SPEC str, dict {id: model}, or sequence of (id, model) / objects with id, model
    plant : Plant, optional
        Physics; default :class:`IndependentServosPlant` with per-model actuator defaults.
    protocol : 1 or 2, optional
        Given, every servo's control table must be for it.  Default: each servo
        speaks its table's protocol, so Protocol 1.0 and 2.0 servos can share the
        bus (each answers only packets of its own protocol, as a real mixed
        chain of AX and X servos does).
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
    reboot_s : float
        Simulated seconds a servo stays silent after answering REBOOT while it
        boots (0: answers at once; ``servoloop virtual-bus`` uses
        :data:`REBOOT_SILENT_S`).
    imu : ImuEmulation, optional
        An IMU board on the bus (:mod:`.imu_device`), fed by the plant's floating base.
    """

    def __init__(self, servos, plant=None, protocol: int | None = None, baud: int | None = None,
                 faults=None, seed: int = 0, actuators: dict | None = None,
                 eeprom: dict | None = None, noise_ticks: float = 0.25, reboot_s: float = 0.0,
                 imu=None):
        specs = normalize_servos(servos)
        tables = [get_table(m) for _, m in specs]
        if protocol is not None:
            if protocol not in (1, 2):
                raise ValueError(f"protocol must be 1 or 2, not {protocol!r}")
            for (sid, _), t in zip(specs, tables, strict=True):
                if t.protocol != protocol:
                    raise ValueError(f"servo {sid}: {t.name}'s control table is for Protocol "
                                     f"{t.protocol}.0, the bus runs Protocol {protocol}.0")
        if not reboot_s >= 0.0:
            raise ValueError(f"reboot_s must be >= 0 s, got {reboot_s!r}")
        self.reboot_s = float(reboot_s)
        self._next_boot: float | None = None
        self.protocol: int | None = None        # the one protocol spoken; None while mixed
        self.mixed = False
        self._cur = 0                           # protocol of the packets being framed now
        self._dispatching = False
        self._switch_pending = False
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
        # motion profiles (.profile): rad/s, rad/s^2 (0: none); the trajectory (rad, rad/s)
        self.profile_v, self.profile_a, self.trajectory, self._traj_v = np.zeros((4, n))
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
            if hasattr(plant, "params") or t.datasheet is not None:   # else: duty = torque / stall
                bank.set_motor_line(k, plant.params[i].servo if hasattr(plant, "params") else servo_model_for(t.name))
            self.servos.append(servo)
        # non-servo devices (an IMU board): answer like servos, drive no joint
        self.devices: list = []
        if imu is not None:
            from servoloop.virtual_bus.imu_device import VirtualImu

            if imu.id in {sid for sid, _ in specs}:
                raise ValueError(f"IMU id {imu.id} is also a servo's id")
            self.devices.append(VirtualImu(imu, plant, baud))
        self._present_dirty = True
        self._rx = bytearray()
        self.stats = {"instructions": 0, "replies": 0, "bad_checksum": 0, "malformed": 0,
                      "watchdog_trips": 0}
        self._wd_servos = [s for s in self.servos if s.info.a_wd is not None]
        if isinstance(faults, str) or faults is None:
            faults = parse_faults(faults)
        self.faults = FaultInjector(faults, seed)
        self._protos = {1: Protocol1(self), 2: Protocol2(self)}
        self._proto_handlers = {p: v.handlers() for p, v in self._protos.items()}
        self._ids_changed()
        self.faults.bind(self)
        self.reply_faults = bool(self.faults.reply_faults)
        self.faults.on_time(self, 0.0)     # faults "at=0" hold from the first byte

    # ------------------------------------------------------------------ bus state
    def _ids_changed(self) -> None:
        """Rebuild id -> servo, per protocol, for the servos that can hear the host now."""
        now = self.time_s
        by_proto: dict[int, dict[int, list]] = {1: {}, 2: {}}
        spoken = set()
        for s in (*self.servos, *self.devices):
            p = s.protocol
            spoken.add(p)
            if s.vanished or s.unpowered or s.booting_until > now or not self._baud_ok(s):
                continue
            by_proto[p].setdefault(s.id, []).append(s)
        self._by_proto = {p: {i: v[0] for i, v in d.items()} for p, d in by_proto.items()}
        self._collide_proto = {p: {i: v for i, v in d.items() if len(v) > 1} for p, d in by_proto.items()}
        self._spoken = spoken
        if self._dispatching:
            # a servo switched protocol (Protocol Type) inside an instruction: it answers that
            # instruction in the protocol it came in; framing follows once it is done
            self.by_id = self._by_proto[self._cur]
            self._collide = self._collide_proto[self._cur]
            self._switch_pending = True
            return
        self._select()

    def _select(self) -> None:
        spoken = self._spoken
        self.mixed = len(spoken) > 1
        self._use(min(spoken) if self.mixed else next(iter(spoken)))
        if self.mixed:
            self.protocol = None

    def _use(self, p: int) -> None:
        """Make protocol ``p``'s servos, framing and status packets the current ones."""
        self.protocol = self._cur = p
        self.by_id = self._by_proto[p]
        self._collide = self._collide_proto[p]
        self._proto = self._protos[p]
        self.status_packet = self._proto.status
        self._handlers = self._proto_handlers[p]

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
        return sorted(self.by_id)

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
        goal = self.goal_rad
        if self.profile_v.any():
            step_profile(dt, goal, self.torque_on, self.mode, self.position, self.profile_v,
                         self.profile_a, self.trajectory, self._traj_v)
            goal = self.trajectory
        self.plant.step(dt, goal, self.torque_on, self.position, self.velocity, self.torque)
        self.time_s += dt
        self._present_dirty = True
        if self._wd_servos:
            for s in self._wd_servos:
                if s.watchdog_check(self.time_s):
                    self.stats["watchdog_trips"] += 1
        if self._next_boot is not None and self._next_boot <= self.time_s:
            self._booted()
        ev = self.faults.next_event_time
        if ev is not None and ev <= self.time_s:
            self.faults.on_time(self, self.time_s)

    def _refresh_present(self) -> None:
        noise = self.noise_ticks
        profile = (self.trajectory, self._traj_v) if self.profile_v.any() else None
        for bank in self.banks.values():
            ticks = self._rng.standard_normal(bank.n) * noise if noise > 0 else None
            bank.write_present(self.position, self.velocity, self.torque, self.time_s, ticks, profile)
        for d in self.devices:
            d.refresh(self.time_s)
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
        if not self.mixed:
            return self._proto.frame(rx)
        return self._frame_mixed(rx)

    def feed_at(self, data: bytes, baud: int | None, prev_baud: int | None = None) -> list:
        """:meth:`feed` bytes the host wrote at ``baud`` bits/s (its port's rate when they were read).

        ``prev_baud``: the rate of the chunk before, when the host has changed
        its rate since.  The pty cannot say when the host switched, and a host
        that writes and reopens its port at once (a baud change) does it within
        ~40 us, before the bytes can be read: then every packet in the chunk but
        the last is taken at the old rate, the last one at the new rate.  (A
        scanner switching rates sends one packet per chunk and is unaffected.)
        Replies to the packets taken at the old rate go out at the old rate, to
        a host that now listens at the new one: they are lost (line noise on
        a real bus), not delivered.
        """
        if prev_baud is None or prev_baud == baud or not data:
            self.set_client_baud(baud)
            return self.feed(data)
        rx = self._rx
        rx += data
        cut = rx.rfind(b"\xff\xff\xfd\x00" if self._proto is self._protos[2] and not self.mixed else b"\xff\xff")
        out = []
        if cut > 0:
            tail = bytes(rx[cut:])
            del rx[cut:]
            self.set_client_baud(prev_baud)
            out = self.feed(b"")
            self.stats["wrong_rate_replies"] = self.stats.get("wrong_rate_replies", 0) + sum(
                len(r) for _, r in out)
            out = [(n, []) for n, _ in out]
            rx += tail
        self.set_client_baud(baud)
        return out + self.feed(b"")

    def _frame_mixed(self, rx: bytearray) -> list:
        """Both protocols on one wire: FF FF FD 00 starts a Protocol 2.0 packet, any other FF FF a 1.0 one.

        Each packet goes to the servos of its protocol only; the others ignore it.
        """
        out = []
        try:
            while True:
                i = rx.find(b"\xff\xff")
                if i < 0:
                    del rx[:len(rx) - (1 if rx[-1:] == b"\xff" else 0)]
                    return out
                if i:
                    del rx[:i]
                if len(rx) < 4:
                    return out
                p = 2 if rx[2] == 0xFD and rx[3] == 0x00 else 1
                n = len(rx)
                self._use(p)
                out += self._proto.frame(rx, once=True)
                if len(rx) == n:             # incomplete: wait for the rest
                    return out
        finally:
            if self.mixed:
                self.protocol = None

    def pending_bytes(self) -> int:
        """Bytes buffered without a complete packet yet."""
        return len(self._rx)

    def drop_partial(self) -> list:
        """Give up on a stalled partial packet (a servo's inter-byte timeout): skip one byte, reframe."""
        if self._rx:
            del self._rx[:1]
            self.stats["malformed"] += 1
        return self.feed(b"")

    # ------------------------------------------------------------------ replies
    def dispatch(self, sid: int, inst: int, params: bytes) -> list:
        # every instruction packet a servo takes restarts its Bus Watchdog interval
        t = self.time_s
        if sid == BROADCAST:
            for s in self.by_id.values():
                s.last_rx_s = t
        else:
            s = self.by_id.get(sid)
            if s is not None:
                s.last_rx_s = t
        self._dispatching = True
        try:
            return self._dispatch(sid, inst, params)
        finally:
            self._dispatching = False
            if self._switch_pending:
                self._switch_pending = False
                self._select()

    def _dispatch(self, sid: int, inst: int, params: bytes) -> list:
        handler = self._handlers.get(inst)
        if sid in self._collide:
            return self._collision(sid, handler, params)
        if handler is not None:
            return handler(sid, params)
        servo = self.by_id.get(sid)
        if servo is None or sid == BROADCAST:
            return []
        return self.reply(servo, ERR.INSTRUCTION, level=2)

    def reply(self, servo: VirtualServo, err: int, data: bytes = b"", level: int = 2,
              reply_id: int | None = None) -> list:
        """One servo's status packet as a reply list (empty if its Status Return Level says no).

        ``level``: 0 ping (always answered), 1 read, 2 anything else.
        ``reply_id``: the ID in the status packet (default the servo's ID now).
        """
        if level and servo.status_return_level < level:
            return []
        pkt = self.status_packet(servo, err, data, reply_id)
        extra = 0.0
        if self.reply_faults and servo.bus_id0 is not None:    # None: a device, not a fault target
            pkt, extra = self.faults.filter_reply(servo.bus_id0, self.time_s, pkt)
            if pkt is None:
                return []
        self.stats["replies"] += 1
        return [(pkt, servo.return_delay_s, extra)]

    def _collision(self, sid: int, handler, params: bytes) -> list:
        """Servos sharing an id all obey, and answer at once: the wire ANDs their bits."""
        answers = []
        for s in self._collide[sid]:
            self.by_id[sid] = s
            answers.append(handler(sid, params) if handler is not None
                           else self.reply(s, ERR.INSTRUCTION, level=2))
        self.by_id[sid] = self._collide[sid][0]
        pkts = [a[0][0] for a in answers if a]
        if not pkts:
            return []
        out = bytearray(max(pkts, key=len))
        for p in pkts:
            for k, b in enumerate(p):
                out[k] &= b
        first = next(a for a in answers if a)[0]
        return [(bytes(out), first[1], first[2])]

    def targets(self, sid: int) -> list:
        if sid == BROADCAST:
            return [self.by_id[i] for i in sorted(self.by_id)]
        s = self.by_id.get(sid)
        return [s] if s is not None else []

    def fresh_present(self) -> None:
        if self._present_dirty:
            self._refresh_present()

    # ------------------------------------------------------------------ instructions (shared)
    def do_write(self, sid: int, address: int, data: bytes) -> list:
        out = []
        for s in self.targets(sid):
            err = s.write(address, data)
            if sid != BROADCAST:
                # a write to the ID register is answered from the ID it was addressed to,
                # as real servos do (DynamixelSDK and LeRobot reject any other ID)
                out += self.reply(s, err, reply_id=sid)
        return out

    def do_read(self, sid: int, address: int, length: int) -> list:
        s = self.by_id.get(sid)
        if s is None or sid == BROADCAST:
            return []
        self.fresh_present()
        err, data = s.read(address, length)
        return self.reply(s, err, data or b"", level=1)

    def do_reg_write(self, sid: int, address: int, data: bytes) -> list:
        out = []
        for s in self.targets(sid):
            s.registered = (address, bytes(data))
            if s.info.a_regd is not None:
                s.mem[s.info.a_regd] = 1
            if sid != BROADCAST:
                out += self.reply(s, ERR.OK)
        return out

    def do_action(self, sid: int, params: bytes) -> list:
        out = []
        for s in self.targets(sid):
            if s.registered is None:
                err = ERR.INSTRUCTION
            else:
                address, data = s.registered
                s.registered = None
                if s.info.a_regd is not None:
                    s.mem[s.info.a_regd] = 0
                err = s.write(address, data)
            if sid != BROADCAST:
                out += self.reply(s, err)
        return out

    def do_reboot(self, sid: int, params: bytes) -> list:
        out = []
        for s in self.targets(sid):
            if not s.info.reboot:
                if sid != BROADCAST:
                    out += self.reply(s, ERR.INSTRUCTION)
                continue
            if sid != BROADCAST:
                out += self.reply(s, ERR.OK)     # the status goes out before the restart
            s.boot()
            if self.reboot_s > 0:
                # then silent while it boots: ~0.4 s measured on an XC330 (ROBOTIS-GIT/emanual
                # issue #1698; the e-Manual's REBOOT page, protocol2/#reboot-0x08, is silent on it)
                s.booting_until = self.time_s + self.reboot_s
                if self._next_boot is None or s.booting_until < self._next_boot:
                    self._next_boot = s.booting_until
        self._ids_changed()
        return out

    def _booted(self) -> None:
        """Servos whose REBOOT is over listen again."""
        pending = [s.booting_until for s in self.servos if s.booting_until > self.time_s]
        self._next_boot = min(pending) if pending else None
        self._ids_changed()

    def do_factory_reset(self, sid: int, params: bytes) -> list:
        option = params[0] if params else 0xFF
        p2 = self._proto is self._protos[2]
        if p2 and sid == BROADCAST and option == 0xFF:
            return []                            # firmware >= 42 ignores a broadcast reset-all
        if p2 and option not in (0x01, 0x02, 0xFF):
            s = self.by_id.get(sid)
            return self.reply(s, ERR.RANGE) if s is not None and sid != BROADCAST else []
        out = []
        for s in self.targets(sid):
            if sid != BROADCAST:
                out += self.reply(s, ERR.OK)
            s.factory_reset(option)
        self._ids_changed()
        return out

    def malformed(self, sid: int) -> list:
        self.stats["malformed"] += 1
        s = self.by_id.get(sid)
        return self.reply(s, ERR.INSTRUCTION) if s is not None and sid != BROADCAST else []

    def ping_reply(self, s: VirtualServo) -> list:
        if s.protocol == 1:
            return self.reply(s, ERR.OK, level=0)
        mem, info = s.mem, s.info
        mn = info.reg["model_number"].address
        fw = info.reg["firmware_version"].address
        return self.reply(s, ERR.OK, bytes((mem[mn], mem[mn + 1], mem[fw])), level=0)

