"""The ffhq-512 crops (GFPGAN, CodeFormer) are facexlib's: same matrix, same pixels, for the same landmarks.

The expected values are computed here with the exact call of facexlib's and CodeFormer's ``align_warp_face``
(``cv2.estimateAffinePartial2D(landmark, face_template, method=cv2.LMEDS)[0]`` on float32 landmarks, then
``cv2.warpAffine`` of the BGR photo with border ``(135, 133, 132)``).
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from deployments.common.image import decode_image
from deployments.faces.align import TEMPLATES, align_face, estimate_similarity

# facexlib ``FaceRestoreHelper.face_template`` for face_size 512, as written there.
FACEXLIB_TEMPLATE = np.array(
    [
        [192.98138, 239.94708],
        [318.90277, 240.1936],
        [256.63416, 314.01935],
        [201.26117, 371.41043],
        [313.08905, 371.15118],
    ]
) * (512 / 512.0)
EVAL_PHOTOS = (
    "codeformer_00.jpg",
    "codeformer_02.png",
    "gfpgan_00.jpg",
    "gfpgan_10045.png",
    "gfpgan_blake_lively.jpg",
    "gpen_selfie_20201217.jpg",
)


def _official_matrix(landmarks: np.ndarray) -> np.ndarray:
    return cv2.estimateAffinePartial2D(np.asarray(landmarks, np.float32), FACEXLIB_TEMPLATE, method=cv2.LMEDS)[0]


def _official_crop(image_rgb: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    bgr = np.ascontiguousarray(image_rgb[:, :, ::-1])
    crop = cv2.warpAffine(bgr, matrix, (512, 512), borderMode=cv2.BORDER_CONSTANT, borderValue=(135, 133, 132))
    return crop[:, :, ::-1]


def _landmarks_lmeds_partly_drops(count: int) -> list[np.ndarray]:
    """Template points moved by random similarities, noised, two points pushed off: sets where LMedS keeps fewer
    than five points (checked), the case where it and least squares part."""
    rng = np.random.default_rng(25)
    found = []
    while len(found) < count:
        angle, scale = rng.uniform(-0.4, 0.4), rng.uniform(0.05, 0.6)
        rotation = scale * np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
        points = (FACEXLIB_TEMPLATE - 256) @ rotation.T + rng.uniform(40, 900, 2) + rng.normal(0, 0.8, (5, 2))
        pushed = rng.choice(5, 2, replace=False)
        points[pushed] += rng.normal(0, 0.15 * 126 * scale, (2, 2))
        points = points.astype(np.float32)
        _, inliers = cv2.estimateAffinePartial2D(points, FACEXLIB_TEMPLATE, method=cv2.LMEDS)
        if inliers.sum() < 5:
            found.append(points)
    return found


def test_ffhq_matrix_is_facexlibs_where_lmeds_drops_points(astronaut_rgb):
    moved_px = []
    for landmarks in _landmarks_lmeds_partly_drops(12):
        expected = _official_matrix(landmarks)
        aligned = align_face(astronaut_rgb, landmarks, "ffhq-512")
        np.testing.assert_array_equal(aligned.matrix, expected)
        np.testing.assert_array_equal(aligned.crop, _official_crop(astronaut_rgb, expected))
        least_squares = estimate_similarity(landmarks, FACEXLIB_TEMPLATE)
        corners = np.array([[0.0, 0.0], [500.0, 500.0]])
        moved_px.append(np.abs(corners @ (expected - least_squares)[:, :2].T + (expected - least_squares)[:, 2]).max())
    assert max(moved_px) > 2.0  # the sets do exercise a fit that least squares would not give


def test_gpen_templates_stay_least_squares(astronaut_rgb):
    landmarks = _landmarks_lmeds_partly_drops(1)[0]
    aligned = align_face(astronaut_rgb, landmarks, "gpen-512")
    np.testing.assert_allclose(aligned.matrix, estimate_similarity(landmarks, TEMPLATES["gpen-512"].points))


@pytest.mark.eval
@pytest.mark.parametrize("name", EVAL_PHOTOS)
def test_ffhq_crops_equal_facexlibs_on_eval_photos(engine, shared_dir, name):
    rgb = decode_image((shared_dir / "eval" / "whole" / name).read_bytes()).rgb
    faces = engine.analyze(rgb)
    assert faces
    for face in faces:
        expected = _official_matrix(face.landmarks)
        aligned = align_face(rgb, face.landmarks, "ffhq-512")
        np.testing.assert_array_equal(aligned.matrix, expected)
        np.testing.assert_array_equal(aligned.crop, _official_crop(rgb, expected))
