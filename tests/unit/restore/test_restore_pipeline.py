"""The restoration job's pure steps: which faces, and where restored crops land."""

from __future__ import annotations

import numpy as np
import pytest

from deployments.common.engine import EngineInfo
from deployments.common.errors import InvalidParameter
from deployments.common.params import parse_params
from deployments.faces.align import align_face
from deployments.faces.types import Face
from deployments.restore.params import RestoreParams
from deployments.restore.pipeline import composite, select_faces
from deployments.restore.types import RestoredFace

ASTRONAUT_POINTS = np.array([[204, 101], [247, 104], [226, 128], [209, 149], [242, 151]], dtype=np.float32)


def _face(x0: float, y0: float, side: float) -> Face:
    return Face(box=(x0, y0, x0 + side, y0 + side), score=0.9, landmarks=ASTRONAUT_POINTS, roll_deg=0.0, chin=(0, 0))


def test_max_faces_keeps_the_first_ones():
    faces = [_face(0, 0, 50), _face(100, 0, 40), _face(200, 0, 30)]
    assert select_faces(faces, 400, 400, parse_params(RestoreParams, {"max_faces": "2"})) == faces[:2]


def test_only_center_face_picks_the_nearest_to_the_centre():
    faces = [_face(0, 0, 50), _face(180, 180, 40), _face(350, 0, 30)]
    chosen = select_faces(faces, 400, 400, parse_params(RestoreParams, {"only_center_face": "true"}))
    assert chosen == [faces[1]]


def test_form_strings_are_coerced_and_unknown_options_refused():
    params = parse_params(RestoreParams, {"upscale": "4", "blend": "0.25", "return": "json"})
    assert (params.upscale, params.blend, params.return_) == (4, 0.25, "json")
    with pytest.raises(InvalidParameter, match="colour"):
        parse_params(RestoreParams, {"colour": "red"})


def test_a_small_restored_crop_lands_where_the_face_was(astronaut_rgb):
    aligned = align_face(astronaut_rgb, ASTRONAUT_POINTS, "gpen-512")
    white = RestoredFace(crop=np.full((64, 64, 3), 255, np.uint8), engine=EngineInfo("test", neural=False))
    result = composite(astronaut_rgb, [aligned], [white], parse_params(RestoreParams, {}))
    changed = np.argwhere(np.abs(result.astype(int) - astronaut_rgb.astype(int)).sum(axis=2) > 0)
    centre_y, centre_x = changed.mean(axis=0)
    assert abs(centre_x - 226) < 15 and abs(centre_y - 125) < 25
    assert result[125, 226].tolist() == [255, 255, 255]
    assert np.array_equal(result[400:], astronaut_rgb[400:])
