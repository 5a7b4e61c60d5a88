"""Build robots/{bench,arm,quadruped,humanoid}/NAME.urdf."""

from __future__ import annotations

import sys
from pathlib import Path

from gen import Urdf, box, cylinder, servo, sphere, tube

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "robots")

HEADER_COMMON = (
    "  Geometry is primitives only (no meshes). Masses: servo cases from the ROBOTIS e-Manual\n"
    "  specification tables; structure from density x volume of the stated box/tube/cylinder\n"
    "  (aluminium 2700, PLA 1240, steel 7850, rubber 1100 kg/m3); items marked 'assumed' are\n"
    "  typical values, not measured on a robot. Joint effort = servo stall torque, velocity =\n"
    "  no-load speed, both from the e-Manual. Each <inertial> lists its parts: change a number\n"
    "  and its comment together.")


# ---------------------------------------------------------------- bench
def bench():
    u = Urdf("bench", "<!--\n  servoloop built-in robot 'bench': one Dynamixel XL330-M288-T driving a pendulum,\n"
             "  the BAM pendulum bench (Rhoban, Duclusaud et al., ICRA 2025): load 0.49 kg at 0.1 m\n"
             "  (see shared data bam-xl330/README.md). Fixed base; the shaft is horizontal (axis y) so\n"
             "  gravity acts; q = 0 hangs straight down.\n" + HEADER_COMMON + "\n-->")
    u.link("base_link", [
        box("stand foot plate", "aluminium", (0.12, 0.10, 0.005), (0, 0, 0.0025)),
        box("stand column", "aluminium", (0.03, 0.01, 0.30), (0, -0.03, 0.155)),
        servo("XL330-M288", "y", (0, -0.012, 0.30 - 0.006), "z"),
    ], note="fixed to the world; its inertia does not enter the dynamics.")
    u.revolute("pendulum", "base_link", "pendulum_link", (0, 0, 0.30), (0, 1, 0), -3.14159, 3.14159,
               "XL330-M288")
    # The BAM README gives only 'mass 0.49 kg at 0.1 m': the whole moving load is one steel
    # cylinder (axis parallel to the shaft) centred 0.1 m below the axis, mass exactly 0.49 kg.
    u.link("pendulum_link", [
        cylinder("pendulum load (BAM bench: 0.49 kg at 0.1 m)", "steel", 0.02, 0.0497, "y",
                 (0, 0, -0.1), mass=0.49),
    ], note="mass and lever arm from the BAM bench README; the light arm is lumped into the load.")
    return u


