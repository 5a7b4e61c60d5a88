"""Control-table memory of the emulated servos, per model.

Memory is the control table as bytes (little-endian, exactly what a real
servo returns), initialised from the table's factory defaults.
:class:`TableInfo` precomputes what the emulator needs of one model (register
owners, EEPROM mask, factory image, addresses of the registers it watches);
servos of one model share one buffer (:class:`ServoBank`) so the
present-state registers of all of them are written with a few NumPy
operations per model.
"""

from __future__ import annotations

import numpy as np

from servoloop.firmware_bridge.units import encode_raw

__all__ = ["ERR", "TableInfo", "ServoBank", "series_of", "table_info", "decode", "decode_bytes", "put",
           "POSITION_MODES", "PLANT_MODE"]


class ERR:
    """Protocol-independent error kinds; :class:`TableInfo` maps them to the wire."""

    OK = 0
    RESULT_FAIL = 1
    INSTRUCTION = 2
    CRC = 3
    RANGE = 4
    LENGTH = 5
    LIMIT = 6
    ACCESS = 7
    ANGLE_LIMIT = 8


# Protocol 2.0 error numbers (bit 7 = alert) and Protocol 1.0 error bits.
_P2_CODES = {ERR.RESULT_FAIL: 0x01, ERR.INSTRUCTION: 0x02, ERR.CRC: 0x03, ERR.RANGE: 0x04,
             ERR.LENGTH: 0x05, ERR.LIMIT: 0x06, ERR.ACCESS: 0x07, ERR.ANGLE_LIMIT: 0x06}
_P1_CODES = {ERR.RESULT_FAIL: 0x08, ERR.INSTRUCTION: 0x40, ERR.CRC: 0x10, ERR.RANGE: 0x08,
             ERR.LENGTH: 0x08, ERR.LIMIT: 0x08, ERR.ACCESS: 0x08, ERR.ANGLE_LIMIT: 0x02}

# Firmware versions we report: X >= 45 has Fast Sync/Bulk Read (FIELD-NOTES a9).
_FIRMWARE = {"X": 48, "MX2": 46, "MX1": 41, "AX": 44}

# Registers whose writes change what the actuator does.
_ACTUATION = ("torque_enable", "goal_position", "operating_mode", "homing_offset", "drive_mode",
              "position_p_gain", "cw_compliance_slope", "ccw_compliance_slope", "torque_limit",
              "goal_current", "current_limit", "pwm_limit", "cw_angle_limit", "ccw_angle_limit",
              "goal_velocity", "goal_pwm", "velocity_limit", "moving_speed",
              "max_position_limit", "min_position_limit", "profile_velocity", "profile_acceleration")

# goal register -> limit register (|goal| <= limit), Protocol 2.0 Data Limit Error.
_LIMITS = {"goal_current": "current_limit", "goal_velocity": "velocity_limit", "goal_pwm": "pwm_limit"}

POSITION_MODES = (3, 4, 5)
# Operating Mode -> plant mode (0 position, 1 velocity, 2 torque); AX wheel mode is 1
PLANT_MODE = {0: 2, 1: 1, 3: 0, 4: 0, 5: 0, 16: 2}


def series_of(table) -> str:
    """'X', 'MX2', 'MX1' or 'AX' from a control table's name and protocol."""
    name = table.name.upper()
    if name.startswith("AX"):
        return "AX"
    if name.startswith("MX"):
        return "MX2" if table.protocol == 2 else "MX1"
    return "X"


