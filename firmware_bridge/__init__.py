"""Bytes on the wire: Dynamixel Protocol 1.0/2.0, control tables as data, raw<->SI, the bus.

Modules (import what you need; nothing heavy is imported here):

- ``control_table`` -- tables/*.yaml per model (``get_table``, ``Register``)
- ``units`` -- raw <-> SI conversions (``to_si``/``from_si``)
- ``protocol`` -- pure-Python packet reference; ``_codec`` -- the compiled codec
- ``bus`` -- ``Bus``, ``ServoSpec``, ``SyncReader``/``SyncWriter`` (hot path in ``_busio``)
- ``errors`` -- the exception hierarchy; ``status_bits`` -- error-bit names
- ``latency`` -- the FTDI latency timer (sysfs); ``sdk`` -- the only dynamixel_sdk user
- ``scan`` -- ``servoloop scan``; ``virtual_bus`` -- the emulated servo bus
"""

__all__ = ["bus", "control_table", "units", "protocol", "errors", "status_bits", "latency",
           "sdk", "scan", "virtual_bus"]
