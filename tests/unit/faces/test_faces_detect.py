"""Detection on the astronaut and on degraded copies; window plan and NMS behaviour."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from deployments.faces.detect import FULL_RANGE, SHORT_RANGE, FaceDetector, plan_tile_levels
from deployments.faces.detection import Detection, DetectionParams, weighted_nms
from tests.unit.faces.faces_samples import ASTRONAUT_BOX, ASTRONAUT_EYES


def _blur(img):
    return cv2.GaussianBlur(img, (0, 0), 3)


def _jpeg(img):
    ok, data = cv2.imencode(".jpg", cv2.cvtColor(img, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 10])
    return cv2.cvtColor(cv2.imdecode(data, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)


def _noise(img):
    rng = np.random.default_rng(0)
    return np.clip(img + rng.normal(0, 25, img.shape), 0, 255).astype(np.uint8)


def _gray(img):
    return np.repeat(cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)[:, :, None], 3, axis=2)


def _identity_geometry(points):
    return points


def _rotate20_geometry():
    matrix = cv2.getRotationMatrix2D((256, 256), 20, 1.0)
    return matrix, lambda pts: pts @ matrix[:, :2].T + matrix[:, 2]


def _rotate20(img):
    matrix, _ = _rotate20_geometry()
    return cv2.warpAffine(img, matrix, (512, 512), borderMode=cv2.BORDER_REFLECT)


SMALL_FACE_SCALE = 64.0 / (ASTRONAUT_BOX[2] - ASTRONAUT_BOX[0])
SMALL_OFFSET = np.array([300.0, 250.0])


def _small_face(img):
    """The whole photo shrunk so the face is 64 px wide, pasted into a larger grey frame."""
    side = round(512 * SMALL_FACE_SCALE)
    canvas = np.full((640, 720, 3), 120, np.uint8)
    small = cv2.resize(img, (side, side), interpolation=cv2.INTER_AREA)
    canvas[250 : 250 + side, 300 : 300 + side] = small
    return canvas


def _small_geometry(pts):
    s = round(512 * SMALL_FACE_SCALE) / 512
    return (pts + 0.5) * s - 0.5 + SMALL_OFFSET


DEGRADATIONS = {
    "clean": (lambda img: img, _identity_geometry),
    "blur_sigma3": (_blur, _identity_geometry),
    "jpeg_q10": (_jpeg, _identity_geometry),
    "noise_sigma25": (_noise, _identity_geometry),
    "grayscale": (_gray, _identity_geometry),
    "rotated_20deg": (_rotate20, _rotate20_geometry()[1]),
    "face_64px_wide": (_small_face, _small_geometry),
}


@pytest.mark.parametrize("name", list(DEGRADATIONS))
def test_astronaut_found_once_with_eyes_in_place(engine, astronaut_rgb, name):
    degrade, geometry = DEGRADATIONS[name]
    faces = engine.analyze(degrade(astronaut_rgb))
    assert len(faces) == 1, f"{name}: {[f.to_json() for f in faces]}"
    face = faces[0]
    eyes = geometry(ASTRONAUT_EYES)
    eye_distance = np.linalg.norm(eyes[1] - eyes[0])
    error = np.linalg.norm(face.landmarks[:2] - eyes, axis=1).max()
    assert error < 0.2 * eye_distance, f"{name}: eyes {face.landmarks[:2]} vs {eyes}"
    box_centre = np.array([(face.box[0] + face.box[2]) / 2, (face.box[1] + face.box[3]) / 2])
    assert np.linalg.norm(box_centre - eyes.mean(axis=0)) < 1.5 * eye_distance


def test_box_matches_the_astronaut_face(engine, astronaut_rgb):
    (face,) = engine.analyze(astronaut_rgb)
    np.testing.assert_allclose(face.box, ASTRONAUT_BOX, atol=8)
    assert face.score > 0.85


def test_image_without_face_gives_empty_list(engine):
    rng = np.random.default_rng(1)
    smooth = cv2.resize(rng.integers(0, 255, (20, 30, 3), dtype=np.uint8), (600, 400), interpolation=cv2.INTER_CUBIC)
    assert engine.analyze(smooth) == []
    assert engine.analyze(np.zeros((300, 300, 3), np.uint8)) == []


def test_pixel_mapping_is_exact(mediapipe_dir, astronaut_rgb):
    """A 2x pixel-replicated photo reaches the model as the very same tensor (pyramid halving is a 2x2 average), so
    its keypoints must be exactly the pixel-index image of the originals: ``(x + 0.5) * 2 - 0.5``. Non-square, so
    the letterbox offset is exercised too."""
    detector = FaceDetector(mediapipe_dir)
    photo = np.ascontiguousarray(astronaut_rgb[:384])
    doubled = np.repeat(np.repeat(photo, 2, axis=0), 2, axis=1)
    (base,) = detector.detect(photo)
    (big,) = detector.detect(doubled)
    np.testing.assert_allclose(big.keypoints, (base.keypoints + 0.5) * 2 - 0.5, atol=0.01)
    np.testing.assert_allclose(big.box, (base.box + 0.5) * 2 - 0.5, atol=0.01)


def test_anchor_counts_match_mediapipe():
    assert SHORT_RANGE.anchors().shape == (896, 2)
    assert FULL_RANGE.anchors().shape == (2304, 2)
    # first short-range anchors: the 16x16 grid cell (0, 0), twice, centre at 4 px of 128
    np.testing.assert_allclose(SHORT_RANGE.anchors()[:2], [[4, 4], [4, 4]])


def test_tile_plan_respects_window_budget():
    params = DetectionParams(min_eye_px=15, max_windows=48)
    for width, height in [(512, 512), (1920, 1080), (4000, 3000), (100, 3000)]:
        levels = plan_tile_levels(width, height, params)
        assert sum(len(level.windows) for level in levels) <= 48


def test_weighted_nms_merges_overlaps_and_keeps_separate_faces():
    def det(x, score):
        return Detection(np.array([x, 0, x + 10, 10], np.float32), score, np.full((4, 2), x, np.float32))

    merged = weighted_nms([det(0, 0.9), det(1, 0.9), det(50, 0.8)], 0.3)
    assert len(merged) == 2
    assert merged[0].box[0] == pytest.approx(0.5)
    assert merged[1].box[0] == pytest.approx(50)
