"""The small-face pass keeps a candidate only when independent looks agree (deployments/faces/confirm.py)."""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor

import cv2
import numpy as np
import pytest
from skimage import data

from deployments.common.errors import ModelUnavailable
from deployments.faces import confirm
from deployments.faces.confirm import (
    LOGIT_WEIGHTS,
    ClassicDetectors,
    Evidence,
    Looks,
    judged_probabilities,
    row_neighbours,
)
from deployments.faces.detect import SMOOTHING_SIGMA_PX
from deployments.faces.detection import Detection, DetectionParams, View
from tests.unit.faces.faces_samples import ASTRONAUT_BOX
from tests.unit.faces.group_photos import face_sources, make_old_group_photo

FACE_PX = 40  # the face's box side on the canvas
FACE_AT = (300, 200)  # its box's top-left
WALL_AT = ((40, 40), (520, 380), (60, 330), (200, 60))


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


@pytest.fixture(scope="module")
def views(small_face_on_bricks) -> tuple[View, View]:
    """The canvas and its smoothed copy, as the small-face pass sees them (no tile hits)."""
    return View(small_face_on_bricks, []), View(cv2.GaussianBlur(small_face_on_bricks, (0, 0), SMOOTHING_SIGMA_PX), [])


def _candidate(x0: float, y0: float, side: float, score: float = 0.2) -> Detection:
    box = np.array([x0, y0, x0 + side, y0 + side], np.float32)
    return Detection(box, score, np.zeros((4, 2), np.float32))


def test_the_looks_agree_on_a_small_face_and_not_on_a_wall(engine, views):
    face = _candidate(*FACE_AT, FACE_PX)
    walls = [_candidate(x0, y0, FACE_PX) for x0, y0 in WALL_AT]
    evidence = engine.detector.judge.gather(*views, [face, *walls])
    on_face, on_walls = evidence[0], evidence[1:]
    for looks in (on_face.photo, on_face.smoothed):
        assert looks.onet_shifted > 0.9 and looks.blazeface > 0.5
        assert looks.onet_eye_drift < 0.1 and looks.onet_mirror_eye_error < 0.05  # the eyes stay put
        assert looks.hog is not None and looks.hog > 0.0  # above dlib's own bar
    assert on_face.probability() > 0.99
    assert all(look.probability() < 0.05 for look in on_walls), [look.probability() for look in on_walls]


def test_confirmed_small_faces_carry_their_probability_and_duplicates_go(engine, views):
    params = DetectionParams()
    face = _candidate(*FACE_AT, FACE_PX)
    inside = _candidate(FACE_AT[0] + 8, FACE_AT[1] + 8, 24)  # a part of the same face
    wall = _candidate(40, 40, FACE_PX, score=0.69)
    sure_large = _candidate(420, 250, 150, score=0.9)  # above small_face_max_px: judged by its score alone
    weak_large = _candidate(100, 250, 150, score=0.6)
    kept = engine.detector.judge.confirm(*views, [face, inside, wall, sure_large, weak_large], params)
    assert [d.box.tolist() for d in kept] == [face.box.tolist(), sure_large.box.tolist()]  # best first
    evidence = engine.detector.judge.gather(*views, [face])[0]
    alone = judged_probabilities(face.box[None], np.array([evidence.logit()]))[0]  # no row around it
    assert kept[0].score == pytest.approx(alone) and alone > sure_large.score


def test_the_judge_looks_at_no_more_than_its_bound_best_first(engine, views, monkeypatch):
    """Noise or dense texture can raise hundreds of candidates (775 on 12 MP of noise): the judge's time stays
    bounded by judging only the ``MAX_JUDGED`` best by their detectors' score."""
    judge, judged = engine.detector.judge, []
    real_gather = judge.gather

    def spy(photo: View, smoothed: View, small: list[Detection]) -> list[Evidence]:
        judged.extend(d.score for d in small)
        return real_gather(photo, smoothed, small)

    monkeypatch.setattr(confirm, "MAX_JUDGED", 2)
    monkeypatch.setattr(judge, "gather", spy)
    walls = [_candidate(x0, y0, FACE_PX, score) for (x0, y0), score in zip(WALL_AT, (0.3, 0.6, 0.4, 0.5))]
    assert judge.confirm(*views, walls, DetectionParams()) == []
    assert judged == [0.6, 0.5]