# ---------------------------------------------------------------- arm
def arm():
    u = Urdf("arm", "<!--\n  servoloop built-in robot 'arm': 6-DoF arm, XM430-W350 on the three proximal joints,\n"
             "  XL430-W250 on the wrist. Fixed base. q = 0 points the arm straight up; reach from the\n"
             "  shoulder axis to the flange face 0.40 m (0.18 upper arm + 0.15 forearm + 0.07 wrist).\n"
             + HEADER_COMMON + "\n-->")
    XM, XL = "XM430-W350", "XL430-W250"

    def bracket(z, name="bracket"):
        return box(f"{name} (aluminium U-bracket as a plate)", "aluminium", (0.04, 0.04, 0.002),
                   (0, 0, z))

    u.link("base_link", [
        box("base plate", "aluminium", (0.12, 0.12, 0.005), (0, 0, 0.0025)),
        servo(XM, "z", (0, 0, 0.005 + 0.017), "x"),
    ], note="fixed to the world; its inertia does not enter the dynamics.")
    u.revolute("base_yaw", "base_link", "shoulder_link", (0, 0, 0.06), (0, 0, 1), -3.14159,
               3.14159, XM)
    u.link("shoulder_link", [bracket(0.001), servo(XM, "y", (0, 0, 0.045 - 0.012), "z")])
    u.revolute("shoulder_pitch", "shoulder_link", "upper_arm_link", (0, 0, 0.045), (0, 1, 0),
               -1.8, 1.8, XM)
    u.link("upper_arm_link", [
        bracket(0.004),
        tube("upper arm", "aluminium", 0.02, 0.0015, 0.12, "z", (0, 0, 0.07)),
        servo(XM, "y", (0, 0, 0.18 - 0.012), "z"),
    ])
    u.revolute("elbow_pitch", "upper_arm_link", "elbow_link", (0, 0, 0.18), (0, 1, 0), -2.2, 2.2, XM)
    u.link("elbow_link", [bracket(0.004), servo(XL, "z", (0, 0, 0.05 - 0.017), "y")])
    u.revolute("forearm_roll", "elbow_link", "forearm_link", (0, 0, 0.05), (0, 0, 1), -2.8, 2.8, XL)
    u.link("forearm_link", [
        bracket(0.002),
        tube("forearm", "aluminium", 0.02, 0.0015, 0.06, "z", (0, 0, 0.035)),
        servo(XL, "y", (0, 0, 0.10 - 0.012), "z"),
    ])
    u.revolute("wrist_pitch", "forearm_link", "wrist_link", (0, 0, 0.10), (0, 1, 0), -1.9, 1.9, XL)
    u.link("wrist_link", [bracket(0.004), servo(XL, "z", (0, 0, 0.04 - 0.017), "y")])
    u.revolute("wrist_roll", "wrist_link", "flange_link", (0, 0, 0.04), (0, 0, 1), -3.14159,
               3.14159, XL)
    u.link("flange_link", [
        cylinder("tool flange", "PLA", 0.025, 0.01, "z", (0, 0, 0.005)),
        box("tool (simple gripper body)", "PLA", (0.04, 0.06, 0.02), (0, 0, 0.02)),
    ], note="flange face at z = 0.03 m; the tool is a PLA block, replace with your own.")
    return u


# ---------------------------------------------------------------- quadruped
QUAD_HIP_X, QUAD_HIP_Y = 0.13, 0.05   # hip ab/ad axes from trunk centre [m]
QUAD_HIP_OFFSET = 0.045               # ab/ad axis -> hip flexion axis, outward [m]
QUAD_THIGH = QUAD_SHANK = 0.14        # hip flexion -> knee -> foot centre [m]
QUAD_FOOT_R = 0.015


