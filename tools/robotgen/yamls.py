"""Write robots/NAME/NAME.yaml from the URDFs (ids in Pinocchio joint order)."""
import sys
from pathlib import Path

import pinocchio as pin
import yaml

ROOT = Path(sys.argv[1])
MARGIN = 0.1  # rad kept between the daemon's soft limit and the URDF hard limit

SPEC = {
    "bench": dict(floating=False, baud=4_000_000, protocol=2, rate=1000, model=lambda j: "XL330-M288",
                  pose=None, what="one XL330-M288-T on the BAM pendulum bench"),
    "arm": dict(floating=False, baud=4_000_000, protocol=2, rate=1000,
                model=lambda j: "XM430-W350" if j in ("base_yaw", "shoulder_pitch", "elbow_pitch") else "XL430-W250",
                pose=None, what="6-DoF arm, XM430-W350 x3 + XL430-W250 x3"),
    "quadruped": dict(floating=True, baud=4_000_000, protocol=2, rate=1000, model=lambda j: "XM430-W350",
                      pose={f"{l}_{j}": v for l in ("lf", "lh", "rf", "rh")
                            for j, v in (("hip_abad", 0.0), ("hip_flex", 0.6), ("knee", -1.2))},
                      what="12-DoF quadruped on XM430-W350"),
    "humanoid": dict(floating=True, baud=1_000_000, protocol=1, rate=200, model=lambda j: "AX-18A",
                     pose=None, what="18-DoF Bioloid-GP-class humanoid on AX-18A (Protocol 1.0)"),
}
hp = {}
for s in "lr":
    hp.update({f"{s}_hip_yaw": 0.0, f"{s}_hip_roll": 0.0, f"{s}_hip_pitch": -0.4, f"{s}_knee": 0.8,
               f"{s}_ankle_pitch": -0.4, f"{s}_ankle_roll": 0.0, f"{s}_shoulder_pitch": 0.0,
               f"{s}_shoulder_roll": 0.0, f"{s}_elbow": -0.3})
SPEC["humanoid"]["pose"] = hp

POSE_NOTE = {
    "quadruped": ("# Standing pose: hip_flex 0.6, knee -1.2 puts each foot centre straight below its hip\n"
                  "# flexion axis (equal 0.14 m thigh and shank), 0.231 m below the trunk frame; the\n"
                  "# foot ball bottom is 0.246 m below it. Same pose on all legs -> all feet level.\n"),
    "humanoid": ("# Standing pose: hip_pitch -0.4, knee 0.8, ankle_pitch -0.4 keeps the soles flat and\n"
                 "# straight below the hips (equal 0.075 m thigh and shank); sole bottom 0.205 m below\n"
                 "# the pelvis frame.\n"),
}

for name, s in SPEC.items():
    urdf = ROOT / name / f"{name}.urdf"
    m = pin.buildModelFromUrdf(str(urdf), pin.JointModelFreeFlyer()) if s["floating"] else pin.buildModelFromUrdf(str(urdf))
    names = [n for n in m.names[1:] if n != "root_joint"]
    lines = [f"# servoloop built-in robot '{name}': {s['what']}.",
             "# Daemon config (contract: robot config YAML). Servo ids 1..n follow Pinocchio's joint",
             f"# order for {name}.urdf; min/max are the URDF limits less {MARGIN} rad on each side.",
             f"robot: {name}",
             f"model: {{urdf: {name}.urdf, floating_base: {'true' if s['floating'] else 'false'}}}",
             f"bus: {{port: null, baud: {s['baud']}, protocol: {s['protocol']}}}  # port null = built-in virtual bus",
             "servos:"]
    for i, j in enumerate(names, start=1):
        jm = m.joints[m.getJointId(j)]
        lo, hi = m.lowerPositionLimit[jm.idx_q], m.upperPositionLimit[jm.idx_q]
        lines.append(f"  - {{id: {i}, model: {s['model'](j)}, joint: {j}, offset: 0.0, direction: 1, "
                     f"min: {round(lo + MARGIN, 3)}, max: {round(hi - MARGIN, 3)}}}")
    lines.append(f"loop: {{rate_hz: {s['rate']}}}" + ("  # Protocol 1.0 has no sync read: one read per servo" if s["protocol"] == 1 else ""))
    if s["pose"] is None:
        lines.append("controller: {name: hold, params: {}}")
    else:
        assert set(s["pose"]) == set(names)
        lines.append(POSE_NOTE[name].rstrip("\n"))
        lines.append("controller:")
        lines.append("  name: hold")
        lines.append("  params:")
        lines.append("    pose:")
        for j in names:
            lines.append(f"      {j}: {s['pose'][j]}")
    if name == "quadruped":
        lines.append("# Stand up from lying through a crouch with the feet under the hips (hip = -knee / 2,")
        lines.append("# as in the standing pose); straight from folded to standing the feet push the trunk over.")
        lines.append("startup:")
        lines.append("  ramp_s: 2.0")
        lines.append("  via:")
        lines.append("    - {" + ", ".join(f"{l}_hip_abad: 0.0, {l}_hip_flex: 1.25, {l}_knee: -2.5"
                                           for l in ("lf", "lh", "rf", "rh")) + "}")
    if not s["floating"]:
        lines.append("simulation: {plant: independent}   # each servo drives its own load (no contact simulator)")
    if s["floating"]:
        lines.append("simulation:                 # the contact simulator stands behind the virtual bus")
        lines.append('  plant: "servoloop.virtual_bus.robot_plant:make_plant"')
        if name == "quadruped":
            # the URDF collides with its feet only: a robot collapsing with torque off lands on its trunk
            lines.append("  contacts: [{link: base_link, shape: box, size: [0.30, 0.14, 0.064]}]   # trunk")
    text = "\n".join(lines) + "\n"
    yaml.safe_load(text)
    (ROOT / name / f"{name}.yaml").write_text(text)
    print(name, len(names))
