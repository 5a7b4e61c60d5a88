"""One emulated servo: its control-table memory and how it reacts to reads and writes.

The memory layout per model is :mod:`.memory`.  Each servo also keeps an
EEPROM image that survives REBOOT and power cycles; only FACTORY RESET
restores it.

Behaviour copied from real servos (FIELD-NOTES a5-a7, the e-Manual):
EEPROM writes refused while torque is on (Access Error; Protocol 1.0: Range
Error bit), read-only and undefined addresses refused, partial writes of a
multi-byte register refused (Protocol 2.0 Data Length Error), values outside
the register range refused (Data Range Error), goals outside their limit
registers refused (Data Limit Error; AX: Angle Limit Error bit), the Bus
Watchdog (X, MX 2.0; see :meth:`VirtualServo.watchdog_check`), hardware
errors latch, set the alert bit and turn torque off when the Shutdown mask
says so, the AX / MX (1.0) Lock (once set, only Torque Enable to Torque Limit
take a write until a power cycle), the motion profile (:mod:`.profile`), REBOOT / power cycle bring RAM back to defaults with torque off and
the goal at the present position.
"""

from __future__ import annotations

import numpy as np

from servoloop.firmware_bridge.units import encode_raw
from servoloop.virtual_bus.memory import (
    _P1_CODES,
    ERR,
    PLANT_MODE,
    POSITION_MODES,
    TableInfo,
    decode,
    decode_bytes,
    put,
)
from servoloop.virtual_bus.profile import profile_registers

__all__ = ["VirtualServo", "ERR", "POSITION_MODES"]