class TableInfo:
    """Everything about one model the emulator precomputes from its control table."""

    def __init__(self, table):
        self.table = table
        self.name = table.name
        self.protocol = table.protocol
        self.series = series_of(table)
        self.size = table.size
        self.codes = _P2_CODES if table.protocol == 2 else _P1_CODES
        self.firmware = _FIRMWARE[self.series]
        self.fast_read = self.series == "X"
        self.reboot = self.series != "AX"
        self.bulk_read = self.series != "AX"
        regs = table.registers
        self.reg = regs
        self.owner: list = [None] * self.size
        self.eeprom_mask = bytearray(self.size)
        self.hot = bytearray(self.size)
        for r in regs.values():
            for a in range(r.address, r.address + r.size):
                self.owner[a] = r
                if r.eeprom:
                    self.eeprom_mask[a] = 1
                if r.name in _ACTUATION:
                    self.hot[a] = 1
        self.defaults = bytearray(self.size)
        for r in regs.values():
            value = r.default
            if r.name == "model_number":
                value = table.model_number
            elif r.name == "firmware_version":
                value = self.firmware
            if value is None:
                continue
            self.defaults[r.address:r.address + r.size] = encode_raw(r, int(value)).to_bytes(r.size, "little")
        self.eeprom_end = max((r.address + r.size for r in regs.values() if r.eeprom), default=0)

        def addr(name):
            return regs[name].address if name in regs else None

        self.a_id, self.a_baud = addr("id"), addr("baud_rate")
        self.a_rdt, self.a_srl = addr("return_delay_time"), addr("status_return_level")
        self.a_torque, self.a_hw = addr("torque_enable"), addr("hardware_error_status")
        self.a_shutdown, self.a_regd = addr("shutdown"), addr("registered_instruction")
        self.a_wd = addr("bus_watchdog")
        # AX / MX (1.0) Lock (47): once 1, only Torque Enable (24) to Torque Limit (34-35) take a
        # WRITE, and only a power cycle unlocks it (e-Manual AX-12A, "Lock":
        # https://emanual.robotis.com/docs/en/dxl/ax/ax-12a/#lock); a refused write answers the
        # Range Error bit, 0x08 (ROBOTIS DX-116 manual, example 19: Punch written while locked)
        self.a_lock = addr("lock") if table.protocol == 1 else None
        self.lock_span = ((regs["torque_enable"].address, regs["torque_limit"].address + regs["torque_limit"].size)
                          if self.a_lock is not None and "torque_limit" in regs else None)
        # goal registers the Bus Watchdog Error makes read-only: (address, end)
        self.goal_spans = tuple((regs[g].address, regs[g].address + regs[g].size)
                                for g in ("goal_pwm", "goal_current", "goal_velocity", "goal_position")
                                if g in regs)
        self.goal = regs["goal_position"]
        self.goal_signed = self.goal.encoding == "s"
        self.kt = table.torque_constant_nm_per_a or 1.0
        self.stall = table.stall_torque_nm or 1.0
        p = regs.get("position_p_gain")
        self.p_default = float(p.default) if p is not None and p.default else None
        self.limits = {g: regs[lim] for g, lim in _LIMITS.items() if g in regs and lim in regs}
        # present input voltage: 12 V where the supply range allows it (XL330: 5 V)
        lo, hi = regs["min_voltage_limit"].default, regs["max_voltage_limit"].default
        vscale = regs["min_voltage_limit"].scale
        lo_v, hi_v = lo * vscale, hi * vscale
        self.voltage_v = 12.0 if lo_v <= 12.0 <= hi_v else 5.0 if lo_v <= 5.0 <= hi_v else (lo_v + hi_v) / 2
        if table.datasheet is not None:      # the supply the servo model runs at (its datasheet voltage)
            self.voltage_v = table.datasheet.voltage_v
        self.temperature_c = 32.0
        # Indirect Data N reads/writes the byte whose address Indirect Address N holds
        # (e-Manual, X series control table, "Indirect Address, Indirect Data":
        # https://emanual.robotis.com/docs/en/dxl/x/xm430-w350/#indirect-address); generic over
        # any table with registers named indirect_address_N / indirect_data_N.
        self.indirect: dict[int, int] = {}       # data byte address -> address of its Indirect Address
        for r in regs.values():
            if r.name.startswith("indirect_data_"):
                a = regs.get("indirect_address_" + r.name[len("indirect_data_"):])
                if a is not None and a.size == 2 and r.size == 1:
                    self.indirect[r.address] = a.address
        self.ind_span = (min(self.indirect), max(self.indirect) + 1) if self.indirect else None
        # ticks per output-shaft turn (Present Position wraps by this in wheel mode, CLEAR removes
        # whole turns); the AX pot covers 300 of 360 degrees with its 1024 ticks
        g = self.goal
        self.ticks_per_turn = round(2.0 * np.pi / g.scale, 6) if g.scale else 0.0
        # Protocol Type (13) of X / MX(2.0) firmware: 1 = Protocol 1.0, 2 = Protocol 2.0
        self.a_protocol = addr("protocol_type")


