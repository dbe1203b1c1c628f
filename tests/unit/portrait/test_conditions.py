"""The conditions of a generated portrait, from our own face analysis and a matte: the photo covers the render's
canvas with the face centred, the OpenPose skeleton puts each part's colour where the face and the matte say (the
person's right on the image's left), the outline is the matte's boundary and nothing else, the adapter sees the face
where the ffhq-512 template puts it, and keep_face pastes the person's own face in its core and nothing outside."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from deployments.common.affine import apply_affine, compose_affine, invert_affine
from deployments.faces.align import FFHQ_512, align_face
from deployments.faces.analyze import FaceAnalysisPredictor
from deployments.faces.types import Face
from deployments.portrait.conditions import (
    ADAPTER_FACE_PX,
    EYE_LINE_FRAC,
    FACE_ELLIPSE_AXES,
    FACE_ELLIPSE_CENTRE,
    LEFT_EYE,
    LEFT_SHOULDER,
    NECK,
    NOSE,
    OPENPOSE_COLORS,
    RIGHT_EAR,
    RIGHT_EYE,
    RIGHT_SHOULDER,
    adapter_face,
    face_core,
    fit_canvas,
    keep_face,
    outline_condition,
    pose_condition,
)


@pytest.fixture(scope="module")
def analyzer(mediapipe_dir) -> FaceAnalysisPredictor:
    return FaceAnalysisPredictor(mediapipe_dir)


@pytest.fixture(scope="module")
def astronaut_face(analyzer, astronaut_rgb) -> Face:
    return analyzer.analyze(astronaut_rgb)[0]


def face_at(centre_x: float, eye_y: float, eye_px: float = 60.0) -> Face:
    """A level, frontal face drawn by hand for the geometry of the canvas: the ffhq-512 points scaled to ``eye_px``."""
    template_eye_px = FFHQ_512[1, 0] - FFHQ_512[0, 0]
    scale = eye_px / template_eye_px
    origin = np.array([centre_x, eye_y]) - scale * np.array([FFHQ_512[[0, 1, 3, 4], 0].mean(), FFHQ_512[:2, 1].mean()])
    landmarks = (FFHQ_512 * scale + origin).astype(np.float32)
    box = (centre_x - 1.1 * eye_px, eye_y - 0.8 * eye_px, centre_x + 1.1 * eye_px, eye_y + 1.6 * eye_px)
    return Face(box=box, score=1.0, landmarks=landmarks, roll_deg=0.0, chin=(centre_x, eye_y + 1.6 * eye_px))


def centroid(weights: np.ndarray) -> np.ndarray:
    """(x, y) of an HxW weight map."""
    rows, columns = np.indices(weights.shape)
    total = weights.sum()
    assert total > 0, "nothing to find"
    return np.array([(columns * weights).sum() / total, (rows * weights).sum() / total])


def colour_centroid(image: np.ndarray, colour: tuple[int, int, int]) -> np.ndarray:
    return centroid(np.all(image == colour, axis=2).astype(np.float64))


def gaussian_spots(size_wh: tuple[int, int], centres_xy: np.ndarray, sigma_px: float) -> np.ndarray:
    """HxW uint8: a bright round spot at each (sub-pixel) centre, black elsewhere."""
    rows, columns = np.indices((size_wh[1], size_wh[0]), dtype=np.float64)
    spots = np.zeros(rows.shape)
    for x, y in centres_xy:
        spots += np.exp(-((columns - x) ** 2 + (rows - y) ** 2) / (2 * sigma_px**2))
    return np.clip(np.rint(255 * spots), 0, 255).astype(np.uint8)


# the canvas


@pytest.mark.parametrize(
    ("photo_wh", "size_wh"),
    [((512, 512), (1024, 1024)), ((512, 512), (768, 1024)), ((1600, 900), (768, 1024)), ((1001, 667), (832, 1216))],
)
@pytest.mark.parametrize("face_xy", [(0.5, 0.4), (0.05, 0.1), (0.95, 0.9)])
def test_the_photo_covers_the_canvas_wherever_the_face_is(photo_wh, size_wh, face_xy):
    face = face_at(face_xy[0] * photo_wh[0], face_xy[1] * photo_wh[1], eye_px=0.05 * photo_wh[0])
    canvas = fit_canvas(photo_wh, face, size_wh)
    top_left, bottom_right = canvas.map_points(np.array([[-0.5, -0.5], [photo_wh[0] - 0.5, photo_wh[1] - 0.5]]))
    assert (canvas.width, canvas.height) == size_wh
    assert np.all(top_left <= -0.5 + 1e-6) and np.all(bottom_right >= np.array(size_wh) - 0.5 - 1e-6)


def test_a_wide_photo_centres_the_face_across_a_tall_canvas():
    canvas = fit_canvas((1600, 900), face_at(1000.0, 400.0), (768, 1024))
    centre_x = canvas.map_points(np.array([[1000.0, 400.0]]))[0, 0]
    assert abs(centre_x - (768 - 1) / 2) <= 0.5


def test_a_tall_photo_puts_the_eye_line_at_its_height_on_a_wide_canvas():
    canvas = fit_canvas((900, 1600), face_at(450.0, 700.0), (1024, 768))
    eye_y = canvas.map_points(np.array([[450.0, 700.0]]))[0, 1]
    assert abs(eye_y - (EYE_LINE_FRAC * 768 - 0.5)) <= 0.5


def test_a_face_near_the_photos_edge_is_clamped_so_the_photo_still_covers():
    canvas = fit_canvas((1600, 900), face_at(60.0, 400.0), (768, 1024))
    assert canvas.map_points(np.array([[-0.5, 0.0]]))[0, 0] == pytest.approx(-0.5)


def test_a_resized_canvas_frames_the_photo_the_same_at_another_size():
    canvas = fit_canvas((1600, 900), face_at(1000.0, 400.0), (768, 1024))
    bigger = canvas.resized(1152, 1536)
    points = np.array([[-0.5, -0.5], [1599.5, 899.5], [1000.0, 400.0]])
    assert np.allclose(bigger.map_points(points) + 0.5, 1.5 * (canvas.map_points(points) + 0.5))
    assert (bigger.width, bigger.height) == (1152, 1536) and bigger.scale == pytest.approx(1.5 * canvas.scale)


@pytest.mark.parametrize("interpolation", [cv2.INTER_AREA, cv2.INTER_LINEAR])
@pytest.mark.parametrize("size_wh", [(512, 512), (1216, 832)])
def test_a_photo_pixel_lands_where_map_points_says(interpolation, size_wh):
    spot_xy = np.array([[612.3, 333.7]])
    photo = gaussian_spots((1000, 700), spot_xy, sigma_px=6.0)
    canvas = fit_canvas((1000, 700), face_at(600.0, 300.0), size_wh)
    placed_matte = canvas.place(photo, interpolation=interpolation)
    placed_rgb = canvas.place(cv2.cvtColor(photo, cv2.COLOR_GRAY2RGB), interpolation=interpolation)
    assert placed_matte.shape == (size_wh[1], size_wh[0]) and placed_rgb.shape == (size_wh[1], size_wh[0], 3)
    expected = canvas.map_points(spot_xy)[0]
    assert np.abs(centroid(placed_matte.astype(np.float64)) - expected).max() < 0.05
    assert np.array_equal(placed_rgb[:, :, 1], placed_matte)


# the pose skeleton


@pytest.fixture(scope="module")
def tall_canvas(astronaut_face):
    return fit_canvas((512, 512), astronaut_face, (768, 1024))


def test_the_eyes_and_the_nose_are_drawn_in_their_colours_where_the_landmarks_map(astronaut_face, tall_canvas):
    skeleton = pose_condition(astronaut_face, tall_canvas, None)
    assert skeleton.shape == (1024, 768, 3) and skeleton.dtype == np.uint8
    marks = tall_canvas.map_points(astronaut_face.landmarks)
    for index, point in ((RIGHT_EYE, marks[0]), (LEFT_EYE, marks[1]), (NOSE, marks[2])):
        colour = OPENPOSE_COLORS[index]
        assert tuple(skeleton[round(point[1]), round(point[0])]) == colour
        assert np.abs(colour_centroid(skeleton, colour) - point).max() <= 1.0


def test_the_persons_right_is_drawn_on_the_image_left(astronaut_face, tall_canvas):
    skeleton = pose_condition(astronaut_face, tall_canvas, None)
    x = {index: colour_centroid(skeleton, OPENPOSE_COLORS[index])[0] for index in (RIGHT_EAR, RIGHT_EYE, LEFT_EYE)}
    x |= {index: colour_centroid(skeleton, OPENPOSE_COLORS[index])[0] for index in (RIGHT_SHOULDER, NECK)}
    x[LEFT_SHOULDER] = colour_centroid(skeleton, OPENPOSE_COLORS[LEFT_SHOULDER])[0]
    assert x[RIGHT_EAR] < x[RIGHT_EYE] < x[LEFT_EYE]
    assert x[RIGHT_SHOULDER] < x[NECK] < x[LEFT_SHOULDER]


def test_nothing_is_drawn_in_the_top_corners(astronaut_face, tall_canvas):
    skeleton = pose_condition(astronaut_face, tall_canvas, None)
    corner_h, corner_w = 1024 // 8, 768 // 4
    assert not skeleton[:corner_h, :corner_w].any() and not skeleton[:corner_h, -corner_w:].any()


def torso_matte(canvas_wh: tuple[int, int], face: Face, half_width_px: float) -> np.ndarray:
    """A drawn person: a head ellipse over the face box and a torso from below the chin to the bottom, ``half_width_px``
    either side of the chin."""
    matte = np.zeros((canvas_wh[1], canvas_wh[0]), np.uint8)
    x0, y0, x1, y1 = face.box
    head_centre = (round((x0 + x1) / 2), round((y0 + y1) / 2))
    cv2.ellipse(matte, head_centre, (round(0.6 * (x1 - x0)), round(0.7 * (y1 - y0))), 0, 0, 360, 255, -1)
    chin_x, chin_y = face.chin
    torso = ((round(chin_x - half_width_px), round(chin_y + 20)), (round(chin_x + half_width_px), canvas_wh[1]))
    cv2.rectangle(matte, *torso, 255, -1)
    return matte


def test_the_shoulders_follow_the_mattes_width(astronaut_face):
    canvas = fit_canvas((512, 512), astronaut_face, (512, 512))  # the photo as it is
    found = {}
    for half_width_px in (130, 150):
        matte = torso_matte((512, 512), astronaut_face, half_width_px)
        skeleton = pose_condition(astronaut_face, canvas, matte)
        right, left = (colour_centroid(skeleton, OPENPOSE_COLORS[i]) for i in (RIGHT_SHOULDER, LEFT_SHOULDER))
        neck = colour_centroid(skeleton, OPENPOSE_COLORS[NECK])
        edges = (astronaut_face.chin[0] - half_width_px, astronaut_face.chin[0] + half_width_px)
        face_px = astronaut_face.box[2] - astronaut_face.box[0]
        assert right[1] == pytest.approx(neck[1], abs=1.0) and left[1] == pytest.approx(neck[1], abs=1.0)
        assert edges[0] < right[0] < edges[0] + 0.5 * face_px and edges[1] - 0.5 * face_px < left[0] < edges[1]
        found[half_width_px] = (right[0], left[0])
    assert found[150][0] == pytest.approx(found[130][0] - 20, abs=1.0)
    assert found[150][1] == pytest.approx(found[130][1] + 20, abs=1.0)


def test_without_a_matte_or_with_an_empty_one_the_shoulders_come_from_the_face_width(astronaut_face):
    canvas = fit_canvas((512, 512), astronaut_face, (512, 512))
    bare = pose_condition(astronaut_face, canvas, None)
    assert np.array_equal(bare, pose_condition(astronaut_face, canvas, np.zeros((512, 512), np.uint8)))
    right, left = (colour_centroid(bare, OPENPOSE_COLORS[i]) for i in (RIGHT_SHOULDER, LEFT_SHOULDER))
    neck = colour_centroid(bare, OPENPOSE_COLORS[NECK])
    face_px = astronaut_face.box[2] - astronaut_face.box[0]
    assert neck[0] - right[0] == pytest.approx(left[0] - neck[0], abs=1.0)
    assert 0.9 * face_px <= left[0] - neck[0] <= 1.8 * face_px
    assert neck[1] > astronaut_face.chin[1]


def test_limbs_widen_with_the_canvas(astronaut_face):
    neck_to_nose = tuple(int(0.6 * c) for c in OPENPOSE_COLORS[12])  # limb 12 (neck -> nose) at 0.6 of its colour
    areas = {}
    for side_px in (512, 1024):
        canvas = fit_canvas((512, 512), astronaut_face, (side_px, side_px))
        areas[side_px] = np.all(pose_condition(astronaut_face, canvas, None) == neck_to_nose, axis=2).sum()
    assert 3.5 <= areas[1024] / areas[512] <= 4.5  # twice as long and twice as wide


# the outline


def test_the_outline_is_the_mattes_boundary_and_nothing_else():
    matte = np.zeros((384, 512), np.uint8)
    cv2.ellipse(matte, (250, 190), (190, 160), 20, 0, 360, 100, -1)  # a faint halo: not the person
    cv2.ellipse(matte, (250, 190), (150, 120), 20, 0, 360, 255, -1)
    matte = cv2.GaussianBlur(matte, (0, 0), 3)  # a soft matte: the threshold at 128 decides
    outline = outline_condition(matte)
    assert outline.shape == (384, 512, 3) and outline.dtype == np.uint8
    assert set(np.unique(outline)) == {0, 255} and np.array_equal(outline[:, :, 0], outline[:, :, 2])
    person = (matte >= 128).astype(np.uint8)
    kernel = np.ones((3, 3), np.uint8)
    boundary = cv2.dilate(person, kernel) != cv2.erode(person, kernel)  # the pixels either side of the threshold
    edges = outline[:, :, 0] > 0
    assert not (edges & ~boundary).any()
    inner_boundary = (person == 1) & (cv2.erode(person, kernel) == 0)
    assert (cv2.dilate(edges.astype(np.uint8), kernel)[inner_boundary] > 0).mean() > 0.95


def test_no_line_is_drawn_where_the_person_leaves_the_canvas():
    matte = np.zeros((256, 256), np.uint8)
    matte[120:, 60:200] = 255  # a torso cut by the bottom edge
    edges = outline_condition(matte)[:, :, 0] > 0
    bottom_columns = np.flatnonzero(edges[-3:].any(axis=0))
    assert len(bottom_columns) and np.all((np.abs(bottom_columns - 60) <= 2) | (np.abs(bottom_columns - 199) <= 2))


# the adapter's face


def test_the_adapter_face_puts_the_eyes_where_the_template_does():
    angle = np.deg2rad(12.0)
    similarity = 0.35 * np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    landmarks = (FFHQ_512 @ similarity.T + (300.0, 150.0)).astype(np.float32)
    photo = cv2.cvtColor(gaussian_spots((640, 480), landmarks[:2], sigma_px=2.0), cv2.COLOR_GRAY2RGB)
    face = Face(box=(0, 0, 1, 1), score=1.0, landmarks=landmarks, roll_deg=12.0, chin=(0.0, 0.0))
    crop = adapter_face(photo, face)
    assert crop.shape == (ADAPTER_FACE_PX, ADAPTER_FACE_PX, 3) and crop.dtype == np.uint8
    expected = (FFHQ_512[:2] + 0.5) * (ADAPTER_FACE_PX / 512) - 0.5
    half = ADAPTER_FACE_PX // 2
    found = [centroid(crop[:, :half, 0].astype(np.float64)), centroid(crop[:, half:, 0].astype(np.float64)) + (half, 0)]
    assert np.abs(np.array(found) - expected).max() < 0.2


def test_the_astronauts_adapter_face_is_found_with_its_eyes_on_the_template(analyzer, astronaut_rgb, astronaut_face):
    crop = adapter_face(astronaut_rgb, astronaut_face)
    found = analyzer.analyze(crop)
    assert len(found) == 1
    expected = (FFHQ_512[:2] + 0.5) * (ADAPTER_FACE_PX / 512) - 0.5
    assert np.abs(found[0].landmarks[:2] - expected).max() < 0.03 * ADAPTER_FACE_PX


# keep_face


def canvas_to_crop(canvas, face: Face, photo: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The aligned ffhq-512 crop of the photo's face and the canvas -> crop map (the photo's crop, seen from the
    canvas)."""
    aligned = align_face(photo, face.landmarks, "ffhq-512")
    return aligned.crop, compose_affine(aligned.matrix, invert_affine(canvas.matrix))


