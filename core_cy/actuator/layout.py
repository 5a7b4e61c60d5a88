"""Layout of the actuator parameter vector shared by the compiled kernel
(core_cy/actuator/_actuator.pyx), its wrapper (core_cy/actuator/simulate.py) and the NumPy
reference (core_cy/actuator/reference.py).

One float64 vector of ``NP`` entries describes one servo on one log.  Two
drives:

* ``MODE_PD`` (seed 000, the one servo law of core_cy/actuator/_law.pxd):
  motor torque ``gain*kp_fw*(goal - q) - kd*qd`` bounded by the motor line
  ``+-stall*vin/v_rated - emf*qd`` (``P_STALL``, ``P_EMF``, ``P_V_RATED``;
  ``P_STALL`` 0 or inf: none; ``P_V_RATED`` 0: ``vin`` is taken as rated), then
  clipped to ``+-limit`` (``P_LIMIT``, N*m).
* ``MODE_VOLTAGE`` (BAM): ``duty = clip(gain*kp_fw*(goal - q), +-limit)``,
  ``V = vin*duty`` (``vin`` per step: the recorded supply voltage or a
  constant), optional current-limit window, then the DC motor
  ``tau = kt*(V - ke*qd)/R`` (BAM: ``ke = kt``).

Friction is BAM's friction budget (models M1-M6 are special cases):
``f = fb + fs*s + |te*lfe - tm*lfm| + s*|te*lfes - tm*lfms| + quad`` and
``viscous*|qd|`` (plus ``P_OFF_DAMP*|qd|`` while torque is off: the
torque-off damping of :class:`core_cy.actuator.model.ServoModel`), applied
by clipping the stopping torque; ``s = exp(-|qd/vs|^alpha)``.  BAM's non-directional load term ``lfb*|te - tm|``
is ``lfe = lfm = lfb``.
"""

__all__ = [
    "MODE_PD", "MODE_VOLTAGE", "NP",
    "P_MODE", "P_KP_FW", "P_GAIN", "P_LIMIT", "P_KT", "P_R", "P_KD", "P_ARMATURE",
    "P_Q_OFFSET", "P_MAX_CURRENT", "P_FB", "P_FS", "P_LFM", "P_LFE", "P_LFMS", "P_LFES",
    "P_LFMQ", "P_LFEQ", "P_VS", "P_ALPHA", "P_VISC", "P_INTEGRATOR", "P_SUBSTEPS", "P_ASYM", "P_DUTY0", "P_DUTY0_ERR", "P_KE",
    "P_STALL", "P_EMF", "P_V_RATED", "P_OFF_DAMP", "NAMES",
]

MODE_PD = 0.0
MODE_VOLTAGE = 1.0

P_MODE = 0         # MODE_PD or MODE_VOLTAGE
P_KP_FW = 1        # firmware position gain (register units)
P_GAIN = 2         # PD: N*m/rad per kp_fw unit; voltage: duty per (rad * kp_fw unit)
P_LIMIT = 3        # PD: torque limit [N*m]; voltage: max duty (PWM limit / 885 on X)
P_KT = 4           # torque constant [N*m/A] = back-EMF constant [V*s/rad]
P_R = 5            # winding resistance [ohm]
P_KD = 6           # PD drive damping [N*m*s/rad] (only while torque is on)
P_ARMATURE = 7     # reflected rotor inertia [kg*m^2]
P_Q_OFFSET = 8     # offset of the gravity zero [rad]
P_MAX_CURRENT = 9  # firmware current limit [A] (inf: none)
P_FB = 10          # Coulomb friction [N*m]
P_FS = 11          # Stribeck extra static friction [N*m]
P_LFM = 12         # load friction, motor-torque side [-]
P_LFE = 13         # load friction, external-torque side [-]
P_LFMS = 14        # load friction, motor side, Stribeck part [-]
P_LFES = 15        # load friction, external side, Stribeck part [-]
P_LFMQ = 16        # quadratic load friction on |tm|^2 [1/(N*m)]
P_LFEQ = 17        # quadratic load friction on |te|^2 [1/(N*m)]
P_VS = 18          # Stribeck velocity [rad/s] (> 0)
P_ALPHA = 19       # Stribeck exponent [-]
P_VISC = 20        # viscous friction [N*m*s/rad]
P_INTEGRATOR = 21  # 0: q += qd*dt (BAM now); 1: q += qd*dt + a*dt^2/2 (BAM 2024)
P_SUBSTEPS = 22    # integration substeps per sample (>= 1; BAM uses 1 at 5 ms)
P_ASYM = 23        # drive asymmetry a: motor torque x (1 + a*sgn(tau)) [-]
P_DUTY0 = 24       # duty offset d0 (voltage drive): duty += d0*tanh(err/e0) [-]
P_DUTY0_ERR = 25   # e0 of the duty offset [rad] (> 0)
P_KE = 26          # back-EMF constant [V*s/rad] (= kt for an ideal motor and gearbox)
P_STALL = 27       # PD: stall torque at the rated voltage [N*m] (0 or inf: no motor line)
P_EMF = 28         # PD: back-EMF slope of the motor line [N*m*s/rad]
P_V_RATED = 29     # PD: voltage the stall torque belongs to [V] (0: vin is rated)
P_OFF_DAMP = 30    # damping with torque off [N*m*s/rad]
NP = 31

NAMES = (
    "mode", "kp_fw", "gain", "limit", "kt", "R", "kd", "armature", "q_offset",
    "max_current", "friction_base", "friction_stribeck", "load_friction_motor",
    "load_friction_external", "load_friction_motor_stribeck",
    "load_friction_external_stribeck", "load_friction_motor_quad",
    "load_friction_external_quad", "dtheta_stribeck", "alpha", "friction_viscous",
    "integrator", "substeps", "drive_asymmetry", "duty_offset", "duty_offset_err", "back_emf",
    "stall_torque", "motor_line_slope", "rated_voltage", "torque_off_damping",
)
