"""Tiles: equal shapes for batching, every pixel kept exactly once, windows that match the image and its reflection."""

from __future__ import annotations

import numpy as np
import pytest

from deployments.common.errors import InternalError, InvalidParameter
from deployments.restore.tiles import merge_tiles, split_tiles


def noise_image(height: int, width: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


def nearest_upscale(pixels: np.ndarray, scale: int) -> np.ndarray:
    """A stand-in network with no context at all: tiling it must reproduce it exactly."""
    return pixels.repeat(scale, axis=0).repeat(scale, axis=1)


@pytest.mark.parametrize(
    ("height", "width", "tile_px", "overlap_px", "multiple_px"),
    [(100, 80, 32, 8, 1), (45, 37, 16, 4, 2), (33, 64, 16, 0, 1), (7, 5, 16, 6, 2), (64, 64, 64, 10, 1)],
)
@pytest.mark.parametrize("scale", [1, 2, 4])
def test_merge_of_tiles_reproduces_a_pointwise_upscale(
    height: int, width: int, tile_px: int, overlap_px: int, multiple_px: int, scale: int
) -> None:
    rgb = noise_image(height, width)
    tiles = split_tiles(rgb, tile_px=tile_px, overlap_px=overlap_px, multiple_px=multiple_px)
    window_px = tile_px + 2 * overlap_px
    assert all(tile.pixels.shape == (window_px, window_px, 3) and tile.pixels.dtype == np.uint8 for tile in tiles)
    merged = merge_tiles(
        tiles, [nearest_upscale(tile.pixels, scale) for tile in tiles], scale=scale, image_hw=(height, width)
    )
    assert np.array_equal(merged, nearest_upscale(rgb, scale))


def test_grid_follows_the_official_tiler_and_shifts_the_last_tile_back() -> None:
    tiles = split_tiles(noise_image(100, 40), tile_px=32, overlap_px=8)
    rows = sorted({(tile.top_px, tile.height_px, tile.inner_top_px) for tile in tiles})
    # Cores at 0, 32, 64 as RealESRGANer; the fourth window is moved back to end at row 100, keeping rows 96..99.
    assert rows == [(0, 32, 8), (32, 32, 8), (64, 32, 8), (96, 4, 8 + 28)]
    columns = sorted({(tile.left_px, tile.width_px, tile.inner_left_px) for tile in tiles})
    assert columns == [(0, 32, 8), (32, 8, 8 + 24)]
    assert len(tiles) == 8


def test_windows_inside_the_image_are_plain_crops_and_borders_are_reflections() -> None:
    rgb = noise_image(100, 90)
    tiles = split_tiles(rgb, tile_px=32, overlap_px=8)
    inner = next(tile for tile in tiles if tile.top_px == 32 and tile.left_px == 32)
    assert np.array_equal(inner.pixels, rgb[24:72, 24:72])
    corner = tiles[0]
    assert np.array_equal(corner.pixels, np.pad(rgb, ((8, 0), (8, 0), (0, 0)), mode="reflect")[:48, :48])
    last = tiles[-1]  # shifted back: its window ends 8 px (the overlap) past the bottom-right corner
    assert np.array_equal(last.pixels, np.pad(rgb, ((0, 8), (0, 8), (0, 0)), mode="reflect")[60:108, 50:98])


def test_small_image_is_one_reflected_tile() -> None:
    rgb = noise_image(5, 9)
    (tile,) = split_tiles(rgb, tile_px=16, overlap_px=4)
    assert (tile.top_px, tile.left_px, tile.height_px, tile.width_px) == (0, 0, 5, 9)
    assert (tile.inner_top_px, tile.inner_left_px) == (4, 4)
    assert np.array_equal(tile.pixels[4:9, 4:13], rgb)
    # Row −1 is row 1; columns reflect the same way, past the right edge as far as the tile needs (bouncing back).
    columns = [4, 3, 2, 1, *range(9), 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3]
    assert np.array_equal(tile.pixels[3], rgb[1][columns])


def test_odd_sides_are_padded_to_the_multiple_and_windows_start_on_it() -> None:
    tiles = split_tiles(noise_image(45, 37), tile_px=16, overlap_px=4, multiple_px=2)
    # Window starts (core start − overlap) in image coordinates must be even for a pixel-unshuffle ×2 network.
    assert all((tile.top_px - (tile.inner_top_px - 4)) % 2 == 0 for tile in tiles)
    assert all((tile.left_px - (tile.inner_left_px - 4)) % 2 == 0 for tile in tiles)
    assert sum(tile.height_px * tile.width_px for tile in tiles) == 45 * 37


@pytest.mark.parametrize(
    ("tile_px", "overlap_px", "multiple_px", "match"),
    [
        (0, 4, 1, "tile_px >= 1"),
        (16, -1, 1, "overlap_px >= 0"),
        (15, 4, 2, "multiples of 2"),
        (16, 5, 2, "multiples"),
        (16, 4, 0, "multiple_px"),
    ],
)
def test_bad_tile_parameters_are_refused(tile_px: int, overlap_px: int, multiple_px: int, match: str) -> None:
    with pytest.raises(InvalidParameter, match=match):
        split_tiles(noise_image(20, 20), tile_px=tile_px, overlap_px=overlap_px, multiple_px=multiple_px)


def test_split_refuses_what_is_not_the_image_contract() -> None:
    with pytest.raises(InvalidParameter):
        split_tiles(np.zeros((8, 8), np.uint8), tile_px=4, overlap_px=0)
    with pytest.raises(InvalidParameter):
        split_tiles(np.zeros((8, 8, 3), np.float32), tile_px=4, overlap_px=0)


def test_merge_checks_its_inputs_are_consistent() -> None:
    tiles = split_tiles(noise_image(20, 20), tile_px=8, overlap_px=2)
    upscaled = [nearest_upscale(tile.pixels, 2) for tile in tiles]
    with pytest.raises(InternalError, match="upscaled tiles"):
        merge_tiles(tiles, upscaled[:-1], scale=2, image_hw=(20, 20))
    with pytest.raises(InternalError, match="cover"):
        merge_tiles(tiles, upscaled, scale=2, image_hw=(20, 24))
    with pytest.raises(InternalError, match="must be 24 px square"):
        merge_tiles(tiles, [nearest_upscale(tile.pixels, 4) for tile in tiles], scale=2, image_hw=(20, 20))
