"""The ``simulation:`` section of the robot config: what stands behind the built-in virtual bus.

Dataclasses only (the loader in :mod:`controller.config` builds them from the
YAML and checks them); re-exported by :mod:`controller.config`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ContactConfig", "GroundConfig", "PushConfig", "SimulationConfig", "check_ground", "check_pushes",
           "standing_pose", "GROUND_CONTACTS", "GROUND_SOLVERS"]

#: ``simulation.ground.contact`` choices and ``simulation.ground.solver`` choices (rigid ground)
GROUND_CONTACTS = ("compliant", "rigid")
GROUND_SOLVERS = ("pgs", "lemke")


@dataclass(frozen=True)
class ContactConfig:
    """One contact primitive on a link, for the contact simulator.

    ``shape``: ``box`` (``size`` = full edge lengths [m], 3 values),
    ``sphere`` ([radius]) or ``cylinder`` ([radius, length], along the link's
    z axis); ``origin``: its centre in the link frame [m].
    """

    link: str
    shape: str
    size: tuple[float, ...]
    origin: tuple[float, ...] = (0.0, 0.0, 0.0)


@dataclass(frozen=True)
class PushConfig:
    """A push: an impulse given to the simulated robot at a time of the simulation.

    ``t_s``: when [s of simulated time from power-up, the plant's clock];
    ``impulse``: [x, y, z] linear impulse [N s] in the world frame, applied at
    the origin of ``link`` (None: the base link), the joints locked, as a
    constant force over ``virtual_bus.robot_plant.PUSH_S`` (50 ms, a hand's
    shove: the IMU's accelerometer feels it, as a real one would).
    """

    t_s: float
    impulse: tuple[float, ...]
    link: str | None = None


@dataclass(frozen=True)
class GroundConfig:
    """The floor the contact simulator puts the robot on.

    ``contact``: ``compliant`` (the default: a Hertz spring-damper with
    stick-slip friction, a soft floor; the feet sink about 0.5 mm) or
    ``rigid`` (velocity-level time stepping, no penetration: a hard floor).
    ``mu``: the friction coefficient (None: each model's default, 0.9 static
    / 0.8 sliding on compliant ground, 0.8 on rigid ground); ``.inf`` (no
    slipping while loaded) needs rigid ground.  ``solver`` (rigid ground):
    ``pgs`` (projected Gauss-Seidel, the default, fast) or ``lemke`` (the
    exact LCP with a 4-sided friction pyramid, about 3x slower).
    """

    contact: str = "compliant"
    mu: float | None = None
    solver: str = "pgs"


@dataclass(frozen=True)
class SimulationConfig:
    """What simulates the robot when no port is given (the built-in virtual bus).

    ``plant``: ``contact`` (the contact simulator), ``independent`` (one
    load per servo) or ``"MODULE:FUNCTION"``, a factory of the virtual
    bus's physics called with ``servos=`` and ``robot=`` (and ``config=``,
    the config itself, when the factory takes it); None = ``contact`` when
    the config names a URDF (``model.urdf`` or ``model.name``), else
    ``independent``.  ``contacts``: contact primitives added to
    the URDF's own collision boxes, spheres and cylinders (a URDF with
    meshes only needs them to touch the ground).  ``held_s``: a floating
    robot starts upright in its pose, its base held still for that long
    [s of simulated time] from power-up (a person or a gantry holding a
    humanoid while the daemon starts), then let go; 0 (the default): it
    starts lying where its joints let it fall with torque off.
    ``pushes``: impulses given to a floating robot at set times (a
    disturbance test through the bus: see :class:`PushConfig`).
    ``ground``: the floor (:class:`GroundConfig`: compliant or rigid, friction).
    """

    plant: str | None = None
    contacts: tuple[ContactConfig, ...] = ()
    held_s: float = 0.0
    pushes: tuple[PushConfig, ...] = ()
    ground: GroundConfig = GroundConfig()


def check_ground(cfg, err) -> None:
    """``simulation.ground``: contact model, friction, solver (cfg : RobotConfig; err as below)."""
    g = cfg.simulation.ground
    if g.contact not in GROUND_CONTACTS:
        raise err(f"simulation.ground.contact {g.contact!r}: choose {' or '.join(GROUND_CONTACTS)}",
                  "simulation.ground.contact")
    if g.solver not in GROUND_SOLVERS:
        raise err(f"simulation.ground.solver {g.solver!r}: choose {' or '.join(GROUND_SOLVERS)}",
                  "simulation.ground.solver")
    if g.mu is not None:
        if not g.mu >= 0:
            raise err(f"simulation.ground.mu must be >= 0 (.inf allowed on rigid ground), got {g.mu}",
                      "simulation.ground.mu")
        if g.contact == "compliant" and g.mu == float("inf"):
            raise err("simulation.ground.mu: .inf needs contact: rigid (the compliant floor's friction "
                      "is a finite force law)", "simulation.ground.mu")


def sim_settings(ground: GroundConfig):
    """The contact simulator's :class:`~core_cy.sim.SimConfig` for ``ground`` (default servos)."""
    from dataclasses import replace

    from servoloop.core_cy.sim.model import RigidSettings
    from servoloop.core_cy.sim.simulator import SimConfig

    base = SimConfig()
    if ground.contact == "rigid":
        rigid = RigidSettings(solver=ground.solver,
                              **({} if ground.mu is None else {"mu": ground.mu}))
        return replace(base, mode="rigid", rigid=rigid)
    if ground.mu is None:
        return base
    law = base.law
    # the default law's shape: sliding friction 8/9 of sticking
    return replace(base, law=replace(law, mu_static=ground.mu,
                                     mu_dynamic=ground.mu * law.mu_dynamic / law.mu_static))


