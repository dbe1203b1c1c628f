"""Whole-image upscaling in tiles, so a 4000 px photo never needs a second full-size float copy."""

from __future__ import annotations

import cv2
import numpy as np

from deployments.common.admission import RESTORE_OUTPUT
from deployments.common.errors import InvalidParameter

DEFAULT_TILE_PX = 512
_MARGIN_PX = 8  # Lanczos reads 4 source pixels each side; 8 keeps tile seams invisible.


def upscale_image(
    rgb: np.ndarray, factor: int, *, tile_px: int = DEFAULT_TILE_PX, max_output_pixels: int = RESTORE_OUTPUT.max_pixels
) -> np.ndarray:
    """Lanczos ×``factor`` (1, 2 or 4), computed tile by tile with overlapping margins (identical to one full resize
    away from the image border, where each tile sees the same neighbours). ``max_output_pixels``: the restore job's
    output cap (``admission``), which its decode already enforced; this is the last line behind it."""
    if factor not in (1, 2, 4):
        raise InvalidParameter(f"upscale must be 1, 2 or 4, got {factor}")
    if factor == 1:
        return rgb
    height, width = rgb.shape[:2]
    if height * width * factor * factor > max_output_pixels:
        raise InvalidParameter(
            f"upscaling {width}x{height} by {factor} gives more than {max_output_pixels} pixels; use a smaller factor"
        )
    out = np.empty((height * factor, width * factor, rgb.shape[2]), dtype=rgb.dtype)
    for y0 in range(0, height, tile_px):
        for x0 in range(0, width, tile_px):
            y1, x1 = min(y0 + tile_px, height), min(x0 + tile_px, width)
            sy0, sx0 = max(0, y0 - _MARGIN_PX), max(0, x0 - _MARGIN_PX)
            sy1, sx1 = min(height, y1 + _MARGIN_PX), min(width, x1 + _MARGIN_PX)
            tile = cv2.resize(
                rgb[sy0:sy1, sx0:sx1], ((sx1 - sx0) * factor, (sy1 - sy0) * factor), interpolation=cv2.INTER_LANCZOS4
            )
            oy, ox = (y0 - sy0) * factor, (x0 - sx0) * factor
            out[y0 * factor : y1 * factor, x0 * factor : x1 * factor] = tile[
                oy : oy + (y1 - y0) * factor, ox : ox + (x1 - x0) * factor
            ]
    return out
