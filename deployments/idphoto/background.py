"""New backgrounds and the composite of the decontaminated subject over them.

Renders: ``solid`` (the colour everywhere), ``vertical`` (the colour at the top edge fading to a light tint of it at
the bottom edge), ``radial`` (a light tint of the colour behind the head fading to the full colour at the corners,
the studio spot-light look), or a picture (:func:`fit_background`). The tint is the colour mixed ``TINT_WEIGHT`` of
the way towards white, so a white background stays white and a blue one stays recognisably blue. ``transparent``
keeps the matte as the alpha channel.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Literal

import cv2
import numpy as np

Render = Literal["solid", "vertical", "radial"]
TINT_WEIGHT = 0.6
# Rows composited at a time: float32 temporaries of a band (256 rows of a 4000 px photo: 12 MB each), never the photo.
BAND_ROWS = 256


def render_background(
    colour_rgb: tuple[int, int, int], size_wh: tuple[int, int], render: Render, rows: tuple[int, int] | None = None
) -> np.ndarray:
    """Float32 RGB background in [0, 1] of ``size_wh``; with ``rows`` (``top``, ``bottom``) only those rows of it,
    the same values (a caller compositing a band at a time never holds the whole background in float32)."""
    width, height = size_wh
    top, bottom = (0, height) if rows is None else rows
    base = np.asarray(colour_rgb, dtype=np.float32) / 255.0
    if render == "solid":
        return np.broadcast_to(base, (bottom - top, width, 3)).copy()
    tint = base + (1.0 - base) * TINT_WEIGHT
    if render == "vertical":
        weight = np.linspace(0.0, 1.0, height, dtype=np.float32)[top:bottom, None, None]
        weight = np.broadcast_to(weight, (bottom - top, width, 1))
    else:
        ys, xs = np.mgrid[top:bottom, 0:width].astype(np.float32)
        centre_x, centre_y = (width - 1) / 2.0, 0.35 * (height - 1)
        distance = np.hypot(xs - centre_x, ys - centre_y)
        # The farthest pixel of the whole canvas is a corner: the same maximum whichever rows are drawn.
        corner_ys, corner_xs = np.array(
            [[0.0, 0.0, height - 1, height - 1], [0.0, width - 1, 0.0, width - 1]], np.float32
        )
        farthest = np.hypot(corner_xs - centre_x, corner_ys - centre_y).max()
        weight = 1.0 - (distance / farthest)[..., None]
    return (base * (1.0 - weight) + tint * weight).astype(np.float32)


# Studio backdrops drawn here (no picture files, no URLs): a tone, lit behind the head, mottled like painted canvas.
Backdrop = Literal["studio-grey", "studio-blue", "studio-brown"]
BACKDROPS: dict[Backdrop, tuple[int, int, int]] = {
    "studio-grey": (128, 132, 138),
    "studio-blue": (70, 104, 150),
    "studio-brown": (120, 92, 70),
}
BACKDROP_SIZE_WH = (600, 800)


@functools.lru_cache(maxsize=len(BACKDROPS))
def draw_backdrop(name: Backdrop) -> np.ndarray:
    """The ``BACKDROPS`` preset ``name`` as a ``BACKDROP_SIZE_WH`` uint8 RGB picture (the same pixels every time;
    read-only, shared by every request)."""
    width, height = BACKDROP_SIZE_WH
    tone = np.asarray(BACKDROPS[name], dtype=np.float32)
    ys, xs = np.mgrid[0:height, 0:width].astype(np.float32)
    light = 1.35 - 0.55 * np.clip(np.hypot((xs - width / 2) / width, (ys - 0.35 * height) / height) / 0.75, 0, 1)
    mottle = np.random.default_rng(23).normal(0.0, 1.0, (height // 40, width // 40)).astype(np.float32)
    mottle = cv2.resize(mottle, (width, height), interpolation=cv2.INTER_CUBIC)
    picture = tone * light[..., None] * (1.0 + 0.04 * mottle[..., None])
    drawn = np.clip(picture + 0.5, 0, 255).astype(np.uint8)
    drawn.setflags(write=False)
    return drawn


def fit_background(image_rgb: np.ndarray, size_wh: tuple[int, int]) -> np.ndarray:
    """A background picture (HxWx3 uint8 RGB) scaled to cover ``size_wh`` and centre-cropped (never stretched), as
    float32 RGB in [0, 1]."""
    width, height = size_wh
    scale = max(width / image_rgb.shape[1], height / image_rgb.shape[0])
    scaled_wh = (max(width, round(image_rgb.shape[1] * scale)), max(height, round(image_rgb.shape[0] * scale)))
    shrinking = scale < 1.0
    scaled = cv2.resize(image_rgb, scaled_wh, interpolation=cv2.INTER_AREA if shrinking else cv2.INTER_CUBIC)
    left, top = (scaled_wh[0] - width) // 2, (scaled_wh[1] - height) // 2
    window = scaled[top : top + height, left : left + width]
    return window.astype(np.float32) * np.float32(1.0 / 255.0)


def composite(foreground: np.ndarray, alpha: np.ndarray, background: np.ndarray) -> np.ndarray:
    """``alpha * F + (1 - alpha) * B`` for float inputs in [0, 1], rounded to uint8 RGB."""
    a = alpha[..., None]
    mixed = foreground * a + background * (1.0 - a)
    return np.clip(mixed * 255.0 + 0.5, 0, 255).astype(np.uint8)


def composite_in_bands(
    rgb: np.ndarray,
    alpha: np.ndarray,
    background_rows: Callable[[int, int], np.ndarray],
    band_rows: int = BAND_ROWS,
) -> np.ndarray:
    """:func:`composite` of a uint8 cut-out (``rgb`` HxWx3, ``alpha`` HxW) over a background drawn a band of rows at
    a time (``background_rows(top, bottom)``: float32 RGB in [0, 1]), into a uint8 result: the same pixels as the
    whole composite, with float32 temporaries of ``band_rows`` rows only, whatever the image's size."""
    out = np.empty(rgb.shape, dtype=np.uint8)
    for top in range(0, rgb.shape[0], band_rows):
        bottom = min(rgb.shape[0], top + band_rows)
        foreground = rgb[top:bottom].astype(np.float32) / 255.0
        out[top:bottom] = composite(
            foreground, alpha[top:bottom].astype(np.float32) / 255.0, background_rows(top, bottom)
        )
    return out
