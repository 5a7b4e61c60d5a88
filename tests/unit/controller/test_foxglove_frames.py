"""The /tf transforms of the MCAP export compose to the same link poses as core_cy's kinematics."""

import numpy as np
from scipy.spatial.transform import Rotation

from servoloop.controller.foxglove_schemas import UrdfFrames, log_message
from servoloop.core_cy import Data, Model, forward_kinematics
from servoloop.robots import urdf_path


def test_frames_compose_to_forward_kinematics():
    urdf = urdf_path("arm")
    model = Model.from_urdf(str(urdf))
    data = Data(model)
    names = list(model.joint_names)
    frames = UrdfFrames(urdf, names)
    rng = np.random.default_rng(0)
    for _ in range(5):
        q = rng.uniform(-1.5, 1.5, model.nq)
        forward_kinematics(model, data, q)
        pose = {"base_link": (np.eye(3), np.zeros(3))}
        for tf in frames.transforms(q, 0):           # parents come before children in the URDF
            R0, p0 = pose[tf["parent_frame_id"]]
            r = tf["rotation"]
            R = Rotation.from_quat([r["x"], r["y"], r["z"], r["w"]]).as_matrix()
            t = np.array([tf["translation"][k] for k in "xyz"])
            pose[tf["child_frame_id"]] = (R0 @ R, R0 @ t + p0)
        # the last movable body of the chain: its world pose by both routes
        last = frames.joints[-1][2]
        b = model.nbodies - 1
        np.testing.assert_allclose(pose[last][0], data.rotation_body_to_world[b], atol=1e-12)
        np.testing.assert_allclose(pose[last][1], data.position_body_in_world[b], atol=1e-12)


def test_event_levels():
    assert log_message({"kind": "fault", "message": "x", "tick": 3}, 5)["level"] == 4
    assert log_message({"kind": "transition", "message": "y"}, 5)["level"] == 2