def test_one_judge_serves_many_threads_with_the_same_answers(engine, views):
    """Ray replicas run batched work in worker threads; each gets its own cascades and interpreters."""
    candidates = [_candidate(*FACE_AT, FACE_PX)] + [_candidate(x0, y0, FACE_PX) for x0, y0 in WALL_AT]
    alone = engine.detector.judge.gather(*views, candidates)
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda _: engine.detector.judge.gather(*views, candidates), range(8)))
    assert all(evidence == alone for evidence in together)


def _row(count: int, side: float = 40.0, spacing: float = 2.0, y0: float = 100.0) -> list[np.ndarray]:
    return [np.array([50 + i * spacing * side, y0, 50 + i * spacing * side + side, y0 + side]) for i in range(count)]


def test_a_neighbour_stands_beside_a_box_in_its_row_at_its_size():
    row = _row(3, spacing=3.0)  # the first and the last 6 sides apart: beyond ROW_DX_PER_SIDE
    boxes = np.stack(
        [
            *row,
            row[2] + [10, 5, 10, 5],  # a second box on the third face: not its own neighbour
            row[0] + [0, 30, 0, 30],  # 0.75 side lower: another row
            np.array([380.0, 100.0, 390.0, 110.0]),  # right of the row at a quarter of its size
        ]
    )
    sure = np.array([0.95, 0.95, 0.95, 0.95, 0.95, 0.95])
    assert row_neighbours(boxes, sure).tolist() == [1, 2, 1, 1, 0, 0]
    doubtful_middle = np.array([0.95, 0.5, 0.95, 0.95, 0.95, 0.95])
    assert row_neighbours(boxes, doubtful_middle).tolist() == [0, 2, 0, 0, 0, 0]


def test_looks_too_weak_alone_confirm_a_face_between_two_faces_of_its_row():
    """The row weighs with the evidence: a candidate whose looks give 0.9 is no face alone, but is one between
    two well-evidenced faces of its size; well-evidenced faces stay faces alone."""
    bar = DetectionParams().small_face_threshold
    weak, sure = np.log(0.9 / 0.1), np.log(0.999 / 0.001)
    row = np.stack(_row(3))
    assert judged_probabilities(row[1:2], np.array([weak]))[0] < bar
    assert judged_probabilities(row, np.array([sure, weak, sure]))[1] >= bar
    assert judged_probabilities(row[:1], np.array([sure]))[0] >= bar


def test_the_weights_name_every_look_on_every_view():
    looks = {field.name for field in dataclasses.fields(Looks)}
    assert set(LOGIT_WEIGHTS) == {field.name for field in dataclasses.fields(Evidence)}
    assert all(set(weights) == looks for weights in LOGIT_WEIGHTS.values())


def test_a_silent_classic_detector_counts_against_a_candidate():
    heard = Looks(0.9, 0.02, 0.02, 0.8, 0.6, 0.7, haar_default=5.0, haar_alt2=55.0, hog=0.5)
    silent = dataclasses.replace(heard, haar_default=None, haar_alt2=None, hog=None)
    assert Evidence(silent, heard).logit() < Evidence(heard, heard).logit()
    assert Evidence(heard, silent).logit() < Evidence(heard, heard).logit()


def test_without_opencvs_cascades_the_judge_cannot_load(tmp_path):
    with pytest.raises(ModelUnavailable, match="haarcascade_frontalface_default.xml"):
        ClassicDetectors(tmp_path)


def test_clutter_leaves_every_face_where_it_was():
    """The cluttered set draws from its own random stream: the same seed places the same faces, shifted only by
    the print's border, so recall before and after clutter compares face for face."""
    sources = face_sources(None)
    plain = make_old_group_photo(sources, seed=3, max_faces=12, clutter=False)
    busy = make_old_group_photo(sources, seed=3, max_faces=12)
    shift = busy.boxes - plain.boxes
    np.testing.assert_allclose(shift, np.broadcast_to(shift[0], shift.shape))
    assert shift[0, 0] > 0 and busy.rgb.shape[1] > plain.rgb.shape[1]