def quadruped():
    u = Urdf("quadruped", "<!--\n  servoloop built-in robot 'quadruped': 12 DoF, XM430-W350 on every joint, ~2.5 kg.\n"
             "  Floating base (load with floating_base=True / pin.JointModelFreeFlyer()). Trunk frame:\n"
             "  x forward, y left, z up. Legs lf, rf, lh, rh: hip_abad (axis x), hip_flex (axis y),\n"
             "  knee (axis y); q = 0 is legs straight down. Feet: fixed joint <leg>_foot to link\n"
             "  <leg>_foot_link, sphere collision r 15 mm centred 0.14 m below the knee.\n"
             + HEADER_COMMON + "\n-->")
    XM = "XM430-W350"
    legs = [("lf", 1, 1), ("rf", 1, -1), ("lh", -1, 1), ("rh", -1, -1)]
    trunk = [
        box("top chassis plate", "aluminium", (0.30, 0.14, 0.002), (0, 0, 0.031)),
        box("bottom chassis plate", "aluminium", (0.30, 0.14, 0.002), (0, 0, -0.031)),
        box("left side plate", "aluminium", (0.30, 0.002, 0.06), (0, 0.071, 0)),
        box("right side plate", "aluminium", (0.30, 0.002, 0.06), (0, -0.071, 0)),
        box("battery (assumed: 3S LiPo 3000 mAh, typical 0.25 kg)", "LiPo", (0.13, 0.043, 0.025),
            (0, 0, -0.015), mass=0.25),
        box("electronics (assumed: SBC ~46 g + U2D2 + power hub + IMU + wiring, 0.15 kg)", "mixed",
            (0.09, 0.06, 0.02), (0, 0, 0.018), mass=0.15),
    ]
    for leg, sx, sy in legs:
        trunk.append(servo(XM, "x", (sx * (QUAD_HIP_X - 0.024), sy * QUAD_HIP_Y, 0), "z"))
        trunk[-1].desc = f"{leg} hip_abad " + trunk[-1].desc
    u.link("base_link", trunk, note="trunk; carries the four hip ab/ad servos.")
    for leg, sx, sy in legs:
        u.comment(f"leg {leg}")
        u.revolute(f"{leg}_hip_abad", "base_link", f"{leg}_hip", (sx * QUAD_HIP_X, sy * QUAD_HIP_Y, 0),
                   (1, 0, 0), -1.0, 1.0, XM)
        u.link(f"{leg}_hip", [
            box("ab/ad output bracket (aluminium plate)", "aluminium", (0.002, 0.04, 0.04),
                (sx * 0.0, 0, 0)),
            box("hip bracket (aluminium plate)", "aluminium", (0.04, 0.002, 0.04),
                (0, sy * 0.008, 0)),
            servo(XM, "y", (0, sy * (QUAD_HIP_OFFSET - 0.017 - 0.008), 0), "z"),
        ])
        u.revolute(f"{leg}_hip_flex", f"{leg}_hip", f"{leg}_thigh", (0, sy * QUAD_HIP_OFFSET, 0),
                   (0, 1, 0), -2.5, 2.5, XM)
        u.link(f"{leg}_thigh", [
            box("hip output bracket (aluminium plate)", "aluminium", (0.04, 0.002, 0.04),
                (0, sy * 0.020, -0.012)),
            tube("thigh", "aluminium", 0.02, 0.0015, 0.09, "z", (0, sy * 0.012, -0.065)),
            servo(XM, "y", (0, 0, -(QUAD_THIGH - 0.012)), "z"),
        ])
        u.revolute(f"{leg}_knee", f"{leg}_thigh", f"{leg}_shank", (0, 0, -QUAD_THIGH), (0, 1, 0),
                   -2.7, 2.7, XM)
        u.link(f"{leg}_shank", [
            box("knee output bracket (aluminium plate)", "aluminium", (0.04, 0.002, 0.04),
                (0, sy * 0.020, 0)),
            tube("shank", "aluminium", 0.016, 0.0015, 0.12, "z", (0, sy * 0.012, -0.07)),
        ])
        u.fixed(f"{leg}_foot", f"{leg}_shank", f"{leg}_foot_link", (0, sy * 0.012, -QUAD_SHANK),
                comment=f"foot {leg}: point contact = bottom of the 15 mm sphere")
        u.link(f"{leg}_foot_link", [sphere("foot ball", "rubber", QUAD_FOOT_R, (0, 0, 0))],
               collision=[("sphere", QUAD_FOOT_R, (0, 0, 0))])
    return u


# ---------------------------------------------------------------- humanoid
H_HIP_Y = 0.037      # hip yaw axes from the pelvis centre [m]
H_HIP_DROP = 0.035   # hip yaw -> hip roll/pitch (intersecting) [m]
H_THIGH = H_SHANK = 0.075
H_ANKLE_SOLE = 0.032  # ankle roll axis -> sole [m]
H_SHOULDER = (0.0, 0.072, 0.115)
H_SOLE = (0.10, 0.06, 0.003)  # sole plate x, y, thickness [m]