class VirtualServo:
    """One servo on the virtual bus.

    Parameters
    ----------
    info : TableInfo
    mem : memoryview
        This servo's slice of its :class:`ServoBank` buffer.
    index : int
        Joint index in the plant arrays.
    bus : object
        The owning engine: arrays ``goal_rad``, ``torque_on``, ``kp_scale``,
        ``torque_limit``, ``position`` and callbacks ``_ids_changed()``,
        ``_actuation_changed()``.
    servo_id : int
        Bus id written into the EEPROM image.
    baud_raw : int or None
        Baud Rate register value written into the EEPROM image.
    eeprom_overrides : dict name -> raw, optional
        Other EEPROM values of the configured robot (e.g. return_delay_time).
    """

    def __init__(self, info: TableInfo, mem: memoryview, index: int, bus, servo_id: int,
                 baud_raw: int | None = None, eeprom_overrides: dict | None = None):
        self.info = info
        self.mem = mem
        self.index = index
        self.bus = bus
        self.eeprom = bytearray(info.defaults)
        self._factory_id = 1
        self.eeprom[info.a_id] = servo_id
        if baud_raw is not None:
            self.eeprom[info.a_baud] = baud_raw
        for name, raw in (eeprom_overrides or {}).items():
            r = info.reg[name]
            if not r.eeprom:
                raise ValueError(f"{info.name}: {name} is not an EEPROM register")
            self.eeprom[r.address:r.address + r.size] = encode_raw(r, int(raw)).to_bytes(r.size, "little")
        self.bank = None              # set by ServoBank.add
        self.bank_k = 0
        self.bus_id0 = servo_id       # the id faults and plant order refer to
        self.vanished = False         # fault: cable cut, silent
        self.unpowered = False        # fault: power cycle in progress, silent
        self.hw_error_p1 = 0          # Protocol 1.0 servos report hardware errors only in status packets
        self.registered: tuple[int, bytes] | None = None
        self.sign = 1.0
        self.homing = 0.0
        self.position_limits: tuple[int, int] | None = None
        self.angle_limits: tuple[int, int] | None = None
        self.mode = 3
        self.turn_offset = 0.0        # ticks CLEAR took off Present Position (whole turns)
        self.wrap_ticks = 0.0         # Present Position wraps by this many ticks (wheel mode), 0: never
        self.booting_until = -1.0     # simulated time a REBOOT ends; silent until then
        self._cmd_reg = None          # the goal register that is the live command (non-position modes)
        self._cmd_scale = 0.0
        self.last_rx_s = 0.0          # simulated time of the last instruction packet it took
        self.boot()

    # ------------------------------------------------------------------ identity
    @property
    def id(self) -> int:
        """Current bus id (from memory)."""
        return self.mem[self.info.a_id]

    @property
    def baud_raw(self) -> int:
        return self.mem[self.info.a_baud]

    @property
    def protocol(self) -> int:
        """Protocol the servo speaks now: its Protocol Type register (X, MX(2.0)), else its table's."""
        a = self.info.a_protocol
        return self.mem[a] if a is not None and self.mem[a] in (1, 2) else self.info.protocol

    @property
    def status_return_level(self) -> int:
        return self.mem[self.info.a_srl]

    @property
    def return_delay_s(self) -> float:
        """Return Delay Time, s (2 us per unit)."""
        return self.mem[self.info.a_rdt] * 2e-6

    @property
    def torque_enabled(self) -> bool:
        return bool(self.mem[self.info.a_torque])

    @property
    def hardware_error(self) -> int:
        """Latched hardware error bits (X: Hardware Error Status; 1.0: status error bits)."""
        a = self.info.a_hw
        return self.mem[a] if a is not None else self.hw_error_p1

    def status_bits(self, err: int) -> int:
        """Error byte of a status packet for the error kind ``err``."""
        info = self.info
        if info.a_protocol is not None and self.protocol != info.protocol:
            # an X servo switched to Protocol 1.0 reports Protocol 1.0 error bits
            # (voltage, overheating and overload share their bit numbers in both protocols)
            hw = self.mem[info.a_hw] & 0x25 if info.a_hw is not None else 0
            return (_P1_CODES[err] if err else 0) | hw
        code = info.codes[err] if err else 0
        if info.protocol == 2:
            if info.a_hw is not None and self.mem[info.a_hw]:
                code |= 0x80
            return code
        return code | self.hw_error_p1

    # ------------------------------------------------------------------ lifecycle
    def boot(self) -> None:
        """Power-on / REBOOT: RAM to defaults over the EEPROM image; torque off; goal := present."""
        info, mem = self.info, self.mem
        mem[:] = info.defaults
        e = info.eeprom_end
        mem[:e] = self.eeprom[:e]
        self.hw_error_p1 = 0
        self.registered = None
        reg = info.reg
        # real servos start with Torque Limit = Max Torque (AX/MX 1.0), Goal Current = Current
        # Limit and Goal PWM = PWM Limit (X), so a servo that was never configured can move
        for ram, eeprom in (("torque_limit", "max_torque"), ("goal_current", "current_limit"),
                            ("goal_pwm", "pwm_limit")):
            if ram in reg and eeprom in reg:
                put(reg[ram], mem, decode(reg[eeprom], mem))
        if "present_input_voltage" in reg:
            r = reg["present_input_voltage"]
            put(r, mem, int(round(info.voltage_v / r.scale)))
        if "present_temperature" in reg:
            r = reg["present_temperature"]
            put(r, mem, int(round(info.temperature_c / r.scale)))
        self._refresh_static()
        # goal := present position, so a fresh servo holds where it is when torque comes on
        q = float(self.bus.position[self.index])
        goal = info.goal
        raw = int(round(self.sign * q / goal.scale + goal.zero_raw + self.homing))
        put(goal, mem, raw)
        if "startup_configuration" in reg and mem[reg["startup_configuration"].address] & 1:
            mem[info.a_torque] = 1            # X "Startup Torque On": boots holding its position
        self.refresh_actuation()

    def factory_reset(self, option: int) -> None:
        """FACTORY RESET: 0xFF all, 0x01 all but the id, 0x02 all but id and baud."""
        info = self.info
        keep_id, keep_baud = self.eeprom[info.a_id], self.eeprom[info.a_baud]
        self.eeprom[:] = info.defaults
        if option in (0x01, 0x02) and info.protocol == 2:
            self.eeprom[info.a_id] = keep_id
        if option == 0x02 and info.protocol == 2:
            self.eeprom[info.a_baud] = keep_baud
        self.boot()

    def clear_multi_turn(self) -> None:
        """CLEAR: take whole turns off Present Position so it reads 0-4095 again.

        Goal Position moves by the same turns, so a servo holding its position
        keeps holding it (rather than turning back by the turns cleared).
        """
        info = self.info
        turn = info.ticks_per_turn
        r = info.reg["present_position"]
        ticks = self.sign * float(self.bus.position[self.index]) / r.scale + self.homing + r.zero_raw
        k = int(np.floor(round(ticks) / turn)) if turn else 0
        if not k:
            return
        shift = int(round(k * turn))
        self.turn_offset -= shift
        goal = info.goal
        put(goal, self.mem, decode(goal, self.mem) - shift)
        self.refresh_actuation()

    def inject_hardware_error(self, bits: int) -> None:
        """Latch hardware error ``bits``; torque off when they meet the Shutdown mask."""
        info, mem = self.info, self.mem
        if info.a_hw is not None:
            mem[info.a_hw] |= bits
        else:
            self.hw_error_p1 |= bits
        if info.a_shutdown is None or mem[info.a_shutdown] & bits:
            mem[info.a_torque] = 0
            self.refresh_actuation()

    # ------------------------------------------------------------------ bus watchdog
    @property
    def watchdog_tripped(self) -> bool:
        """Bus Watchdog(98) reads -1: the watchdog fired; goals are read-only until it is 0."""
        a = self.info.a_wd
        return a is not None and self.mem[a] == 0xFF

    def watchdog_check(self, now_s: float) -> bool:
        """Fire the Bus Watchdog if armed, torque on and silent too long; True when it fired.

        The e-Manual (X series, Bus Watchdog(98), unit 20 ms): with Torque
        Enable 1, if the interval between instruction packets exceeds the
        set value the servo stops, Bus Watchdog becomes -1 (Bus Watchdog
        Error) and the goal registers (Goal PWM, Goal Current, Goal
        Velocity, Goal Position) become read-only: writing them returns a
        Range Error until 0 is written to Bus Watchdog.  "Stops" is
        emulated as: position modes hold the present position, other
        modes get a zero command; torque stays on.
        """
        info, mem = self.info, self.mem
        a = info.a_wd
        if a is None:
            return False
        v = mem[a]
        if v == 0 or v >= 0x80 or not mem[info.a_torque]:
            return False
        if now_s - self.last_rx_s <= v * 0.02:
            return False
        mem[a] = 0xFF
        reg = info.reg
        if self.mode in POSITION_MODES:
            q = float(self.bus.position[self.index])
            goal = info.goal
            put(goal, mem, int(round(self.sign * q / goal.scale + goal.zero_raw + self.homing)))
        else:
            for name in ("goal_velocity", "goal_current", "goal_pwm"):
                if name in reg and name != "goal_pwm":
                    put(reg[name], mem, 0)
        self.refresh_actuation()
        return True

    def _goal_locked(self, address: int, end: int) -> bool:
        return self.watchdog_tripped and any(a < end and address < b for a, b in self.info.goal_spans)

    # ------------------------------------------------------------------ access
    def read(self, address: int, length: int):
        """(error kind, bytes or None) for a READ of ``length`` bytes at ``address``."""
        info = self.info
        if address + length > info.size or length <= 0:
            return ERR.ACCESS, None
        span = info.ind_span
        if span is not None and address < span[1] and address + length > span[0]:
            return ERR.OK, self._read_indirect(address, length)
        return ERR.OK, bytes(self.mem[address:address + length])

    def _read_indirect(self, address: int, length: int) -> bytes:
        """Bytes at ``address``; each Indirect Data byte is the byte its Indirect Address names."""
        mem, ind, size = self.mem, self.info.indirect, self.info.size
        out = bytearray(mem[address:address + length])
        for k in range(length):
            ia = ind.get(address + k)
            if ia is not None:
                target = mem[ia] | (mem[ia + 1] << 8)
                out[k] = mem[target] if target < size else 0
        return bytes(out)

    def _write_indirect(self, address: int, data) -> int:
        """A WRITE that covers Indirect Data: each byte goes to the address its Indirect Address names.

        Consecutive targets are written as one run (so Goal Position mapped to four
        Indirect Data bytes is written whole); runs are checked before any is written.
        """
        ind, mem = self.info.indirect, self.mem
        runs: list[list] = []
        for k, b in enumerate(data):
            ia = ind.get(address + k)
            target = (mem[ia] | (mem[ia + 1] << 8)) if ia is not None else address + k
            if target in ind:
                return ERR.ACCESS            # an Indirect Data byte cannot point at Indirect Data
            if runs and runs[-1][0] + len(runs[-1][1]) == target:
                runs[-1][1].append(b)
            else:
                runs.append([target, bytearray((b,))])
        saved, saved_eeprom = bytes(mem), bytes(self.eeprom)
        for target, chunk in runs:
            err = self.write(target, chunk)
            if err:
                mem[:] = saved           # all or nothing, as a direct WRITE
                self.eeprom[:] = saved_eeprom
                self.refresh_actuation()
                return err
        return ERR.OK

    def write(self, address: int, data) -> int:
        """Apply a WRITE; returns the error kind (0 = written).  All-or-nothing."""
        info = self.info
        n = len(data)
        goal = info.goal
        if info.a_wd is not None and self._goal_locked(address, address + n):
            return ERR.RANGE
        if info.lock_span is not None and self.mem[info.a_lock] and not (  # Lock: Range Error bit
                info.lock_span[0] <= address and address + n <= info.lock_span[1]):
            return ERR.ACCESS
        if address == goal.address and n == goal.size:
            return self._write_goal(data)
        cmd = self._cmd_reg
        if cmd is not None and address == cmd.address and n == cmd.size:
            return self._write_command(data)
        end = address + n
        if n == 0 or end > info.size:
            return ERR.ACCESS if n else ERR.LENGTH
        span = info.ind_span
        if span is not None and address < span[1] and end > span[0]:
            return self._write_indirect(address, data)
        owner = info.owner
        mem = self.mem
        torque_on = mem[info.a_torque]
        a = address
        p1 = info.protocol == 1
        while a < end:
            r = owner[a]
            if r is None or r.access != "RW":
                return ERR.ACCESS
            if r.eeprom and torque_on:
                return ERR.ACCESS
            if r.address != a or a + r.size > end:
                if not p1:
                    return ERR.LENGTH
                # Protocol 1.0 accepts a partial write; check the value it makes
            err = self._check_value(r, address, data)
            if err:
                return err
            a = r.address + r.size
        old_id, old_baud = mem[info.a_id], mem[info.a_baud]
        old_proto = mem[info.a_protocol] if info.a_protocol is not None else 0
        mem[address:end] = data
        if any(info.eeprom_mask[address:end]):
            for k in range(address, end):
                if info.eeprom_mask[k]:
                    self.eeprom[k] = mem[k]
        if (mem[info.a_id] != old_id or mem[info.a_baud] != old_baud
                or (info.a_protocol is not None and mem[info.a_protocol] != old_proto)):
            # a new id, a servo that moved to another baud rate, or (Protocol Type, e-Manual
            # https://emanual.robotis.com/docs/en/dxl/x/xm430-w350/#protocol-type13) to the
            # other protocol: it answers this WRITE as it was, then listens as it is now
            self.bus._ids_changed()
        if torque_on == 0 and mem[info.a_torque] and self.hardware_error and info.a_hw is not None:
            # an X servo in shutdown keeps torque off until it is rebooted
            if info.a_shutdown is None or mem[info.a_shutdown] & mem[info.a_hw]:
                mem[info.a_torque] = 0
        if any(info.hot[address:end]):
            self.refresh_actuation()
        return ERR.OK

    def _check_value(self, r, address: int, data) -> int:
        """Range / limit check of register ``r`` with ``data`` (written at ``address``) applied."""
        start, stop = r.address, r.address + r.size
        buf = bytearray(self.mem[start:stop])
        lo, hi = max(start, address), min(stop, address + len(data))
        buf[lo - start:hi - start] = data[lo - address:hi - address]
        raw = decode_bytes(r, buf)
        if self._out_of_range(r, raw, buf):
            return ERR.RANGE
        info = self.info
        if r.name in info.limits and abs(raw) > decode(info.limits[r.name], self.mem):
            return ERR.LIMIT
        if r is info.goal:
            return self._check_goal_limits(raw)
        return ERR.OK

    def _out_of_range(self, r, raw: int, buf) -> bool:
        """Whether ``raw`` (wire bytes ``buf``) lies outside register ``r``'s range.

        Sign-magnitude registers (AX / MX(1.0) speed, load) give their range as
        wire values: Moving Speed 0-2047 where bit 10 is the direction, which only
        wheel mode uses (e-Manual AX-12A / MX-28 "Moving Speed": 0-1023 in joint
        mode, 0-2047 in wheel mode, 1024-2047 turning CW;
        https://emanual.robotis.com/docs/en/dxl/ax/ax-12a/#moving-speed).
        """
        if r.encoding == "sm":
            wire = int.from_bytes(buf, "little")
            hi = r.max_raw
            if r.name == "moving_speed" and self.mode != 1 and hi is not None:
                hi = min(hi, 1023)
            return (r.min_raw is not None and wire < r.min_raw) or (hi is not None and wire > hi)
        return (r.min_raw is not None and raw < r.min_raw) or (r.max_raw is not None and raw > r.max_raw)

    def _check_goal_limits(self, raw: int) -> int:
        if self.position_limits is not None:
            lo, hi = self.position_limits
            if raw < lo or raw > hi:
                return ERR.LIMIT
        if self.angle_limits is not None:
            lo, hi = self.angle_limits
            if raw < lo or raw > hi:
                return ERR.ANGLE_LIMIT
        return ERR.OK

    def _write_goal(self, data) -> int:
        """The hot path: a whole Goal Position (sync write of every tick)."""
        goal = self.info.goal
        raw = int.from_bytes(data, "little", signed=self.info.goal_signed)
        if (goal.min_raw is not None and raw < goal.min_raw) or (goal.max_raw is not None and raw > goal.max_raw):
            return ERR.RANGE
        err = self._check_goal_limits(raw)
        if err:
            return err
        a = goal.address
        self.mem[a:a + goal.size] = data
        self.bus.goal_rad[self.index] = self.sign * ((raw - goal.zero_raw - self.homing) * goal.scale)
        return ERR.OK

    def _write_command(self, data) -> int:
        """The hot path in current / velocity / PWM mode: the live goal register."""
        r = self._cmd_reg
        raw = decode_bytes(r, data)
        if self._out_of_range(r, raw, data):
            return ERR.RANGE
        lim = self.info.limits.get(r.name)
        if lim is not None and abs(raw) > decode(lim, self.mem):
            return ERR.LIMIT
        a = r.address
        self.mem[a:a + r.size] = data
        self.bus.command[self.index] = raw * self._cmd_scale
        self.bus._actuation_changed()
        return ERR.OK

    # ------------------------------------------------------------------ actuation
    def _refresh_static(self) -> None:
        """Mode, direction, homing offset and goal limits from the registers."""
        info, mem, reg = self.info, self.mem, self.info.reg
        self.mode = mem[reg["operating_mode"].address] if "operating_mode" in reg else 3
        self.sign = -1.0 if ("drive_mode" in reg and mem[reg["drive_mode"].address] & 1) else 1.0
        self.homing = float(decode(reg["homing_offset"], mem)) if "homing_offset" in reg else 0.0
        self.homing += self.turn_offset
        self.position_limits = None
        self.angle_limits = None
        wrap = 0.0
        if info.protocol == 2 and self.mode == 3 and "max_position_limit" in reg:
            self.position_limits = (decode(reg["min_position_limit"], mem),
                                    decode(reg["max_position_limit"], mem))
        if "cw_angle_limit" in reg:
            cw, ccw = decode(reg["cw_angle_limit"], mem), decode(reg["ccw_angle_limit"], mem)
            top = reg["ccw_angle_limit"].max_raw
            if cw and cw == ccw == top and info.series == "MX1":
                # both limits 4095: MX multi-turn mode, goal -28672..28672 (e-Manual MX-28
                # "Multi-turn": https://emanual.robotis.com/docs/en/dxl/mx/mx-28/#multi-turn)
                self.mode = 4
            elif cw or ccw:                      # both 0 = wheel mode, no position control
                self.angle_limits = (cw, ccw)
                self.mode = 3
            else:
                self.mode = 1
                # wheel mode: Present Position stays within one turn (MX: 0-4095)
                wrap = info.ticks_per_turn
        self.wrap_ticks = wrap
        bank = self.bank
        if bank is not None and bank.wrap[self.bank_k] != wrap:
            bank.wrap[self.bank_k] = wrap
            bank.wrap_any = bool(bank.wrap.any())

    def _command(self, plant_mode: int | None) -> float:
        """Goal velocity (rad/s) or goal torque (N*m) in the motor frame, from the goal registers.

        Also records which register is the live command (for the write fast path).
        """
        reg, mem, info = self.info.reg, self.mem, self.info
        r, k = None, 0.0
        if plant_mode == 1:
            r = reg.get("goal_velocity") or reg.get("moving_speed")
            k = 1.0
        elif plant_mode == 2 and self.mode == 0 and "goal_current" in reg:
            r, k = reg["goal_current"], info.kt
        elif plant_mode == 2 and "goal_pwm" in reg:
            r, k = reg["goal_pwm"], info.stall
        self._cmd_reg = r
        if r is None:
            return 0.0
        self._cmd_scale = self.sign * r.scale * k
        return decode(r, mem) * self._cmd_scale

    def refresh_actuation(self) -> None:
        """Push goal, torque, gain scale and torque limit of this servo to the bus arrays."""
        self._refresh_static()
        info, mem, reg = self.info, self.mem, self.info.reg
        bus, i = self.bus, self.index
        goal = info.goal
        bus.goal_rad[i] = self.sign * ((decode(goal, mem) - goal.zero_raw - self.homing) * goal.scale)
        plant_mode = PLANT_MODE.get(self.mode)
        bus.torque_on[i] = bool(mem[info.a_torque]) and plant_mode is not None
        bus.mode[i] = plant_mode or 0
        bus.command[i] = self._command(plant_mode)
        bus.profile_v[i], bus.profile_a[i] = profile_registers(info, mem, plant_mode)
        scale = 1.0
        if info.p_default:
            scale = decode(reg["position_p_gain"], mem) / info.p_default
        elif "cw_compliance_slope" in reg:
            slope = 0.5 * (mem[reg["cw_compliance_slope"].address] + mem[reg["ccw_compliance_slope"].address])
            scale = 32.0 / max(slope, 1.0)      # AX: a larger slope is a softer servo
        limit = info.stall
        if "torque_limit" in reg:
            r = reg["torque_limit"]
            limit *= min(1.0, decode(r, mem) * r.scale)
        elif "pwm_limit" in reg:
            r = reg["pwm_limit"]
            limit *= min(1.0, decode(r, mem) * r.scale)
        if self.mode in (0, 5) and "current_limit" in reg:
            r = reg["current_limit"]
            limit = min(limit, decode(r, mem) * r.scale * info.kt)
        if self.mode == 5 and "goal_current" in reg:
            r = reg["goal_current"]
            limit = min(limit, abs(decode(r, mem)) * r.scale * info.kt)
        bank = self.bank
        if bank is not None:
            bank.sign[self.bank_k], bank.homing[self.bank_k] = self.sign, self.homing
        bus.kp_scale[i] = scale
        bus.torque_limit[i] = limit
        bus._actuation_changed()
        bus._present_dirty = True         # direction and homing offset change what is reported
