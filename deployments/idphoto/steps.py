"""The ID photo one step at a time, for front-ends that preview colours without matting again: matte a whole photo
(a transparent cut-out), take a cut-out's alpha as the matte of a later crop, put a background behind a cut-out, fit
a finished photo to a size. The full pipeline (``pipeline.make_id_photo``) chains the same pieces in one call.

These work on images at their own size (a cut-out is the size of its photo), so none holds a float32 copy of one:
composites and the cut-out are made ``BAND_ROWS`` rows at a time into uint8, their smooth parts on a coarse grid.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import cv2
import numpy as np

from deployments.common.admission import IDPHOTO_OUTPUT
from deployments.common.affine import pixel_scale_affine
from deployments.common.image import require_image
from deployments.idphoto.background import BAND_ROWS, Render, composite_in_bands, render_background
from deployments.idphoto.matte import (
    REFINE_EPS,
    LowResMatte,
    apply_guided,
    decontaminate,
    guided_coefficients,
    local_colours,
    refine_radius_px,
    upsample_rows,
)

IDENTITY_AFFINE = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=np.float64)
# The cut-out's smooth parts (local colours, the selfie matte's filter coefficients) are computed on a grid of half
# the photo's size, at most this many pixels: what the whole job's 4 MP output cap gives its own composite.
SMOOTH_GRID_MAX_PX = IDPHOTO_OUTPUT.max_pixels // 4


@dataclass(frozen=True, eq=False)
class CutOut:
    """A person on nothing: decontaminated RGB (HxWx3 uint8) and its alpha (HxW uint8)."""

    rgb: np.ndarray
    alpha: np.ndarray


def cut_out(rgb: np.ndarray, low: LowResMatte, *, band_rows: int = BAND_ROWS) -> CutOut:
    """The whole photo with the matte as its alpha, the colours of the background bled out of the hair edges.

    ``estimate_foreground``'s blur fusion, and ``low.matte_at`` for the whole photo, made a band of ``band_rows``
    rows at a time: the smooth parts on a grid of half the photo's size (at most ``SMOOTH_GRID_MAX_PX``), the matte
    and the per-pixel correction per band, straight into uint8. No float32 array is the photo's size, so a cut-out
    of a 16 MP photo costs about what a 4 MP one does, plus its uint8 pixels.
    """
    require_image(rgb)
    height, width = rgb.shape[:2]
    factor = min(0.5, math.sqrt(SMOOTH_GRID_MAX_PX / (width * height)))
    grid_wh = (max(1, int(width * factor)), max(1, int(height * factor)))
    to_grid = pixel_scale_affine(grid_wh[0] / width, grid_wh[1] / height)
    image_grid = cv2.resize(rgb, grid_wh, interpolation=cv2.INTER_AREA).astype(np.float32) * (1.0 / 255.0)
    alpha_rows = _matte_rows(low, rgb, to_grid, grid_wh, image_grid)
    mean_f, mean_b = local_colours(image_grid, alpha_rows(None))
    foreground = np.empty_like(rgb)
    alpha = np.empty((height, width), dtype=np.uint8)
    for top in range(0, height, band_rows):
        bottom = min(height, top + band_rows)
        a = alpha_rows((top, bottom))
        image = rgb[top:bottom].astype(np.float32) * (1.0 / 255.0)
        if ((a > 0.002) & (a < 0.998)).any():  # only a soft edge needs the local colours
            rows = ((width, height), top, bottom)
            decontaminate(image, a, upsample_rows(mean_f, *rows), upsample_rows(mean_b, *rows))
        foreground[top:bottom] = _to_uint8(image)
        alpha[top:bottom] = _to_uint8(a)
    return CutOut(rgb=foreground, alpha=alpha)


def _matte_rows(
    low: LowResMatte, rgb: np.ndarray, to_grid: np.ndarray, grid_wh: tuple[int, int], image_grid: np.ndarray
) -> Callable[[tuple[int, int] | None], np.ndarray]:
    """``rows -> float32 matte``: the matte of the photo ``rgb`` (what ``low.matte_at`` gives it) on the grid for
    ``None``, else those rows (``top``, ``bottom``) at the photo's size. MODNet's matte is resampled; the selfie
    matte's guided filter is solved on the grid and applied to each band's own pixels ("fast guided filter")."""
    height, width = rgb.shape[:2]
    if low.matting != "selfie":

        def modnet_rows(rows: tuple[int, int] | None) -> np.ndarray:
            if rows is None:
                return np.clip(low.warp_to(to_grid, grid_wh), 0.0, 1.0)
            shift = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, -rows[0]]])  # photo pixels -> the band's
            return np.clip(low.warp_to(shift, (width, rows[1] - rows[0])), 0.0, 1.0)

        return modnet_rows
    radius_px = max(1, int(round(refine_radius_px(height, width) * grid_wh[0] / width)))
    coefficients = np.dstack(guided_coefficients(image_grid, low.warp_to(to_grid, grid_wh), radius_px, REFINE_EPS))

    def selfie_rows(rows: tuple[int, int] | None) -> np.ndarray:
        if rows is None:
            return apply_guided(np.moveaxis(coefficients, -1, 0), image_grid)
        band = upsample_rows(coefficients, (width, height), *rows)
        guide = rgb[rows[0] : rows[1]].astype(np.float32) * (1.0 / 255.0)
        return apply_guided(np.moveaxis(band, -1, 0), guide)

    return selfie_rows


def matte_of_cut_out(alpha: np.ndarray) -> LowResMatte:
    """A cut-out's own alpha as the matte a crop frames by (it is only resampled into the crop's frame). Over the
    ID-photo output cap it is area-shrunk to it first: a crop and its HD copy are at most that size (and the whole
    job frames by MODNet's matte, short side 512), so the framing never holds a float32 copy of a larger cut-out."""
    height, width = alpha.shape
    factor = min(1.0, math.sqrt(IDPHOTO_OUTPUT.max_pixels / (width * height)))
    affine = IDENTITY_AFFINE
    if factor < 1.0:
        size_wh = (max(1, int(width * factor)), max(1, int(height * factor)))
        alpha = cv2.resize(alpha, size_wh, interpolation=cv2.INTER_AREA)
        affine = pixel_scale_affine(size_wh[0] / width, size_wh[1] / height)
    return LowResMatte(
        alpha=alpha.astype(np.float32) / 255.0, affine=affine, source_shape=(height, width), matting="modnet"
    )


def on_white(rgb: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """A cut-out over white: what a face detector sees of it (the hidden pixels of a PNG may be anything)."""
    return put_background(rgb, alpha, (255, 255, 255), "solid")


def put_background(
    rgb: np.ndarray,
    alpha: np.ndarray,
    colour_rgb: tuple[int, int, int],
    render: Render,
    *,
    band_rows: int = BAND_ROWS,
) -> np.ndarray:
    """The cut-out over a ``render`` background of ``colour_rgb``; the subject's pixels are kept as they are.
    Composited ``band_rows`` rows at a time (uint8 in, uint8 out: float32 only for a band)."""
    require_image(rgb)
    size_wh = (rgb.shape[1], rgb.shape[0])

    def background_rows(top: int, bottom: int) -> np.ndarray:
        return render_background(colour_rgb, size_wh, render, (top, bottom))

    return composite_in_bands(rgb, alpha, background_rows, band_rows)


def fit_to(image: np.ndarray, size_wh: tuple[int, int]) -> np.ndarray:
    """``image`` resampled to ``size_wh`` (area-averaged when shrinking), unchanged when it is that size already."""
    if (image.shape[1], image.shape[0]) == tuple(size_wh):
        return image
    shrinking = size_wh[0] < image.shape[1]
    return cv2.resize(image, size_wh, interpolation=cv2.INTER_AREA if shrinking else cv2.INTER_CUBIC)


def _to_uint8(values: np.ndarray) -> np.ndarray:
    return np.clip(values * 255.0 + 0.5, 0, 255).astype(np.uint8)
