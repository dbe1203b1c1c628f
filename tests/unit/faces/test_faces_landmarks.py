"""Landmark plausibility: order, roll sign, chin, fallback to detector keypoints."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from deployments.faces.analyze import FaceAnalysisConfig, FaceAnalysisPredictor


def test_five_points_are_ordered_like_a_face(engine, astronaut_rgb):
    (face,) = engine.analyze(astronaut_rgb)
    left_eye, right_eye, nose, mouth_left, mouth_right = face.landmarks
    assert face.landmarks.shape == (5, 2) and face.landmarks.dtype == np.float32
    assert left_eye[0] < right_eye[0] and mouth_left[0] < mouth_right[0]
    assert max(left_eye[1], right_eye[1]) < nose[1] < min(mouth_left[1], mouth_right[1]) < face.chin[1]
    assert face.mesh is not None and face.mesh.shape == (468, 2)
    assert 30 < face.eye_distance_px < 60


@pytest.mark.parametrize("turn_deg", [-20, 20])
def test_roll_follows_rotation(engine, astronaut_rgb, turn_deg):
    (upright,) = engine.analyze(astronaut_rgb)
    # getRotationMatrix2D turns counter-clockwise on screen for a positive angle: roll goes down by that angle
    rotated = cv2.warpAffine(
        astronaut_rgb, cv2.getRotationMatrix2D((256, 256), turn_deg, 1.0), (512, 512), borderMode=cv2.BORDER_REFLECT
    )
    (face,) = engine.analyze(rotated)
    assert face.roll_deg == pytest.approx(upright.roll_deg - turn_deg, abs=4)
    assert face.landmarks[0, 0] < face.landmarks[1, 0]


def test_mirrored_photo_keeps_image_left_eye_first(engine, astronaut_rgb):
    (face,) = engine.analyze(np.ascontiguousarray(astronaut_rgb[:, ::-1]))
    assert face.landmarks[0, 0] < face.landmarks[1, 0]
    assert face.landmarks[3, 0] < face.landmarks[4, 0]


def test_unsure_mesh_falls_back_to_detector_keypoints(mediapipe_dir, astronaut_rgb):
    strict = FaceAnalysisPredictor(mediapipe_dir, FaceAnalysisConfig(mesh_threshold=1.0))
    (face,) = strict.analyze(astronaut_rgb)
    assert face.mesh is None
    left_eye, right_eye, nose, mouth_left, mouth_right = face.landmarks
    assert left_eye[0] < right_eye[0] and mouth_left[0] < mouth_right[0]
    assert max(left_eye[1], right_eye[1]) < nose[1] < min(mouth_left[1], mouth_right[1]) < face.chin[1]


def test_analyze_batch_keeps_order(engine, astronaut_rgb):
    blank = np.zeros((200, 200, 3), np.uint8)
    results = engine.analyze_batch([astronaut_rgb, blank, astronaut_rgb])
    assert [len(r) for r in results] == [1, 0, 1]