_INFO_CACHE: dict[str, TableInfo] = {}


def table_info(table) -> TableInfo:
    """The (cached) :class:`TableInfo` of a control table."""
    info = _INFO_CACHE.get(table.name)
    if info is None or info.table is not table:
        info = _INFO_CACHE[table.name] = TableInfo(table)
    return info


def decode(reg, mem) -> int:
    a = reg.address
    wire = int.from_bytes(mem[a:a + reg.size], "little")
    if reg.encoding == "s":
        bits = 8 * reg.size
        return wire - (1 << bits) if wire >> (bits - 1) else wire
    if reg.encoding == "sm":
        return -(wire & 1023) if wire & 1024 else wire & 1023
    return wire


def put(reg, mem, raw: int) -> None:
    lo = reg.min_raw if reg.min_raw is not None else None
    if lo is not None and raw < lo:
        raw = lo
    if reg.max_raw is not None and raw > reg.max_raw:
        raw = reg.max_raw
    a = reg.address
    mem[a:a + reg.size] = encode_raw(reg, raw).to_bytes(reg.size, "little")


def decode_bytes(reg, buf) -> int:
    wire = int.from_bytes(buf, "little")
    if reg.encoding == "s":
        bits = 8 * reg.size
        return wire - (1 << bits) if wire >> (bits - 1) else wire
    if reg.encoding == "sm":
        return -(wire & 1023) if wire & 1024 else wire & 1023
    return wire


_VIEW_DTYPES = {(2, "u"): "<u2", (2, "sm"): "<u2", (2, "s"): "<i2", (4, "u"): "<u4", (4, "s"): "<i4"}


