"""The classic (non-neural) cartoon engine: contract, posterization, dark line art, determinism."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from deployments.cartoon.classic import cartoonize_classic
from deployments.common.errors import InvalidParameter


def luminance(image_rgb: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(image_rgb, cv2.COLOR_RGB2GRAY).astype(np.float64)


def distinct_colours(image_rgb: np.ndarray) -> int:
    return len(np.unique(image_rgb.reshape(-1, 3), axis=0))


def test_contract_shape_and_dtype(astronaut_rgb: np.ndarray) -> None:
    out = cartoonize_classic(astronaut_rgb)

    assert out.shape == astronaut_rgb.shape and out.dtype == np.uint8 and out.flags.c_contiguous


def test_fewer_distinct_colours(astronaut_rgb: np.ndarray) -> None:
    assert distinct_colours(cartoonize_classic(astronaut_rgb)) < distinct_colours(astronaut_rgb) / 20


def test_edges_are_darker(astronaut_rgb: np.ndarray) -> None:
    out = cartoonize_classic(astronaut_rgb)
    edges = cv2.dilate(cv2.Canny(cv2.cvtColor(astronaut_rgb, cv2.COLOR_RGB2GRAY), 100, 200), np.ones((3, 3))) > 0

    def edge_contrast(image: np.ndarray) -> float:
        lum = luminance(image)
        return lum[edges].mean() / lum[~edges].mean()

    assert edge_contrast(out) < edge_contrast(astronaut_rgb) - 0.05


def test_a_step_edge_gets_a_dark_line() -> None:
    image = np.full((64, 64, 3), 200, dtype=np.uint8)
    image[:, 32:] = 120

    lum = luminance(cartoonize_classic(image))

    band = lum[8:-8, 28:36].min(axis=1)
    assert (band < 0.6 * lum[8:-8, 40:].mean()).all()  # a line along the boundary, darker than the dark side
    assert np.ptp(lum[8:-8, 4:20]) == 0 and np.ptp(lum[8:-8, 44:60]) == 0  # flat regions stay flat


def test_deterministic(astronaut_rgb: np.ndarray) -> None:
    assert np.array_equal(cartoonize_classic(astronaut_rgb), cartoonize_classic(astronaut_rgb.copy()))


@pytest.mark.parametrize(
    "image",
    [
        np.zeros((32, 32), np.uint8),
        np.zeros((32, 32, 4), np.uint8),
        np.zeros((32, 32, 3), np.float32),
        np.zeros((2, 32, 3), np.uint8),
    ],
    ids=["gray", "rgba", "float", "tiny"],
)
def test_rejects_images_outside_the_contract(image: np.ndarray) -> None:
    with pytest.raises(InvalidParameter):
        cartoonize_classic(image)
