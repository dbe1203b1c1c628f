"""Face counts on real evaluation photos (../shared/eval) and on a synthetic group photo."""

from __future__ import annotations

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
