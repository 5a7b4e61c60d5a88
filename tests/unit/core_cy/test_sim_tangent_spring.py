"""The compliant law's anchored tangential spring-damper (ContactLaw.tangent_stiffness):
a true mu = inf that holds a box on a steep slope at 1 ms, and Coulomb sliding at a
finite mu; the stick-slip law at a large mu creeps there instead."""

import math
from dataclasses import replace

import numpy as np
import pinocchio as pin
import pytest

from servoloop.core_cy.contact.laws import ContactLaw
from servoloop.core_cy.dynamics._dynamics import Model
from servoloop.core_cy.sim.model import Ground, contact_points_from_urdf
from servoloop.core_cy.sim.simulator import SimConfig, Simulator

G = 9.81
BOX_URDF = """<?xml version="1.0"?>
<robot name="box">
  <link name="box">
    <inertial><origin xyz="0 0 0"/><mass value="1.0"/>
      <inertia ixx="0.0025" ixy="0" ixz="0" iyy="0.0041667" iyz="0" izz="0.0058333"/></inertial>
    <collision><geometry><box size="0.2 0.1 0.05"/></geometry></collision>
  </link>
</robot>
"""
SPRING = dict(tangent_stiffness=1e4, tangent_damping=150.0)


@pytest.fixture(scope="module")
def box_urdf(tmp_path_factory):
    p = tmp_path_factory.mktemp("box") / "box.urdf"
    p.write_text(BOX_URDF)
    return str(p)


def _box_on(box_urdf, law, alpha, dt=1e-3):
    model = Model.from_urdf(box_urdf, floating_base=True)
    ground = Ground.slope(alpha)
    sim = Simulator(model, contact_points_from_urdf(box_urdf),
                    replace(SimConfig(mode="compliant", dt=dt, law=law), ground=ground))
    q = model.neutral()
    q[:3] = ground.unit_normal() * 0.0249
    q[3:7] = pin.Quaternion(pin.utils.rotate("y", alpha)).coeffs()
    sim.set_state(q)
    return sim


def test_infinite_friction_spring_holds_a_box_on_a_steep_slope_at_1ms(box_urdf):
    alpha = 0.9                         # tan 1.26: any mu below that slides
    law = ContactLaw(mu_static=math.inf, mu_dynamic=math.inf, **SPRING)
    sim = _box_on(box_urdf, law, alpha)
    sim.step(np.zeros(0), n_steps=1000)           # 1 s to settle
    x0 = sim.q[:3].copy()
    sim.step(np.zeros(0), n_steps=2000)           # 2 s more
    assert np.isfinite(sim.q).all()
    assert np.linalg.norm(sim.q[:3] - x0) / 2.0 < 1e-5          # m/s: it does not creep
    # the ground carries the weight: normal and tangential parts of the slope's reaction
    f = sim.contact_forces.sum(axis=0)
    assert f @ Ground.slope(alpha).unit_normal() == pytest.approx(G * math.cos(alpha), rel=0.02)
    assert np.linalg.norm(f) == pytest.approx(G, rel=0.02)
    # the stick-slip law at mu 2 (a finite stand-in for inf) creeps down that slope
    creep = _box_on(box_urdf, ContactLaw(mu_static=2.0, mu_dynamic=2.0), alpha)
    creep.step(np.zeros(0), n_steps=1000)
    y0 = creep.q[:3].copy()
    creep.step(np.zeros(0), n_steps=2000)
    assert np.linalg.norm(creep.q[:3] - y0) / 2.0 > 1e-4


def test_spring_at_finite_mu_slides_at_coulombs_deceleration(box_urdf):
    law = ContactLaw(mu_static=0.6, mu_dynamic=0.6, **SPRING)
    sim = _box_on(box_urdf, law, 0.0, dt=2.5e-4)
    sim.step(np.zeros(0), n_steps=400)
    v = sim.v.copy()
    v[0] = 1.0
    sim.set_state(sim.q.copy(), v)
    speeds = []
    for _ in range(8):
        sim.step(np.zeros(0), n_steps=40)          # 10 ms
        speeds.append(sim.v[0])
    decel = -np.polyfit(np.arange(8) * 0.01, speeds, 1)[0]
    assert decel == pytest.approx(0.6 * G, rel=0.03)
    # and it stops: the anchor holds once the box sticks
    sim.step(np.zeros(0), n_steps=2000)
    assert abs(sim.v[0]) < 1e-4


def test_infinite_mu_needs_the_spring():
    with pytest.raises(ValueError, match="tangent_stiffness"):
        ContactLaw(mu_static=math.inf, mu_dynamic=math.inf)
    with pytest.raises(ValueError, match="tangent_stiffness"):
        ContactLaw(tangent_stiffness=-1.0)
    # the stateless helpers and the NumPy reference have no anchors: they say so
    from servoloop.core_cy.contact.laws import contact_force

    with pytest.raises(ValueError, match="anchor"):
        contact_force(ContactLaw(**SPRING), 1e-3, np.zeros(3), np.eye(3))
