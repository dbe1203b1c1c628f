"""Phone photos stored sideways with an EXIF orientation: faces come back upright, in the upright frame."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from deployments.common.image import decode_image


@pytest.mark.parametrize("orientation, stored_rotation_k", [(6, 1), (8, -1), (3, 2)])
def test_exif_rotated_selfie_gives_upright_landmarks(engine, astronaut_rgb, orientation, stored_rotation_k):
    stored = np.ascontiguousarray(np.rot90(astronaut_rgb, k=stored_rotation_k))  # what the sensor wrote
    exif = Image.Exif()
    exif[0x0112] = orientation
    buffer = io.BytesIO()
    Image.fromarray(stored).save(buffer, format="JPEG", quality=92, exif=exif.tobytes())
    decoded = decode_image(buffer.getvalue())
    [face] = engine.analyze(decoded.rgb)
    left_eye, right_eye = face.landmarks[0], face.landmarks[1]
    assert decoded.rgb.shape == astronaut_rgb.shape
    assert left_eye[0] < right_eye[0] and abs(face.roll_deg) < 15
    assert np.allclose(left_eye, [204, 101], atol=8) and np.allclose(right_eye, [247, 104], atol=8)