def ellipse_radius(canvas, to_crop: np.ndarray) -> np.ndarray:
    """Each canvas pixel's normalised radius in the face ellipse of the ffhq-512 crop (1 on its edge)."""
    rows, columns = np.indices((canvas.height, canvas.width), dtype=np.float64)
    crop_xy = apply_affine(to_crop, np.stack([columns.ravel(), rows.ravel()], axis=1))
    centre, axes = np.array(FACE_ELLIPSE_CENTRE) * 512 - 0.5, np.array(FACE_ELLIPSE_AXES) * 512
    return np.sqrt((((crop_xy - centre) / axes) ** 2).sum(axis=1)).reshape(canvas.height, canvas.width)


def test_keep_face_pastes_the_face_in_its_core_and_leaves_the_rest_bit_for_bit(
    astronaut_rgb, astronaut_face, tall_canvas
):
    generated = np.random.default_rng(3).integers(0, 256, (1024, 768, 3), dtype=np.uint8)
    result = keep_face(generated, astronaut_rgb, astronaut_face, tall_canvas)
    core = face_core(tall_canvas, astronaut_face)
    crop, to_crop = canvas_to_crop(tall_canvas, astronaut_face, astronaut_rgb)
    pasted = cv2.warpAffine(
        crop, invert_affine(to_crop), (768, 1024), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
    )
    assert np.abs(result.astype(int) - pasted)[core].max() <= 1
    # ... and it is her face where the canvas puts her: the photo placed on the canvas, not the render, is there.
    placed = tall_canvas.place(astronaut_rgb, interpolation=cv2.INTER_LINEAR).astype(int)
    assert np.abs(result.astype(int) - placed)[core].mean() < 2 < np.abs(generated.astype(int) - placed)[core].mean()
    reach = 2.0 / (min(FACE_ELLIPSE_AXES) * 512)  # a bilinear sample's reach, in ellipse radii
    outside = ellipse_radius(tall_canvas, to_crop) > 1.0 + reach
    assert np.array_equal(result[outside], generated[outside])
    changed = np.any(result != generated, axis=2)
    assert changed.sum() > 1.3 * core.sum()  # the feather blends a ring around the core


