"""Face counts on real evaluation photos (../shared/eval) and on a synthetic group photo."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from deployments.common.image import decode_image
from tests.unit.faces.faces_samples import face_sources, make_group_photo

EXPECTED_FACES = {
    "codeformer_00.jpg": 4,
    "codeformer_02.png": 4,
    "gfpgan_00.jpg": 2,
    "gfpgan_10045.png": 3,
    "gfpgan_blake_lively.jpg": 2,
    "gpen_selfie_20201217.jpg": 1,  # eyes hidden under a hat brim
}


def _read_rgb(path) -> np.ndarray:
    """Through the service's own decoder, so EXIF orientation is applied as in production."""
    return decode_image(path.read_bytes()).rgb


@pytest.mark.eval
@pytest.mark.parametrize("name", sorted(EXPECTED_FACES))
def test_eval_photo_face_count(engine, shared_dir, name):
    faces = engine.analyze(_read_rgb(shared_dir / "eval" / "whole" / name))
    assert len(faces) == EXPECTED_FACES[name], [f.to_json() for f in faces]
    areas = [(f.box[2] - f.box[0]) * (f.box[3] - f.box[1]) for f in faces]
    assert areas == sorted(areas, reverse=True)


@pytest.mark.eval
def test_real_small_faces_pass_the_small_face_judge(engine, shared_dir):
    """The eval photos are too small for the small-face pass (under ``small_face_min_image_px``, or faces over
    ``small_face_max_px``): set on a larger canvas, their real small faces go through the judge, a row of four 40 px
    faces and a family of three (one of them alone in its row), and come out as they are, nothing added."""
    row = _read_rgb(shared_dir / "eval" / "whole" / "codeformer_00.jpg")  # 491 px wide
    on_grey = cv2.copyMakeBorder(row, 300, 300, 400, 400, cv2.BORDER_CONSTANT, value=(128, 128, 128))
    family = _read_rgb(shared_dir / "eval" / "whole" / "gfpgan_10045.png")  # 783 x 1146
    larger = cv2.resize(family, None, fx=1.1, fy=1.1, interpolation=cv2.INTER_CUBIC)  # faces 82–97 px
    params = engine.config
    for photo, expected in ((on_grey, 4), (larger, 3)):
        assert params.small_face_pass(photo.shape[1], photo.shape[0])
        faces = engine.analyze(photo)
        assert len(faces) == expected, [f.to_json() for f in faces]
        assert all(max(f.box[2] - f.box[0], f.box[3] - f.box[1]) <= params.small_face_max_px for f in faces)


@pytest.mark.parametrize("seed", [0, 1])
def test_group_photo_of_thirty_small_faces(engine, astronaut_rgb, seed):
    from tests.conftest import SHARED_DIR

    photo, truths = make_group_photo(face_sources(SHARED_DIR / "eval" / "faces", astronaut_rgb), seed=seed)
    faces = engine.analyze(photo)
    found, false_positives = set(), 0
    for face in faces:
        errors = [np.linalg.norm(face.landmarks[:2] - eyes, axis=1).max() for eyes in truths]
        best = int(np.argmin(errors))
        if errors[best] < 0.5 * np.linalg.norm(truths[best][1] - truths[best][0]):
            found.add(best)
        else:
            false_positives += 1
    assert len(found) >= 0.9 * len(truths), f"found {len(found)} of {len(truths)}"
    assert false_positives == 0
