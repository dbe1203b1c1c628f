"""Cutting an image into equal, overlapping square tiles for a fully convolutional upscaler, and pasting the results.

Every tile has the same shape, ``tile_px + 2 * overlap_px`` square, so tiles from many photos stack into one batch
(what a batching deployment needs), and no forward pass ever sees more than one tile: a 12 MP photo at ×4 costs the
device one batch of tiles, never the whole image.

The layout is that of ``RealESRGANer.tile_process`` (xinntao/Real-ESRGAN): cores of ``tile_px`` on a grid from the
top-left corner, each read with ``overlap_px`` of context on every side, and only the core's upscaled pixels kept.
Where the official tiler shrinks tiles at the image border, these keep their shape:

- context beyond the image is its reflection (``numpy.pad`` ``reflect``), on all four sides;
- the last row/column of tiles is shifted back to end at the image edge (its cores overlap the previous ones; only
  the pixels not yet covered are kept), so it sees real pixels rather than padding;
- an image side shorter than ``tile_px`` is reflected up to it;
- a side that is not a multiple of ``multiple_px`` (2 for a pixel-unshuffle ×2 network) is reflected up to one, as
  ``RealESRGANer.pre_process`` pads, and every window starts on that multiple, so the network groups pixels exactly as
  it would over the whole image. This module is who pads: a network's forward only checks.

So tiles whose window lies inside the image are exactly the official tiles; and when ``overlap_px`` covers the
network's receptive field, the merged result equals one forward pass over the reflect-padded image.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from deployments.common.errors import InternalError, InvalidParameter
from deployments.common.image import require_image


@dataclass(frozen=True, eq=False)
class Tile:
    """One window of an image: ``pixels`` is what the network sees; the core it contributes is
    ``height_px × width_px`` at (``top_px``, ``left_px``) in the image and at (``inner_top_px``, ``inner_left_px``)
    in ``pixels``."""

    pixels: np.ndarray
    top_px: int
    left_px: int
    height_px: int
    width_px: int
    inner_top_px: int
    inner_left_px: int


@dataclass(frozen=True)
class _Span:
    """One tile along one axis, in image coordinates: its window starts at ``core_start - overlap``; it keeps
    ``[keep_start, keep_end)``."""

    core_start: int
    keep_start: int
    keep_end: int


def realesrgan_multiple_px(scale: int) -> int:
    """What ``split_tiles`` aligns windows to for Real-ESRGAN at ``scale``: x2plus pixel-unshuffles its input by 2.
    (Here, not beside the network, so the ingress can cut tiles without importing torch.)"""
    return 2 if scale == 2 else 1


def split_tiles(rgb: np.ndarray, *, tile_px: int, overlap_px: int, multiple_px: int = 1) -> list[Tile]:
    """Cut ``rgb`` (HxWx3 uint8) into tiles of ``tile_px + 2 * overlap_px`` square, row by row.

    ``tile_px`` and ``overlap_px`` must be multiples of ``multiple_px`` (the network's input granularity).
    """
    require_image(rgb)
    if multiple_px < 1:
        raise InvalidParameter(f"multiple_px must be at least 1, got {multiple_px}")
    if tile_px < 1 or overlap_px < 0:
        raise InvalidParameter(f"tiles need tile_px >= 1 and overlap_px >= 0, got {tile_px} and {overlap_px}")
    if tile_px % multiple_px or overlap_px % multiple_px:
        raise InvalidParameter(
            f"tile_px ({tile_px}) and overlap_px ({overlap_px}) must be multiples of {multiple_px} for this network"
        )
    height, width = rgb.shape[:2]
    rows = _spans(height, tile_px, multiple_px)
    columns = _spans(width, tile_px, multiple_px)
    padded = np.pad(
        rgb,
        (
            (overlap_px, _window_end(rows, tile_px) - height + overlap_px),
            (overlap_px, _window_end(columns, tile_px) - width + overlap_px),
            (0, 0),
        ),
        mode="reflect",
    )
    window_px = tile_px + 2 * overlap_px
    return [
        Tile(
            pixels=padded[
                row.core_start : row.core_start + window_px, col.core_start : col.core_start + window_px
            ].copy(),
            top_px=row.keep_start,
            left_px=col.keep_start,
            height_px=row.keep_end - row.keep_start,
            width_px=col.keep_end - col.keep_start,
            inner_top_px=overlap_px + row.keep_start - row.core_start,
            inner_left_px=overlap_px + col.keep_start - col.core_start,
        )
        for row in rows
        for col in columns
    ]


def paste_tile(out: np.ndarray, tile: Tile, upscaled: np.ndarray, scale: int) -> None:
    """Write the upscaled core of ``tile`` into ``out`` (the ``scale``× image), so a caller can merge batch by batch
    without holding every upscaled tile."""
    window_px = tile.pixels.shape[0]
    if upscaled.shape != (window_px * scale, window_px * scale, out.shape[2]):
        raise InternalError(
            f"an upscaled tile of {window_px} px at ×{scale} must be {window_px * scale} px square with "
            f"{out.shape[2]} channels, got {upscaled.shape}"
        )
    top, left = tile.top_px * scale, tile.left_px * scale
    inner_top, inner_left = tile.inner_top_px * scale, tile.inner_left_px * scale
    height, width = tile.height_px * scale, tile.width_px * scale
    out[top : top + height, left : left + width] = upscaled[
        inner_top : inner_top + height, inner_left : inner_left + width
    ]


def merge_tiles(
    tiles: Sequence[Tile], upscaled_tiles: Sequence[np.ndarray], *, scale: int, image_hw: tuple[int, int]
) -> np.ndarray:
    """The ``scale``× image (``scale*H × scale*W × 3`` uint8) from every tile ``split_tiles`` made of an H×W image
    and the network's output for each (uint8, same order; a list or one stacked N×h×w×3 array)."""
    height, width = image_hw
    if len(tiles) != len(upscaled_tiles):
        raise InternalError(f"{len(tiles)} tiles but {len(upscaled_tiles)} upscaled tiles")
    covered_px = sum(tile.height_px * tile.width_px for tile in tiles)
    if covered_px != height * width or any(
        tile.top_px + tile.height_px > height or tile.left_px + tile.width_px > width for tile in tiles
    ):
        raise InternalError(f"these tiles do not cover a {width}x{height} image exactly once")
    out = np.empty((height * scale, width * scale, 3), dtype=np.uint8)
    for tile, upscaled in zip(tiles, upscaled_tiles, strict=True):
        paste_tile(out, tile, upscaled, scale)
    return out


def _spans(length_px: int, tile_px: int, multiple_px: int) -> list[_Span]:
    aligned_px = -(-length_px // multiple_px) * multiple_px
    if aligned_px <= tile_px:
        return [_Span(core_start=0, keep_start=0, keep_end=length_px)]
    starts = [*range(0, aligned_px - tile_px, tile_px), aligned_px - tile_px]
    spans = []
    kept_px = 0
    for start in starts:
        end = min(start + tile_px, length_px)
        spans.append(_Span(core_start=start, keep_start=kept_px, keep_end=end))
        kept_px = end
    return spans


def _window_end(spans: list[_Span], tile_px: int) -> int:
    """Where the last core ends (the image side, or more when padded up to a tile or a multiple)."""
    return spans[-1].core_start + tile_px