def check_pushes(cfg, err) -> None:
    """``simulation.pushes``: times, impulse vectors, links of the robot description.

    cfg : RobotConfig; err : callable(message, key) -> ConfigError
    """
    pushes = cfg.simulation.pushes
    for k, p in enumerate(pushes):
        key = f"simulation.pushes[{k}]"
        if not p.t_s >= 0:
            raise err(f"{key}.t_s must be >= 0 s of simulated time, got {p.t_s}", f"{key}.t_s")
        if len(p.impulse) != 3 or not all(abs(x) < 1e3 for x in p.impulse):
            raise err(f"{key}.impulse must be [x, y, z] in N s (world frame), got {list(p.impulse)}",
                      f"{key}.impulse")
    if not pushes:
        return
    if cfg.urdf_path() is None or not cfg.model.floating_base:
        raise err("simulation.pushes needs a floating-base robot description (model.urdf or "
                  "model.name, model.floating_base: true): a push moves the whole robot", "simulation.pushes")
    links = _urdf_links(cfg.urdf_path())
    for k, p in enumerate(pushes):
        if p.link is not None and links is not None and p.link not in links:
            raise err(f"simulation.pushes[{k}].link {p.link!r} is not a link of "
                      f"{cfg.urdf_path().name}", f"simulation.pushes[{k}].link")


def _urdf_links(path) -> set[str] | None:
    """Link names of a URDF file (None when it cannot be read: the model loader reports that)."""
    import xml.etree.ElementTree as ET

    try:
        return {e.get("name") for e in ET.parse(path).getroot().iter("link")}
    except (OSError, ET.ParseError):
        return None


def standing_pose(cfg) -> dict:
    """The robot's standing pose ({joint: rad}) as its config gives it: the controller's
    ``pose`` (``hold``) or ``posture`` (``wbc``), else the last ``startup.via`` pose, else {}
    (all zero).  Where the simulator places a robot at power-up and where the estimator
    looks for the feet."""
    params = cfg.controller.params or {}
    for key in ("pose", "posture"):
        if isinstance(params.get(key), dict):
            return params[key]
    return dict(cfg.startup.via[-1]) if cfg.startup.via else {}
