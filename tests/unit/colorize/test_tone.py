"""The monochrome reading behind restore ``colorize=auto``: gray and toned prints are monochrome, colour photos not."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from skimage import data

from deployments.colorize.tone import MONOCHROME_MAX_STRAY, read_tone


def gray(rgb: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY), cv2.COLOR_GRAY2RGB)


def sepia(rgb: np.ndarray) -> np.ndarray:
    matrix = np.array([[0.393, 0.769, 0.189], [0.349, 0.686, 0.168], [0.272, 0.534, 0.131]])
    return np.clip(gray(rgb).astype(np.float32) @ matrix.T, 0, 255).astype(np.uint8)


def jpeg(rgb: np.ndarray) -> np.ndarray:
    _, encoded = cv2.imencode(".jpg", rgb[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, 50])
    return cv2.imdecode(encoded, cv2.IMREAD_COLOR)[..., ::-1]


@pytest.mark.parametrize("name", ["astronaut", "coffee", "chelsea"])
def test_colour_photos_are_not_monochrome_and_their_prints_are(name: str) -> None:
    photo = getattr(data, name)()
    colour = read_tone(photo)
    assert not colour.monochrome and colour.stray > MONOCHROME_MAX_STRAY + 2
    for print_ in (gray(photo), sepia(photo), jpeg(sepia(photo))):
        reading = read_tone(print_)
        assert reading.monochrome and reading.stray < MONOCHROME_MAX_STRAY - 1


def test_a_sepia_print_reads_its_warm_tint() -> None:
    reading = read_tone(sepia(data.astronaut()))
    assert reading.tint[0] > 1.0 and reading.tint[1] > 5.0  # red-yellow: positive a and b
    assert read_tone(gray(data.astronaut())).to_json() == {"monochrome": True, "stray": 0.05, "tint": [0.02, 0.0]}