def test_the_core_covers_the_eyes_and_the_mouth(astronaut_face, tall_canvas):
    core = face_core(tall_canvas, astronaut_face)
    assert core.shape == (1024, 768) and core.dtype == bool
    for x, y in tall_canvas.map_points(astronaut_face.landmarks):
        assert core[round(y), round(x)]
    face_px = (astronaut_face.box[2] - astronaut_face.box[0]) * tall_canvas.scale
    assert core.sum() < face_px**2  # the inner face, not the head


def test_keep_face_pastes_a_restored_crop_of_any_side_when_given(astronaut_rgb, astronaut_face, tall_canvas):
    generated = np.full((1024, 768, 3), 128, np.uint8)
    restored = np.full((1024, 1024, 3), (10, 200, 30), np.uint8)
    result = keep_face(generated, astronaut_rgb, astronaut_face, tall_canvas, face_crop=restored)
    core = face_core(tall_canvas, astronaut_face)
    assert np.array_equal(result[core], np.broadcast_to(restored[0, 0], (int(core.sum()), 3)))
    _, to_crop = canvas_to_crop(tall_canvas, astronaut_face, astronaut_rgb)
    outside = ellipse_radius(tall_canvas, to_crop) > 1.01
    assert np.array_equal(result[outside], generated[outside])