class ServoBank:
    """The servos of one model: one shared buffer, vectorised present-state writes.

    Parameters
    ----------
    info : TableInfo
    n : int
        Number of servos of this model.
    """

    def __init__(self, info: TableInfo, n: int):
        self.info = info
        self.n = n
        self.buf = bytearray(n * info.size)
        self.arr = np.frombuffer(self.buf, dtype=np.uint8).reshape(n, info.size)
        self.servos: list = []       # VirtualServo, in bank order
        self.index = np.zeros(n, dtype=np.intp)
        self.sign = np.ones(n)
        self.homing = np.zeros(n)
        self.wrap = np.zeros(n)          # ticks per turn where Present Position wraps (wheel mode), else 0
        self.wrap_any = False
        reg = info.reg
        self._views = {}
        for name in ("present_position", "present_velocity", "present_current", "present_load",
                     "present_pwm", "moving", "realtime_tick", "position_trajectory", "velocity_trajectory"):
            if name in reg:
                self._views[name] = (reg[name], self._view(reg[name]))
        self._goal_view = self._view(info.goal)
        mt = reg.get("moving_threshold")
        self.moving_threshold = (mt.default or 0) * mt.scale if mt is not None else 0.02
        # Present PWM (and Present Load where there is no current sensor: AX, MX(1.0), XL430)
        # is the PWM duty, not a torque (FIELD-NOTES a9): duty = (tau_m + k_e qd) / tau_stall
        # on each servo's motor line (stall torque at its supply [N*m], back-EMF slope [N*m*s/rad])
        self.line_stall = np.full(n, info.stall)
        self.line_emf = np.zeros(n)
        self._load_is_duty = "present_current" not in reg

    def memory(self, k: int) -> memoryview:
        s = self.info.size
        return memoryview(self.buf)[k * s:(k + 1) * s]

    def _view(self, r):
        col = self.arr[:, r.address:r.address + r.size]
        if r.size == 1:
            return col[:, 0]
        return col.view(_VIEW_DTYPES[(r.size, r.encoding)])[:, 0]

    def add(self, servo, k: int) -> None:
        self.servos.append(servo)
        self.index[k] = servo.index
        servo.bank, servo.bank_k = self, k
        self.sign[k], self.homing[k] = servo.sign, servo.homing
        self.wrap[k] = servo.wrap_ticks
        self.wrap_any = bool(self.wrap.any())

    def set_motor_line(self, k: int, servo) -> None:
        """Motor line of servo ``k`` from its ``core_cy.actuator.ServoModel`` (PWM duty readings)."""
        self.line_stall[k] = servo.stall_torque_at_supply_nm
        self.line_emf[k] = servo.back_emf_nm_s_per_rad

    def write_present(self, position, velocity, torque, time_s: float, noise_ticks,
                      profile=None) -> None:
        """Write present position/velocity/current|load/pwm/moving/tick of every servo.

        Parameters
        ----------
        position, velocity, torque : (n_bus,) float64
            Joint state of the whole bus (rad, rad/s, N*m), indexed by ``self.index``.
        time_s : float
            Simulated time, s (Realtime Tick).
        noise_ticks : (n,) float64 or None
            Measurement noise added to the position, in encoder ticks.
        profile : ((n_bus,), (n_bus,)) float64 or None
            Position (rad) and velocity (rad/s) of the servos' profiles (Position / Velocity
            Trajectory); None: no servo has one, the trajectory is the goal.
        """
        idx, sign = self.index, self.sign
        info = self.info
        for name, (r, view) in self._views.items():
            if name == "present_position":
                x = sign * position[idx] / r.scale + self.homing
                if noise_ticks is not None:
                    x = x + noise_ticks
                raw = np.rint(x) + r.zero_raw
                if self.wrap_any:
                    # wheel mode: the reading wraps within one turn (MX(1.0), AX: e-Manual
                    # "Present Position"; multi-turn only in the MX's multi-turn mode)
                    w = self.wrap
                    raw = np.where(w > 0, np.floor(np.mod(raw, np.where(w > 0, w, 1.0))), raw)
                if r.encoding == "u" and info.goal.max_raw is not None:
                    # AX: the pot reads 0..1023 and no further
                    raw = np.minimum(np.maximum(raw, info.goal.min_raw or 0), info.goal.max_raw)
            elif name == "present_velocity":
                raw = np.rint(sign * velocity[idx] / r.scale)
            elif name == "present_current":
                # zero_raw: MX (1.0) reports offset binary, 2048 = 0 A (e-Manual MX-64 address
                # 68: I = 4.5 mA x (Present Current - 2048)); X and MX (2.0) two's complement
                raw = np.rint(sign * torque[idx] / (info.kt * r.scale)) + r.zero_raw
            elif name == "present_pwm" or (name == "present_load" and self._load_is_duty):
                duty = (torque[idx] + self.line_emf * velocity[idx]) / self.line_stall
                raw = np.rint(np.minimum(np.maximum(sign * duty, -1.0), 1.0) / r.scale)
            elif name == "present_load":
                raw = np.rint(np.minimum(np.maximum(sign * torque[idx] / info.stall, -1.0), 1.0) / r.scale)
            elif name == "moving":
                view[:] = np.abs(velocity[idx]) > self.moving_threshold
                continue
            elif name == "realtime_tick":
                view[:] = int(time_s * 1000.0) % 32768
                continue
            elif name == "velocity_trajectory":
                raw = np.zeros(self.n) if profile is None else np.rint(sign * profile[1][idx] / r.scale)
            elif profile is None:  # position_trajectory without a profile: the goal
                view[:] = self._goal_view
                continue
            else:
                raw = np.rint(sign * profile[0][idx] / r.scale + self.homing) + r.zero_raw
            self._store(r, view, raw)

    @staticmethod
    def _store(r, view, raw) -> None:
        bits = 8 * r.size
        if r.encoding == "sm":
            raw = np.clip(raw, -1023, 1023).astype(np.int64)
            view[:] = np.where(raw < 0, (-raw) | 1024, raw)
        elif r.encoding == "s":
            view[:] = np.minimum(np.maximum(raw, -(1 << (bits - 1))), (1 << (bits - 1)) - 1)
        else:
            lo = r.min_raw if r.min_raw is not None else 0
            hi = r.max_raw if r.max_raw is not None else (1 << bits) - 1
            view[:] = np.minimum(np.maximum(raw, lo), hi)