def humanoid():
    u = Urdf("humanoid", "<!--\n  servoloop built-in robot 'humanoid': small Bioloid-GP-class humanoid on 18 AX-18A\n"
             "  (6 per leg, 3 per arm; Protocol 1.0 at 1 Mbps), ~1.7 kg, ~0.40 m tall. Floating base\n"
             "  on the pelvis/torso (x forward, y left, z up). Left and right use the same axis\n"
             "  directions (servo mounting is handled by 'direction' in the YAML). q = 0 is standing\n"
             "  straight with arms down. Collision: sole boxes, link outlines as boxes, a head sphere.\n"
             "  AX-18A mass: e-Manual lists AX-18F 54.5 g and AX-18A 55.9 g; AX-18A is used.\n"
             + HEADER_COMMON + "\n-->")
    AX = "AX-18A"

    def br(desc, size, center):
        return box(f"{desc} (aluminium frame as a plate)", "aluminium", size, center)

    torso = [
        br("pelvis frame", (0.06, 0.11, 0.002), (0, 0, 0.05)),
        br("chest front frame", (0.0015, 0.12, 0.09), (0.025, 0, 0.09)),
        br("chest back frame", (0.0015, 0.12, 0.09), (-0.025, 0, 0.09)),
        box("controller (assumed: CM-530-class board in case, 0.06 kg)", "mixed", (0.02, 0.07, 0.05),
            (-0.04, 0, 0.09), mass=0.06),
        box("battery (assumed: 3S LiPo 1000 mAh, 0.08 kg)", "LiPo", (0.02, 0.07, 0.03), (0, 0, 0.075),
            mass=0.08),
        box("body shells (assumed: PLA/ABS covers, 0.05 kg)", "plastic", (0.06, 0.12, 0.10),
            (0, 0, 0.09), mass=0.05),
        sphere("head", "PLA", 0.025, (0, 0, 0.17)),
    ]
    for side, sy in (("l", 1), ("r", -1)):
        torso.append(servo(AX, "z", (0, sy * H_HIP_Y, 0.025), "x"))
        torso[-1].desc = f"{side}_hip_yaw " + torso[-1].desc
        torso.append(servo(AX, "y", (0, sy * (H_SHOULDER[1] - 0.025), H_SHOULDER[2] - 0.01), "z"))
        torso[-1].desc = f"{side}_shoulder_pitch " + torso[-1].desc
    # Collision: the robot must lie on the floor when it falls, so every link the ground
    # can touch gets its outline as a box (the body shells, thighs, shanks, arms) and the
    # head a sphere, not only the soles.
    u.link("base_link", torso, collision=[("box", (0.06, 0.12, 0.12), (0, 0, 0.08)),
                                          ("sphere", 0.025, (0, 0, 0.17))],
           note="pelvis + torso; carries both hip yaw and both shoulder pitch servos.")

    for side, sy in (("l", 1), ("r", -1)):
        u.comment(f"leg {side}")
        hr = (-0.4, 0.8) if sy > 0 else (-0.8, 0.4)  # roll outward further than inward
        u.revolute(f"{side}_hip_yaw", "base_link", f"{side}_hip_yaw_link", (0, sy * H_HIP_Y, 0),
                   (0, 0, 1), -1.0, 1.0, AX)
        u.link(f"{side}_hip_yaw_link", [br("hip yaw bracket", (0.04, 0.032, 0.002), (0, 0, -0.002)),
                                         servo(AX, "x", (0, 0, -0.02), "z")])
        u.revolute(f"{side}_hip_roll", f"{side}_hip_yaw_link", f"{side}_hip_roll_link",
                   (0, 0, -H_HIP_DROP), (1, 0, 0), hr[0], hr[1], AX)
        u.link(f"{side}_hip_roll_link", [br("hip cross bracket", (0.032, 0.04, 0.002), (0, 0, 0.004)),
                                          servo(AX, "y", (0.0, 0, -0.005), "x")])
        u.revolute(f"{side}_hip_pitch", f"{side}_hip_roll_link", f"{side}_thigh", (0, 0, 0), (0, 1, 0),
                   -1.8, 0.6, AX)
        u.link(f"{side}_thigh", [br("thigh frame", (0.032, 0.002, 0.06), (0, sy * 0.022, -0.035)),
                                  br("thigh frame", (0.032, 0.002, 0.06), (0, -sy * 0.022, -0.035)),
                                  servo(AX, "y", (0, 0, -(H_THIGH - 0.012)), "z")],
               collision=[("box", (0.036, 0.048, H_THIGH), (0, 0, -H_THIGH / 2))])
        u.revolute(f"{side}_knee", f"{side}_thigh", f"{side}_shank", (0, 0, -H_THIGH), (0, 1, 0),
                   -0.1, 2.4, AX)
        u.link(f"{side}_shank", [br("shank frame", (0.032, 0.002, 0.06), (0, sy * 0.022, -0.035)),
                                  br("shank frame", (0.032, 0.002, 0.06), (0, -sy * 0.022, -0.035)),
                                  servo(AX, "y", (0, 0, -(H_SHANK - 0.012)), "z")],
               collision=[("box", (0.036, 0.048, H_SHANK), (0, 0, -H_SHANK / 2))])
        u.revolute(f"{side}_ankle_pitch", f"{side}_shank", f"{side}_ankle_link", (0, 0, -H_SHANK),
                   (0, 1, 0), -1.3, 1.3, AX)
        u.link(f"{side}_ankle_link", [br("ankle cross bracket", (0.032, 0.04, 0.002), (0, 0, -0.004)),
                                       servo(AX, "x", (0, 0, -0.012), "z")])
        u.revolute(f"{side}_ankle_roll", f"{side}_ankle_link", f"{side}_foot", (0, 0, 0), (1, 0, 0),
                   -0.6, 0.6, AX)
        sx, syy, sz = H_SOLE
        u.link(f"{side}_foot", [
            br("ankle output bracket", (0.04, 0.032, 0.002), (0, 0, -0.02)),
            box("sole plate", "aluminium", H_SOLE, (0.005, 0, -(H_ANKLE_SOLE - sz / 2))),
        ], collision=[("box", H_SOLE, (0.005, 0, -(H_ANKLE_SOLE - sz / 2)))],
            note=f"sole bottom at z = -{H_ANKLE_SOLE} m in this frame.")

    for side, sy in (("l", 1), ("r", -1)):
        u.comment(f"arm {side}")
        sr = (-0.3, 1.7) if sy > 0 else (-1.7, 0.3)  # abduction positive on the left, negative on the right
        u.revolute(f"{side}_shoulder_pitch", "base_link", f"{side}_shoulder_link",
                   (H_SHOULDER[0], sy * H_SHOULDER[1], H_SHOULDER[2]), (0, 1, 0), -2.6, 2.6, AX)
        u.link(f"{side}_shoulder_link", [br("shoulder bracket", (0.032, 0.002, 0.04), (0, sy * 0.004, 0)),
                                          servo(AX, "x", (0, sy * 0.022, -0.01), "z")])
        u.revolute(f"{side}_shoulder_roll", f"{side}_shoulder_link", f"{side}_upper_arm",
                   (0, sy * 0.022, 0), (1, 0, 0), sr[0], sr[1], AX)
        u.link(f"{side}_upper_arm", [br("upper arm frame", (0.032, 0.04, 0.002), (0, 0, -0.004)),
                                      servo(AX, "y", (0, 0, -0.045), "z")],
               collision=[("box", (0.036, 0.04, 0.062), (0, 0, -0.031))])
        u.revolute(f"{side}_elbow", f"{side}_upper_arm", f"{side}_forearm", (0, 0, -0.062), (0, 1, 0),
                   -2.2, 0.2, AX)
        u.link(f"{side}_forearm", [br("forearm frame", (0.032, 0.04, 0.002), (0, 0, -0.004)),
                                    box("forearm + hand", "PLA", (0.018, 0.02, 0.06), (0, 0, -0.036))],
               collision=[("box", (0.032, 0.04, 0.066), (0, 0, -0.033))])
    return u


def main():
    for build in (bench, arm, quadruped, humanoid):
        u = build()
        d = OUT / u.name
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{u.name}.urdf").write_text(u.text())
        print(f"{u.name}: total mass {u.mass:.4f} kg")


if __name__ == "__main__":
    main()
