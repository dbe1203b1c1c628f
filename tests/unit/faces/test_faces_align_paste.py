"""Templates, similarity estimation, alignment and paste-back round trips."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from deployments.common.errors import InvalidParameter
from deployments.faces.align import TEMPLATES, align_face, estimate_similarity, get_template, rescale_crop_matrix
from deployments.faces.paste import paste_back


def test_templates_put_eyes_where_the_references_do():
    np.testing.assert_allclose(TEMPLATES["gpen-512"].points[:2], [[202, 243], [309, 242]], atol=1.0)
    np.testing.assert_allclose(TEMPLATES["ffhq-512"].points[:2], [[193, 240], [319, 240]], atol=1.0)
    np.testing.assert_allclose(TEMPLATES["gpen-1024"].points, TEMPLATES["gpen-256"].points * 4)
    dct = TEMPLATES["dctnet-288"]
    assert dct.size_px == 288 and 60 < dct.points[1, 0] - dct.points[0, 0] < 75  # a loose head crop
    with pytest.raises(InvalidParameter):
        get_template("ffhq-2048")


def test_similarity_recovers_a_known_transform_without_reflection():
    rng = np.random.default_rng(0)
    src = rng.uniform(0, 100, (5, 2))
    angle = np.deg2rad(25)
    true = np.array([[np.cos(angle), -np.sin(angle), 7.0], [np.sin(angle), np.cos(angle), -3.0]]) * [[1.7], [1.7]]
    true[:, 2] = [7.0, -3.0]
    dst = src @ true[:, :2].T + true[:, 2]
    np.testing.assert_allclose(estimate_similarity(src, dst), true, atol=1e-9)
    mirrored = estimate_similarity(src, dst * [-1, 1])
    assert np.linalg.det(mirrored[:, :2]) > 0
    with pytest.raises(InvalidParameter):
        estimate_similarity(src, dst[:3])


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_aligned_landmarks_land_on_the_template(engine, astronaut_rgb, name):
    (face,) = engine.analyze(astronaut_rgb)
    aligned = align_face(astronaut_rgb, face.landmarks, name)
    template = TEMPLATES[name]
    assert aligned.crop.shape == (template.size_px, template.size_px, 3) and aligned.crop.dtype == np.uint8
    moved = face.landmarks @ aligned.matrix[:, :2].T + aligned.matrix[:, 2]
    eye_distance = np.linalg.norm(template.points[1] - template.points[0])
    assert np.linalg.norm(moved[:2] - template.points[:2], axis=1).max() < 0.12 * eye_distance


def _face_region(face, upscale=1):
    x0, y0, x1, y1 = (int(round(v * upscale)) for v in face.box)
    return slice(y0, y1), slice(x0, x1)


def test_unchanged_crop_pastes_back_to_the_original(engine, astronaut_rgb):
    (face,) = engine.analyze(astronaut_rgb)
    aligned = align_face(astronaut_rgb, face.landmarks, "gpen-512")
    out = paste_back(astronaut_rgb, [(aligned.crop, aligned.matrix)])
    region = _face_region(face)
    assert np.abs(out[region].astype(int) - astronaut_rgb[region]).mean() < 3.0
    assert np.abs(out.astype(int) - astronaut_rgb).mean() < 0.5


def test_paste_back_x2_lands_at_double_coordinates(engine, astronaut_rgb):
    (face,) = engine.analyze(astronaut_rgb)
    aligned = align_face(astronaut_rgb, face.landmarks, "ffhq-512")
    white = np.full_like(aligned.crop, 255)
    base = cv2.resize(np.zeros_like(astronaut_rgb), (1024, 1024))
    out = paste_back(base, [(white, aligned.matrix)], upscale=2)
    ys, xs = np.nonzero(out[:, :, 0] > 128)
    centre_crop = np.array([255.5, 255.5])
    centre_image = cv2.invertAffineTransform(aligned.matrix) @ np.append(centre_crop, 1.0)
    np.testing.assert_allclose([xs.mean(), ys.mean()], (centre_image + 0.5) * 2 - 0.5, atol=4)
    # and the real photo: the upscaled original's face matches the pasted crop
    up = cv2.resize(astronaut_rgb, (1024, 1024), interpolation=cv2.INTER_CUBIC)
    pasted = paste_back(up, [(aligned.crop, aligned.matrix)], upscale=2)
    region = _face_region(face, 2)
    assert np.abs(pasted[region].astype(int) - up[region]).mean() < 4.0


def test_faces_at_borders_and_overlapping_faces():
    image = np.full((100, 120, 3), 40, np.uint8)
    red = np.zeros((64, 64, 3), np.uint8)
    red[:] = (255, 0, 0)
    blue = np.zeros((64, 64, 3), np.uint8)
    blue[:] = (0, 0, 255)
    # crop pixel (u, v) comes from image (u / 2 + x0, v / 2 + y0): footprints of 32 px, one hanging off the corner
    at_corner = np.array([[2.0, 0, 2 * 10], [0, 2.0, 2 * 10]])
    overlapping = np.array([[2.0, 0, -2 * 0], [0, 2.0, -2 * 0]])
    out = paste_back(image, [(red, at_corner), (blue, overlapping)], feather_px=4)
    assert out.shape == image.shape
    assert tuple(out[16, 16]) == (0, 0, 255)  # the later face covers the earlier one where both are solid
    assert tuple(out[80, 100]) == (40, 40, 40)  # untouched far away
    half = paste_back(image, [(blue, overlapping)], blend=0.5)
    assert tuple(half[16, 16]) == (20, 20, 148)
    np.testing.assert_array_equal(paste_back(image, [(blue, overlapping)], blend=0.0), image)


def test_paste_back_rejects_bad_parameters(astronaut_rgb):
    crop = np.zeros((8, 8, 3), np.uint8)
    matrix = np.eye(2, 3)
    for kwargs in ({"blend": 1.5}, {"upscale": 3}):
        with pytest.raises(InvalidParameter):
            paste_back(astronaut_rgb, [(crop, matrix)], **kwargs)
    with pytest.raises(InvalidParameter):
        paste_back(astronaut_rgb.astype(np.float32), [(crop, matrix)])


def test_rescaled_matrix_maps_to_the_same_face_at_another_size(astronaut_rgb):
    eyes_nose_mouth = np.array([[204, 101], [247, 104], [226, 128], [209, 149], [242, 151]], dtype=np.float64)
    aligned = align_face(astronaut_rgb, eyes_nose_mouth, "gpen-512")
    small = cv2.resize(aligned.crop, (128, 128), interpolation=cv2.INTER_AREA)
    matrix = rescale_crop_matrix(aligned.matrix, 512, 128)
    direct = cv2.warpAffine(astronaut_rgb, matrix, (128, 128), flags=cv2.INTER_AREA)
    assert np.abs(direct.astype(int) - small.astype(int)).mean() < 4
