"""The small-face pass keeps a candidate only after a second look (deployments/faces/confirm.py)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from skimage import data

from deployments.faces.confirm import CANDIDATE_THRESHOLD, RECHECK_MIN_SCORE, confirm_small_faces, recheck_score
from deployments.faces.detect import Detection, DetectionParams
from tests.unit.faces.faces_samples import ASTRONAUT_BOX
from tests.unit.faces.group_photos import face_sources, make_old_group_photo

FACE_PX = 40  # the face's box side on the canvas
FACE_AT = (300, 200)  # its box's top-left


@pytest.fixture(scope="module")
def small_face_on_bricks(astronaut_rgb) -> np.ndarray:
    """The astronaut's face at 40 px on a brick wall (grey, as in an old photo): box at ``FACE_AT``."""
    wall = cv2.resize(data.brick(), (640, 480))
    canvas = np.repeat(wall[:, :, None], 3, axis=2)
    scale = FACE_PX / (ASTRONAUT_BOX[2] - ASTRONAUT_BOX[0])
    small = cv2.resize(astronaut_rgb, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    grey = cv2.cvtColor(cv2.cvtColor(small, cv2.COLOR_RGB2GRAY), cv2.COLOR_GRAY2RGB)
    x0, y0 = round(FACE_AT[0] - ASTRONAUT_BOX[0] * scale), round(FACE_AT[1] - ASTRONAUT_BOX[1] * scale)
    region = canvas[y0 : y0 + grey.shape[0], x0 : x0 + grey.shape[1]]
    region[:] = grey[: region.shape[0], : region.shape[1]]
    return canvas


def _candidate(x0: float, y0: float, side: float, score: float = 0.9) -> Detection:
    box = np.array([x0, y0, x0 + side, y0 + side], np.float32)
    return Detection(box, score, np.zeros((4, 2), np.float32))


def test_blazeface_sees_a_small_face_again_but_not_a_wall(engine, small_face_on_bricks):
    run_window = engine.detector.short_range.run_window
    face = _candidate(*FACE_AT, FACE_PX)
    assert recheck_score(small_face_on_bricks, face, run_window) > 0.5
    for x0, y0 in ((40, 40), (520, 380), (60, 330)):
        assert recheck_score(small_face_on_bricks, _candidate(x0, y0, FACE_PX), run_window) < RECHECK_MIN_SCORE


def test_collar_face_part_and_wall_candidates_are_dropped(engine, small_face_on_bricks):
    face = _candidate(*FACE_AT, FACE_PX)
    collar = _candidate(FACE_AT[0] + 10, FACE_AT[1] + 30, 22)  # a face lower, under it, half as wide
    eye = _candidate(FACE_AT[0] + 5, FACE_AT[1] + 8, 16)  # inside the face
    wall = _candidate(40, 40, FACE_PX)
    large_on_wall = _candidate(420, 250, 150)  # above small_face_max_px: judged by its score alone
    weak_face = _candidate(*FACE_AT, FACE_PX, score=0.55)  # context only, too weak to keep
    params = DetectionParams()
    candidates = [face, collar, eye, wall, large_on_wall]
    kept = confirm_small_faces(small_face_on_bricks, candidates, engine.detector.short_range.run_window, params)
    assert kept == [face, large_on_wall]
    kept = confirm_small_faces(
        small_face_on_bricks, [weak_face, collar], engine.detector.short_range.run_window, params
    )
    assert kept == []  # the collar goes even though the face above it is too weak to be kept
    assert CANDIDATE_THRESHOLD < weak_face.score < params.small_face_threshold


def test_clutter_leaves_every_face_where_it_was():
    """The cluttered set draws from its own random stream: the same seed places the same faces, shifted only by
    the print's border, so recall before and after clutter compares face for face."""
    sources = face_sources(None)
    plain = make_old_group_photo(sources, seed=3, max_faces=12, clutter=False)
    busy = make_old_group_photo(sources, seed=3, max_faces=12)
    shift = busy.boxes - plain.boxes
    np.testing.assert_allclose(shift, np.broadcast_to(shift[0], shift.shape))
    assert shift[0, 0] > 0 and busy.rgb.shape[1] > plain.rgb.shape[1]
