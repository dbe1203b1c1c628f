"""Tiled upscaling equals one full Lanczos resize and refuses absurd outputs."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from deployments.common.errors import InvalidParameter
from deployments.common.upscale import upscale_image


@pytest.mark.parametrize("factor", [2, 4])
def test_tiles_match_a_single_resize(astronaut_rgb, factor):
    photo = astronaut_rgb[:300, :450]
    tiled = upscale_image(photo, factor, tile_px=128)
    whole = cv2.resize(photo, (450 * factor, 300 * factor), interpolation=cv2.INTER_LANCZOS4)
    assert np.array_equal(tiled, whole)


def test_factor_one_returns_the_input(astronaut_rgb):
    assert upscale_image(astronaut_rgb, 1) is astronaut_rgb


def test_other_factors_and_huge_outputs_are_refused(astronaut_rgb):
    with pytest.raises(InvalidParameter, match="1, 2 or 4"):
        upscale_image(astronaut_rgb, 3)
    with pytest.raises(InvalidParameter, match="smaller factor"):
        upscale_image(astronaut_rgb, 4, max_output_pixels=1_000_000)
